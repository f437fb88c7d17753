"""Which passages the joint candidate reads: the model's verdicts fused with lexical evidence.

Each retrieved passage gets ``fused = (model + prior) / 2``: ``model`` is 1
for a passage the mode judged relevant, 0 for one judged irrelevant (or
dropped by the ``separate`` mode's filter), the critic's P(relevant) for
``self_rag_critic``, and for a passage nobody judged (or whose verdict reply
was unusable) the **mean of the judged passages' verdicts** (0.5 when none
was judged). The mean, not a fixed 0.5:
``self_rag`` judges only its first ``num_candidates`` passages and small
models call nearly every passage relevant, so a fixed 0.5 would rank the
retriever's top three above every unjudged passage whatever its lexical
evidence. ``prior`` is
:func:`selfrag.retrieval.links.evidence_prior` (retrieval score share, title
named in the question, title named in another top passage). The
joint candidate reads the ``joint_passages`` best, best first, leaving out
any below :data:`MIN_FUSED` (a passage judged irrelevant stays only if its
prior is at least 0.5); when fewer than two pass, it reads the best
``joint_passages`` regardless, as a model that rejects nearly everything is
not trusted either. A small model's verdict alone cannot filter (it judges
almost every passage relevant); the prior is what tells the second hop from
a distractor.

``self_rag``'s combined and fused modes rank by the **prior alone**
(``model=None``; config ``joint_ranking``): their written ``[IsRel]``
verdict separates gold passages from distractors no better than chance on
small models, and fusing it makes the ranking worse than the prior alone
(docs/results.md). Ranking without verdicts also lets the joint candidate be
written while the one-passage candidates are still being judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...reflection.parse import RELEVANT
from ...retrieval.links import evidence
from ...types import Candidate, Document
from ..core.trace import Run


@dataclass(frozen=True)
class Passages:
    """The passages one candidate is written from, with their 1-based ranks."""

    docs: tuple[Document, ...]
    indices: tuple[int, ...]

    @property
    def joint(self) -> bool:
        return len(self.docs) > 1

    def name(self) -> str:
        if self.joint:
            return f"passages {', '.join(str(i) for i in self.indices)}"
        doc = self.docs[0]
        return f"passage {self.indices[0]} ('{doc.title or doc.id}')"


MIN_FUSED = 0.25


@dataclass(frozen=True)
class Ranked:
    """The passages kept for the joint candidate and the best score of any passage (fused, or prior alone)."""

    passages: Passages
    best: float


def verdicts(n: int, chains: Sequence[Candidate | None]) -> list[float | None]:
    """Per passage: 1 / 0 when the mode judged it relevant / not, None when it did not judge it."""
    out: list[float | None] = []
    for i in range(n):
        candidate = chains[i] if i < len(chains) else None
        out.append(None if i >= len(chains) else float(candidate is not None and candidate.relevance == RELEVANT))
    return out


def impute(model: Sequence[float | None]) -> list[float]:
    """``model`` with every missing verdict replaced by the mean of the others (0.5 if all are missing)."""
    judged = [float(v) for v in model if v is not None]
    fill = sum(judged) / len(judged) if judged else 0.5
    return [fill if v is None else float(v) for v in model]


def fuse(
    question: str, docs: Sequence[Document], scores: Sequence[float] | None, model: Sequence[float | None],
) -> list[dict]:
    """One row per passage, in retrieval order: its verdict (imputed), lexical prior and their mean."""
    signals = evidence(question, docs, scores if scores is not None and len(scores) == len(docs) else None)
    rows = []
    for i, (doc, sig, value, raw) in enumerate(zip(docs, signals, impute(model), model, strict=True)):
        rows.append({
            "index": i + 1, "title": doc.title, "model": round(value, 4), "judged": raw is not None,
            "prior": round(sig.prior, 4), "score": round(sig.score, 4), "named": sig.named, "linked": sig.linked,
            "fused": round((value + sig.prior) / 2, 4),
        })
    return rows


def best_fused(
    question: str, docs: Sequence[Document], scores: Sequence[float] | None, model: Sequence[float | None],
) -> float:
    """The highest fused relevance of any passage (0 when there is none)."""
    return max((r["fused"] for r in fuse(question, docs, scores, model)), default=0.0)


def rank_evidence(
    run: Run, question: str, docs: Sequence[Document], scores: Sequence[float] | None,
    model: Sequence[float | None] | None, keep: int,
) -> Ranked:
    """The ``keep`` passages with the highest fused relevance, best first (a trace step says why).

    ``model``: the model's relevance of each passage in [0, 1] (None for a passage: not judged, see
    :func:`impute`); ``model=None`` ranks by the lexical prior alone (no verdict is waited for).
    """
    by_prior = model is None
    rows = fuse(question, docs, scores, [None] * len(docs) if model is None else model)
    if by_prior:  # no verdict took part: say so rather than show an imputed one
        for r in rows:
            r["model"] = r["fused"] = None
    key = "prior" if by_prior else "fused"
    ranked = sorted(rows, key=lambda r: (-r[key], r["index"]))
    passing = ranked if by_prior else [r for r in ranked if r["fused"] >= MIN_FUSED]
    order = (passing if len(passing) >= 2 else ranked)[:keep]
    kept = {r["index"] for r in order}
    for r in rows:
        r["kept"] = r["index"] in kept
    thought = ("Rank the passages by lexical evidence (the model's verdicts are not used); the joint candidate "
               "reads the best." if by_prior else
               "Fuse each passage's relevance verdict with lexical evidence; the joint candidate reads the best.")
    run.note(
        "rank_evidence",
        thought=thought,
        action_input=f"{len(docs)} passages, keep {keep}",
        observation="kept " + ", ".join(f"[{r['index']}] {r['title'] or '-'} ({r[key]:.2f})" for r in order),
        details={"passages": rows, "ranked_by": key},
    )
    passages = Passages(tuple(docs[r["index"] - 1] for r in order), tuple(r["index"] for r in order))
    return Ranked(passages, ranked[0][key] if ranked else 0.0)
