"""Self-RAG with a probability critic (short form, seed 002's augmentations).

Adaptive retrieval -> critic reranking -> one candidate per kept passage,
scored by the segment score -> the best -> optional self-reflection. The
critique source (reflection tokens, label-word probabilities or text labels)
is chosen per backend and recorded in the trace.

Around it, the joint-first chain of :mod:`..steps.joint_first`: a draft over
the passages with the best fused relevance (the joint draft) is the answer
whenever it has one, and by default the per-passage candidates are written
only when it has none (``passage_candidates``); every passage's relevance is
read either way, as it ranks the joint's passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import Field, field_validator

from ...reflection import score as S
from ...reflection.readings import segment_score
from ...types import ArchitectureType, Candidate, Document, Question, RetrievalResult, Verdict
from ..core.answer_format import answer_format
from ..core.answer_shape import keep_answers
from ..core.base import Method, Outcome
from ..core.registry import register
from ..core.text import clean_answer
from ..core.trace import Run
from ..critique import Critic, CriticConfig, Task
from ..critique import drafts as write_drafts
from ..critique.answer import joint_document
from ..critique.critic import Relevance
from ..critique.drafts import critiqued_answer
from ..critique.relevance import every_relevance, known_relevance
from ..critique.stages import (
    AdaptiveConfig,
    ReflectionConfig,
    RerankConfig,
    RetrievalChoice,
    WeightsConfig,
    adaptive_retrieval,
    as_candidate,
    critic_rerank,
    self_reflect,
)
from ..steps.abstention import ABSTAIN_ANSWER, note_abstention, relevance_floor_reason
from ..steps.choice_reading import reader_for
from ..steps.evidence import Ranked, rank_evidence
from ..steps.joint_answer import joint_answer
from ..steps.joint_first import JointFirstConfig, Selection, fallback_candidates, selection_order


class ProbabilityCriticConfig(CriticConfig):
    """The critic of ``self_rag_critic``: relevance ``auto`` reads the mean of the label question and
    the question likelihood where the backend can score a given reply (the label question alone
    otherwise), since the label question alone hardly tells a small model's passages apart."""

    AUTO_RELEVANCE: ClassVar[Relevance] = Relevance.LABEL_AND_LIKELIHOOD


class SelfRagCriticConfig(JointFirstConfig):
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    max_answer_tokens: int = Field(64, ge=1)
    critic: ProbabilityCriticConfig = Field(default_factory=ProbabilityCriticConfig)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    weights: WeightsConfig = Field(default_factory=WeightsConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)
    # joint_candidate, joint_passages, selection, passage_candidates (JointFirstConfig): the joint
    # draft reads the passages with the best fused relevance (the critic's P(relevant) and lexical
    # evidence: steps/evidence.py); selection: critique ranks it with the others by the segment
    # score (seed 002's rule). With reflection tokens (relevance comes with each candidate) the
    # per-passage candidates are always written.
    # Context budget of the joint draft's answer call (vanilla_rag's prompt).
    max_context_tokens: int = Field(4000, ge=16)
    # Abstention (off, as in the seeds): answer "insufficient evidence" when no retrieved
    # passage's fused relevance reaches this (checked before the joint draft is written).
    abstain_min_relevance: Annotated[float, Field(ge=0.0, le=1.0)] | None = None

    @field_validator("selection")
    @classmethod
    def _selection_here(cls, value: Selection) -> Selection:
        if value == Selection.LIKELIHOOD:
            raise ValueError("likelihood is self_rag's selection; self_rag_critic selects by joint_first or critique")
        return value


@dataclass
class Pool:
    """The drafts of one question so far: those in the running, those the reranker dropped, the joint,
    and the passages' relevance when it was read without candidates."""

    drafts: list[Candidate] = field(default_factory=list)
    dropped: list[Candidate] = field(default_factory=list)
    joint: Candidate | None = None
    joint_docs: tuple[Document, ...] = ()
    relevance: list[Verdict | None] | None = None


