"""``self_rag``'s first phase: whether to retrieve, and the answer written without passages.

``retrieval_mode``: ``look_first`` uses the question's own passages when it
brought them (no call) and otherwise retrieves first and decides from what was
found (:mod:`...critique.look_first`: no call when the best passage covers the
question); with nothing to look at it asks, as ``adaptive`` does. ``adaptive``
asks from the question alone: the critic's own decision (seed 003's JSON
verdict) or the shared one, read as P(yes) against a threshold measured per
model where the backend gives log-probabilities (:mod:`...critique.decision`).
``always`` / ``never`` make no call.
"""

from __future__ import annotations

from ....llm.base import chat
from ....prompts import load_prompt, render
from ...core.answer_format import answer_system
from ...core.text import clean_answer
from ...core.trace import Run
from ...critique.decision import (
    DEFAULT_THRESHOLD,
    Calibration,
    RetrievalMode,
    decide_retrieval,
    decision_template,
)
from ...critique.look_first import look_first
from ...critique.prompted import VERDICT_TOKENS
from .state import State


class Decide:
    def __init__(self, mode: RetrievalMode, top_k: int | None) -> None:
        self.mode = RetrievalMode(mode)
        self.top_k = top_k
        self.template = decision_template(None)  # the packaged one, or SELFRAG_PROMPT_DIR's
        self.calibration = Calibration()  # the threshold, measured once per method

    async def __call__(self, run: Run, state: State) -> bool:
        question = state.question
        if self.mode == RetrievalMode.LOOK_FIRST and run.own_evidence:
            run.note("retrieval_decision", thought="The question came with its own documents: retrieve without asking.",
                     action_input=question.text, observation="retrieval needed: yes (the question's own documents)",
                     details={"retrieval_needed": True, "retrieval_mode": self.mode, "own_evidence": True})
            return True
        short = min(VERDICT_TOKENS, int(run.params.get("max_tokens", VERDICT_TOKENS)))
        if self.mode == RetrievalMode.LOOK_FIRST and run.retriever is not None:
            return (await look_first(run, question, self.top_k, short)).needed
        if self.mode in (RetrievalMode.LOOK_FIRST, RetrievalMode.ADAPTIVE):  # look_first: nothing to look at
            own = await state.critic.retrieval(run, question)
            if own is not None:
                return own
            return (await decide_retrieval(run, self.template, question, threshold=DEFAULT_THRESHOLD,
                                           max_tokens=short, calibration=self.calibration)).needed
        needed = self.mode == RetrievalMode.ALWAYS
        run.note("retrieval_decision", thought=f"retrieval_mode is {self.mode.value!r}: no decision call.",
                 action_input=question.text, observation=f"retrieval needed: {'yes' if needed else 'no'} (configured)",
                 details={"retrieval_needed": needed, "retrieval_mode": self.mode})
        return needed


async def answer_directly(run: Run, state: State, thought: str) -> None:
    """The answer without passages (no retrieval, or no passage was relevant)."""
    question = state.question
    step = await run.generate(chat(answer_system(question), render(load_prompt("answer_direct"), question=question.text)),
                              action="direct_answer", thought=thought, action_input=question.text)
    state.answer = clean_answer(step.text)
