"""Which passages the joint candidate reads: the model's verdicts fused with lexical evidence.

Each retrieved passage gets ``fused = (model + prior) / 2``: ``model`` is 1
for a passage the mode judged relevant, 0 for one judged irrelevant (or
dropped by the ``separate`` mode's filter) and 0.5 for one it did not judge;
``prior`` is :func:`selfrag.retrieval.links.evidence_prior` (retrieval score
share, title named in the question, title named in another top passage). The
joint candidate reads the ``joint_passages`` best, best first, leaving out
any below :data:`MIN_FUSED` (a passage judged irrelevant stays only if its
prior is at least 0.5); when fewer than two pass, it reads the best
``joint_passages`` regardless, as a model that rejects nearly everything is
not trusted either. On the small
models the verdict alone could not filter (the 0.5B model judged almost every
passage relevant); the prior is what tells the second hop from a distractor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..reflection.parse import RELEVANT
from ..retrieval.links import evidence
from ..types import Candidate, Document
from .self_rag_modes import Passages
from .trace import Run

MIN_FUSED = 0.25


@dataclass(frozen=True)
class Ranked:
    """The passages kept for the joint candidate and the best fused relevance of any passage."""

    passages: Passages
    best: float


def verdicts(n: int, chains: Sequence[Candidate | None]) -> list[float]:
    """Per passage: 1 / 0 when the mode judged it relevant / not, 0.5 when it did not judge it."""
    out = []
    for i in range(n):
        candidate = chains[i] if i < len(chains) else None
        out.append(0.5 if i >= len(chains) else float(candidate is not None and candidate.relevance == RELEVANT))
    return out


def rank_evidence(
    run: Run, question: str, docs: Sequence[Document], scores: Sequence[float] | None,
    model: Sequence[float], keep: int,
) -> Ranked:
    """The ``keep`` passages with the highest fused relevance, best first (a trace step says why).

    ``model``: the model's relevance of each passage in [0, 1] (0.5: not judged).
    """
    signals = evidence(question, docs, scores if scores is not None and len(scores) == len(docs) else None)
    rows = []
    for i, (doc, sig, model_value) in enumerate(zip(docs, signals, model, strict=True)):
        value = float(model_value)
        rows.append({
            "index": i + 1, "title": doc.title, "model": round(value, 4), "prior": round(sig.prior, 4),
            "score": round(sig.score, 4), "named": sig.named, "linked": sig.linked,
            "fused": round((value + sig.prior) / 2, 4),
        })
    ranked = sorted(rows, key=lambda r: (-r["fused"], r["index"]))
    passing = [r for r in ranked if r["fused"] >= MIN_FUSED]
    order = (passing if len(passing) >= 2 else ranked)[:keep]
    kept = {r["index"] for r in order}
    for r in rows:
        r["kept"] = r["index"] in kept
    run.note(
        "rank_evidence",
        thought="Fuse each passage's relevance verdict with lexical evidence; the joint candidate reads the best.",
        action_input=f"{len(docs)} passages, keep {keep}",
        observation="kept " + ", ".join(f"[{r['index']}] {r['title'] or '-'} ({r['fused']:.2f})" for r in order),
        details={"passages": rows},
    )
    passages = Passages(tuple(docs[r["index"] - 1] for r in order), tuple(r["index"] for r in order))
    return Ranked(passages, ranked[0]["fused"] if ranked else 0.0)
