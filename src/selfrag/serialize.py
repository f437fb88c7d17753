"""Turning selfrag's dataclasses into JSON-ready values, and one answer into its JSON object."""

from __future__ import annotations

import dataclasses
import json
import math
from enum import Enum
from pathlib import Path
from typing import Any

from .reflection.citing import with_markers
from .reflection.judged import VERDICTS, honest_row
from .types import Candidate, RAGResponse, ReasoningStep


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, enums, tuples and paths to plain JSON values (NaN/inf become None)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if hasattr(obj, "model_dump"):
        return to_jsonable(obj.model_dump(mode="json"))
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def dumps(obj: Any, **kwargs: Any) -> str:
    kwargs.setdefault("ensure_ascii", False)
    return json.dumps(to_jsonable(obj), **kwargs)


def candidate_json(c: Candidate) -> dict[str, Any]:
    """One candidate as JSON: its answer, first passage and verdicts (each with the source that gave it),
    a verdict the model did not give set to None and named under ``not_judged``."""
    defaulted = [name for name, v in c.verdicts.items() if v.default]
    row = {
        "text": c.text,
        "passage": to_jsonable(c.passage),
        "passage_indices": list(c.indices),
        "joint": c.joint,
        "relevance": c.relevance,
        "support": c.support,
        "utility": c.utility,
        "score": c.score,
        "seq": c.seq,
        "verdicts": {name: {"value": v.value, "label": v.label, "source": v.source, "default": v.default}
                     for name, v in c.verdicts.items()},
        "details": to_jsonable({**c.details, "joint": c.joint, "passage_indices": list(c.indices),
                                "defaults_used": defaulted}),
    }
    return honest_row(row)


def candidates_json(candidates: Any) -> list[dict[str, Any]]:
    """Candidates as JSON (:func:`candidate_json`)."""
    return [candidate_json(c) for c in candidates if isinstance(c, Candidate)]


def _honest_step(step: dict[str, Any]) -> dict[str, Any]:
    """A trace step as JSON; a verdict its reply did not hold (a parser default) is None, named under
    ``not_judged`` (its value for scoring stays in ``default_value``)."""
    details = step.get("details")
    if not isinstance(details, dict):
        return step
    defaulted = list(details.get("defaults_used") or [])
    if details.get("default_used") is True:
        defaulted += [k for k in (*VERDICTS, "needs_retrieval") if k in details]
    names = [k for k in dict.fromkeys(defaulted) if k in details]
    if not names:
        return step
    fixed = dict(details)
    fixed["default_value"] = {k: details[k] for k in names}
    for k in names:
        fixed[k] = None
    fixed["not_judged"] = names
    return {**step, "details": fixed}


def steps_json(steps: Any) -> list[dict[str, Any]]:
    """Trace steps as JSON (see :func:`_honest_step`)."""
    return [_honest_step(to_jsonable(s)) for s in steps if isinstance(s, ReasoningStep)]


def response_json(response: RAGResponse) -> dict[str, Any]:
    """The one JSON object ``selfrag ask --json`` prints."""
    return {
        "answer": response.answer,
        "method": response.architecture,
        "model": response.model,
        "retrieval_needed": response.retrieval_needed,
        "num_llm_calls": response.num_llm_calls,
        "num_retrieval_calls": response.num_retrieval_calls,
        "total_tokens": response.total_tokens,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "total_cost_usd": response.total_cost_usd,
        "latency_ms": round(response.latency_ms, 1),
        "sources": [{"id": d.id, "title": d.title} for d in response.sources],
        "citations": [{"n": i, "id": d.id, "title": d.title, "text": d.text}
                      for i, d in enumerate(response.citations, start=1)],
        # The answer with [n] after the sentence each citation supports.
        "answer_with_citations": with_markers(response.answer, response.citations),
        # The passages the answer was written from; none: it used no document (and why).
        "read": [{"id": d.id, "title": d.title} for d in response.read],
        "used_documents": bool(response.read),
        "without_documents": response.details.get("without_documents"),
        "abstained": response.abstained,
        "confidence": response.confidence,
        "candidates": candidates_json(response.candidates),
        "reasoning_chain": steps_json(response.reasoning_chain),
        "details": to_jsonable(response.details),
    }
