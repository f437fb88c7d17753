"""The generic JSON Lines question format.

One object per line::

    {"id": "q1", "question": "...", "answers": ["...", "..."],
     "contexts": ["passage", {"id": "d1", "title": "...", "text": "..."}],
     "choices": ["option A", "option B"], "type": "...", "level": "...",
     "supporting_titles": ["..."]}

``id`` defaults to the line number; ``answers`` may be one string (``answer``
is accepted too). ``contexts`` are the question's own passages; leave them out
and give ``data.corpus`` (a JSONL file or folder of documents) for a shared
collection. With ``choices`` the gold answer may be an option's letter or its
text. ``supporting_titles`` (titles of the gold passages) enable
``retrieval_recall@k``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..types import Document, Question, QuestionType
from .choices import YES_NO_MAYBE, gold_aliases, gold_option, question_with_choices
from .metrics import normalize_answer
from .records import InvalidRecord, RecordErrors, iter_json_lines, need_object, need_str, str_list

KEYS = {
    "id", "_id", "question", "answers", "answer", "contexts", "choices",
    "type", "level", "supporting_titles", "metadata",
}


def _contexts(value: Any, qid: str) -> tuple[Document, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRecord("'contexts' must be a list of strings or {id?, title?, text} objects")
    docs = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
            raise InvalidRecord(f"context {i} needs a non-empty 'text'")
        title = item.get("title") or ""
        docs.append(Document(id=str(item.get("id") or f"{qid}-{i}"), title=str(title), text=item["text"].strip()))
    return tuple(docs)


def parse_record(record: Any, line: int) -> Question:
    record = need_object(record)
    unknown = sorted(set(record) - KEYS)
    if unknown:
        raise InvalidRecord(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    qid = need_str(record, "id", "_id") if ("id" in record or "_id" in record) else f"line{line}"
    question = need_str(record, "question")
    if "answers" not in record and "answer" not in record:
        raise InvalidRecord("missing 'answers' (a list of gold answers)")
    answers = [a.strip() for a in str_list(record.get("answers", record.get("answer")), "answers") if a.strip()]
    if not answers:
        raise InvalidRecord("'answers' is empty")
    kind = record.get("type")
    choices = tuple(str_list(record["choices"], "choices")) if record.get("choices") else ()
    text = question
    if choices:
        gold = gold_option(answers[0], choices)
        answers = [*gold_aliases(gold, choices), *answers[1:]]
        text = question_with_choices(question, choices)
        kind = kind or QuestionType.MULTIPLE_CHOICE.value
    elif not kind and all(normalize_answer(a) in YES_NO_MAYBE for a in answers):
        kind = QuestionType.YES_NO.value
    meta = record.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidRecord("'metadata' must be an object")
    meta = {**meta, "question": question}
    if record.get("supporting_titles") is not None:
        meta["supporting_titles"] = str_list(record["supporting_titles"], "supporting_titles")
    return Question(
        id=qid,
        text=text,
        answers=tuple(dict.fromkeys(answers)),
        type=str(kind or QuestionType.OPEN.value),
        level=str(record.get("level") or ""),
        choices=choices,
        contexts=_contexts(record.get("contexts"), qid),
        metadata=meta,
    )


def load(path: Path, errors: RecordErrors) -> list[Question]:
    questions = []
    for line, record in iter_json_lines(path, errors):
        try:
            questions.append(parse_record(record, line))
        except InvalidRecord as exc:
            errors.invalid(path, line, str(exc))
    return questions
