"""The answer as every surface shows it: its notes and its ``[n]`` citation markers.

``selfrag ask`` prints these lines and the server's OpenAI-compatible reply
carries them as its ``content``, so a chat front-end shows the same honesty
the terminal does: an answer written without the documents says so first, the
answer carries a marker after the sentence each cited passage supports, and an
abstention or a low confidence is said in words after it.
"""

from __future__ import annotations

from ..types import RAGResponse
from .citing import with_markers

# What a low confidence means, in the words every surface shows.
LOW = 0.5
LOW_CONFIDENCE_NOTE = "low confidence: the passages may not support this answer"
# What a low sufficiency means: the documents read do not seem to hold the answer.
NOT_IN_DOCUMENTS = "The documents do not seem to say."


def confidence_words(value: float) -> str:
    """How sure an answer is, in the words every surface shows: a low value says so plainly."""
    if value < LOW:
        return f"{LOW_CONFIDENCE_NOTE}; confidence {value:.2f}"
    return f"confidence {value:.2f}"


def confidence_line(value: float) -> str:
    """How sure the answer is, in words: a low value says so plainly."""
    return f"({confidence_words(value)})"


def without_documents_line(response: RAGResponse) -> str | None:
    """The line that says an answer used no document (None when it used some, or abstained)."""
    why = response.details.get("without_documents")
    return f"(answered without your documents: {why})" if why else None


def insufficient(response: RAGResponse) -> dict | None:
    """The sufficiency verdict when it is below its floor (None: judged enough, not judged, or abstained)."""
    said = response.details.get("sufficiency")
    return said if isinstance(said, dict) and said.get("low") and not response.abstained else None


def sufficiency_words(said: dict) -> str:
    return f"sufficiency {said['value']:.2f}, below {said['floor']:.2f}"


def answer_lines(response: RAGResponse, *, answer_shown: bool = False) -> list[str]:
    """The lines ``selfrag ask`` prints for an answer, before its list of sources.

    The note that no document was used, the answer with its markers (with
    ``answer_shown``, when the answer was already streamed: only its markers,
    on a line of their own), after :data:`NOT_IN_DOCUMENTS` when the passages
    read do not seem to hold it, the abstention's reason and the confidence.
    """
    cited = response.citations
    lines = []
    if (line := without_documents_line(response)) is not None:
        lines.append(line)
    low = insufficient(response)
    if not answer_shown:
        answer = with_markers(response.answer, cited)
        lines.append(f"{NOT_IN_DOCUMENTS} Closest: {answer}" if low else answer)
    elif cited:
        lines.append("".join(f"[{i}]" for i in range(1, len(cited) + 1)))
    if low:
        lines.append(f"({NOT_IN_DOCUMENTS[:-1]}; the answer above is the closest they give: "
                     f"{sufficiency_words(low)})" if answer_shown else f"({sufficiency_words(low)})")
    if response.abstained and response.details.get("abstain_reason"):
        lines.append(f"(abstained: {response.details['abstain_reason']})")
    if response.confidence is not None and not response.abstained:
        lines.append(confidence_line(response.confidence))
    return lines
