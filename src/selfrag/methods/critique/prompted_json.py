"""One JSON verdict per call: seed 003's critic (``critic: json``).

Every step asks its own question and reads one JSON field from the reply
(the backend's JSON mode where it has one, else the first JSON object in the
text): the retrieval decision (``needs_retrieval``), each passage's relevance
before any answer is written (a passage judged irrelevant gets no candidate),
then per kept passage an answer (``vanilla_rag``'s prompt over that passage),
its support over the passage and its utility (1-5). A reply without the field
gets seed 003's default (retrieve, irrelevant, no support, utility 3), shown
as not judged. Candidates rank by support level, then utility.
"""

from __future__ import annotations

from typing import Any

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...reflection.parse import RELEVANT, json_objects, json_verdict
from ...reflection.select import separate_key, separate_score
from ...reflection.tokens import neutralize
from ...types import Candidate, Question, Verdict
from ..core.answer_format import answer_system
from ..core.concurrency import gather_in_order
from ..core.text import clean_answer
from ..core.trace import Run, StepRecord, shorten
from ..steps.evidence import Passages
from .prompted import Prompted, candidate


class PromptedJSON(Prompted):
    name = "json"
    rule = "Pick the best support level (fully > partially > no), then the highest utility."
    judges_first = True

    @staticmethod
    def key(candidate_: Candidate) -> Any:
        return separate_key(candidate_.support or "", int(candidate_.utility or 0))

    async def ask(self, run: Run, prompt_name: str, user: str, field: str, *, action: str, thought: str,
                  action_input: str) -> tuple[StepRecord, Verdict]:
        """One JSON verdict: ``field`` read from the reply to the named system prompt and ``user``."""
        fmt = "json" if self.llm.supports_json else None
        step = await run.generate(chat(render(load_prompt(prompt_name)), user), action=action, thought=thought,
                                  action_input=action_input, max_tokens=self.short_tokens, response_format=fmt)
        step.details["json_mode"] = "backend" if fmt else "extracted from text"
        aspect = {"needs_retrieval": "retrieve"}.get(field, field)
        return step, self.verdict(step, field, json_verdict(json_objects(step.text), field), aspect)

    async def retrieval(self, run: Run, question: Question) -> bool | None:
        _, verdict = await self.ask(run, "self_rag_json_decision", f"Question: {neutralize(question.text)}", "needs_retrieval",
                                    action="retrieval_decision", thought="Decide whether retrieval is needed "
                                    "(JSON verdict).", action_input=question.text)
        return verdict.label == "yes"

    async def relevance(self, run: Run, question: Question, passages: Passages) -> Verdict | None:
        """The passage's relevance; None when the reply held no usable verdict (no verdict is not a verdict
        of "irrelevant": the joint then ranks the passage as one not judged)."""
        step, verdict = await self.ask(
            run, "self_rag_json_relevance", f"Question: {neutralize(question.text)}\n\n{self.context(passages)}", "relevance",
            action="evaluate_relevance", thought=f"Is {passages.name()} relevant to the question?",
            action_input=shorten(passages.docs[0].text))
        step.details["passage_id"] = passages.docs[0].id
        if verdict.label != RELEVANT:
            step.observation += "; filtered out before generation"
        if verdict.default:
            step.observation += "; ranked for the joint as not judged"
            return None
        return verdict

    async def write(self, run: Run, question: Question, passages: Passages) -> Candidate:
        context = self.context(passages)
        gen = await run.generate(
            chat(answer_system(question), render(load_prompt("answer_with_context"), context=context,
                                                 question=question.text)),
            action="generate", thought=f"Answer from {passages.name()}.", action_input=question.text,
        )
        gen.details["passage_id"] = passages.docs[0].id
        written = candidate(clean_answer(gen.text), passages, {}, 0.0)
        return await self.judge(run, question, written, context)

    async def judge(self, run: Run, question: Question, candidate_: Candidate, context: str) -> Candidate:
        """Support over ``context`` and utility, asked at once (support recorded first)."""
        passages = Passages(candidate_.passages, candidate_.indices)
        answer = candidate_.text
        sup_run, use_run = run.fork(), run.fork()
        (_, support), (_, utility) = await gather_in_order([
            self.ask(sup_run, "self_rag_json_support", f"{context}\n\nResponse: {answer}", "support",
                     action="assess_support", thought=f"Is the answer from {passages.name()} supported?",
                     action_input=shorten(answer)),
            self.ask(use_run, "self_rag_json_utility", f"Question: {neutralize(question.text)}\n\nResponse: {answer}", "utility",
                     action="rate_utility", thought=f"Rate how useful the answer from {passages.name()} is (1-5).",
                     action_input=shorten(answer)),
        ])
        run.join(sup_run, use_run)
        candidate_.verdicts.update(support=support, utility=utility)
        candidate_.score = separate_score(support.label or "", int(utility.label or 0))
        return candidate_
