"""The demo corpus and demo questions shipped with selfrag (a small Solar System collection)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from ..types import Document, Question


def demo_corpus_path() -> Path:
    return Path(str(resources.files(__package__).joinpath("demo_corpus.jsonl")))


def demo_questions_path() -> Path:
    return Path(str(resources.files(__package__).joinpath("demo_questions.jsonl")))


def demo_corpus() -> list[Document]:
    from ..retrieval.store import read_documents

    return read_documents(demo_corpus_path())


def demo_questions() -> list[Question]:
    out = []
    with demo_questions_path().open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                out.append(
                    Question(id=row["id"], text=row["question"], answers=tuple(row["answers"]), type=row["type"])
                )
    return out
