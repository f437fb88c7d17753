"""How self_rag reports its candidates: the selected one's citations, and one trace row per candidate."""

from __future__ import annotations

from typing import Any

from ..types import Candidate, Document


def cited_passages(best: Candidate | None, docs: list[Document]) -> list[Document] | None:
    """The selected candidate's passages (None: no candidate, so every retrieved passage)."""
    if best is None:
        return None
    indices = best.details.get("passage_indices") or []
    cited = [docs[i - 1] for i in indices if 0 < i <= len(docs)]
    if not cited and best.passage is not None:
        cited = [best.passage]
    return cited or None


def candidate_row(c: Candidate) -> dict[str, Any]:
    """One candidate as the response's ``details["all_candidates"]`` lists it."""
    return {
        "text": c.text,
        "passage_id": c.passage.id if c.passage else None,
        "passage_title": c.passage.title if c.passage else None,
        "passage_indices": list(c.details.get("passage_indices", [])),
        "joint": bool(c.details.get("joint", False)),
        "relevance": c.relevance,
        "support": c.support,
        "utility": c.utility,
        "score": c.score,
        "defaults_used": list(c.details.get("defaults_used", [])),
    }
