"""Joint first: the candidate written over the best-evidence passages is the answer whenever it has one.

``self_rag`` and ``self_rag_critic`` both write a *joint* candidate over the
passages with the best evidence beside their one-passage candidates, and
both build the same chain around it:

1. **Joint first, others on demand** (``passage_candidates: fallback``): the
   joint is written first, and the one-passage candidates (each an answer
   and its critiques) only when it has no usable answer
   (:func:`fallback_candidates`). ``always`` writes them for every question,
   as the seeds' pipelines do.
2. **Select** (``selection``): ``joint_first`` puts the joint ahead of every
   other usable candidate (:func:`selection_order`); ``critique`` ranks it
   with the others by the method's critique score, the papers' rule;
   ``likelihood`` (``self_rag``) by how likely each candidate is as the reply
   to the answer prompt over the joint's passages.
3. **Fall back**: with no usable candidate, one answer over every passage.

A joint that is the answer whenever it has one makes the one-passage
candidates matter only when it has none, which is why they can wait for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from typing import TypeVar

from pydantic import Field

from ..core.answer_shape import malformed
from ..core.trace import Run
from .joint_answer import JointAnswerConfig

T = TypeVar("T")


class Selection(StrEnum):
    """How the answer is chosen among the usable candidates."""

    JOINT_FIRST = "joint_first"  # the joint whenever it has an answer, else the critique's best
    CRITIQUE = "critique"  # the critique's best, the joint included (the papers' rule)
    # The candidate most likely as the reply to the evidence prompt (catalog/self_rag/likelihood.py; self_rag).
    LIKELIHOOD = "likelihood"


class PassageCandidates(StrEnum):
    """When the one-passage candidates are written."""

    ALWAYS = "always"  # beside the joint, for every question (the seeds' pipelines)
    FALLBACK = "fallback"  # only when the joint has no usable answer


class JointFirstConfig(JointAnswerConfig):
    """The settings of a method that writes a joint candidate and may select it first."""

    # One more candidate written over the best passages, at most joint_passages of them.
    joint_candidate: bool = True
    joint_passages: int = Field(5, ge=2)
    selection: Selection = Selection.JOINT_FIRST
    passage_candidates: PassageCandidates = PassageCandidates.FALLBACK

    @property
    def joint_first(self) -> bool:
        return self.joint_candidate and self.selection == Selection.JOINT_FIRST

    def candidates_on_demand(self, *, blocked: bool = False) -> bool:
        """Whether the one-passage candidates wait for a joint without a usable answer; ``blocked``: the
        method needs them for every question all the same (e.g. abstention reads their verdicts)."""
        return self.passage_candidates == PassageCandidates.FALLBACK and self.joint_first and not blocked


def selection_order(keys: Sequence[object], joint: int | None, joint_first: bool) -> list[int]:
    """Candidate indices best first by ``keys`` (the earliest on ties), the ``joint``'s index
    first when ``joint_first``."""
    order = sorted(range(len(keys)), key=keys.__getitem__, reverse=True)  # stable: ties keep index order
    if joint_first and joint is not None and joint in order:
        order.remove(joint)
        order.insert(0, joint)
    return order


async def fallback_candidates(
    run: Run, question: str, joint_text: str, count: int, write: Callable[[], Awaitable[list[T]]],
) -> list[T]:
    """The one-passage candidates on demand: none when the joint's answer is usable, else ``write()``'s.
    A ``passage_candidates`` step says which."""
    reason = malformed(joint_text, question)
    if reason is None:
        run.note("passage_candidates", thought="The joint candidate has an answer: the one-passage candidates "
                 "are not written (passage_candidates: fallback).",
                 observation=f"{count} one-passage candidates skipped")
        return []
    run.note("passage_candidates", thought="The joint candidate has no usable answer: write the one-passage "
             "candidates.", observation=f"joint: {reason}")
    return await write()
