"""Seed 002's augmentations (Self-BioRAG) as stages any retrieving method can use.

An ``augmentations:`` config section switches each stage on with its own
sub-section (a sub-section that is given is on unless it says ``enabled: false``)::

    augmentations:
      verbose: true                 # one line per stage on stderr as it runs
      retrieval: {mode: adaptive, threshold: 0.5}
      rerank: {top_k: 3}
      reflection: {max_iterations: 3, min_utility: 4}

:func:`load_augmentations` builds the enabled stages by kind, in the seed's
shape (``query``, ``retrieval``, ``rerank``, ``generation``, ``reflection``;
no stage of the query and generation kinds exists yet). A method given them
(``Method(..., augmentations=...)``) opens a :class:`Session` per question:

* the session is the run's retrieval hook (:attr:`~selfrag.methods.core.trace.Run.hook`),
  so every ``run.retrieve`` of the method goes through it. The first one asks
  the adaptive stage, once per question, whether the question needs passages;
  "no" makes that and every later retrieval of the question an empty result
  (a ``retrieve_skipped`` step, no retriever call). Each result the retriever
  returns is then reranked by the critic and cut to the reranker's ``top_k``.
* after the method's answer, the reflection stage critiques it against the
  passages the method was given and regenerates while its utility rating is
  below ``min_utility``.

The stages run the functions of :mod:`.critique.stages`, the code the
``self_rag_critic`` and ``self_rag_segment`` methods run; a method that has
a stage built in (``Method.builtin_augmentations``) refuses the generic one.
Every stage records a step with its numbers (``details.augmentation`` names it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from ...errors import ConfigError
from ...reflection import score as S
from ...types import Document, Question, RetrievalResult
from ...validation import StrictModel, parse_model
from ..core.answer_format import answer_format
from ..core.base import Method, Outcome
from ..core.context import truncate_to_tokens
from ..core.text import clean_answer
from ..core.trace import Run, shorten
from .answer import critique_answer
from .critic import Critic, CriticConfig, Task
from .decision import RetrievalMode
from .stages import (
    AdaptiveConfig,
    ReflectionConfig,
    RerankConfig,
    adaptive_retrieval,
    critic_rerank,
    self_reflect,
)

KINDS = ("query", "retrieval", "rerank", "generation", "reflection")


class RetrievalStageConfig(AdaptiveConfig):
    """``augmentations.retrieval``: adaptive retrieval (paper threshold 0.2)."""

    enabled: bool = True


class RerankStageConfig(RerankConfig):
    """``augmentations.rerank``: the critic reranker keeps the best ``top_k`` passages."""


class ReflectionStageConfig(ReflectionConfig):
    """``augmentations.reflection``: regenerate while utility < ``min_utility`` (paper: 2 iterations)."""

    enabled: bool = True
    # The passages the method was given, joined up to this many tokens, are the evidence.
    max_context_tokens: int = Field(1500, ge=16)


class AugmentWeights(StrictModel):
    """Critique weights of the reranker and of self-reflection's "best answer" (paper: 1.0 / 1.0 / 0.5)."""

    w_rel: float = 1.0
    w_sup: float = 1.0
    w_use: float = 0.5

    def weights(self) -> S.Weights:
        # The method's own answer has no sequence probability: compare critiques only.
        return S.Weights(w_rel=self.w_rel, w_sup=self.w_sup, w_use=self.w_use, use_seq_score=False)


class AugmentationsConfig(StrictModel):
    """The ``augmentations:`` section; a stage whose sub-section is absent is off."""

    verbose: bool = False
    retrieval: RetrievalStageConfig | None = None
    rerank: RerankStageConfig | None = None
    reflection: ReflectionStageConfig | None = None
    critic: CriticConfig = Field(default_factory=CriticConfig)
    weights: AugmentWeights = Field(default_factory=AugmentWeights)
    # Tokens of the answers the critic writes (reranker candidates, reflection rewrites).
    max_answer_tokens: int = Field(64, ge=1)


# -- the stages ------------------------------------------------------------------


@dataclass(frozen=True)
class AdaptiveRetrieval:
    """Retrieve for this question at all? Asked once per question, at its first retrieval."""

    config: RetrievalStageConfig
    kind: ClassVar[str] = "retrieval"

    @property
    def name(self) -> str:
        c = self.config
        return f"adaptive_retrieval_{c.threshold:g}" if c.mode == RetrievalMode.ADAPTIVE else f"retrieval_{c.mode}"

    async def __call__(self, session: Session, run: Run) -> bool:
        c = self.config
        choice = await adaptive_retrieval(
            session.critic, run, Task(session.question.text), mode=c.mode, threshold=c.threshold
        )
        step = run.records[-1]
        step.details["augmentation"] = self.name
        session.summary["retrieval"] = {
            "stage": self.name, "mode": c.mode, "threshold": c.threshold,
            "p_retrieve": None if choice.p is None else round(choice.p, 4), "decision": choice.decision,
        }
        session.say(self.name, step.observation)
        return choice.retrieve


