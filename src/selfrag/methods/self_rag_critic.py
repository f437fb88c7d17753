"""Self-RAG with a probability critic (short form, seed 002's augmentations).

Adaptive retrieval -> critic reranking -> one candidate per kept passage,
scored by the segment score -> the best -> optional self-reflection. The
critique source (reflection tokens, label-word probabilities or text labels)
is chosen per backend and recorded in the trace. By default the draft over
the most relevant passages (the joint draft) is the answer whenever it has
one, and the per-passage candidates are written only when it has none
(``passage_candidates``); every passage's relevance is read either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from ..reflection import score as S
from ..reflection.readings import Draft, Reading
from ..types import ArchitectureType, Document, Question, RetrievalResult
from .abstention import ABSTAIN_ANSWER, note_abstention, relevance_floor_reason
from .answer_format import answer_format
from .answer_shape import keep_answers
from .base import Method, Outcome
from .choice_reading import reader_for
from .critique import Critic, CriticConfig, Task
from .critique import drafts as write_drafts
from .critique.drafts import critiqued_answer
from .critique.relevance import every_relevance, known_relevance
from .critique.stages import (
    AdaptiveConfig,
    ReflectionConfig,
    RerankConfig,
    WeightsConfig,
    adaptive_retrieval,
    as_candidate,
    critic_rerank,
    self_reflect,
)
from .joint_answer import JointAnswerConfig, PassageCandidates, joint_answer
from .registry import register
from .self_rag_evidence import Ranked, rank_evidence
from .text import clean_answer
from .trace import Run

# What ``critic.relevance: auto`` (the default) reads here: the mean of the label question and
# the question likelihood, where the backend can score a given reply. Relevance AUC of gold
# paragraphs against distractors, 1.5B benchmark model, top-5 BM25 paragraphs: 0.876 / 0.860 /
# 0.908 on three HotpotQA samples against 0.751 / 0.753 / 0.723 for the label question alone;
# 0.800 against 0.494 on the 0.5B (README, "Where self-reflection stands").
AUTO_RELEVANCE = "label_and_likelihood"


class SelfRagCriticConfig(JointAnswerConfig):
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    max_answer_tokens: int = Field(64, ge=1)
    critic: CriticConfig = Field(default_factory=CriticConfig)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    weights: WeightsConfig = Field(default_factory=WeightsConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)
    # One more candidate written over the passages with the best fused relevance (the critic's
    # P(relevant) and lexical evidence: self_rag_evidence.py), at most joint_passages of them.
    # It is selected whenever it has a usable answer (selection: joint_first); selection:
    # critique ranks it with the others by the segment score (seed 002's rule).
    joint_candidate: bool = True
    joint_passages: int = Field(5, ge=2)
    selection: Literal["joint_first", "critique"] = "joint_first"
    # "fallback": the per-passage candidates (and seed 002's critic reranker over them) are written
    # only when the joint draft has no usable answer; every passage's relevance is read all the
    # same, as it ranks the joint's passages. The joint draft was the answer in all 496 benchmark
    # runs of a question (2026-11-28), so their ~3 calls per passage changed no answer. "always":
    # written for every question, seed 002's pipeline. Without the joint draft, with selection:
    # critique or with reflection tokens (relevance comes with the candidate) they always are.
    passage_candidates: PassageCandidates = "fallback"
    # Context budget of the joint draft's answer call (vanilla_rag's prompt).
    max_context_tokens: int = Field(4000, ge=16)
    # facts_first and answer_reading (JointAnswerConfig): how the joint draft's answer is written.
    # Abstention (issue 17; off, as in the seeds): answer "insufficient evidence" when no retrieved
    # passage's fused relevance reaches this (checked before the joint draft is written).
    abstain_min_relevance: Annotated[float, Field(ge=0.0, le=1.0)] | None = None


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
    # Seed 002's stages are this method's own (same code as selfrag.methods.augmentations).
    builtin_augmentations = {"retrieval": "adaptive", "rerank": "rerank", "reflection": "reflection"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reader = reader_for(self.config.answer_reading)

    def _critic(self, question: Question) -> Critic:
        return Critic(
            self.llm, self.config.critic, answer_tokens=self.config.max_answer_tokens,
            answer_format=answer_format(question), auto_relevance=AUTO_RELEVANCE,
        )

    async def _answer(self, question: Question, run: Run) -> Outcome:
        cfg: SelfRagCriticConfig = self.config
        weights = cfg.weights.weights()
        critic = self._critic(question)
        choice = critic.choice
        run.note(
            "critic",
            thought="Stage: choose where critique probabilities come from.",
            observation=f"critique_source={choice.source} ({choice.reason})",
            details=critic.describe(),
        )
        q = question.text
        decision = await adaptive_retrieval(critic, run, Task(q), mode=cfg.adaptive.mode, threshold=cfg.adaptive.threshold)
        drafts: list[Draft] = []
        dropped: list[Draft] = []
        relevance: list[Reading | None] | None = None  # read without candidates (passage_candidates)
        retrieved = False
        if decision.retrieve:
            result = await run.retrieve(q, cfg.top_k, thought="Stage: retrieve passages for the question.")
            retrieved = bool(result.documents)
        if not retrieved:
            drafts = await write_drafts(critic, run, Task(q), [None])
        elif self._candidates_on_demand(critic, result):
            relevance = await every_relevance(critic, run, q, result, await known_relevance(critic, run, q, result))
        else:
            drafts, dropped = await self._passage_drafts(critic, run, q, result, weights)

        joint: Draft | None = None
        joint_docs: tuple[Document, ...] = ()
        ranked = self._rank(run, q, result, drafts + dropped, relevance) if retrieved else None
        if ranked is not None and (why := relevance_floor_reason(ranked.best, cfg.abstain_min_relevance)):
            note_abstention(run, f"abstain_min_relevance={cfg.abstain_min_relevance}", why)
            details = {**choice.as_dict(), "p_retrieve": decision.p, "retrieval_decision": decision.decision,
                       "abstain_reason": why}
            return Outcome(answer=ABSTAIN_ANSWER, retrieval_needed=True, details=details, citations=[],
                           abstained=True)
        if ranked is not None and cfg.joint_candidate and len(result.documents) >= 2:
            joint_docs = ranked.passages.docs
            joint = await self._joint(critic, run, question, joint_docs)
            drafts = [joint, *drafts]
        usable = keep_answers(run, drafts, lambda d: d.text, q)
        if not usable and relevance is not None:  # the joint draft has none: one candidate per passage
            more, more_dropped = await self._passage_drafts(critic, run, q, result, weights, known=relevance)
            drafts += more
            dropped += more_dropped
            usable = keep_answers(run, more, lambda d: d.text, q)
        if not usable:  # write one answer over every retrieved passage (or none)
            docs = list(result.documents) if retrieved else []
            usable = await write_drafts(critic, run, Task(q), [joint_document(docs) if docs else None])
        dropped += [d for d in drafts if d not in usable]
        drafts = usable
        breakdowns = [d.score(weights) for d in drafts]
        order = S.rank([b.total for b in breakdowns], len(drafts))
        joint_first = joint is not None and joint in drafts and cfg.selection == "joint_first"
        if joint_first:
            # Small models' critique scores did not separate right answers from wrong ones
            # (docs/methods.md), so the draft written from all the evidence stands.
            order = [drafts.index(joint), *(i for i in order if drafts[i] is not joint)]
        best_i = order[0]
        run.note(
            "select",
            thought=("Stage: the joint draft when it has an answer; the others ranked by "
                     "seq + w_rel·rel + w_sup·sup + w_use·use." if joint_first else
                     "Stage: score each candidate: seq + w_rel·rel + w_sup·sup + w_use·use; keep the best."),
            observation=f"best: candidate from {_name(drafts[best_i].passage)} (score {breakdowns[best_i].total:.3f})",
            details={
                "stage": "selection",
                "weights": {
                    "w_rel": weights.w_rel, "w_sup": weights.w_sup, "w_use": weights.w_use,
                    "use_seq_score": weights.use_seq_score,
                },
                "scores": [{"passage": _name(drafts[i].passage), **breakdowns[i].as_dict()} for i in order],
            },
        )
        best, best_score = drafts[best_i], breakdowns[best_i]
        details: dict = {**choice.as_dict(), "p_retrieve": decision.p, "retrieval_decision": decision.decision}
        if cfg.reflection.enabled:
            reflected = await self_reflect(
                critic, run, q, best, weights=weights,
                max_iterations=cfg.reflection.max_iterations, min_utility=cfg.reflection.min_utility,
            )
            details["self_reflection"] = {
                "iterations": len(reflected.iterations) - 1,
                "answer_changed": reflected.changed,
                "stop": reflected.stop,
            }
            best, best_score = reflected.best, reflected.best_score
        candidates = [
            as_candidate(drafts[i], breakdowns[i], rank=r + 1, selected=drafts[i] is best)
            for r, i in enumerate(order)
        ]
        if best not in drafts:  # a self-reflection rewrite won
            candidates.insert(0, as_candidate(best, best_score, rank=0, selected=True, reflected=True))
        candidates += [as_candidate(d, d.score(weights), rank=None, selected=False, reranked_out=True) for d in dropped]
        details["score"] = round(best_score.total, 4)
        if best is joint:
            cited: list[Document] | None = list(joint_docs)
        elif retrieved and best.passage is not None:
            cited = [best.passage]
        else:
            cited = None if retrieved else []
        return Outcome(
            answer=clean_answer(best.text),
            retrieval_needed=decision.retrieve,
            candidates=candidates,
            details=details,
            citations=cited,
        )

    async def _joint(self, critic: Critic, run: Run, question: Question, docs: Sequence[Document]) -> Draft:
        """The draft over several passages. With label questions it is written with ``vanilla_rag``'s
        prompt (the critic's own answer prompt wrote worse answers over the same passages on the
        benchmark models) and the critic reads its support and utility; a reflection-token model
        writes it in its own format, like every other draft."""
        doc = joint_document(docs)
        if critic.reflection:
            return (await write_drafts(critic, run, Task(question.text), [doc]))[0]
        _, _, answer = await joint_answer(
            run, question, docs, self.config.max_context_tokens, name=f"{len(docs)} passages",
            facts_first=self.config.facts_first, reader=self.reader)
        return await critiqued_answer(critic, run, Task(question.text), doc, answer)

    def _candidates_on_demand(self, critic: Critic, result: RetrievalResult) -> bool:
        """Whether the per-passage candidates wait until the joint draft turns out to have no answer."""
        cfg: SelfRagCriticConfig = self.config
        return (cfg.passage_candidates == "fallback" and cfg.joint_candidate and cfg.selection == "joint_first"
                and not critic.reflection and len(result.documents) >= 2)

    async def _passage_drafts(
        self, critic: Critic, run: Run, q: str, result: RetrievalResult, weights: S.Weights,
        known: Sequence[Reading | None] | None = None,
    ) -> tuple[list[Draft], list[Draft]]:
        """One critiqued candidate per retrieved passage: those kept by the critic reranker (all of
        them without it), and those it dropped."""
        cfg: SelfRagCriticConfig = self.config
        if cfg.rerank.enabled:
            reranked = await critic_rerank(critic, run, q, result, weights=weights, top_k=cfg.rerank.top_k, known=known)
            return [s.draft for s in reranked.kept], [s.draft for s in reranked.ranked[cfg.rerank.top_k :]]
        if known is None:
            known = await known_relevance(critic, run, q, result)
        return await write_drafts(critic, run, Task(q), list(result.documents), known=known), []

    def _rank(self, run: Run, question: str, result: RetrievalResult, judged: list[Draft],
              read: Sequence[Reading | None] | None = None) -> Ranked | None:
        """Fused relevance of every retrieved passage (the critic's P(relevant): ``read`` in passage
        order, or where a ``judged`` draft read one), when the joint draft or the relevance floor needs it."""
        cfg: SelfRagCriticConfig = self.config
        if not (cfg.joint_candidate or cfg.abstain_min_relevance is not None):
            return None
        docs = list(result.documents)
        if read is not None:
            model = [None if r is None else r.value for r in read]
        else:
            relevance = {d.passage.id: d.value("relevance") for d in judged if d.passage is not None}
            model = [relevance.get(doc.id) for doc in docs]
        return rank_evidence(run, question, docs, result.scores, model, cfg.joint_passages)


def joint_document(docs: Sequence[Document]) -> Document:
    """Several passages as one, for a candidate that reads them all."""
    if len(docs) == 1:
        return docs[0]
    return Document(
        id="+".join(d.id for d in docs),
        title=" + ".join(d.title or d.id for d in docs),
        text="\n\n".join(f"{d.title}: {d.text}" if d.title else d.text for d in docs),
    )


def _name(doc: Document | None) -> str:
    return "(no passage)" if doc is None else (doc.title or doc.id)
