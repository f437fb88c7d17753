"""One line of what a method did for one question, read from its trace.

``demo`` prints it under each answer, ``run --trace`` per question and
``serve --trace`` per answer: whether the method retrieved and why, how many
passages, which it judged relevant or how it ranked them, its candidates, the
one it chose and why, and how sure it is. It reads the trace steps
(``retrieval_decision``, ``retrieve``, ``rank_evidence``,
``passage_candidates``, ``select_best``, ``abstain``, ``confidence``) and the
response's details, so it works for a response and for a run's prediction
record alike; a method without those steps gets its steps listed in order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..methods.critique.confidence import LOW
from ..serialize import to_jsonable
from ..types import RAGResponse

_DECISION = re.compile(r"retrieval needed: (yes|no)(?: \((.*)\))?$", re.IGNORECASE)
_KEPT = re.compile(r"\[(\d+)\] (.+?) \((-?[0-9.]+)\)")
_SELECTED = re.compile(r"Selected candidate (\d+) from (.+?) \(")
# Steps that explain() summarises; any other step of a method is only counted.
_KNOWN = {"retrieval_decision", "calibrate_decision", "retrieve", "rank_evidence", "passage_candidates",
          "select_best", "abstain", "confidence"}


def explain(response: RAGResponse) -> str:
    """What the method did for this response, in one line."""
    steps = [to_jsonable(s) for s in response.reasoning_chain]
    return describe(steps, dict(response.details or {}), response.abstained, response.confidence)


def record_line(record: Mapping[str, Any]) -> str:
    """``run --trace``: a prediction record's id, answer and what the method did, in one line."""
    qid = record.get("id", "?")
    error = record.get("error")
    if error:
        return f"{qid}: failed: {error.get('type')}: {error.get('message')}"
    details = dict(record.get("details") or {})
    confidence = (details.get("confidence") or {}).get("confidence") if isinstance(details.get("confidence"), dict) \
        else None
    what = describe(list(record.get("reasoning_chain") or []), details, bool(record.get("abstained")), confidence)
    answer = " ".join(str(record.get("prediction") or "").split())
    if len(answer) > 80:
        answer = answer[:77] + "..."
    return f"{qid}: {answer!r} · {what}"


def describe(steps: Sequence[Mapping[str, Any]], details: Mapping[str, Any], abstained: bool,
             confidence: float | None) -> str:
    """The line for ``steps`` (dicts with ``action``, ``observation``, ``details`` ...)."""
    parts = [_decision(steps), _retrieved(steps), _judged(steps, details), _ranked(steps),
             _candidates(steps, details), _choice(steps, details), _abstention(steps, abstained),
             _sufficiency(details, abstained), _sureness(confidence)]
    line = " · ".join(p for p in parts if p)
    calibration = sum(1 for s in steps if s.get("action") == "calibrate_decision")
    if calibration:
        line += f" · (+{calibration} one-off steps calibrating the retrieval threshold)"
    others = [str(s.get("action")) for s in steps if s.get("action") not in _KNOWN]
    if not any(s.get("action") in ("select_best", "abstain") for s in steps):
        # No selection to report (another method, or no retrieval): say what it did step by step.
        line = " · ".join(p for p in (line, "then: " + " → ".join(_runs(others)) if others else "") if p)
    return line or "no steps recorded"


def _runs(actions: list[str]) -> list[str]:
    """``a, a, a, b`` -> ``a ×3, b``."""
    out: list[str] = []
    for action in actions:
        if out and out[-1].split(" ×")[0] == action:
            head, _, count = out[-1].partition(" ×")
            out[-1] = f"{head} ×{int(count or 1) + 1}"
        else:
            out.append(action)
    return out


def _first(steps: Sequence[Mapping[str, Any]], action: str) -> Mapping[str, Any] | None:
    return next((s for s in steps if s.get("action") == action), None)


def _decision(steps: Sequence[Mapping[str, Any]]) -> str:
    step = _first(steps, "retrieval_decision")
    if step is None:
        return ""
    m = _DECISION.search(str(step.get("observation") or ""))
    needed = (step.get("details") or {}).get("retrieval_needed")
    if m:
        needed = m[1].lower() == "yes"
    why = m[2] if m and m[2] else _shorten(str(step.get("observation") or ""), 80)
    verdict = "decided to retrieve" if needed else "decided not to retrieve"
    return f"{verdict} ({why})" if why else verdict


def _retrieved(steps: Sequence[Mapping[str, Any]]) -> str:
    found = [s for s in steps if s.get("action") == "retrieve"]
    if not found:
        return ""
    n = sum(len((s.get("details") or {}).get("documents") or []) for s in found)
    searches = f" in {len(found)} searches" if len(found) > 1 else ""
    return f"retrieved {n} passage{'s' if n != 1 else ''}{searches}"