@dataclass(frozen=True)
class CriticReranker:
    """One critiqued candidate per retrieved passage; the best ``top_k`` passages go to the method."""

    config: RerankStageConfig
    kind: ClassVar[str] = "rerank"

    @property
    def name(self) -> str:
        return f"critic_reranker_top{self.config.top_k}"

    async def __call__(self, session: Session, run: Run, result: RetrievalResult) -> RetrievalResult:
        if not result.documents:
            return result
        out = await critic_rerank(
            session.critic, run, session.question.text, result, weights=session.weights, top_k=self.config.top_k
        )
        run.records[-1].details["augmentation"] = self.name
        kept = [(s.doc, s.rerank.total) for s in out.kept if s.doc is not None]
        session.summary.setdefault("rerank", []).append(
            {"stage": self.name, "query": result.query, "before": [d.id for d in result.documents],
             "kept": [d.id for d, _ in kept], "scores": [round(v, 4) for _, v in kept]}
        )
        session.say(
            self.name,
            f"kept {len(kept)} of {len(out.ranked)}: " + ", ".join(f"{d.id} ({v:.3f})" for d, v in kept),
        )
        return RetrievalResult(
            documents=tuple(d for d, _ in kept),
            scores=tuple(v for _, v in kept),
            query=result.query,
            retrieval_time_ms=result.retrieval_time_ms,
            method=f"{result.method}+critic_rerank" if result.method else "critic_rerank",
        )


@dataclass(frozen=True)
class SelfReflection:
    """Critique the method's answer; regenerate while its utility rating is below ``min_utility``."""

    config: ReflectionStageConfig
    kind: ClassVar[str] = "reflection"

    @property
    def name(self) -> str:
        return f"self_reflection_iter{self.config.max_iterations}"

    async def __call__(self, session: Session, run: Run, outcome: Outcome) -> Outcome:
        c = self.config
        q = session.question.text
        evidence, used = session.evidence(c.max_context_tokens)
        start = await critique_answer(session.critic, run, q, outcome.answer, evidence)
        result = await self_reflect(
            session.critic, run, q, start, weights=session.weights,
            max_iterations=c.max_iterations, min_utility=c.min_utility,
        )
        run.records[-1].details.update(augmentation=self.name, evidence=[d.id for d in used])
        changed = result.best is not start
        answer = clean_answer(result.best.text) if changed else outcome.answer
        ratings = [it["rating"] for it in result.iterations]
        session.summary["reflection"] = {
            "stage": self.name, "regenerations": len(result.iterations) - 1, "utility_ratings": ratings,
            "scores": [it["score"] for it in result.iterations], "answer_changed": changed,
            "stop": result.stop, "evidence": [d.id for d in used],
        }
        shown = " -> ".join("?" if r is None else f"{r:.1f}" for r in ratings)
        verdict = f"answer changed: {shorten(answer, 80)}" if changed else "answer unchanged"
        session.say(
            self.name, f"{len(result.iterations) - 1} regeneration(s), utility {shown}; {verdict} ({result.stop})"
        )
        return dataclasses.replace(outcome, answer=answer)


Stage = AdaptiveRetrieval | CriticReranker | SelfReflection
# The stage built from each sub-section (the config key is the stage's kind).
_BUILDERS: dict[str, type[AdaptiveRetrieval] | type[CriticReranker] | type[SelfReflection]] = {
    "retrieval": AdaptiveRetrieval, "rerank": CriticReranker, "reflection": SelfReflection,
}


# -- loading ----------------------------------------------------------------------


class Augmentations:
    """The enabled stages by kind (``augmentations["rerank"]``), and their shared settings."""

    def __init__(self, config: AugmentationsConfig | None = None) -> None:
        self.config = config or AugmentationsConfig()
        stages: dict[str, list[Stage]] = {kind: [] for kind in KINDS}
        for kind, build in _BUILDERS.items():
            section = getattr(self.config, kind)
            if section is not None and section.enabled:
                stages[kind].append(build(section))
        self.stages: dict[str, tuple[Stage, ...]] = {k: tuple(v) for k, v in stages.items()}

    def __getitem__(self, kind: str) -> tuple[Stage, ...]:
        return self.stages[kind]

    @property
    def active(self) -> bool:
        return any(self.stages.values())

    @property
    def names(self) -> list[str]:
        return [s.name for kind in KINDS for s in self.stages[kind]]

    def for_method(self, method: Method) -> Augmentations | None:
        """These stages for ``method`` (``None`` when none is enabled); refuses stages it has built in."""
        for kind, key in method.builtin_augmentations.items():
            if self.stages.get(kind):
                raise ConfigError(
                    f"augmentations.{kind}: {method.name} has this stage built in "
                    f"(configure '{method.section()}.{key}'); turn augmentations.{kind} off for it"
                )
        return self if self.active else None

    def start(self, llm: Any, question: Question, run: Run) -> Session:
        """A session for one question, hooked into the run's retrievals.

        (Reflection alone needs the hook too: it keeps what the method was given, the evidence.)
        """
        session = Session(self, llm, question)
        run.hook = session
        return session


