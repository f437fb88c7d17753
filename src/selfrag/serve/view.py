"""What the web page draws of one answer, worked out from its trace.

:func:`trace_view` reads a response the way ``selfrag ask --json`` prints it
(or a line of a run's ``predictions.jsonl``: same keys, the answer under
``prediction``) and returns the parts of the picture: the retrieval decision,
each retrieved passage with its critique and whether it is cited (with the
sentences of it that the answer draws on), the candidates with the selected
one marked, and the timeline of steps. The page only draws; the reading is
here, where it is tested.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..reflection.answer_text import LOW, NOT_IN_DOCUMENTS, confidence_words, sufficiency_words
from ..reflection.judged import VERDICTS, not_judged_names

_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "the a an and or of to in on at by for with from is are was were be been it its this that these those as "
    "which who whom what when where why how than then there their they he she his her we you your our not no "
    "yes do does did has have had can could would should will may might into about over after before"
)
_STOP = frozenset(_STOP_WORDS.split())
_PROBABILITY_KEYS = ("p_yes", "p_retrieve", "p_evidence")


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP}


def _sentences(passage: str) -> list[tuple[int, int, int]]:
    """``(start, end, words shared)`` per sentence; ``words`` filled in by the caller."""
    out = []
    for match in _SENTENCE.finditer(passage):
        start, end = match.span()
        while start < end and passage[start].isspace():
            start += 1
        if start < end:
            out.append((start, end, 0))
    return out


def shared_counts(answer: str, passage: str) -> list[tuple[int, int, int]]:
    """Each sentence of ``passage`` as ``(start, end, content words it shares with answer)``."""
    wanted = content_words(answer)
    return [(s, e, len(content_words(passage[s:e]) & wanted)) for s, e, _ in _sentences(passage)]


def highlight_threshold(answer: str, best: int) -> int:
    """Words a sentence must share with the answer to be marked: 2 (1 for a one-word answer),
    and at least half as many as the best sentence of all the cited passages."""
    floor = min(2, len(content_words(answer)))
    return max(floor, -(-best // 2), 1)


def highlight_spans(answer: str, passage: str, min_shared: int | None = None) -> list[list[int]]:
    """``[start, end]`` of each sentence of ``passage`` the answer draws on (see highlight_threshold)."""
    counts = shared_counts(answer, passage)
    if min_shared is None:
        min_shared = highlight_threshold(answer, max((n for _, _, n in counts), default=0))
    return [[s, e] for s, e, n in counts if n >= min_shared]


def answer_of(record: Mapping[str, Any]) -> str:
    value = record.get("answer", record.get("prediction"))
    return value if isinstance(value, str) else ""


def _steps(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in record.get("reasoning_chain") or [] if isinstance(s, Mapping)]


def _details(item: Mapping[str, Any]) -> Mapping[str, Any]:
    details = item.get("details")
    return details if isinstance(details, Mapping) else {}


def decision(record: Mapping[str, Any]) -> dict[str, Any]:
    """The retrieval decision: a probability against a threshold, the model's verdict, or fixed."""
    for step in _steps(record):
        d = _details(step)
        prob_key = next((k for k in _PROBABILITY_KEYS if isinstance(d.get(k), (int, float))), None)
        if step.get("action") != "retrieval_decision" and prob_key is None:
            continue
        needed = d.get("retrieval_needed")
        if needed is None and "decision" in d:
            needed = d["decision"] != "no"
        p = d.get(prob_key) if prob_key else None
        threshold = d.get("threshold")
        source = d.get("decision_source") or d.get("mode") or ("label_probs" if p is not None else "text")
        return {
            "kind": "probability" if isinstance(p, (int, float)) else "verdict",
            "needed": needed,
            "p": p,
            "p_name": prob_key,
            "threshold": threshold if isinstance(threshold, (int, float)) else None,
            "source": source,
            "text": step.get("observation") or "",
            "verdict": (d.get("raw_output") or "").strip()[:200],
        }
    retrieved = any(s.get("retrieval_calls") for s in _steps(record))
    return {
        "kind": "fixed",
        "needed": retrieved,
        "p": None,
        "p_name": None,
        "threshold": None,
        "source": "method",
        "text": "this method always retrieves" if retrieved else "this method answered without retrieving",
        "verdict": "",
    }


