"""The stage each step of a method belongs to, in the words every surface shows while a method works.

``selfrag ask`` shows them on stderr and the server's page under the question,
each as its step starts (:data:`selfrag.methods.core.trace.step_listener`).
"""

from __future__ import annotations

# Step action -> the stage it belongs to, as shown.
STAGES = {
    "retrieve": "retrieving passages",
    "retrieval_decision": "deciding whether to read the documents",
    "calibrate_decision": "calibrating the retrieval decision (once per model)",
    "generate_and_critique": "judging passage",
    "evaluate_relevance": "judging passage",
    "critique_relevance": "judging passage",
    "generate": "writing the answer",
    "generate_after_facts": "writing the answer",
    "short_answer": "writing the answer",
    "final_answer": "writing the answer",
    "direct_answer": "writing the answer without documents",
    "generate_segment": "writing the answer",
    "assess_support": "critiquing the answer",
    "rate_utility": "critiquing the answer",
    "critique_retrieval": "critiquing the answer",
    "reflect": "critiquing the answer",
    "reformulate": "rewriting the query",
    "react_step": "thinking",
    "reason": "reasoning one step",
    "confidence_p_true": "reading how sure the answer is",
    "confidence_likelihood": "reading how sure the answer is",
    "confidence_draft": "reading how sure the answer is",
    "calibrate_choice": "calibrating the answer's labels (once per model)",
}
# The stage shown with the number of the passage being judged.
JUDGING = "judging passage"


class StageNames:
    """Names the stage of each step of one question as it starts, numbering the passages judged."""

    def __init__(self) -> None:
        self.judged = 0

    def label(self, action: str) -> str:
        label = STAGES.get(action, action.replace("_", " "))
        if label == JUDGING:
            self.judged += 1
            label = f"{JUDGING} {self.judged}"
        return label
