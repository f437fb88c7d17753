"""What a method answers when it abstains, and the trace step that says why (issue 17).

Abstention is off by default in every method (the seeds never abstain); the
conditions are each method's own options (``self_rag.abstain_min_relevance``,
``self_rag.abstain_below``, ``self_rag_critic.abstain_min_relevance``).
"""

from __future__ import annotations

from .trace import Run

ABSTAIN_ANSWER = "insufficient evidence"


def relevance_floor_reason(best: float, floor: float | None) -> str | None:
    """Why to abstain when no passage's fused relevance reaches ``floor`` (None: do not)."""
    if floor is None or best >= floor:
        return None
    return f"no passage's fused relevance reaches {floor:g} (best {best:.2f})"


def note_abstention(run: Run, settings: str, why: str) -> None:
    run.note("abstain", thought="Abstention is on: answer only from supported evidence.",
             action_input=settings, observation=f"abstained: {why}", details={"abstain_reason": why})