def load_augmentations(config: Any) -> Augmentations:
    """The stages of a config's ``augmentations`` section (none enabled when there is no section).

    ``config`` is an experiment config (its ``augmentations`` attribute), a
    mapping holding an ``augmentations`` key, an :class:`AugmentationsConfig`, or ``None``.
    """
    if config is None or isinstance(config, AugmentationsConfig):
        section: Any = config
    elif isinstance(config, Mapping):
        section = config.get("augmentations")
    else:
        section = getattr(config, "augmentations", None)
    if section is None:
        return Augmentations()
    return Augmentations(parse_model(AugmentationsConfig, section, prefix="augmentations"))


# -- one question ------------------------------------------------------------------


class Session:
    """The augmentations at work on one question: the run's retrieval hook, then the reflection."""

    def __init__(self, augmentations: Augmentations, llm: Any, question: Question) -> None:
        cfg = augmentations.config
        self.augmentations = augmentations
        self.llm = llm
        self.question = question
        self.critic = Critic(
            llm, cfg.critic, answer_tokens=cfg.max_answer_tokens, answer_format=answer_format(question)
        )
        self.weights = cfg.weights.weights()
        self.results: list[RetrievalResult] = []  # what the method was given, in order
        self.summary: dict[str, Any] = {}
        self._decision: bool | None = None
        self._lock = asyncio.Lock()
        self._critic_noted = False

    def say(self, stage: str, text: str) -> None:
        if self.augmentations.config.verbose:
            print(f"[augment {self.question.id}] {stage}: {text}", file=sys.stderr, flush=True)

    def _note_critic(self, run: Run) -> None:
        if self._critic_noted:
            return
        self._critic_noted = True
        choice = self.critic.choice
        run.note(
            "critic",
            thought="Augmentations: choose where critique probabilities come from.",
            observation=f"critique_source={choice.source} ({choice.reason})",
            details={**self.critic.describe(), "augmentations": self.augmentations.names},
        )

    async def retrieve(self, run: Run, query: str, top_k: int, *, thought: str, action: str) -> RetrievalResult:
        """The run's retrieval hook: adaptive decision (once), retrieval, reranking."""
        stages = self.augmentations.stages
        if run.retriever is None:  # the method's own "no documents" error, before any stage call
            return await run.retrieve_direct(query, top_k, thought=thought, action=action)
        if stages["retrieval"]:
            async with self._lock:
                if self._decision is None:
                    self._note_critic(run)
                    self._decision = all([await stage(self, run) for stage in stages["retrieval"]])
            if not self._decision:
                return self._skip(run, query, top_k)
        result = await run.retrieve_direct(query, top_k, thought=thought, action=action)
        for stage in stages["rerank"]:
            self._note_critic(run)
            result = await stage(self, run, result)
        self.results.append(result)
        return result

    def _skip(self, run: Run, query: str, top_k: int) -> RetrievalResult:
        run.note(
            "retrieve_skipped",
            thought="Adaptive retrieval decided against retrieving for this question: no passages.",
            action_input=query,
            observation="no retrieval",
            details={"stage": "adaptive retrieval", "query": query, "top_k": top_k},
        )
        result = RetrievalResult(documents=(), scores=(), query=query, method="skipped")
        self.results.append(result)
        return result

    def evidence(self, max_tokens: int) -> tuple[Document | None, list[Document]]:
        """The passages the method was given (latest retrieval first, each once) as one passage."""
        docs: dict[str, Document] = {}
        for result in reversed(self.results):
            for doc in result.documents:
                docs.setdefault(doc.id, doc)
        parts: list[str] = []
        used: list[Document] = []
        left = max_tokens
        count = self.llm.count_tokens
        for doc in docs.values():
            block = doc.text if len(docs) == 1 else (f"{doc.title}\n{doc.text}" if doc.title else doc.text)
            cost = count(block) + 1
            if cost > left:
                if left > 8:
                    parts.append(truncate_to_tokens(block, left, count))
                    used.append(doc)
                break
            parts.append(block)
            used.append(doc)
            left -= cost
        if not used:
            return None, []
        if len(docs) == 1:
            return Document(id=used[0].id, title=used[0].title, text=parts[0]), used
        return Document(id="evidence", title="Retrieved passages", text="\n\n".join(parts)), used

    async def finish(self, run: Run, outcome: Outcome) -> Outcome:
        """Reflect on the method's outcome and record what every stage did."""
        for stage in self.augmentations.stages["reflection"]:
            self._note_critic(run)
            outcome = await stage(self, run, outcome)
        if not self.summary:
            return outcome
        details = {**outcome.details, "augmentations": {"stages": self.augmentations.names, **self.summary}}
        needed = outcome.retrieval_needed and self._decision is not False
        return dataclasses.replace(outcome, details=details, retrieval_needed=needed)
