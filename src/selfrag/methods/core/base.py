"""The Method base class: dependencies passed in, every call traced, totals derived.

A method implements ``_answer(question, run)`` and returns an :class:`Outcome`;
``answer()`` wraps it with timing and builds the :class:`RAGResponse` from the
run's steps, so no method keeps its own counters. With ``augmentations``
(:mod:`selfrag.methods.critique.augmentations`) a per-question session wraps the run's
retrievals and reflects on the outcome; without them nothing changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ...defaults import Inherited, inherit
from ...errors import ConfigError, DataError
from ...reflection.citing import supporting
from ...retrieval.base import Retriever, RetrieverFactory
from ...types import ArchitectureType, Candidate, Document, Question, RAGResponse, ReasoningStep
from ...validation import StrictModel, parse_model
from .answer_shape import finalize_answer
from .trace import Run


class AnswerSession(Protocol):
    """Stages at work on one question (see :class:`Stages`)."""

    async def finish(self, run: Run, outcome: Outcome) -> Outcome: ...


class Stages(Protocol):
    """Stages wrapped around any method's answers (:mod:`selfrag.methods.critique.augmentations`)."""

    def for_method(self, method: Method) -> Stages | None: ...

    def start(self, llm: Any, question: Question, run: Run) -> AnswerSession: ...


class MethodConfig(StrictModel):
    """Base of every method's config section (unknown keys are rejected).

    A key shared by every method (``top_k``) is declared ``int | None = None``:
    None inherits the experiment's value (``retrieval.top_k``), or the project
    default without one (:mod:`selfrag.defaults`). Set it only to differ.
    ``RETIRED`` names settings a method no longer has, each with what replaces it.
    """

    RETIRED: ClassVar[dict[str, str]] = {}

    @classmethod
    def upgrade(cls, recorded: Mapping[str, Any]) -> dict[str, Any]:
        """Settings a run recorded, in today's names: a retired setting that meant what today's
        behaviour is disappears, one with a new name takes it; others stay, and so differ."""
        return dict(recorded)


def retired_message(key: str, instead: str) -> str:
    """The one-line error for a setting that was retired: what to write instead."""
    return f"config key '{key}' was retired: {instead}"


@dataclass
class Outcome:
    """What a method decided; accounting is derived from the run."""

    answer: str
    retrieval_needed: bool = False
    candidates: Sequence[Candidate] = ()
    details: dict[str, Any] = field(default_factory=dict)
    # The passages the answer was written from; None: every passage the method retrieved (none when
    # it says no retrieval was needed). Which of them are cited is decided in Method._response.
    citations: Sequence[Document] | None = None
    abstained: bool = False
    # How sure the method is of the answer (None: not read).
    confidence: float | None = None


def as_question(question: Question | str) -> Question:
    if isinstance(question, Question):
        return question
    text = str(question).strip()
    if not text:
        raise DataError("the question is empty; give some text to answer")
    return Question(id="q", text=text)


