"""The JSON of one answer, as ``POST /v1/ask`` returns it.

It is the object ``selfrag ask --json`` prints, plus what the page needs and
that object may not hold: the cited passages (with their text), whether the
method abstained, and ``view``, the trace read into the parts of the picture
(:mod:`selfrag.serve.view`).
"""

from __future__ import annotations

from typing import Any

from ..serialize import response_json
from ..types import RAGResponse
from .view import trace_view


def answer_payload(response: RAGResponse) -> dict[str, Any]:
    data = response_json(response)
    data.setdefault("citations", [{"id": d.id, "title": d.title, "text": d.text} for d in response.citations])
    data.setdefault("abstained", response.abstained)
    texts = {d.id: d.text for d in response.sources}
    texts.update({d.id: d.text for d in response.citations})
    data["view"] = trace_view(data, texts)
    return data
