"""The critic: reads Self-RAG's critiques from a model, as probabilities where it can.

Three sources, chosen once per backend and recorded in every critique step as
``critique_source``:

* ``reflection_tokens`` — a fine-tuned Self-RAG model (``[Retrieval]``,
  ``[Relevant]``, ``[Fully supported]``, ``[Utility:5]``, ...). Prompts use
  the model's own ``### Instruction:`` format as a plain string; one call per
  passage yields the candidate *and* its critique, read from the top
  log-probabilities at the positions where the model wrote its reflection
  tokens (as the paper does).
* ``label_probs`` — an instruction model. Each critique is a question whose
  answer is a label word; one ``max_tokens=1`` call reads the next-token
  probabilities of the label words.
* ``text`` — a backend without log-probabilities (e.g. Anthropic): the label
  the model wrote counts as probability 1. Chosen visibly, never silently.

``auto`` picks reflection tokens when the tokenizer has ``[Retrieval]`` as a
single token (llama.cpp) or, for backends without a tokenizer, when the model
name looks like a Self-RAG fine-tune; otherwise label probabilities when the
backend returns log-probabilities, else text.

Prompts put the shared parts first (instructions, question, answer so far)
and the passage last, so concurrent candidates share the longest prefix.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import Field

from ..errors import ConfigError
from ..methods.answer_format import SHORT_ANSWER_FORMAT
from ..methods.context import format_passage
from ..methods.trace import Run, StepRecord
from ..prompts import load_prompt, render
from ..types import Document, Generation
from ..validation import StrictModel
from . import score as S
from .tokens import (
    LABEL_GROUPS,
    NO_RETRIEVAL,
    REFLECTION_GROUPS,
    RETRIEVAL,
    TokenGroup,
    find_label,
    instruction_prompt,
    paragraph,
    parse_reflection_positions,
    parse_reflection_text,
)

SOURCES = ("reflection_tokens", "label_probs", "text")
# Backends that decode one call at a time: concurrency buys nothing, prompt order buys prefix reuse.
SERIAL_PROVIDERS = frozenset({"llamacpp"})
T = TypeVar("T")
_SELF_RAG_NAME = re.compile(r"self[-_ ]?(bio)?rag", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


class CriticConfig(StrictModel):
    """Where critique probabilities come from."""

    source: Literal["auto", "reflection_tokens", "label_probs", "text"] = "auto"
    # Alternatives read per position (backends give at most 20).
    top_logprobs: int = Field(20, ge=1, le=20)
    # Tokens a text critique may use to write its label.
    text_max_tokens: int = Field(8, ge=1, le=64)
    # How independent calls run: concurrently, or one after another in an order that
    # maximises KV-cache prefix reuse. auto: sequential for backends that decode one
    # call at a time (in-process llama.cpp), concurrent otherwise.
    schedule: Literal["auto", "concurrent", "sequential"] = "auto"


@dataclass(frozen=True)
class SourceChoice:
    source: str  # reflection_tokens | label_probs | text
    prompt_format: str  # reflection_tokens | instruction
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"critique_source": self.source, "prompt_format": self.prompt_format, "reason": self.reason}


def has_reflection_vocabulary(llm: Any) -> bool | None:
    """Whether the backend's tokenizer has ``[Retrieval]`` as one token; ``None`` without a tokenizer."""
    tokenize = getattr(llm, "tokenize", None)
    if not callable(tokenize):
        return None
    try:
        ids = tokenize(RETRIEVAL)
    except (TypeError, ValueError, RuntimeError):
        return None
    return len(ids) == 1


