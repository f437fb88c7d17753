"""MMLU medical subjects in the Self-BioRAG evidence format (multiple choice, A-D).

Files are named ``retrieved_mmlu_<subject>_test.jsonl`` but each holds one JSON
array (JSON Lines are read too). A record is ``{id, name, instruction,
instances, evidence}``; ``instances`` is an object, or a Python-literal string
of one, with ``input`` ("QUESTION: ...\\nOption A: ...\\n...Option: ") and
``output`` (the correct option's text); ``evidence`` is the list of retrieved
passages, which become the question's documents.

``data.path`` is one file or a folder of them; with a folder, ``data.split``
may name subjects (comma-separated, e.g. ``anatomy,medical_genetics``). The
records' own ids are not unique, so questions get ``<subject>-<n>`` ids.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..types import Document, Question, QuestionType
from .choices import gold_aliases, gold_option, question_with_choices
from .records import InvalidRecord, RecordErrors, iter_records, need_object, need_str, str_list

FILE_PATTERN = re.compile(r"^retrieved_mmlu_(?P<subject>.+)_test\.jsonl?$")
_OPTION = re.compile(r"^\s*Option ([A-J])\s*:[ \t]*(.*)$", re.MULTILINE)
_STEM = re.compile(r"^\s*QUESTION\s*:\s*", re.IGNORECASE)


def subject_of(path: Path) -> str:
    m = FILE_PATTERN.match(path.name)
    return m["subject"] if m else path.stem


def _instances(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise InvalidRecord("'instances' is a string but not a Python or JSON literal") from None
    return need_object(value, "'instances'")


def parse_input(text: str) -> tuple[str, list[str]]:
    """Split ``QUESTION: stem\\nOption A: ...`` into the stem and the option texts."""
    matches = [m for m in _OPTION.finditer(text) if m[2].strip()]
    if len(matches) < 2:
        raise InvalidRecord("'input' has fewer than two 'Option X: ...' lines")
    letters = "".join(m[1] for m in matches)
    if letters != "ABCDEFGHIJ"[: len(letters)]:
        raise InvalidRecord(f"options are not lettered A, B, C...: got {', '.join(letters)}")
    stem = _STEM.sub("", text[: matches[0].start()]).strip()
    if not stem:
        raise InvalidRecord("'input' has no question before the options")
    return stem, [m[2].strip() for m in matches]


def parse_record(record: Any, subject: str, index: int) -> Question:
    record = need_object(record)
    inst = _instances(record.get("instances"))
    stem, options = parse_input(need_str(inst, "input"))
    gold = gold_option(need_str(inst, "output"), options)
    evidence = str_list(record.get("evidence", []), "evidence")
    qid = f"{subject}-{index}"
    documents = tuple(
        Document(id=f"{qid}-e{i}", title="", text=text.strip()) for i, text in enumerate(evidence) if text.strip()
    )
    return Question(
        id=qid,
        text=question_with_choices(stem, options),
        answers=gold_aliases(gold, options),
        type=QuestionType.MULTIPLE_CHOICE.value,
        choices=tuple(options),
        contexts=documents,
        metadata={"question": stem, "subject": subject, "source_name": record.get("name", "")},
    )


def _files(path: Path, split: str | None) -> list[Path]:
    if path.is_file():
        if split:
            raise DataError("data.split picks subjects from a folder; data.path is a single file")
        return [path]
    if not path.is_dir():
        raise DataError(f"data file or folder not found: {path}")
    files = sorted(p for p in path.iterdir() if FILE_PATTERN.match(p.name))
    if not files:
        raise DataError(f"{path}: no retrieved_mmlu_<subject>_test.jsonl files")
    if split:
        wanted = [s.strip() for s in split.split(",") if s.strip()]
        known = {subject_of(p): p for p in files}
        missing = [s for s in wanted if s not in known]
        if missing:
            raise DataError(f"no MMLU subject {', '.join(missing)} in {path}; subjects: {', '.join(known)}")
        files = [known[s] for s in wanted]
    return files


def load(path: Path, errors: RecordErrors, split: str | None = None) -> list[Question]:
    questions = []
    for file in _files(path, split):
        subject = subject_of(file)
        for index, (line, record) in enumerate(iter_records(file, errors)):
            try:
                questions.append(parse_record(record, subject, index))
            except InvalidRecord as exc:
                errors.invalid(file, line, str(exc))
    return questions
