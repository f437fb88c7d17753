"""What ``self_rag``'s phases read and write for one question."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ....types import Candidate, Document, Question, Verdict
from ...core.trace import Run
from ...critique.confidence import Confidence
from ...critique.fitted import Assessment
from ...critique.protocol import CriticSource


@dataclass
class State:
    question: Question
    critic: CriticSource
    retrieval_needed: bool = True
    docs: list[Document] = field(default_factory=list)
    scores: Sequence[float] | None = None
    own_evidence: bool = False
    # Per retrieved passage: the critic's relevance value (None: not judged), and the verdicts a
    # critic that judges first gave.
    relevance: list[float | None] = field(default_factory=list)
    verdicts: list[Verdict | None] = field(default_factory=list)
    # One trace branch per judged passage, so each passage's verdict and candidate stay together.
    forks: list[Run] = field(default_factory=list)
    joint: Candidate | None = None
    joint_context: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    # A critic that judges first kept no passage and nothing was written: answer without context.
    none_relevant: bool = False
    # The candidates with an answer, the selected one, the answer and how sure it is.
    usable: list[Candidate] = field(default_factory=list)
    best: Candidate | None = None
    answer: str = ""
    confidence: Confidence | None = None
    # What a fitted critic read of the answer (its sufficiency, confidence and utility verdicts).
    assessment: Assessment | None = None

    @property
    def written(self) -> list[Candidate]:
        """Every candidate written, the joint first."""
        return ([self.joint] if self.joint is not None else []) + self.candidates