class Method(ABC):
    """A RAG method. Subclasses set the class attributes and implement ``_answer``."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    type: ClassVar[ArchitectureType] = ArchitectureType.STANDARD
    # Key of this method's section in experiment configs (e.g. "vanilla" for vanilla_rag).
    config_section: ClassVar[str] = ""
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    uses_retrieval: ClassVar[bool] = True
    # Augmentation stages the method already has, by stage kind -> its own config key
    # (e.g. {"retrieval": "adaptive"}); enabling the generic stage too is an error.
    builtin_augmentations: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        llm: Any,
        retriever: Retriever | None = None,
        config: MethodConfig | dict[str, Any] | None = None,
        *,
        retriever_factory: RetrieverFactory | None = None,
        inherited: Inherited | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        augmentations: Stages | None = None,
    ) -> None:
        """``inherited``: the experiment-wide values (``ExperimentConfig.inherited()``);
        None: the project defaults. The config's own keys win over it; ``max_tokens``
        and ``temperature``, when given, win over its LLM parameters.
        """
        inherited = inherited or Inherited()
        self.llm = llm
        self.retriever = retriever
        self.retriever_factory = retriever_factory
        self.config = self.resolve_config(config, inherited)
        self.llm_params: dict[str, Any] = {
            "max_tokens": inherited.max_tokens if max_tokens is None else max_tokens,
            "temperature": inherited.temperature if temperature is None else temperature,
        }
        # None unless some stage is enabled: then every answer runs through a session.
        self.augmentations = augmentations.for_method(self) if augmentations is not None else None

    @classmethod
    def section(cls) -> str:
        return cls.config_section or cls.name

    @classmethod
    def resolve_config(cls, config: MethodConfig | dict[str, Any] | None, inherited: Inherited) -> MethodConfig:
        """The settings the method runs with: its section's keys, the inherited ones it leaves
        unset, and the code's defaults for the rest."""
        if isinstance(config, Mapping):
            retired = next((k for k in config if k in cls.Config.RETIRED), None)
            if retired is not None:
                raise ConfigError(retired_message(f"{cls.section()}.{retired}", cls.Config.RETIRED[retired]))
        own = parse_model(cls.Config, config, prefix=cls.section())
        return own.model_copy(update=inherit(cls.Config.model_fields, own, inherited))

    # -- seed-compatible accessors --------------------------------------------
    def get_name(self) -> str:
        return self.name

    def get_type(self) -> ArchitectureType:
        return self.type

    @classmethod
    def get_config_schema(cls) -> dict[str, tuple[Any, bool, Any]]:
        """``{key: (type, required, default)}`` for each config key."""
        schema = {}
        for key, info in cls.Config.model_fields.items():
            default = None if info.is_required() else info.get_default(call_default_factory=True)
            schema[key] = (info.annotation, info.is_required(), default)
        return schema

    # -- answering -------------------------------------------------------------
    def _resolve_retriever(
        self, question: Question, corpus: Retriever | Sequence[Document] | None
    ) -> Retriever | None:
        if corpus is not None and not isinstance(corpus, (list, tuple)):
            return corpus  # a retriever
        docs: Sequence[Document] | None = corpus if corpus is not None else None
        if docs is None:
            if self.retriever is not None:
                return self.retriever
            docs = question.contexts or None
        if docs is None or not self.uses_retrieval:
            return None
        if not docs:
            raise DataError(f"question {question.id}: the corpus is empty; give at least one document")
        factory = self.retriever_factory
        if factory is None:
            from ...retrieval.registry import retriever_factory

            factory = retriever_factory("bm25")
        return factory(docs)

    async def answer(
        self,
        question: Question | str,
        corpus: Retriever | Sequence[Document] | None = None,
    ) -> RAGResponse:
        """Answer one question.

        Documents come from ``corpus`` (a retriever, or documents to index), else
        the method's own retriever, else the question's own contexts.
        """
        q = as_question(question)
        run = self.start(q, corpus)
        if self.augmentations is None:
            outcome = await self._answer(q, run)
        else:
            session = self.augmentations.start(self.llm, q, run)
            outcome = await session.finish(run, await self._answer(q, run))
        return self._response(run, outcome, q)

    def start(self, question: Question, corpus: Retriever | Sequence[Document] | None = None) -> Run:
        """The run that answers ``question``: the LLM, the retriever :meth:`answer` would use, no step yet."""
        run = Run(self.llm, self._resolve_retriever(question, corpus), dict(self.llm_params))
        # The documents came with the question (a dataset's own contexts), not from a corpus.
        run.own_evidence = corpus is None and self.retriever is None and bool(question.contexts)
        return run

    def _response(self, run: Run, outcome: Outcome, question: Question) -> RAGResponse:
        steps = run.steps()
        details = dict(outcome.details)
        # An abstention is a fixed phrase, not an answer to shape ("insufficient evidence" is not "no").
        answer = outcome.answer.strip() if outcome.abstained else finalize_answer(question, outcome.answer)
        if answer != outcome.answer.strip():
            details["raw_answer"] = outcome.answer
        prompt_tokens = sum(s.prompt_tokens for s in steps)
        completion_tokens = sum(s.completion_tokens for s in steps)
        read = self._read(run, outcome)
        cited = () if outcome.abstained else tuple(
            read[i] for i in supporting(question.text, citable_answer(question, answer), read))
        if not read and not outcome.abstained:
            details["without_documents"] = without_documents_reason(self, steps)
        return RAGResponse(
            answer=answer,
            reasoning_chain=steps,
            retrieved_docs=tuple(run.retrievals),
            total_tokens=sum(s.tokens_used for s in steps),
            total_cost_usd=sum(s.cost_usd for s in steps),
            latency_ms=run.elapsed_ms(),
            num_retrieval_calls=sum(s.retrieval_calls for s in steps),
            num_llm_calls=sum(s.llm_calls for s in steps),
            model=str(self.llm.model),
            architecture=self.name,
            candidates=tuple(outcome.candidates),
            retrieval_needed=outcome.retrieval_needed,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            details=details,
            citations=cited,
            abstained=outcome.abstained,
            confidence=outcome.confidence,
            read=read,
        )

    @staticmethod
    def _read(run: Run, outcome: Outcome) -> tuple[Document, ...]:
        """The passages the answer was written from (see :attr:`Outcome.citations`)."""
        seen: dict[str, Document] = {}
        if outcome.citations is not None:
            for doc in outcome.citations:
                seen.setdefault(doc.id, doc)
            return tuple(seen.values())
        if not outcome.retrieval_needed and not outcome.abstained:
            return ()
        for result in run.retrievals:
            for doc in result.documents:
                seen.setdefault(doc.id, doc)
        return tuple(seen.values())

    @abstractmethod
    async def _answer(self, question: Question, run: Run) -> Outcome: ...


def citable_answer(question: Question, answer: str) -> str:
    """The text to look for in the passages: a chosen option's own text for an option letter."""
    letter = answer.strip().rstrip(".)").upper()
    if question.choices and len(letter) == 1 and "A" <= letter < chr(ord("A") + len(question.choices)):
        return question.choices[ord(letter) - ord("A")]
    return answer


def without_documents_reason(method: Method, steps: Sequence[ReasoningStep]) -> str:
    """Why an answer used no document, in a few words: the retrieval decision's own reason, or the method's."""
    if not method.uses_retrieval:
        return f"{method.name} answers from the model alone"
    for step in steps:
        if step.action == "retrieval_decision" and step.observation:
            reason = step.observation.removeprefix("retrieval needed: no").strip(" ()")
            return reason or "the method decided no retrieval was needed"
    return "the method wrote its answer without any passage"