def choose_source(llm: Any, requested: str = "auto") -> SourceChoice:
    """Decide the critique source for ``llm`` (see the module docstring)."""
    if requested not in ("auto", *SOURCES):
        raise ConfigError(f"critic.source {requested!r} is not one of auto, {', '.join(SOURCES)}")
    logprobs = bool(getattr(llm, "supports_logprobs", False))
    raw = bool(getattr(llm, "supports_raw_prompt", False))
    if requested == "reflection_tokens":
        if not raw:
            raise ConfigError(
                "critic.source=reflection_tokens needs a backend that sends plain prompts "
                "(llamacpp:/path/model.gguf or openai:MODEL@URL)"
            )
        fmt, why = "reflection_tokens", "configured"
    elif requested == "label_probs":
        fmt, why = "instruction", "configured"
    else:
        vocab = has_reflection_vocabulary(llm) if raw else False
        model = str(getattr(llm, "model", ""))
        if raw and vocab:
            fmt, why = "reflection_tokens", "the tokenizer has [Retrieval] as one token"
        elif raw and vocab is None and _SELF_RAG_NAME.search(model):
            fmt, why = "reflection_tokens", f"model name {model!r} looks like a Self-RAG fine-tune"
        else:
            fmt, why = "instruction", "no reflection tokens: asking label questions"
        if requested == "text":
            why = f"configured; {why}"
    if requested == "text":
        return SourceChoice("text", fmt, why)
    if not logprobs:
        return SourceChoice("text", fmt, f"{why}; the backend gives no log-probabilities, so text labels count as probability 1")
    source = "reflection_tokens" if fmt == "reflection_tokens" else "label_probs"
    return SourceChoice(source, fmt, why)


@dataclass(frozen=True)
class Reading:
    """One critique: the probability of each label of a group.

    ``raw`` holds summed probabilities as read; ``probs`` the same normalised
    within the group (``None`` when the group had no mass); ``source`` says
    how it was read (``reflection_tokens``, ``label_probs`` or ``text``).
    """

    group: str
    raw: dict[str, float]
    source: str
    note: str = ""

    @property
    def probs(self) -> dict[str, float] | None:
        return S.normalise(self.raw)

    @property
    def value(self) -> float | None:
        probs = self.probs
        return None if probs is None else S.group_score(self.group, probs)

    @property
    def label(self) -> str | None:
        return S.argmax_label(self.probs)

    def details(self) -> dict[str, Any]:
        probs = self.probs
        out: dict[str, Any] = {
            "critique": self.group,
            "critique_source": self.source,
            "probs": {k: round(v, 4) for k, v in probs.items()} if probs else "none (no probability mass)",
            "value": None if self.value is None else round(self.value, 4),
            "label": self.label,
        }
        if self.group == "retrieve":
            out["logprobs"] = {k: (round(math.log(v), 4) if v > 0 else None) for k, v in self.raw.items()}
        if self.note:
            out["note"] = self.note
        return out

    def summary(self) -> str:
        value = "unknown" if self.value is None else f"{self.value:.3f}"
        return f"{self.group}={value} ({self.label or 'no label'}; {self.source})"


@dataclass
class Draft:
    """A candidate (an answer, or the next segment of one) and its critique."""

    text: str
    passage: Document | None
    readings: dict[str, Reading] = field(default_factory=dict)
    seq: float | None = None
    final: bool = True
    index: int = 0

    def value(self, group: str) -> float | None:
        reading = self.readings.get(group)
        return None if reading is None else reading.value

    @property
    def rel(self) -> float | None:
        return self.value("relevance")

    @property
    def sup(self) -> float | None:
        return self.value("support")

    @property
    def use(self) -> float | None:
        return self.value("utility")

    @property
    def rating(self) -> float | None:
        """Expected utility rating on the 1..5 scale."""
        use = self.use
        return None if use is None else 3.0 + 2.0 * use

    def label(self, group: str) -> str | None:
        reading = self.readings.get(group)
        return None if reading is None else reading.label

    def score(self, weights: S.Weights) -> S.ScoreBreakdown:
        return S.segment_score(seq=self.seq, rel=self.rel, sup=self.sup, use=self.use, weights=weights)

    def critic_score(self, weights: S.Weights) -> S.ScoreBreakdown:
        return S.critic_score(rel=self.rel, sup=self.sup, use=self.use, weights=weights)


@dataclass(frozen=True)
class Feedback:
    """What a regeneration is told about the previous attempt (self-reflection)."""

    previous: str
    rating: float


def first_sentence(text: str) -> str:
    """The text up to and including its first sentence end (all of it when there is none)."""
    text = text.strip()
    match = _SENTENCE_END.search(text)
    return text[: match.end()].strip() if match else text


def _prefix_logprobs(gen: Generation, text: str) -> list[float]:
    """Log-probabilities of the generated tokens that produced ``text`` (a prefix of the output)."""
    if not gen.logprobs:
        return []
    target = len(text.strip())
    out: list[float] = []
    acc = ""
    for pos in gen.logprobs:
        if len(acc.strip()) >= target:
            break
        acc += pos.token
        out.append(pos.logprob)
    return out


