"""The critic: asks a backend for Self-RAG's critiques and reads them as probabilities.

One :class:`Critic` per question and backend. A critique asked again with the
same prompt for the same question (the segment loop asks each passage's
relevance in every segment and beam; two passages can yield the same answer,
whose utility is then asked twice) is answered from the first reading, with a
step that says so and calls nothing. It knows where critique
probabilities come from (:mod:`.source`), how its calls are scheduled
(concurrently, or one after another on a backend that decodes serially, in
an order that maximises prompt-prefix reuse), and how to read one critique
(:meth:`Critic.read`). Candidate writing lives in :mod:`.drafts`; the
augmentation stages built on the critic in :mod:`.stages`.

Prompts put the shared parts first (instructions, question, answer so far)
and the passage last, so calls about one question share the longest prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Hashable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field

from ...llm.base import LLMBackend, Prompt, chat, normalize_messages
from ...prompts import load_prompt, render
from ...reflection import score as S
from ...reflection.readings import Feedback, reading, verdict_details, verdict_summary
from ...reflection.tokens import (
    LABEL_GROUPS,
    REFLECTION_GROUPS,
    TokenGroup,
    find_label,
    instruction_prompt,
)
from ...types import Verdict
from ...validation import StrictModel
from ..core.answer_format import SHORT_ANSWER_FORMAT
from ..core.concurrency import gather_in_order
from ..core.trace import Run, StepRecord
from .source import CritiqueSource, SourceChoice, choose_source

T = TypeVar("T")


class Relevance(StrEnum):
    """How a passage's relevance is read.

    ``passage``: the label question about the passage alone (the paper's critique);
    ``linked``: the same beside the question's best other passage; ``question_likelihood``:
    how likely the passage makes the question (needs a backend that scores a given reply);
    ``label_and_likelihood``: the mean of the two (one more call per passage); ``auto``: the
    method's choice (``CriticConfig.AUTO_RELEVANCE``) where the backend can give it.
    """

    AUTO = "auto"
    PASSAGE = "passage"
    LINKED = "linked"
    QUESTION_LIKELIHOOD = "question_likelihood"
    LABEL_AND_LIKELIHOOD = "label_and_likelihood"

    @property
    def scores_replies(self) -> bool:
        """Whether this reading scores a given reply (forced decoding)."""
        return self in (Relevance.QUESTION_LIKELIHOOD, Relevance.LABEL_AND_LIKELIHOOD)


class CriticConfig(StrictModel):
    """Where critique probabilities come from."""

    source: CritiqueSource = CritiqueSource.AUTO
    # Alternatives read per position (backends give at most 20).
    top_logprobs: int = Field(20, ge=1, le=20)
    # Tokens a text critique may use to write its label.
    text_max_tokens: int = Field(8, ge=1, le=64)
    # How independent calls run: concurrently, or one after another in an order that
    # maximises KV-cache prefix reuse. auto: sequential for backends that decode one
    # call at a time (in-process llama.cpp), concurrent otherwise.
    schedule: Literal["auto", "concurrent", "sequential"] = "auto"
    # How a passage's relevance is read (critique/relevance/: one reader per value); auto: the
    # reading the method's config names in AUTO_RELEVANCE, where the backend can give it.
    relevance: Relevance = Relevance.AUTO

    # What relevance: auto reads: the paper's label question, unless a method's config says otherwise.
    AUTO_RELEVANCE: ClassVar[Relevance] = Relevance.PASSAGE


@dataclass(frozen=True)
class Task:
    """What the critic works on: a whole answer to ``question``, or its next segment.

    ``segment`` asks for one more sentence after ``answer_so_far`` (the
    segment-level loop); ``feedback`` carries the previous attempt when
    self-reflection regenerates.
    """

    question: str
    answer_so_far: str = ""
    segment: bool = False
    feedback: Feedback | None = None


class Critic:
    """Reads critiques and writes candidates for one backend (see the module docstring)."""

    def __init__(
        self,
        llm: LLMBackend,
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
        # The instruction line of answer prompts (see selfrag.methods.core.answer_format).
        self.answer_format = answer_format
        self._choice: SourceChoice | None = None
        self._relevance: Relevance | None = None
        # Critiques asked so far, by group and prompt: the first ask's (reading, step).
        self._asked: dict[Hashable, asyncio.Future[tuple[Verdict, StepRecord]]] = {}

    @property
    def choice(self) -> SourceChoice:
        if self._choice is None:
            self._choice = choose_source(self.llm, self.config.source)
        return self._choice

    @property
    def sequential(self) -> bool:
        if self.config.schedule != "auto":
            return self.config.schedule == "sequential"
        return self.llm.decodes_serially

    def describe(self) -> dict[str, str]:
        """The critique source and call schedule, for the trace."""
        return {**self.choice.as_dict(), "schedule": "sequential" if self.sequential else "concurrent",
                "relevance": self.relevance.value}

    async def gather(self, coros: Sequence[Awaitable[T]]) -> list[T]:
        """Run ``coros`` concurrently, or in order when the schedule is sequential."""
        return await gather_in_order(coros, sequential=self.sequential)

    @property
    def reflection(self) -> bool:
        return self.choice.prompt_format == "reflection_tokens"

    @property
    def relevance(self) -> Relevance:
        """The relevance reading in use, chosen once: ``config.relevance``, or for ``auto`` the
        config's ``AUTO_RELEVANCE`` where it can be read; a reading that scores a given reply falls
        back to ``passage`` unless critiques come from label probabilities on a backend that can."""
        if self._relevance is None:
            mode = self.config.relevance
            if mode == Relevance.AUTO:
                mode = self.config.AUTO_RELEVANCE
                if mode.scores_replies and not (self.llm.supports_forced and self.choice.source == CritiqueSource.LABEL_PROBS):
                    mode = Relevance.PASSAGE
            self._relevance = mode
        return self._relevance

    def groups(self) -> dict[str, TokenGroup]:
        return REFLECTION_GROUPS if self.reflection else LABEL_GROUPS

    # -- one critique ---------------------------------------------------------

    async def read(
        self, run: Run, group: str, prompt: Prompt, *, action: str, thought: str, action_input: str
    ) -> tuple[Verdict, StepRecord]:
        """One critique: next-token label probabilities, or the written label for ``text``.

        A critique already asked with this prompt is not asked again: its
        reading is reused and the step records no call (``details.reused``).
        """
        key = (group, normalize_messages(prompt))
        first = self._asked.get(key)
        if first is None:
            first = asyncio.ensure_future(
                self._ask(run, group, prompt, action=action, thought=thought, action_input=action_input)
            )
            self._asked[key] = first
            try:
                return await first
            except BaseException:
                del self._asked[key]  # a failed ask is asked again next time
                raise
        verdict, _ = await first
        step = run.note(
            action, thought=thought, action_input=action_input,
            observation=f"{verdict_summary(verdict)}; asked before for this question, reading reused (no call)",
            details={**verdict_details(verdict), "reused": True},
        )
        return verdict, step

    async def _ask(
        self, run: Run, group: str, prompt: Prompt, *, action: str, thought: str, action_input: str
    ) -> tuple[Verdict, StepRecord]:
        spec = self.groups()[group]
        if not self.choice.probabilities:
            step = await run.generate(
                prompt, action=action, thought=thought, action_input=action_input,
                max_tokens=self.config.text_max_tokens, top_logprobs=0,
            )
            label = find_label(step.text, spec)
            verdict = reading(group, S.label_probs(label, spec), "text", "" if label else "no label in the text")
        else:
            step = await run.generate(
                prompt, action=action, thought=thought, action_input=action_input,
                max_tokens=1, top_logprobs=self.config.top_logprobs,
            )
            gen = step.gen
            if gen is not None and gen.logprobs:
                verdict = reading(group, S.group_probs(gen.logprobs[0].top, spec), self.choice.source)
            else:
                label = find_label(step.text, spec)
                verdict = reading(
                    group, S.label_probs(label, spec), "text",
                    "the backend returned no log-probabilities; read the text label",
                )
        step.details.update(verdict_details(verdict))
        step.observation = verdict_summary(verdict)
        return verdict, step

    def messages(self, system: str, user: str) -> tuple[Any, ...]:
        """A chat prompt with the named packaged system prompt."""
        return chat(load_prompt(system), user)

    def critique_prompt(self, name: str, **values: str) -> tuple[Any, ...]:
        return self.messages("critic_system", render(load_prompt(name), **values))

    async def retrieval(self, run: Run, task: Task) -> tuple[Verdict, StepRecord]:
        """Does the next part of the answer need passages? (``retrieve`` group: yes/no/continue)."""
        if self.reflection:
            prompt: Prompt = instruction_prompt(task.question) + task.answer_so_far.strip()
        elif task.segment:
            prompt = self.critique_prompt(
                "segment_retrieve", question=task.question, answer=task.answer_so_far or "(nothing yet)"
            )
        else:
            prompt = self.critique_prompt("critic_retrieve", question=task.question)
        return await self.read(
            run, "retrieve", prompt, action="critique_retrieval",
            thought="Does the answer need retrieved passages?", action_input=task.question,
        )
