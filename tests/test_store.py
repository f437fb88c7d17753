"""Loading document collections from folders and JSONL."""

from __future__ import annotations

import pytest

from selfrag.data import demo_corpus, demo_questions
from selfrag.errors import DataError
from selfrag.retrieval import load_corpus


def test_folder_of_text_and_markdown(tmp_path):
    (tmp_path / "a.txt").write_text("Plain text document.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# Heading Title\nBody of the note.")
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    docs = load_corpus(tmp_path)
    # Titles name the file and the heading the passage sits under (what BM25 and the evidence read).
    assert [(d.id, d.title, d.text) for d in docs] == [
        ("a", "a.txt", "Plain text document."),
        ("sub/b", "sub/b.md § Heading Title", "Body of the note."),
    ]


def test_jsonl_with_optional_fields(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"text": "no id"}\n\n{"id": "x", "title": "T", "text": "with id"}\n')
    docs = load_corpus(p)
    assert [d.id for d in docs] == ["doc1", "x"]
    assert docs[1].title == "T"


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"text": "ok"}\n{"text": oops}\n', r"docs.jsonl:2: not valid JSON"),
        ('{"id": "a"}\n', r"docs.jsonl:1: missing or empty 'text'"),
        ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', r"docs.jsonl:2: duplicate document id"),
        ("[1, 2]\n", r"docs.jsonl:1: expected a JSON object"),
    ],
)
def test_malformed_jsonl_names_the_line(tmp_path, content, message):
    p = tmp_path / "docs.jsonl"
    p.write_text(content)
    with pytest.raises(DataError, match=message):
        load_corpus(p)


def test_missing_and_empty(tmp_path):
    with pytest.raises(DataError, match="documents not found"):
        load_corpus(tmp_path / "nope")
    with pytest.raises(DataError, match="no documents"):
        load_corpus(tmp_path)


def test_demo_data_is_shipped_and_consistent():
    docs = demo_corpus()
    questions = demo_questions()
    assert len(docs) >= 30 and len(questions) >= 10
    text = " ".join(d.text for d in docs).lower()
    # Every demo answer is actually stated somewhere in the demo corpus.
    for q in questions:
        assert any(a.lower() in text for a in q.answers), q.text
