"""How self_rag reports its candidates: the selection's trace step, the selected one's citations, one row each."""

from __future__ import annotations

from typing import Any

from ...reflection.judged import honest_row, judged_value, shown
from ...types import Candidate, Document
from ..core.trace import Run


def cited_passages(best: Candidate | None, docs: list[Document]) -> list[Document] | None:
    """The selected candidate's passages (None: no candidate, so every retrieved passage)."""
    if best is None:
        return None
    cited = [docs[i - 1] for i in best.indices if 0 < i <= len(docs)]
    if not cited and best.passage is not None:
        cited = [best.passage]
    return cited or None


def candidate_row(c: Candidate) -> dict[str, Any]:
    """One candidate as the response's ``details["all_candidates"]`` lists it (a verdict the model did
    not give is None and named under ``not_judged``)."""
    defaulted = [name for name, v in c.verdicts.items() if v.default]
    return honest_row({
        "text": c.text,
        "passage_id": c.passage.id if c.passage else None,
        "passage_title": c.passage.title if c.passage else None,
        "passage_indices": list(c.indices),
        "joint": c.joint,
        "relevance": c.relevance,
        "support": c.support,
        "utility": c.utility,
        "score": c.score,
        "sources": {name: v.source for name, v in c.verdicts.items()},
        "defaults_used": defaulted,
    }, {"defaults_used": defaulted})


def note_selection(run: Run, rule: str, candidates: list[Candidate], index: int, why: str | None = None) -> None:
    """The ``select_best`` step: which candidate (0-based ``index``) the rule picked, and its verdicts
    (``why``: what the rule read instead, when it read no verdict)."""
    best = candidates[index]
    source = "all relevant passages" if best.joint else (
        f"'{best.passage.title or best.passage.id}'" if best.passage else "-")
    # The verdicts read so far (a fitted critic reads the answer's utility after the selection); one whose
    # reply held none says "not judged".
    read = [f"{name}={shown(judged_value(best, name))}" for name in ("utility", "support", "relevance")
            if name in best.verdicts]
    verdicts = why or ", ".join([*read, f"score={best.score:g}"])
    run.note(
        "select_best",
        thought=rule,
        action_input=f"{len(candidates)} candidates",
        observation=f"Selected candidate {index + 1} from {source} ({verdicts})",
        details={"selected": index + 1, "scores": [c.score for c in candidates]},
    )
