"""PubMedQA PQA-L (``ori_pqal.json``): yes/no/maybe questions over their own abstract.

The file is one JSON object keyed by PubMed id, each value holding
``QUESTION``, ``CONTEXTS`` (the abstract's sections), ``LABELS`` (the section
names), ``LONG_ANSWER`` and ``final_decision`` (the gold label). Each section
becomes a :class:`Document`. ``data.split: test`` keeps the 500 questions of
the official test split (ids from ``test_ground_truth.json`` next to the
file); ``train`` keeps the other 500. Every section is the question's own
(``gold_contexts: all``), so ``data.remove_gold`` puts the nearest other
abstract in their place (:mod:`selfrag.eval.unanswerable`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..types import Document, Question, QuestionType
from ..validation import load_json
from .choices import YES_NO_MAYBE
from .records import InvalidRecord, RecordErrors, iter_json_object, need_object, need_str, str_list

SPLITS = ("test", "train")
GROUND_TRUTH = "test_ground_truth.json"


def parse_record(pmid: str, record: Any) -> Question:
    record = need_object(record)
    question = need_str(record, "QUESTION")
    decision = need_str(record, "final_decision").lower()
    if decision not in YES_NO_MAYBE:
        raise InvalidRecord(f"'final_decision' must be yes, no or maybe, got {decision!r}")
    contexts = str_list(record.get("CONTEXTS"), "CONTEXTS")
    labels = record.get("LABELS") or []
    if not isinstance(labels, list):
        raise InvalidRecord("'LABELS' must be a list of section names")
    documents = []
    for i, text in enumerate(contexts):
        if not text.strip():
            continue
        label = labels[i] if i < len(labels) and isinstance(labels[i], str) else ""
        documents.append(Document(id=f"{pmid}-{i}", title=label.capitalize(), text=text.strip()))
    if not documents:
        raise InvalidRecord("'CONTEXTS' holds no text")
    return Question(
        id=pmid,
        text=f"{question}\nReply yes, no or maybe.",
        answers=(decision,),
        type=QuestionType.YES_NO.value,
        choices=YES_NO_MAYBE,
        contexts=tuple(documents),
        metadata={"question": question, "gold_contexts": "all", "long_answer": record.get("LONG_ANSWER", ""), "year": record.get("YEAR")},
    )


def _test_ids(path: Path) -> set[str]:
    truth = path.parent / GROUND_TRUTH
    if not truth.is_file():
        raise DataError(f"data.split needs {truth} (the official test ids) next to {path.name}")
    try:
        data = load_json(truth.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{truth}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise DataError(f"{truth}: expected a JSON object of id -> label")
    return set(data)


def load(path: Path, errors: RecordErrors, split: str | None = None) -> list[Question]:
    if split is not None and split not in SPLITS:
        raise DataError(f"pubmedqa has splits {', '.join(SPLITS)}; got data.split={split!r}")
    keep = _test_ids(path) if split else None
    questions = []
    for line, pmid, record in iter_json_object(path):
        if keep is not None and (pmid in keep) != (split == "test"):
            continue
        try:
            questions.append(parse_record(pmid, record))
        except InvalidRecord as exc:
            errors.invalid(path, line, f"record {pmid}: {exc}")
    return questions
