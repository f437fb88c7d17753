"""Recording a method's work while it answers one question.

A :class:`Run` is created per ``answer()`` call. Methods make every LLM call
and retrieval through it, so each becomes a step of the trace and the
response's totals are sums over the steps. Work that runs concurrently records
into forks (``run.fork()``) that are joined back in a fixed order, so traces
stay deterministic whatever the scheduling.

A run may carry a retrieval ``hook`` (see :mod:`selfrag.methods.critique.augmentations`):
when set, :meth:`Run.retrieve` hands the call to it, and the hook fetches with
:meth:`Run.retrieve_direct`. Forks share their parent's hook.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...errors import DataError
from ...llm.base import Prompt
from ...types import Generation, ReasoningStep, RetrievalResult


def shorten(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class StepRecord:
    """A step under construction; methods may fill in observation and details after parsing."""

    action: str
    thought: str = ""
    action_input: str = ""
    observation: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    gen: Generation | None = None
    retrieval: RetrievalResult | None = None

    @property
    def text(self) -> str:
        return self.gen.text if self.gen is not None else ""

    def freeze(self, step_id: int) -> ReasoningStep:
        gen = self.gen
        details = dict(self.details)
        if gen is not None:
            details.setdefault("raw_output", gen.text)
            if gen.evaluated_prompt_tokens is not None:
                details.setdefault("evaluated_prompt_tokens", gen.evaluated_prompt_tokens)
        if self.retrieval is not None:
            details.setdefault(
                "documents",
                [
                    {"id": d.id, "title": d.title, "score": round(s, 4)}
                    for d, s in zip(self.retrieval.documents, self.retrieval.scores, strict=False)
                ],
            )
        return ReasoningStep(
            step_id=step_id,
            thought=self.thought,
            action=self.action,
            action_input=self.action_input,
            observation=self.observation,
            tokens_used=gen.total_tokens if gen else 0,
            cost_usd=gen.cost_usd if gen else 0.0,
            prompt_tokens=gen.prompt_tokens if gen else 0,
            completion_tokens=gen.completion_tokens if gen else 0,
            latency_ms=(gen.latency_ms if gen else 0.0)
            + (self.retrieval.retrieval_time_ms if self.retrieval else 0.0),
            llm_calls=1 if gen is not None else 0,
            retrieval_calls=1 if self.retrieval is not None else 0,
            cached=bool(gen and gen.cached),
            details=details,
        )


# Told about each step as it starts ("start", action, thought) and ends ("end", action, the record):
# how `selfrag ask` shows progress and logs each model call. Context-local, so concurrent questions in
# one process each tell their own listener.
StepListener = Callable[[str, str, Any], None]
step_listener: contextvars.ContextVar[StepListener | None] = contextvars.ContextVar("selfrag_steps", default=None)


def _tell(event: str, action: str, payload: Any) -> None:
    listener = step_listener.get()
    if listener is not None:
        listener(event, action, payload)


class RetrievalHook(Protocol):
    """Wraps every retrieval of a run (adaptive retrieval, reranking)."""

    async def retrieve(self, run: Run, query: str, top_k: int, *, thought: str, action: str) -> RetrievalResult: ...


class Run:
    """The trace of one ``answer()`` call, with the LLM and retriever it may use."""

    def __init__(self, llm: Any, retriever: Any, params: dict[str, Any]) -> None:
        self.llm = llm
        self.retriever = retriever
        self.params = params  # default LLM parameters (max_tokens, temperature)
        self.records: list[StepRecord] = []
        self.retrievals: list[RetrievalResult] = []
        self.started = time.perf_counter()
        self.own_evidence = False  # the retriever holds the question's own documents
        self.hook: RetrievalHook | None = None
        # A retrieval already made and recorded (a decision looked at the documents first): the
        # method's next identical retrieval gets it back instead of retrieving again.
        self._kept: tuple[RetrievalResult, str, int] | None = None

    def fork(self) -> Run:
        """A child run for concurrent work; join it back with :meth:`join`."""
        child = Run(self.llm, self.retriever, self.params)
        child.started = self.started
        child.own_evidence = self.own_evidence
        child.hook = self.hook
        return child

    def join(self, *children: Run) -> None:
        for child in children:
            self.records.extend(child.records)
            self.retrievals.extend(child.retrievals)

    async def generate(
        self,
        prompt: Prompt,
        *,
        action: str,
        thought: str = "",
        action_input: str = "",
        **params: Any,
    ) -> StepRecord:
        """Call the LLM and record the call as a step (observation defaults to the output)."""
        merged = {**self.params, **params}
        _tell("start", action, thought)
        gen = await self.llm.generate(prompt, **merged)
        record = StepRecord(
            action=action,
            thought=thought,
            action_input=action_input,
            observation=shorten(gen.text),
            gen=gen,
        )
        self.records.append(record)
        _tell("end", action, record)
        return record

    def keep_for_reuse(self, result: RetrievalResult, query: str, top_k: int) -> None:
        """Let the next :meth:`retrieve` of ``query`` and ``top_k`` return ``result`` (once, unrecorded)."""
        self._kept = (result, query, top_k)

    async def retrieve(self, query: str, top_k: int, *, thought: str = "", action: str = "retrieve") -> RetrievalResult:
        """Retrieve ``top_k`` passages for ``query`` (through the hook, when there is one)."""
        if self._kept is not None:
            kept, self._kept = self._kept, None
            if kept[1:] == (query, top_k):
                return kept[0]
        if self.hook is not None:
            return await self.hook.retrieve(self, query, top_k, thought=thought, action=action)
        return await self.retrieve_direct(query, top_k, thought=thought, action=action)

    async def retrieve_direct(
        self, query: str, top_k: int, *, thought: str = "", action: str = "retrieve"
    ) -> RetrievalResult:
        """Call the retriever and record the call as a step (no hook)."""
        if self.retriever is None:
            raise DataError("this method needs documents to retrieve from; give --docs or a corpus")
        _tell("start", action, thought)
        result = await self.retriever.retrieve(query, top_k)
        self.retrievals.append(result)
        titles = ", ".join(d.title or d.id for d in result.documents[:5])
        self.records.append(
            StepRecord(
                action=action,
                thought=thought or "Retrieve passages.",
                action_input=query,
                observation=f"Retrieved {len(result.documents)} passages: {titles}",
                retrieval=result,
            )
        )
        _tell("end", action, self.records[-1])
        return result

    def note(
        self,
        action: str,
        *,
        thought: str = "",
        action_input: str = "",
        observation: str = "",
        details: dict[str, Any] | None = None,
    ) -> StepRecord:
        """Record a step that calls nothing (a decision, a selection)."""
        record = StepRecord(
            action=action,
            thought=thought,
            action_input=action_input,
            observation=observation,
            details=dict(details or {}),
        )
        self.records.append(record)
        return record

    def steps(self) -> tuple[ReasoningStep, ...]:
        return tuple(r.freeze(i) for i, r in enumerate(self.records, start=1))

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000