def _judged(steps: Sequence[Mapping[str, Any]], details: Mapping[str, Any]) -> str:
    read = _first(steps, "judge_relevance")
    values = (read.get("details") or {}).get("relevance") if read is not None else None
    if isinstance(values, list) and values:  # every passage read by a fitted head, before writing
        relevant = sum(1 for v in values if isinstance(v, (int, float)) and v >= 0.5)
        return f"judged {len(values)} passages: {relevant} relevant (fitted relevance, best {max(values):.2f})"
    rows = [c for c in details.get("all_candidates") or [] if not c.get("joint")]
    judged = [c for c in rows if c.get("relevance") is not None]
    if not judged:
        return ""
    relevant = sum(1 for c in judged if str(c.get("relevance")).lower() == "relevant")
    return f"judged {len(judged)} passage{'s' if len(judged) != 1 else ''}: {relevant} relevant"


def _ranked(steps: Sequence[Mapping[str, Any]]) -> str:
    step = _first(steps, "rank_evidence")
    if step is None:
        return ""
    by = (step.get("details") or {}).get("ranked_by")
    how = "by lexical evidence" if by == "prior" else "by relevance verdicts fused with lexical evidence"
    kept = _KEPT.findall(str(step.get("observation") or ""))
    shown = ", ".join(f"{title} ({float(score):.2f})" for _, title, score in kept[:3])
    more = f" and {len(kept) - 3} more" if len(kept) > 3 else ""
    return f"ranked the passages {how}, best {shown}{more}" if kept else f"ranked the passages {how}"


def _candidates(steps: Sequence[Mapping[str, Any]], details: Mapping[str, Any]) -> str:
    rows = list(details.get("all_candidates") or [])
    if not rows and _first(steps, "select_best") is None:
        return ""
    joint = sum(1 for c in rows if c.get("joint"))
    single = len(rows) - joint
    kinds = []
    if joint:
        kinds.append("the joint answer over the best passages")
    if single:
        kinds.append(f"{single} one-passage candidate{'s' if single != 1 else ''}")
    text = f"{len(rows)} candidate{'s' if len(rows) != 1 else ''}" + (f" ({' + '.join(kinds)})" if kinds else "")
    skipped = _first(steps, "passage_candidates")
    if skipped is not None and "skipped" in str(skipped.get("observation") or ""):
        text += "; one-passage candidates not written: the joint had an answer"
    elif skipped is not None:
        text += f"; one-passage candidates written: {_shorten(str(skipped.get('observation') or ''), 60)}"
    return text


def _choice(steps: Sequence[Mapping[str, Any]], details: Mapping[str, Any]) -> str:
    step = _first(steps, "select_best")
    if step is None:
        return ""
    observation = str(step.get("observation") or "")
    m = _SELECTED.search(observation)
    if not m:
        return _shorten(observation, 80)
    rule = str(step.get("thought") or "")
    rows = list(details.get("all_candidates") or [])
    index = int(m[1]) - 1
    chosen = rows[index] if 0 <= index < len(rows) else {}
    if chosen.get("joint"):
        why = "it has an answer (joint first)" if rule.startswith("The joint candidate") else _shorten(rule, 60)
        return f"chose the joint answer: {why}"
    verdicts = ", ".join(f"{k} {chosen[k]}" for k in ("relevance", "support", "utility") if chosen.get(k) is not None)
    return f"chose candidate {m[1]} from {m[2]}" + (f" ({verdicts})" if verdicts else "") + \
        (f": {_shorten(rule.split(': ', 1)[-1], 60)}" if rule else "")


def _abstention(steps: Sequence[Mapping[str, Any]], abstained: bool) -> str:
    step = _first(steps, "abstain")
    if step is None and not abstained:
        return ""
    why = (step.get("details") or {}).get("abstain_reason") if step is not None else None
    return f"abstained: {why}" if why else "abstained"


def _sufficiency(details: Mapping[str, Any], abstained: bool) -> str:
    said = details.get("sufficiency")
    if abstained or not isinstance(said, Mapping) or not isinstance(said.get("value"), (int, float)):
        return ""
    if said.get("low"):
        return f"the passages read do not seem to hold the answer (sufficiency {said['value']:.2f})"
    return f"sufficiency {said['value']:.2f}"


def _sureness(confidence: float | None) -> str:
    if confidence is None:
        return ""
    return f"confidence {confidence:.2f}" + (" (low: check the answer against its sources)" if confidence < LOW else "")


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
