"""``self_rag``'s last phases: how sure the answer is, then abstain or answer.

The confidence (``confidence``) is read over the passages the selected
candidate was written from (:mod:`...critique.confidence`). The abstention rules
(``abstain``, :mod:`.abstain`) are checked once everything is read; the outcome
carries seed 003's response fields (:func:`details`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....reflection.confidence import ConfidenceModel, Signals
from ....reflection.judged import judged_value
from ....reflection.parse import RELEVANT
from ...core.base import Outcome
from ...core.context import build_context
from ...core.trace import Run
from ...critique.confidence import Confidence, ConfidenceReading, candidate_confidence
from ...steps.abstention import ABSTAIN_ANSWER, note_abstention
from ...steps.candidates import candidate_row, cited_passages
from ...steps.evidence import best_fused
from . import abstain
from .selection import ByCritique
from .state import State


class ReadConfidence:
    """``confidence: reflection`` with a fitted critic reads its heads (sufficiency, confidence, utility); with
    another critic, or a rule file, the rule over the reflection signals; ``p_true`` / ``sequence`` alone."""

    def __init__(self, reading: ConfidenceReading, rule_file: str | None, max_context_tokens: int) -> None:
        self.reading = reading
        self.rule_file = rule_file
        self.model = ConfidenceModel.load(rule_file) if reading is ConfidenceReading.REFLECTION else None
        self.max_context_tokens = max_context_tokens

    async def __call__(self, run: Run, state: State) -> None:
        best = state.best
        if best is None or self.reading is ConfidenceReading.OFF:
            return
        assess = getattr(state.critic, "assess", None)
        if assess is not None and self.reading is ConfidenceReading.REFLECTION and self.rule_file is None:
            context = state.joint_context if best.joint else build_context(
                [state.docs[i - 1] for i in best.indices if 0 < i <= len(state.docs)], self.max_context_tokens,
                run.llm.count_tokens)[0]
            state.assessment = await assess(run, state.question, best, state.docs, context)
            if "utility" in state.assessment.verdicts and "utility" not in best.verdicts:
                best.verdicts["utility"] = state.assessment.verdicts["utility"]
            sure = state.assessment.verdicts.get("confidence")
            r = state.assessment.readings
            signals = Signals(seq=r.get("seq"), p_true=r.get("p_true"), lift=r.get("lift"),
                              contained=r.get("contained"), relevance=r.get("read_prior"))
            state.confidence = Confidence(None if sure is None else sure.value, self.reading, signals)
            return
        state.confidence = await candidate_confidence(run, self.reading, state.question, best, state.docs,
                                                      state.scores, self.max_context_tokens, model=self.model)


class Conclude:
    def __init__(self, critic: str, rules: Sequence[abstain.Rule], selection: ByCritique,
                 sufficiency_floor: float | str = "fitted") -> None:
        self.critic = critic
        self.rules = rules
        self.selection = selection
        self.floor = sufficiency_floor

    def __call__(self, run: Run, state: State) -> Outcome:
        """The outcome, or an abstention when a rule says so."""
        info = details(self.critic, state)
        sure = state.confidence
        if sure is not None:
            info["confidence"] = sure.as_dict()
        if (said := self._sufficiency(state)) is not None:
            info["sufficiency"] = said
        confidence = None if sure is None else sure.value
        if not state.retrieval_needed:
            return Outcome(answer=state.answer, details=info, confidence=confidence)
        relevance = best_fused(state.question.text, state.docs, state.scores, state.relevance)
        why = abstain.first_reason(self.rules, abstain.Facts(relevance, state.usable, state.best, confidence))
        if why is not None:
            note_abstention(run, ", ".join(str(r) for r in self.rules), why)
            order = self.selection.order(state.usable)  # what selection would answer without the rules
            withheld = state.answer or (state.usable[order[0]].text if order else None)
            info.update(abstain_reason=why, withheld_answer=withheld)
            return Outcome(answer=ABSTAIN_ANSWER, retrieval_needed=True, candidates=state.written, details=info,
                           abstained=True, confidence=confidence)
        citations = [] if state.none_relevant else cited_passages(state.best, state.docs)
        return Outcome(answer=state.answer, retrieval_needed=True, candidates=state.written, details=info,
                       citations=citations, confidence=confidence)


    def _sufficiency(self, state: State) -> dict[str, Any] | None:
        """The fitted sufficiency verdict, the floor it is held to and whether it is below (the answer's first
        line then says the documents do not seem to hold it)."""
        verdict = None if state.assessment is None else state.assessment.verdicts.get("sufficiency")
        if verdict is None or verdict.value is None:
            return None
        floor = None if self.floor == "off" else state.assessment.threshold if self.floor == "fitted" else self.floor
        return {"value": round(verdict.value, 4), "floor": None if floor is None else round(floor, 4), "source": verdict.source,
                "low": floor is not None and verdict.value < floor}


def details(critic: str, state: State) -> dict[str, Any]:
    """Seed 003's response fields: the selected answer's verdicts and passages, and every candidate."""
    best, docs = state.best, state.docs
    context = [docs[i - 1].text for i in best.indices if i <= len(docs)] if best else []
    return {
        "critic": critic,
        "support": judged_value(best, "support") if best else None,  # None: not judged
        "utility": judged_value(best, "utility") if best else None,
        "context_used": context or ([best.passage.text] if best and best.passage else []),
        "retrieval_needed": state.retrieval_needed,
        "total_docs_retrieved": len(docs),
        "relevant_docs_count": sum(c.relevance == RELEVANT for c in state.candidates),
        "all_candidates": [candidate_row(c) for c in state.written],
    }
