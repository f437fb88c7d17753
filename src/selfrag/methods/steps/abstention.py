"""What a method answers when it abstains, and the trace step that says why.

Abstention is off by default in every method (the seeds never abstain); the
conditions are each method's own options (``self_rag.abstain_min_relevance``,
``self_rag.abstain_below``, ``self_rag.abstain_unconfirmed``,
``self_rag_critic.abstain_min_relevance``).

**Confirmation** (``abstain_unconfirmed``): the selected answer stands only
when another candidate, written from other passages, gives the same answer:
token F1 of the normalised answers at least :data:`AGREEMENT_F1` (yes/no
must match exactly), the test the benchmarks use for "right". An answer
another candidate confirms is right more often than one none confirms
(docs/results.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...normalize import token_overlap
from ..core.trace import Run

ABSTAIN_ANSWER = "insufficient evidence"
AGREEMENT_F1 = 0.5


def agree(a: str, b: str) -> bool:
    """Two answers say the same thing: token F1 (symmetric) >= AGREEMENT_F1."""
    return token_overlap(a, b)[0] >= AGREEMENT_F1


def unconfirmed_reason(answer: str, others: Sequence[str]) -> str | None:
    """Why to abstain when no other candidate's answer agrees with ``answer`` (None: one does)."""
    if any(agree(answer, other) for other in others):
        return None
    return (f"no other candidate confirms the answer {answer!r} "
            f"({len(others)} other usable candidate{'s' if len(others) != 1 else ''}, agreement: token F1 >= "
            f"{AGREEMENT_F1:g})")


def relevance_floor_reason(best: float, floor: float | None) -> str | None:
    """Why to abstain when no passage's fused relevance reaches ``floor`` (None: do not)."""
    if floor is None or best >= floor:
        return None
    return f"no passage's fused relevance reaches {floor:g} (best {best:.2f})"


def note_abstention(run: Run, settings: str, why: str) -> None:
    run.note("abstain", thought="Abstention is on: answer only from supported evidence.",
             action_input=settings, observation=f"abstained: {why}", details={"abstain_reason": why})