class Critic:
    """Reads critiques and writes candidates for one backend (see the module docstring)."""

    def __init__(
        self,
        llm: Any,
        config: CriticConfig | None = None,
        *,
        answer_tokens: int = 64,
        segment_tokens: int = 48,
        answer_format: str = SHORT_ANSWER_FORMAT,
    ) -> None:
        self.llm = llm
        self.config = config or CriticConfig()
        self.answer_tokens = answer_tokens
        self.segment_tokens = segment_tokens
        # The instruction line of answer prompts (see selfrag.methods.answer_format).
        self.answer_format = answer_format
        self._choice: SourceChoice | None = None

    @property
    def choice(self) -> SourceChoice:
        if self._choice is None:
            self._choice = choose_source(self.llm, self.config.source)
        return self._choice

    @property
    def sequential(self) -> bool:
        if self.config.schedule != "auto":
            return self.config.schedule == "sequential"
        return getattr(self.llm, "provider", "") in SERIAL_PROVIDERS

    def describe(self) -> dict[str, str]:
        """The critique source and call schedule, for the trace."""
        return {**self.choice.as_dict(), "schedule": "sequential" if self.sequential else "concurrent"}

    async def gather(self, coros: Sequence[Awaitable[T]]) -> list[T]:
        """Run ``coros`` concurrently, or in order when the schedule is sequential."""
        if not self.sequential:
            return list(await asyncio.gather(*coros))
        results: list[T] = []
        for i, coro in enumerate(coros):
            try:
                results.append(await coro)
            except BaseException:
                for rest in coros[i + 1 :]:  # never started: close them so they do not warn
                    close = getattr(rest, "close", None)
                    if close is not None:
                        close()
                raise
        return results

    @property
    def reflection(self) -> bool:
        return self.choice.prompt_format == "reflection_tokens"

    def groups(self) -> dict[str, TokenGroup]:
        return REFLECTION_GROUPS if self.reflection else LABEL_GROUPS

    # -- one critique ---------------------------------------------------------

    async def _read(
        self, run: Run, group: str, prompt: Any, *, action: str, thought: str, action_input: str
    ) -> tuple[Reading, StepRecord]:
        spec = self.groups()[group]
        if self.choice.source == "text":
            step = await run.generate(
                prompt, action=action, thought=thought, action_input=action_input,
                max_tokens=self.config.text_max_tokens, top_logprobs=0,
            )
            label = find_label(step.text, spec)
            reading = Reading(group, S.label_probs(label, spec), "text", "" if label else "no label in the text")
        else:
            step = await run.generate(
                prompt, action=action, thought=thought, action_input=action_input,
                max_tokens=1, top_logprobs=self.config.top_logprobs,
            )
            gen = step.gen
            if gen is not None and gen.logprobs:
                reading = Reading(group, S.group_probs(gen.logprobs[0].top, spec), self.choice.source)
            else:
                label = find_label(step.text, spec)
                reading = Reading(
                    group, S.label_probs(label, spec), "text",
                    "the backend returned no log-probabilities; read the text label",
                )
        step.details.update(reading.details())
        step.observation = reading.summary()
        return reading, step

    def _messages(self, system: str, user: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": load_prompt(system)}, {"role": "user", "content": user}]

    def _critique_prompt(self, name: str, **values: str) -> list[dict[str, str]]:
        return self._messages("critic_system", render(load_prompt(name), **values))

    async def retrieval(
        self, run: Run, question: str, *, answer_so_far: str = "", segment: bool = False
    ) -> tuple[Reading, StepRecord]:
        """Does the next part of the answer need passages? (``retrieve`` group: yes/no/continue)."""
        if self.reflection:
            prompt: Any = instruction_prompt(question) + _joinable(answer_so_far)
        elif segment:
            prompt = self._critique_prompt("segment_retrieve", question=question, answer=answer_so_far or "(nothing yet)")
        else:
            prompt = self._critique_prompt("critic_retrieve", question=question)
        return await self._read(
            run, "retrieve", prompt, action="critique_retrieval",
            thought="Does the answer need retrieved passages?", action_input=question,
        )

    # -- candidates -------------------------------------------------------------

    async def drafts(
        self,
        run: Run,
        question: str,
        passages: Sequence[Document | None],
        *,
        answer_so_far: str = "",
        segment: bool = False,
        feedback: Feedback | None = None,
        known: Sequence[Reading | None] | None = None,
    ) -> list[Draft]:
        """One candidate per passage (``None``: no passage), each with its critique.

        Candidates are generated concurrently; their steps join the trace in
        passage order, each candidate's calls together. ``known`` gives
        relevance readings already made (self-reflection keeps the passage).
        """
        if self.reflection:
            return await self._reflection_drafts(run, question, passages, answer_so_far, segment, feedback)
        return await self._instruction_drafts(run, question, passages, answer_so_far, segment, feedback, known)

    async def _reflection_drafts(
        self, run: Run, question: str, passages: Sequence[Document | None], answer_so_far: str,
        segment: bool, feedback: Feedback | None,
    ) -> list[Draft]:
        instruction = question
        if feedback is not None:
            instruction = render(
                load_prompt("critic_feedback_instruction"),
                question=question, previous=feedback.previous, rating=f"{feedback.rating:.1f}",
            ).rstrip()
        head = instruction_prompt(instruction) + _joinable(answer_so_far)
        forks = [run.fork() for _ in passages]
        logprobs = self.choice.source != "text"

        async def one(i: int, doc: Document | None) -> Draft:
            prompt = head + (RETRIEVAL + paragraph(doc) if doc is not None else NO_RETRIEVAL)
            step = await forks[i].generate(
                prompt, action="generate_segment" if segment else "generate_candidate",
                thought=_candidate_thought(i, doc), action_input=question,
                max_tokens=self.segment_tokens if segment else self.answer_tokens,
                top_logprobs=self.config.top_logprobs if logprobs else 0,
            )
            gen = step.gen
            groups = ("relevance", "support", "utility") if doc is not None else ("utility",)
            readings: dict[str, Reading] = {}
            if gen is not None and gen.logprobs:
                out = parse_reflection_positions(gen.logprobs)
                for g in groups:
                    readings[g] = Reading(
                        g, S.group_probs(out.tops.get(g), REFLECTION_GROUPS[g]), "reflection_tokens",
                        "" if g in out.tops else "the model wrote no token of this group",
                    )
                seq = S.sequence_score(out.token_logprobs)
            else:
                out = parse_reflection_text(step.text)
                for g in groups:
                    label = out.labels.get(g)
                    readings[g] = Reading(
                        g, S.label_probs(label, REFLECTION_GROUPS[g]), "text",
                        "" if label else "no token of this group in the text",
                    )
                seq = None
            ended = out.ended or (gen is not None and gen.finish_reason == "stop")
            final = out.boundary is None and (ended or "utility" in out.labels)
            draft = Draft(text=out.text, passage=doc, readings=readings, seq=seq, final=final or not out.text, index=i)
            step.observation = _draft_summary(draft)
            step.details.update(_draft_details(draft, self.choice.source, boundary=out.boundary))
            return draft

        drafts = await self.gather([one(i, d) for i, d in enumerate(passages)])
        run.join(*forks)
        return drafts

    async def _instruction_drafts(
        self, run: Run, question: str, passages: Sequence[Document | None], answer_so_far: str,
        segment: bool, feedback: Feedback | None, known: Sequence[Reading | None] | None,
    ) -> list[Draft]:
        known = list(known or [None] * len(passages))
        forks = [run.fork() for _ in passages]
        drafts = await self.gather(
            [
                self._instruction_draft(forks[i], i, question, doc, answer_so_far, segment, feedback, known[i])
                for i, doc in enumerate(passages)
            ]
        )
        run.join(*forks)
        return drafts

    async def _instruction_draft(
        self, run: Run, i: int, question: str, doc: Document | None, answer_so_far: str,
        segment: bool, feedback: Feedback | None, known: Reading | None,
    ) -> Draft:
        """Relevance and the candidate, then support, utility (and is_final); each call a step of ``run``.

        Every prompt starts with the same system message and the question, and
        passage-bound prompts continue with the passage, so consecutive calls
        for one candidate share most of their prefix.
        """
        block = format_passage(doc) if doc is not None else ""
        thought = _candidate_thought(i, doc)
        rel_run, gen_run = run.fork(), run.fork()

        async def relevance() -> Reading | None:
            if known is not None or doc is None:
                return known
            prompt = self._critique_prompt("critic_relevance", question=question, passage=block)
            reading, _ = await self._read(
                rel_run, "relevance", prompt, action="critique_relevance", thought=thought, action_input=question
            )
            return reading

        async def generate() -> tuple[str, float | None]:
            so_far = {"answer": answer_so_far or "(nothing yet)"} if segment else {}
            name = ("segment_generate" if segment else "critic_answer") + ("" if doc is not None else "_direct")
            user = render(
                load_prompt(name), question=question, answer_format=self.answer_format, **so_far,
                **({"passage": block} if doc else {}),
            )
            if feedback is not None:
                user = user.rstrip() + "\n" + render(
                    load_prompt("critic_feedback"), previous=feedback.previous, rating=f"{feedback.rating:.1f}"
                )
            step = await gen_run.generate(
                self._messages("critic_system", user),
                action="generate_segment" if segment else "generate_candidate",
                thought=thought, action_input=question,
                max_tokens=self.segment_tokens if segment else self.answer_tokens,
                top_logprobs=1 if self.choice.source != "text" else 0,
                **({"stop": ["\n"]} if segment else {}),
            )
            text = first_sentence(step.text) if segment else step.text.strip()
            seq = S.sequence_score(_prefix_logprobs(step.gen, text)) if step.gen is not None else None
            step.details["candidate"] = i + 1
            if doc is not None:
                step.details["passage"] = doc.id
            if seq is not None:
                step.details["seq"] = round(seq, 4)
            return text, seq

        rel, (text, seq) = await self.gather([relevance(), generate()])
        whole = f"{answer_so_far} {text}".strip() if segment else text
        names: list[str] = []
        calls = []
        runs: list[Run] = []
        if doc is not None:
            names.append("support")
            runs.append(run.fork())
            prompt = self._critique_prompt("critic_support", question=question, passage=block, answer=text)
            calls.append(self._read(runs[-1], "support", prompt, action="critique_support", thought=thought, action_input=text))
        names.append("utility")
        runs.append(run.fork())
        prompt = self._critique_prompt("critic_utility", question=question, answer=whole)
        calls.append(self._read(runs[-1], "utility", prompt, action="critique_utility", thought=thought, action_input=whole))
        if segment:
            names.append("final")
            runs.append(run.fork())
            prompt = self._critique_prompt("segment_final", question=question, answer=whole)
            calls.append(self._read(runs[-1], "final", prompt, action="critique_final", thought=thought, action_input=whole))
        results = await self.gather(calls)
        run.join(rel_run, gen_run, *runs)
        readings: dict[str, Reading] = {} if rel is None else {"relevance": rel}
        readings.update({name: reading for name, (reading, _) in zip(names, results, strict=True)})
        final = True
        if segment:
            p_final = readings["final"].value
            final = not text or p_final is None or p_final > 0.5
        return Draft(text=text, passage=doc, readings=readings, seq=seq, final=final, index=i)


def _joinable(answer_so_far: str) -> str:
    # Reflection tokens follow the text directly, as in the fine-tuning data.
    return answer_so_far.strip()


def _candidate_thought(i: int, doc: Document | None) -> str:
    where = f"passage {doc.title or doc.id}" if doc is not None else "no passage"
    return f"Candidate {i + 1} ({where})."


def _draft_summary(draft: Draft) -> str:
    parts = [f"{g}={draft.value(g):.3f}" if draft.value(g) is not None else f"{g}=unknown" for g in draft.readings]
    return f"{' '.join(draft.text.split())[:120]} | {', '.join(parts)}"


def _draft_details(draft: Draft, source: str, *, boundary: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"critique_source": source, "candidate": draft.index + 1}
    if draft.passage is not None:
        out["passage"] = draft.passage.id
    for g, reading in draft.readings.items():
        probs = reading.probs
        out[g] = {k: round(v, 4) for k, v in probs.items()} if probs else "none (no probability mass)"
    if draft.seq is not None:
        out["seq"] = round(draft.seq, 4)
    out["final"] = draft.final
    if boundary:
        out["boundary"] = boundary
    return out