@register
class SelfRagCritic(Method):
    name = "self_rag_critic"
    description = (
        "Self-RAG with a probability critic: adaptive retrieval, critic reranking, "
        "segment-score selection, optional self-reflection."
    )
    type = ArchitectureType.AGENTIC
    config_section = "self_rag_critic"
    Config = SelfRagCriticConfig
    # Seed 002's stages are this method's own (same code as selfrag.methods.critique.augmentations).
    builtin_augmentations = {"retrieval": "adaptive", "rerank": "rerank", "reflection": "reflection"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reader = reader_for(self.config.answer_reading)

    def _critic(self, question: Question) -> Critic:
        return Critic(self.llm, self.config.critic, answer_tokens=self.config.max_answer_tokens,
                      answer_format=answer_format(question))

    async def _answer(self, question: Question, run: Run) -> Outcome:
        cfg: SelfRagCriticConfig = self.config
        weights = cfg.weights.weights()
        critic = self._critic(question)
        run.note(
            "critic",
            thought="Stage: choose where critique probabilities come from.",
            observation=f"critique_source={critic.choice.source} ({critic.choice.reason})",
            details=critic.describe(),
        )
        q = question.text
        decision = await adaptive_retrieval(critic, run, Task(q), mode=cfg.adaptive.mode,
                                            threshold=cfg.adaptive.threshold)
        details: dict[str, Any] = {**critic.choice.as_dict(), "p_retrieve": decision.p,
                                   "retrieval_decision": decision.decision}
        result = await run.retrieve(q, cfg.top_k, thought="Stage: retrieve passages for the question.") \
            if decision.retrieve else None
        if result is None or not result.documents:
            pool = Pool(drafts=await write_drafts(critic, run, Task(q), [None]))
            return await self._choose(critic, run, q, pool, weights, decision, details, None)
        pool = await self._read_passages(critic, run, q, result, weights)
        ranked = self._rank(run, q, result, pool)
        if ranked is not None and (why := relevance_floor_reason(ranked.best, cfg.abstain_min_relevance)):
            note_abstention(run, f"abstain_min_relevance={cfg.abstain_min_relevance}", why)
            return Outcome(answer=ABSTAIN_ANSWER, retrieval_needed=True, details={**details, "abstain_reason": why},
                           citations=[], abstained=True)
        if ranked is not None and cfg.joint_candidate and len(result.documents) >= 2:
            pool.joint_docs = ranked.passages.docs
            pool.joint = await self._joint(critic, run, question, pool.joint_docs)
            pool.drafts.insert(0, pool.joint)
        return await self._choose(critic, run, q, pool, weights, decision, details, result)

    async def _read_passages(
        self, critic: Critic, run: Run, q: str, result: RetrievalResult, weights: S.Weights
    ) -> Pool:
        """Every passage's relevance: alone when the candidates wait for the joint draft, else with
        one candidate per passage."""
        if self._candidates_on_demand(critic, result):
            known = await known_relevance(critic, run, q, result)
            return Pool(relevance=await every_relevance(critic, run, q, result, known))
        drafts, dropped = await self._passage_drafts(critic, run, q, result, weights)
        return Pool(drafts=drafts, dropped=dropped)

    async def _choose(
        self, critic: Critic, run: Run, q: str, pool: Pool, weights: S.Weights, decision: RetrievalChoice,
        details: dict[str, Any], result: RetrievalResult | None,
    ) -> Outcome:
        """Keep the usable drafts (writing fallbacks when there is none), rank them, reflect, answer."""
        cfg: SelfRagCriticConfig = self.config
        usable = keep_answers(run, pool.drafts, lambda d: d.text, q)
        if pool.relevance is not None and pool.joint is not None and result is not None:
            relevance = pool.relevance

            async def passage_drafts() -> list[Candidate]:
                more, more_dropped = await self._passage_drafts(critic, run, q, result, weights, known=relevance)
                pool.drafts += more
                pool.dropped += more_dropped
                return more

            more = await fallback_candidates(run, q, pool.joint.text, len(result.documents), passage_drafts)
            usable += keep_answers(run, more, lambda d: d.text, q)
        if not usable:  # one answer over every retrieved passage (or none)
            docs = list(result.documents) if result is not None else []
            usable = await write_drafts(critic, run, Task(q), [joint_document(docs) if docs else None])
        dropped = pool.dropped + [d for d in pool.drafts if d not in usable]
        breakdowns = [segment_score(d, weights) for d in usable]
        joint = usable.index(pool.joint) if pool.joint in usable else None
        first = cfg.selection == Selection.JOINT_FIRST
        order = selection_order([b.total for b in breakdowns], joint, first)
        joint_first = joint is not None and first
        best_i = order[0]
        run.note(
            "select",
            thought=("Stage: the joint draft when it has an answer; the others ranked by "
                     "seq + w_rel·rel + w_sup·sup + w_use·use." if joint_first else
                     "Stage: score each candidate: seq + w_rel·rel + w_sup·sup + w_use·use; keep the best."),
            observation=f"best: candidate from {_name(usable[best_i].passage)} (score {breakdowns[best_i].total:.3f})",
            details={
                "stage": "selection",
                "weights": {"w_rel": weights.w_rel, "w_sup": weights.w_sup, "w_use": weights.w_use,
                            "use_seq_score": weights.use_seq_score},
                "scores": [{"passage": _name(usable[i].passage), **breakdowns[i].as_dict()} for i in order],
            },
        )
        best, best_score = usable[best_i], breakdowns[best_i]
        if cfg.reflection.enabled:
            reflected = await self_reflect(
                critic, run, q, best, weights=weights,
                max_iterations=cfg.reflection.max_iterations, min_utility=cfg.reflection.min_utility,
            )
            details["self_reflection"] = {"iterations": len(reflected.iterations) - 1,
                                          "answer_changed": reflected.changed, "stop": reflected.stop}
            best, best_score = reflected.best, reflected.best_score
        candidates = [as_candidate(usable[i], breakdowns[i], rank=r + 1, selected=usable[i] is best)
                      for r, i in enumerate(order)]
        if best not in usable:  # a self-reflection rewrite won
            candidates.insert(0, as_candidate(best, best_score, rank=0, selected=True, reflected=True))
        candidates += [as_candidate(d, segment_score(d, weights), rank=None, selected=False, reranked_out=True)
                       for d in dropped]
        details["score"] = round(best_score.total, 4)
        retrieved = result is not None and bool(result.documents)
        return Outcome(answer=clean_answer(best.text), retrieval_needed=decision.retrieve, candidates=candidates,
                       details=details, citations=self._cited(best, pool, retrieved))

    @staticmethod
    def _cited(best: Candidate, pool: Pool, retrieved: bool) -> list[Document] | None:
        """The passages the selected draft read (None: every retrieved passage; [] when none was)."""
        if best is pool.joint:
            return list(pool.joint_docs)
        if retrieved and best.passage is not None:
            return [best.passage]
        return None if retrieved else []

    async def _joint(self, critic: Critic, run: Run, question: Question, docs: Sequence[Document]) -> Candidate:
        """The draft over several passages. With label questions it is written with ``vanilla_rag``'s
        prompt and the critic reads its support and utility; a reflection-token model writes it in its
        own format, like every other draft."""
        doc = joint_document(docs)
        if critic.reflection:
            return (await write_drafts(critic, run, Task(question.text), [doc]))[0]
        _, _, answer = await joint_answer(
            run, question, docs, self.config.max_context_tokens, name=f"{len(docs)} passages",
            facts_first=self.config.facts_first, reader=self.reader, final=False)
        return await critiqued_answer(critic, run, Task(question.text), doc, answer)

    def _candidates_on_demand(self, critic: Critic, result: RetrievalResult) -> bool:
        """Whether the per-passage candidates wait until the joint draft turns out to have no answer
        (not with reflection tokens, whose relevance comes with each candidate, nor with one passage)."""
        return self.config.candidates_on_demand(blocked=critic.reflection or len(result.documents) < 2)

    async def _passage_drafts(
        self, critic: Critic, run: Run, q: str, result: RetrievalResult, weights: S.Weights,
        known: Sequence[Verdict | None] | None = None,
    ) -> tuple[list[Candidate], list[Candidate]]:
        """One critiqued candidate per retrieved passage: those kept by the critic reranker (all of
        them without it), and those it dropped."""
        cfg: SelfRagCriticConfig = self.config
        if cfg.rerank.enabled:
            reranked = await critic_rerank(critic, run, q, result, weights=weights, top_k=cfg.rerank.top_k, known=known)
            return [s.draft for s in reranked.kept], [s.draft for s in reranked.ranked[cfg.rerank.top_k :]]
        if known is None:
            known = await known_relevance(critic, run, q, result)
        return await write_drafts(critic, run, Task(q), list(result.documents), known=known), []

    def _rank(self, run: Run, question: str, result: RetrievalResult, pool: Pool) -> Ranked | None:
        """Fused relevance of every retrieved passage (the critic's P(relevant): read alone, or where a
        draft read one), when the joint draft or the relevance floor needs it."""
        cfg: SelfRagCriticConfig = self.config
        if not (cfg.joint_candidate or cfg.abstain_min_relevance is not None):
            return None
        docs = list(result.documents)
        if pool.relevance is not None:
            model = [None if r is None else r.value for r in pool.relevance]
        else:
            judged = {d.passage.id: d.value("relevance") for d in pool.drafts + pool.dropped if d.passage is not None}
            model = [judged.get(doc.id) for doc in docs]
        return rank_evidence(run, question, docs, result.scores, model, cfg.joint_passages)


def _name(doc: Document | None) -> str:
    return "(no passage)" if doc is None else (doc.title or doc.id)
