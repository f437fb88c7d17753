"""The options of ``self_rag`` (every critique mode): what each one changes is said beside it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from ....reflection.confidence import Signal
from ....validation import off_when_false
from ...steps.confidence import DRAFT_TEMPERATURE, DRAFTS, ConfidenceReading
from ...steps.decision import DEFAULT_THRESHOLD, RetrievalMode
from ...steps.joint_first import JointFirstConfig


class JointRanking(StrEnum):
    """Which passages the joint candidate reads."""

    # The best by lexical evidence alone, chosen before any verdict, so the joint is written
    # alongside the one-passage candidates.
    PRIOR = "prior"
    # The mode's relevance verdicts averaged with that evidence (waits for them).
    FUSED = "fused"
    # fused for the separate mode, whose verdicts filter passages; prior otherwise.
    AUTO = "auto"


class SelfRAGConfig(JointFirstConfig):
    critique: Literal["combined", "fused", "separate"] = "combined"
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    num_candidates: int = Field(3, ge=1)
    max_context_tokens: int = Field(4000, ge=16)
    # A retrieval-decision template with a {question} placeholder; None: the packaged one.
    prompt_path: str | None = None
    # Token cap for the short verdict calls (decision, relevance, support, utility).
    critic_max_tokens: int = Field(32, ge=1)
    # look_first: with documents, retrieve first and decide from what was found (no call when the best
    # passage covers the question, steps/look_first.py); adaptive: the model decides from the question
    # alone (one call, the paper's); always / never: skip that call and retrieve for every question /
    # for none (the paper's forced-retrieval settings).
    retrieval_mode: RetrievalMode = RetrievalMode.LOOK_FIRST
    # Adaptive decision on a backend with log-probabilities: retrieve when P(yes) >= this;
    # "auto": measured once per backend on written anchor questions (steps/decision.py).
    retrieval_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["auto"] = DEFAULT_THRESHOLD
    # Which passages the joint candidate reads (JointRanking).
    joint_ranking: JointRanking = JointRanking.AUTO
    # joint_candidate, joint_passages, selection, passage_candidates (JointFirstConfig,
    # steps/joint_first.py): the joint candidate and how the answer is chosen; by default the
    # one-passage candidates are written only when the joint has no usable answer (always: seed
    # 000's pipeline; without the joint, with selection: critique or likelihood, with joint_ranking
    # fused or with an abstention rule that reads their verdicts, they always are; likelihood picks
    # the candidate most likely as the reply to the joint's prompt, self_rag/likelihood.py). facts_first and
    # answer_reading (JointAnswerConfig): how the joint's answer is written and read.
    # adaptive, and the question came with its own documents (a dataset's contexts):
    # retrieve without asking, since whoever asked supplied the evidence.
    retrieve_own_evidence: bool = True
    # Abstention (off, as in the seeds): answer ABSTAIN_ANSWER and record
    # abstained: true when no usable candidate has a support verdict at least this good ...
    abstain_below: Literal["partially_supported", "fully_supported"] | None = None
    # ... or when no retrieved passage's fused relevance (verdict and lexical evidence,
    # steps/evidence.py) reaches this (checked once the one-passage verdicts are in).
    abstain_min_relevance: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    # ... or when no other usable candidate (written from other passages) gives the same answer
    # as the selected one (steps/abstention.py: token F1 >= 0.5) ...
    abstain_unconfirmed: bool = False
    # ... or when the answer's confidence is below this.
    abstain_below_confidence: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    # How sure the answer is (steps/confidence.py): reflection reads the signals its model uses (the
    # answer's probability, P(True), how much the passages raise the answer's likelihood, how much of
    # it they contain, their evidence, the agreement of sampled drafts), combined by a model fitted on
    # development questions (confidence_model: a JSON file `selfrag confidence fit` wrote; None: the
    # packaged fit).
    confidence: Annotated[ConfidenceReading, BeforeValidator(off_when_false)] = ConfidenceReading.REFLECTION
    confidence_model: str | None = None
    # Signals read and recorded besides those the model weighs, to fit another rule on (e.g.
    # [agreement, lift]; each costs its calls at every answer).
    confidence_also_read: tuple[Signal, ...] = ()
    # Drafts sampled from the answer's prompt when the model reads their agreement, and how freely.
    confidence_drafts: Annotated[int, Field(ge=1, le=20)] = DRAFTS
    confidence_draft_temperature: Annotated[float, Field(gt=0.0, le=2.0)] = DRAFT_TEMPERATURE
