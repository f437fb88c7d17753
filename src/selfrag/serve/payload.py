"""The JSON of one answer, as ``POST /v1/ask`` returns it.

It is the object ``selfrag ask --json`` prints, plus what the page needs and
that object may not hold: the cited passages (with their text), whether the
method abstained, ``reply`` (the lines ``selfrag ask`` prints for the answer:
its notes and ``[n]`` markers, the text of the OpenAI-compatible reply) and
``view``, the trace read into the parts of the picture (:mod:`selfrag.serve.view`).
"""

from __future__ import annotations

from typing import Any

from ..reflection.answer_text import answer_lines
from ..serialize import response_json
from ..types import RAGResponse
from .view import trace_view


def answer_payload(response: RAGResponse) -> dict[str, Any]:
    data = response_json(response)
    data.setdefault("citations", [{"id": d.id, "title": d.title, "text": d.text} for d in response.citations])
    data.setdefault("abstained", response.abstained)
    data["reply"] = "\n".join(answer_lines(response))
    texts = {d.id: d.text for d in response.sources}
    texts.update({d.id: d.text for d in response.citations})
    data["view"] = trace_view(data, texts)
    return data
