"""ReAct RAG: the model alternates Thought / Action / Observation until it finishes.

Each step is one LLM call that must end in ``search[query]`` (retrieve
``top_k`` passages; their shortened text is the observation) or
``finish[answer]``. A malformed action becomes an observation that restates
the valid formats. After ``max_steps`` steps without ``finish``, one last call
asks for the best answer from what was observed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import Field

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...reflection.decisions import normalize_query, parse_action
from ...types import ArchitectureType, Question
from ..core.answer_format import answer_system, finish_answer
from ..core.base import Method, MethodConfig, Outcome
from ..core.context import format_passage, truncate_to_tokens
from ..core.registry import register
from ..core.text import clean_answer
from ..core.trace import Run, shorten

OMITTED = "(earlier results omitted to fit the context)"
STOP = ["\nObservation", "Observation:"]


class ReActConfig(MethodConfig):
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    max_steps: int = Field(5, ge=1, le=30)
    observation_tokens: int = Field(80, ge=8)  # per passage in an observation
    max_context_tokens: int = Field(1500, ge=64)  # the whole history in one prompt
    step_max_tokens: int = Field(128, ge=1)


@dataclass
class Turn:
    thought: str
    action: str
    observation: str


def render_history(turns: list[Turn], budget: int, count_tokens: Callable[[str], int]) -> str:
    """The scratchpad, oldest observations dropped first (then oldest turns) to fit ``budget``."""
    if not turns:
        return ""
    observations = [t.observation for t in turns]
    start = 0

    def text() -> str:
        blocks = []
        for turn, obs in list(zip(turns, observations, strict=True))[start:]:
            lines = [f"Thought: {turn.thought}"] if turn.thought else []
            lines += [f"Action: {turn.action}", f"Observation: {obs}"]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    for i in range(len(turns) - 1):
        if count_tokens(text()) <= budget:
            break
        observations[i] = OMITTED
    while start < len(turns) - 1 and count_tokens(text()) > budget:
        start += 1
    return text()


@register
class ReActRAG(Method):
    name = "react_rag"
    description = (
        "ReAct: the model alternates Thought/Action (search[query] or finish[answer]) with "
        "observations for up to max_steps steps, then one final answer call if it never finished."
    )
    type = ArchitectureType.AGENTIC
    config_section = "react"
    Config = ReActConfig

    def _history(self, turns: list[Turn]) -> str:
        return render_history(turns, self.config.max_context_tokens, self.llm.count_tokens)

    def _observe(self, docs) -> str:
        if not docs:
            return "No documents found. Try other search terms."
        count = self.llm.count_tokens
        return "\n".join(
            format_passage(d, i, truncate_to_tokens(d.text, self.config.observation_tokens, count))
            for i, d in enumerate(docs, start=1)
        )

    async def _answer(self, question: Question, run: Run) -> Outcome:
        cfg = self.config
        system = render(load_prompt("react_system"), finish_answer=finish_answer(question))
        max_tokens = min(cfg.step_max_tokens, int(self.llm_params["max_tokens"]))
        turns: list[Turn] = []
        searched: dict[str, str] = {}  # normalised query -> query, in search order
        for n in range(1, cfg.max_steps + 1):
            history = self._history(turns)
            prompt = render(
                load_prompt("react_step"),
                question=question.text,
                history=f"{history}\n\n" if history else "",
            )
            step = await run.generate(
                chat(system, prompt),
                action="react_step",
                max_tokens=max_tokens,
                stop=STOP,
            )
            act = parse_action(step.text)
            step.thought, step.action_input = act.thought, act.argument
            step.details["react_step"] = n
            if act.kind == "finish":
                step.action, step.observation = "finish", clean_answer(act.argument)
                return self._outcome(step.observation, "finish", n, searched)
            if act.kind == "search":
                step.action = "search"
                step.observation = await self._search(run, n, act.argument, searched, step.details)
                turns.append(Turn(act.thought, f"search[{act.argument}]", step.observation))
            else:
                step.action = "invalid_action"
                step.observation = render(load_prompt("react_invalid"), error=act.error)
                step.details["error"] = act.error
                turns.append(Turn("", shorten(step.text) or "(empty)", step.observation))
        return await self._final(run, question, turns, searched)

    async def _search(self, run: Run, n: int, query: str, searched: dict[str, str], details: dict[str, object]) -> str:
        """Run a search (unless it repeats one) and return the observation."""
        key = normalize_query(query)
        if key in searched:
            details["repeated_search"] = True
            return render(load_prompt("react_repeat"), query=query)
        searched[key] = query
        result = await run.retrieve(query, self.config.top_k, thought=f"Step {n}: search[{query}]")
        details["documents"] = [{"id": d.id, "title": d.title} for d in result.documents]
        return self._observe(result.documents)

    async def _final(self, run: Run, question: Question, turns: list[Turn], searched: dict[str, str]) -> Outcome:
        history = self._history(turns) or "(nothing was observed)"
        prompt = render(load_prompt("react_final"), question=question.text, history=history)
        step = await run.generate(
            chat(answer_system(question), prompt),
            action="final_answer",
            thought=f"No finish after {self.config.max_steps} steps: answer from what was observed.",
            action_input=question.text,
        )
        answer = clean_answer(step.text)
        step.observation = answer
        return self._outcome(answer, "max_steps", self.config.max_steps, searched)

    @staticmethod
    def _outcome(answer: str, stopped: str, steps: int, searched: dict[str, str]) -> Outcome:
        return Outcome(
            answer=answer,
            retrieval_needed=bool(searched),
            details={"stopped": stopped, "steps": steps, "searches": list(searched.values())},
        )