def selected_index(record: Mapping[str, Any]) -> int | None:
    """The candidate the method chose: marked on the candidate, named by a selection step, or the answer's."""
    candidates = [c for c in record.get("candidates") or [] if isinstance(c, Mapping)]
    for i, c in enumerate(candidates):
        if _details(c).get("selected") is True:
            return i
    for step in _steps(record):
        chosen = _details(step).get("selected")
        if step.get("action") == "select_best" and isinstance(chosen, int) and 1 <= chosen <= len(candidates):
            return chosen - 1
    answer = " ".join(answer_of(record).split())
    for i, c in enumerate(candidates):
        if answer and " ".join(str(c.get("text") or "").split()) == answer:
            return i
    return None


def _retrieved(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Retrieved passages in the order first seen, each with its best retrieval score."""
    seen: dict[str, dict[str, Any]] = {}
    for step in _steps(record):
        for doc in _details(step).get("documents") or []:
            if isinstance(doc, Mapping) and doc.get("id") is not None:
                entry = seen.setdefault(str(doc["id"]), {"id": str(doc["id"]), "title": doc.get("title") or "", "score": None})
                score = doc.get("score")
                if isinstance(score, (int, float)) and (entry["score"] is None or score > entry["score"]):
                    entry["score"] = score
    for src in record.get("sources") or []:
        if isinstance(src, Mapping) and src.get("id") is not None:
            seen.setdefault(str(src["id"]), {"id": str(src["id"]), "title": src.get("title") or "", "score": None})
    return list(seen.values())


def _own_candidate(candidates: Iterable[Mapping[str, Any]], passage_id: str) -> Mapping[str, Any] | None:
    """The candidate written from this passage alone (not one over several passages)."""
    for c in candidates:
        passage = c.get("passage") if isinstance(c.get("passage"), Mapping) else {}
        indices = _details(c).get("passage_indices")
        joint = _details(c).get("joint") is True or (isinstance(indices, list) and len(indices) > 1)
        if str(passage.get("id")) == passage_id and not joint:
            return c
    return None


def _texts(record: Mapping[str, Any], documents: Mapping[str, str] | None) -> dict[str, str]:
    texts: dict[str, str] = {}
    for c in record.get("citations") or []:
        if isinstance(c, Mapping) and isinstance(c.get("text"), str):
            texts[str(c.get("id"))] = c["text"]
    for c in record.get("candidates") or []:
        passage = c.get("passage") if isinstance(c, Mapping) else None
        if isinstance(passage, Mapping) and isinstance(passage.get("text"), str):
            texts.setdefault(str(passage.get("id")), passage["text"])
    texts.update(documents or {})
    return texts


def trace_view(record: Mapping[str, Any], documents: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The picture of one answer (see the module docstring); ``documents``: passage id -> text."""
    answer = answer_of(record)
    candidates = [c for c in record.get("candidates") or [] if isinstance(c, Mapping)]
    chosen = selected_index(record)
    raw_citations = record.get("citations")
    cited = None if raw_citations is None else {  # {id, title, ...} objects, or bare ids
        str(c.get("id")) if isinstance(c, Mapping) else str(c) for c in raw_citations
    }
    texts = _texts(record, documents)
    best = max(
        (n for pid, text in texts.items() if cited and pid in cited for _, _, n in shared_counts(answer, text)),
        default=0,
    )
    min_shared = highlight_threshold(answer, best)
    passages = []
    read = passage_relevance(record)
    for i, entry in enumerate(_retrieved(record)):
        own = _own_candidate(candidates, entry["id"])
        text = texts.get(entry["id"], "")
        is_cited = cited is not None and entry["id"] in cited
        verdicts = _verdicts(own) if own else {"relevance": None, "support": None, "utility": None, "not_judged": [],
                                              "values": {}, "sources": {}}
        if i < len(read):  # a critic that read every passage's relevance: its verdict on this one
            p, source = read[i]
            verdicts = {**verdicts, "relevance": "relevant" if p >= 0.5 else "irrelevant",
                        "values": {**verdicts["values"], "relevance": p},
                        "sources": {**verdicts["sources"], "relevance": source},
                        "not_judged": [n for n in verdicts["not_judged"] if n != "relevance"]}
        passages.append({
            **entry,
            "text": text,
            **verdicts,
            "cited": is_cited,
            "highlights": highlight_spans(answer, text, min_shared) if is_cited and text else [],
        })
    confidence = _confidence(record)
    why = record.get("without_documents")
    if why is None and isinstance(record.get("details"), Mapping):
        why = record["details"].get("without_documents")
    return {
        "answer": answer,
        "abstained": bool(record.get("abstained")),
        # Why the answer used no document (None: it used some, or the record does not say).
        "without_documents": why if isinstance(why, str) and why else None,
        "citations_known": cited is not None,
        # How sure the answer is (None: not read, or the method abstained), and in words.
        "confidence": confidence,
        "confidence_words": None if confidence is None else confidence_words(confidence),
        "confidence_low": confidence is not None and confidence < LOW,
        # Whether the passages read seem to hold the answer (a fitted critic's verdict; None: not read).
        "sufficiency": sufficiency(record),
        "decision": decision(record),
        "passages": passages,
        "candidates": [_candidate(c, i == chosen) for i, c in enumerate(candidates)],
        "selected": chosen,
        "timeline": [_timeline_step(s) for s in _steps(record)],
    }


def passage_relevance(record: Mapping[str, Any]) -> list[tuple[float, str]]:
    """Every retrieved passage's relevance as a critic read it before writing (``judge_relevance``), in
    retrieval order, with its source; empty when no such reading was made."""
    for step in _steps(record):
        d = _details(step)
        values = d.get("relevance")
        if step.get("action") == "judge_relevance" and isinstance(values, list):
            source = str(d.get("source") or "")
            return [(float(v), source) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return []


def sufficiency(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The sufficiency verdict with the words the page shows (None: not read, or the method abstained)."""
    said = _details(record).get("sufficiency")
    if record.get("abstained") or not isinstance(said, Mapping) or not isinstance(said.get("value"), (int, float)):
        return None
    low = bool(said.get("low"))
    floor = said.get("floor")
    words = (f"{NOT_IN_DOCUMENTS} The answer is the closest the passages read give ({sufficiency_words(said)})."
             if low else f"The passages read seem to hold the answer (sufficiency {said['value']:.2f}"
             + (f", floor {floor:.2f})." if isinstance(floor, (int, float)) else ")."))
    return {"value": said["value"], "floor": floor, "low": low, "source": said.get("source") or "", "words": words}


def _confidence(record: Mapping[str, Any]) -> float | None:
    """The answer's confidence: the response's field, or a run record's reading in its details."""
    if record.get("abstained"):
        return None
    value = record.get("confidence")
    if value is None and isinstance(record.get("details"), Mapping):
        reading = record["details"].get("confidence")
        value = reading.get("confidence") if isinstance(reading, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _candidate(c: Mapping[str, Any], selected: bool) -> dict[str, Any]:
    passage = c.get("passage") if isinstance(c.get("passage"), Mapping) else {}
    d = _details(c)
    indices = d.get("passage_indices")
    return {
        "text": str(c.get("text") or ""),
        "passage_id": passage.get("id"),
        "passage_title": passage.get("title") or passage.get("id") or "",
        "joint": d.get("joint") is True or (isinstance(indices, list) and len(indices) > 1),
        **_verdicts(c),
        "score": c.get("score"),
        "selected": selected,
    }


def _verdicts(c: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's verdicts as the model gave them, and ``not_judged``: the ones it did not give
    (named by the record, listed as parser defaults, or missing), which the page draws as "not judged"."""
    named = c.get("not_judged")
    names = [n for n in named if n in VERDICTS] if isinstance(named, list) else not_judged_names(c, _details(c))
    out: dict[str, Any] = {v: None if v in names else c.get(v) for v in VERDICTS}
    out["not_judged"] = names
    read = c.get("verdicts") if isinstance(c.get("verdicts"), Mapping) else {}
    # Each verdict's value and the reader that gave it (a probability for a fitted head).
    out["values"] = {k: v.get("value") for k, v in read.items()
                     if k in VERDICTS and k not in names and isinstance(v, Mapping)
                     and isinstance(v.get("value"), (int, float))}
    out["sources"] = {k: str(v.get("source") or "") for k, v in read.items()
                      if k in VERDICTS and k not in names and isinstance(v, Mapping)}
    return out


def _timeline_step(step: Mapping[str, Any]) -> dict[str, Any]:
    kind = "llm" if step.get("llm_calls") else "retrieval" if step.get("retrieval_calls") else "note"
    return {
        "step": step.get("step_id"),
        "action": step.get("action") or "",
        "kind": kind,
        "tokens": step.get("tokens_used") or 0,
        "prompt_tokens": step.get("prompt_tokens") or 0,
        "completion_tokens": step.get("completion_tokens") or 0,
        "cost_usd": step.get("cost_usd") or 0.0,
        "latency_ms": round(float(step.get("latency_ms") or 0.0), 1),
        "cached": bool(step.get("cached")),
        "observation": " ".join(str(step.get("observation") or "").split())[:240],
    }
