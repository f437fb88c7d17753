"""The settings of ``self_rag``: what a user chooses, each beside what it changes.

Everything else is fixed by the method or by a preset (``configs/self_rag_seed000.yaml``,
``configs/self_rag_seed003.yaml``, ...); the settings an earlier version had and
this one does not are named in :data:`RETIRED` with where they went, so an old
config gets a one-line error that says what to write instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, field_validator

from ....validation import off_when_false
from ...core.base import MethodConfig
from ...critique.confidence import ConfidenceReading
from ...critique.decision import RetrievalMode
from .abstain import Rule, parse_rules


class Critic(StrEnum):
    """Where the verdicts come from (methods/critique/: one source class each)."""

    AUTO = "auto"  # fitted on a local model, prompted elsewhere
    FITTED = "fitted"  # the model's fitted reflection heads, calibrated probabilities (selfrag critic fit)
    PROMPTED = "prompted"  # labels the model writes: one call answers and judges, one rates (seed 000)
    JSON = "json"  # one JSON verdict per call; irrelevant passages dropped before answering (seed 003)
    LABEL_PROBS = "label_probs"  # label-word probabilities by the paper's formulas (seed 002's critic)
    REFLECTION_TOKENS = "reflection_tokens"  # a Self-RAG fine-tune's own reflection tokens


class Selection(StrEnum):
    """How the answer is chosen among the usable candidates (selection.py: one strategy each)."""

    JOINT_FIRST = "joint_first"  # the joint candidate whenever it has an answer, else the critic's rule
    CRITIQUE = "critique"  # the critic's own rule over every candidate (seed 000's score, seed 003's key)
    SCORE = "score"  # the paper's weighted sum seq + 1.0·rel + 1.0·sup + 0.5·use
    LIKELIHOOD = "likelihood"  # the candidate most likely as the reply to the joint's answer prompt


# Settings of earlier versions, and what replaces each (the error an old config gets).
RETIRED: dict[str, str] = {
    "critique": "critic: prompted (was combined) or json (was separate); fused was retired",
    "joint_candidate": "joint_passages: 0 for no joint candidate",
    "passage_candidates": "the one-passage candidates are written on demand with selection: joint_first, "
                          "and for every question otherwise",
    "joint_ranking": "the joint reads the passages ranked by lexical evidence, fused with the relevance "
                     "verdicts of a critic that judges first (critic: json)",
    "retrieve_own_evidence": "retrieval_mode: adaptive asks even when the question brings its own passages; "
                             "look_first does not",
    "abstain_below": "abstain: [support < partially_supported]",
    "abstain_min_relevance": "abstain: [relevance < 0.7]",
    "abstain_unconfirmed": "abstain: [unconfirmed]",
    "abstain_below_confidence": "abstain: [confidence < 0.3]",
    "retrieval_threshold": "the threshold is measured per model (docs/methods.md, the retrieval decision)",
    "prompt_path": "put your decision template, as self_rag.txt, in the folder SELFRAG_PROMPT_DIR names",
    "critic_max_tokens": "verdict calls are capped at 32 tokens",
    "confidence_model": "confidence: PATH.json (your fit, read as confidence: reflection)",
    "confidence_also_read": "a lab setting (lab/README.md)",
    "confidence_drafts": "a lab setting (lab/README.md)",
    "confidence_draft_temperature": "a lab setting (lab/README.md)",
    "facts_first": "yes/no questions are answered after their facts; other questions directly",
    "answer_reading": "choice answers are read as written",
}


def _confidence(value: Any) -> Any:
    value = off_when_false(value)
    if isinstance(value, str) and (value.endswith(".json") or value in {r.value for r in ConfidenceReading}):
        return value
    raise ValueError(f"confidence is one of {', '.join(r.value for r in ConfidenceReading)} or a rule file "
                     "(.json) that `selfrag confidence fit` wrote")


# Retired settings with a new name or form (SelfRAGConfig.upgrade), and the values that are what
# the method now always does.
_CRITICS = {"combined": "prompted", "separate": "json"}
_RULES = {"abstain_below": "support < {}", "abstain_min_relevance": "relevance < {}",
          "abstain_unconfirmed": "unconfirmed", "abstain_below_confidence": "confidence < {}"}
_RENAMED = {"joint_candidate", "confidence_model", *_RULES}
_ALWAYS: dict[str, tuple] = {
    "critique": ("combined", "separate"), "passage_candidates": ("fallback",), "joint_ranking": ("auto",),
    "retrieve_own_evidence": (True,), "retrieval_threshold": ("auto",), "prompt_path": (None,),
    "critic_max_tokens": (32,), "confidence_also_read": ((), [], None), "confidence_drafts": (10, None),
    "confidence_draft_temperature": (0.7, None), "facts_first": ("yes_no",), "answer_reading": ("text",),
}


class SelfRAGConfig(MethodConfig):
    critic: Critic = Critic.AUTO
    # look_first: with a corpus, retrieve first and decide from what was found (no call when the best
    # passage covers the question); with the question's own passages, use them without asking.
    # adaptive: the model decides from the question alone (one call, the paper's; the critic reads it).
    # always / never: no call (the paper's forced settings).
    retrieval_mode: RetrievalMode = RetrievalMode.LOOK_FIRST
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    # One-passage candidates: one for each of the first num_candidates passages (the critic's
    # judges_first sources: those of them judged relevant).
    num_candidates: int = Field(3, ge=1)
    # The joint candidate reads this many passages with the best evidence (0: no joint candidate).
    joint_passages: int = Field(5, ge=0)
    selection: Selection = Selection.JOINT_FIRST
    # Abstention rules, checked once the answer and its confidence are read (off, as in the seeds):
    # "relevance < X", "support < partially_supported|fully_supported", "unconfirmed", "confidence < X".
    abstain: Annotated[tuple[Rule, ...], BeforeValidator(parse_rules),
                       PlainSerializer(lambda rules: [str(r) for r in rules])] = ()
    # How sure the answer is (critique/confidence.py): off, sequence, p_true, reflection (the packaged
    # rule over the reflection signals), or a rule file `selfrag confidence fit` wrote (reflection with it).
    confidence: Annotated[str, BeforeValidator(_confidence)] = ConfidenceReading.REFLECTION.value
    max_context_tokens: int = Field(4000, ge=16)
    # When the fitted sufficiency of the passages read is below this, the answer's first line says the
    # documents do not seem to hold it ("fitted": the threshold the critic fit chose on its fitting
    # questions; "off": always answer, the seeds' behaviour).
    sufficiency_floor: Annotated[Annotated[float, Field(ge=0.0, le=1.0)] | Literal["fitted", "off"],
                                 BeforeValidator(off_when_false)] = "fitted"

    RETIRED: ClassVar[dict[str, str]] = RETIRED

    @classmethod
    def upgrade(cls, recorded: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in recorded.items() if k not in RETIRED}
        old = dict(recorded)
        if old.get("critique") in _CRITICS:
            out.setdefault("critic", _CRITICS[old.pop("critique")])
        if old.get("joint_candidate") is False:
            out["joint_passages"] = 0
        if old.get("confidence_model"):
            out["confidence"] = old["confidence_model"]
        rules = [*out.get("abstain", ())]
        for key, form in _RULES.items():
            if old.get(key) not in (None, False):
                rules.append(form.format(old[key]))
        out["abstain"] = rules
        # Retired settings whose recorded value is what the method now always does say nothing;
        # any other value (fused, facts_first: all, a fixed threshold ...) stays, so it differs.
        out.update({k: v for k, v in old.items()
                    if k in RETIRED and k not in _RENAMED and v not in _ALWAYS.get(k, ())})
        return out

    @property
    def confidence_reading(self) -> ConfidenceReading:
        return ConfidenceReading.REFLECTION if self.confidence.endswith(".json") else ConfidenceReading(self.confidence)

    @property
    def confidence_file(self) -> str | None:
        """The fitted rule file ``confidence`` names (None: the packaged one)."""
        return self.confidence if self.confidence.endswith(".json") else None

    @field_validator("joint_passages")
    @classmethod
    def _joint(cls, value: int) -> int:
        if value == 1:
            raise ValueError("a joint candidate reads at least 2 passages (0: none)")
        return value

    @property
    def joint(self) -> bool:
        return self.joint_passages >= 2
