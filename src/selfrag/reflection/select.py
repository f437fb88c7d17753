"""Choosing among critiqued candidates: pure scoring rules for both Self-RAG modes."""

from __future__ import annotations

from collections.abc import Sequence

from .parse import FULLY, NO_SUPPORT, PARTIALLY, RELEVANT

# Tagged critiques (combined, fused): score = utility + 2 * support_bonus + 0.5 * relevant.
SUPPORT_BONUS = {FULLY: 1.0, PARTIALLY: 0.5, NO_SUPPORT: 0.0}
UNKNOWN_SUPPORT_BONUS = 0.5
SUPPORT_WEIGHT = 2.0
RELEVANCE_BONUS = 0.5

# One verdict per call (separate): support level first, utility second.
SUPPORT_RANK = {"fully_supported": 3, "partially_supported": 2, "no_support": 1}


def combined_score(utility: float, support: str, relevance: str) -> float:
    """``utility + 2 × support_bonus + 0.5 × [relevant]`` (support bonus 1 / 0.5 / 0)."""
    bonus = SUPPORT_BONUS.get(support, UNKNOWN_SUPPORT_BONUS)
    return (
        float(utility)
        + SUPPORT_WEIGHT * bonus
        + (RELEVANCE_BONUS if relevance == RELEVANT else 0.0)
    )


def support_rank(support: str) -> int:
    """3 / 2 / 1 for full / partial / no support in either vocabulary; 0 when unknown."""
    return SUPPORT_RANK.get(support.replace(" ", "_"), 0)


def separate_key(support: str, utility: int) -> tuple[int, int]:
    """The lexicographic key: (support rank 3/2/1, utility); unknown support ranks 0."""
    return SUPPORT_RANK.get(support, 0), int(utility)


def separate_score(support: str, utility: int) -> float:
    """A single number that orders candidates exactly like :func:`separate_key`.

    ``10 × support_rank + utility``: utility is at most 5, so support always wins.
    """
    rank, use = separate_key(support, utility)
    return float(10 * rank + use)


def best_index(keys: Sequence[object]) -> int | None:
    """Index of the largest key, the earliest on ties; None for no candidates."""
    best: int | None = None
    for i, key in enumerate(keys):
        if best is None or key > keys[best]:  # type: ignore[operator]
            best = i
    return best
