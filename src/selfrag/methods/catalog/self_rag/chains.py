"""How ``self_rag`` writes its candidates: the one-passage chains and the joint, in the mode's order.

:class:`CandidateWriter` knows the mode (how a candidate is written and
critiqued) and the settings that decide when each candidate is written:
alongside the others, after the relevance verdicts (``filters_first``
modes), or on demand (the one-passage candidates only when the joint has no
usable answer, :func:`~...steps.joint_first.fallback_candidates`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....types import Candidate, Document, Question
from ...core.concurrency import gather_in_order
from ...core.trace import Run
from ...steps.abstention import relevance_floor_reason
from ...steps.evidence import Passages, Ranked, best_fused, rank_evidence
from ...steps.joint_first import fallback_candidates
from .config import SelfRAGConfig
from .modes import Mode


class CandidateWriter:
    def __init__(self, mode: Mode, config: SelfRAGConfig, *, judge_joint: bool, on_demand: bool) -> None:
        self.mode = mode
        self.config = config
        # Whether the joint's support and utility verdicts are asked (only where they can change the
        # answer), and whether the one-passage candidates wait for a joint without an answer.
        self.judge_joint = judge_joint
        self.on_demand = on_demand

    async def joint(self, question: Question, passages: Passages, run: Run) -> Candidate:
        joint = await self.mode.joint(question, passages, run, judge=self.judge_joint)
        joint.details["joint"] = True
        return joint

    async def ranked_joint(self, question: Question, docs: list[Document], scores: Sequence[float] | None,
                           model: list[float | None] | None, run: Run) -> Candidate:
        ranked = rank_evidence(run, question.text, docs, scores, model, self.config.joint_passages)
        return await self.joint(question, ranked.passages, run)

    async def filter_then_answer(
        self, question: Question, docs: list[Document], judged: list[Document], scores: Sequence[float] | None,
        forks: list[Run], joint_run: Run, wants_joint: bool,
    ) -> tuple[list[Candidate | None], Candidate | None, list[float | None]]:
        """``filters_first`` modes: a relevance verdict on each ``judged`` passage at once, then the kept
        passages' candidates and the joint at once (None per rejected passage; the joint is None when it
        is not written here), and the verdicts (1 / 0 per judged passage, None per passage not judged
        or with no usable verdict). The joint ranks every retrieved passage (a None counts as the mean
        verdict, :func:`...steps.evidence.impute`); only a passage judged relevant gets a candidate.

        The joint's ranking needs the verdicts, not the candidates' critiques, so it is written beside the
        candidates: two round trips fewer than after them, the same calls. Not when no passage was kept or
        the relevance floor will abstain: the paths after this decide what is read then.
        """
        one = [Passages((doc,), (i,)) for i, doc in enumerate(judged, start=1)]
        kept = await gather_in_order([self.mode.relevant(question, p, f) for p, f in zip(one, forks, strict=True)])
        work = [self.mode.candidate(question, p, f) for p, f, k in zip(one, forks, kept, strict=True) if k]
        model: list[float | None] = [*(None if k is None else float(k) for k in kept),
                                     *[None] * (len(docs) - len(judged))]
        floor = relevance_floor_reason(best_fused(question.text, docs, scores, model),
                                       self.config.abstain_min_relevance)
        # With no usable verdict at all there is nothing to filter by: the joint reads the passages as
        # though none was judged (ranked by the prior), as it does when one is judged relevant.
        with_joint = wants_joint and (any(kept) or all(k is None for k in kept)) and floor is None
        if with_joint:
            work.append(self.ranked_joint(question, docs, scores, model, joint_run))
        results = iter(await gather_in_order(work))
        chains = [next(results) if k else None for k in kept]
        return chains, next(results) if with_joint else None, model

    async def chains_and_joint(
        self, question: Question, judged: list[Document], forks: list[Run], early: Ranked | None, joint_run: Run,
    ) -> tuple[list[Candidate | None], Candidate | None]:
        """The one-passage candidates and, when its passages were ranked before any verdict
        (``early``), the joint written alongside them (None otherwise). On demand the joint is written
        first, and the others only when it has no usable answer."""
        def chains() -> list[Any]:
            return [self.mode.candidate(question, Passages((doc,), (i,)), fork)
                    for i, (doc, fork) in enumerate(zip(judged, forks, strict=True), start=1)]

        if early is not None and self.on_demand:
            joint = await self.joint(question, early.passages, joint_run)
            others = await fallback_candidates(joint_run, question.text, joint.text, len(judged),
                                               lambda: gather_in_order(chains()))
            return list(others), joint
        work = chains()
        if early is not None:  # the joint does not wait for the verdicts: write it alongside the chains
            work.append(self.joint(question, early.passages, joint_run))
        results = await gather_in_order(work)
        return list(results[: len(judged)]), (results[len(judged)] if early is not None else None)
