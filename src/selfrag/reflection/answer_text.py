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


def answer_lines(response: RAGResponse, *, answer_shown: bool = False) -> list[str]:
    """The lines ``selfrag ask`` prints for an answer, before its list of sources.

    The note that no document was used, the answer with its markers (with
    ``answer_shown``, when the answer was already streamed: only its markers,
    on a line of their own), the abstention's reason and the confidence.
    """
    cited = response.citations
    lines = []
    if (line := without_documents_line(response)) is not None:
        lines.append(line)
    if not answer_shown:
        lines.append(with_markers(response.answer, cited))
    elif cited:
        lines.append("".join(f"[{i}]" for i in range(1, len(cited) + 1)))
    if response.abstained and response.details.get("abstain_reason"):
        lines.append(f"(abstained: {response.details['abstain_reason']})")
    if response.confidence is not None and not response.abstained:
        lines.append(confidence_line(response.confidence))
    return lines
