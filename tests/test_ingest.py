"""Reading real files into passages: formats, headings, chunking, skipped files."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from selfrag.errors import ConfigError, DataError
from selfrag.ingest import ChunkSettings, chunk_section, collect, count_tokens
from selfrag.ingest import formats as formats_module
from selfrag.ingest import loading as collect_module
from selfrag.ingest.html import html_sections
from selfrag.ingest.sections import markdown_sections
from selfrag.retrieval import load_corpus
from tests.helpers.documents import write_docx, write_html, write_markdown, write_pdf

SECTIONS = [
    ("Brewing temperature", ["Espresso is brewed with water at 92 to 94 degrees Celsius.",
                             "Hotter water extracts bitter compounds from the grounds."]),
    ("Cold brew storage", ["Cold brew concentrate keeps for up to two weeks in the fridge.",
                           "Diluted cold brew should be drunk within three days."]),
    ("Descaling", ["Maria descaled the office machine on 3 March using citric acid."]),
]
HAS_DOCS_EXTRA = all(importlib.util.find_spec(m) for m in ("pypdf", "docx"))
needs_docs_extra = pytest.mark.skipif(not HAS_DOCS_EXTRA, reason="needs the docs extra (pypdf, python-docx)")


def titles_and_texts(docs):
    return [(d.title, d.text) for d in docs]


def expected(name):
    return [(f"{name} § {h}", "\n\n".join(ps)) for h, ps in SECTIONS]


def test_markdown_sections_become_passages_titled_file_and_heading(tmp_path):
    write_markdown(tmp_path / "coffee.md", SECTIONS, title="Coffee handbook")
    docs = load_corpus(tmp_path)
    assert titles_and_texts(docs) == expected("coffee.md")
    assert [d.id for d in docs] == ["coffee#1", "coffee#2", "coffee#3"]
    assert docs[0].metadata["file"] == "coffee.md"


def test_a_single_markdown_file_is_read_as_markdown_not_jsonl(tmp_path):
    path = write_markdown(tmp_path / "beans.md", SECTIONS[:1])
    docs = load_corpus(path)
    assert titles_and_texts(docs) == expected("beans.md")[:1]
    assert docs[0].id == "beans.md"


def test_setext_headings_and_code_fences(tmp_path):
    text = "Intro line.\n\nSetup\n=====\n\nInstall it.\n\n```\n# not a heading\n```\n\nUsage\n-----\nRun it."
    sections = markdown_sections(text)
    assert [(s.heading, s.text) for s in sections] == [
        (None, "Intro line."), ("Setup", "Install it.\n\n```\n# not a heading\n```"), ("Usage", "Run it.")]


def test_html_keeps_the_article_and_drops_the_page_around_it(tmp_path):
    write_html(tmp_path / "coffee.html", SECTIONS, title="Coffee handbook")
    docs = load_corpus(tmp_path)
    assert titles_and_texts(docs) == expected("coffee.html")
    text = " ".join(d.text for d in docs)
    for boilerplate in ("cookies", "Log in", "Copyright", "gadgets", "tracking", "font-family"):
        assert boilerplate not in text


def test_html_without_main_reads_the_body_and_unclosed_paragraphs():
    page = "<html><body><script>x()</script><h3>Tea</h3><p>Green tea<br>steeps briefly.<p>Black tea longer.</body>"
    assert [(s.heading, s.text) for s in html_sections(page)] == [("Tea", "Green tea steeps briefly.\n\nBlack tea longer.")]


@needs_docs_extra
def test_pdf_headings_come_from_font_size(tmp_path):
    write_pdf(tmp_path / "coffee.pdf", [SECTIONS[:2], SECTIONS[2:]])
    docs = load_corpus(tmp_path)
    assert titles_and_texts(docs) == expected("coffee.pdf")


@needs_docs_extra
def test_docx_headings_come_from_styles(tmp_path):
    write_docx(tmp_path / "coffee.docx", SECTIONS, title="Coffee handbook")
    assert titles_and_texts(load_corpus(tmp_path)) == expected("coffee.docx")


@needs_docs_extra
def test_a_damaged_pdf_is_skipped_and_named_a_single_one_is_an_error(tmp_path, caplog):
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf")
    (tmp_path / "ok.md").write_text("Fine.")
    with caplog.at_level(logging.WARNING, logger="selfrag.retrieval.store"):
        assert [d.id for d in load_corpus(tmp_path)] == ["ok"]
    [record] = caplog.records
    assert "1 unreadable file (broken.pdf: not a readable PDF" in record.getMessage()
    with pytest.raises(DataError, match=r"broken.pdf: cannot be read: not a readable PDF"):
        load_corpus(tmp_path / "broken.pdf")


def test_every_skipped_file_is_named_in_one_line_with_the_reason_and_the_extra(tmp_path, caplog, monkeypatch):
    # As if selfrag[docs] were not installed.
    monkeypatch.setattr(formats_module.Format, "available", lambda self: self.extra is None)
    (tmp_path / "paper.pdf").write_bytes(b"%PDF-1.4\n")
    (tmp_path / "report.docx").write_bytes(b"PK")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG")
    (tmp_path / "empty.md").write_text("  \n")
    (tmp_path / "note.txt").write_text("A note.")
    with caplog.at_level(logging.WARNING, logger="selfrag.retrieval.store"):
        assert [d.id for d in load_corpus(tmp_path)] == ["note"]
    [record] = caplog.records
    message = record.getMessage()
    assert "\n" not in message
    assert "2 files (paper.pdf, report.docx) that need pip install 'selfrag[docs]'" in message
    assert "1 file with no text (empty.md)" in message
    assert "1 file in a format selfrag does not read (photo.png)" in message


def test_a_folder_holding_only_a_pdf_says_why_it_is_empty(tmp_path, monkeypatch):
    monkeypatch.setattr(formats_module.Format, "available", lambda self: self.extra is None)
    (tmp_path / "paper.pdf").write_bytes(b"%PDF-1.4\n")
    with pytest.raises(DataError, match=r"no documents in .*paper.pdf.*selfrag\[docs\]"):
        load_corpus(tmp_path)
    with pytest.raises(DataError, match=r"paper.pdf: reading PDF files needs pip install 'selfrag\[docs\]'"):
        load_corpus(tmp_path / "paper.pdf")


def test_jsonl_in_a_folder_is_read_and_a_non_documents_jsonl_is_skipped(tmp_path, caplog):
    (tmp_path / "corpus.jsonl").write_text('{"id": "x", "title": "T", "text": "from jsonl"}\n')
    (tmp_path / "predictions.jsonl").write_text('{"prediction": "no text field"}\n')
    with caplog.at_level(logging.WARNING, logger="selfrag.retrieval.store"):
        docs = load_corpus(tmp_path)
    assert [(d.id, d.title, d.text) for d in docs] == [("corpus:x", "T", "from jsonl")]
    assert "predictions.jsonl: not a documents file" in caplog.records[0].getMessage()


def test_a_long_file_is_cut_into_overlapping_passages_within_the_size(tmp_path):
    sentences = [f"Sentence number {i} talks about grinder setting {i} for the espresso machine." for i in range(80)]
    (tmp_path / "long.md").write_text("# Grinding\n\n" + " ".join(sentences))
    settings = ChunkSettings(size=60, overlap=15)
    docs = load_corpus(tmp_path, chunks=settings)
    assert len(docs) > 10
    assert all(count_tokens(d.text) <= 60 for d in docs)
    assert all(d.title == "long.md § Grinding" for d in docs)
    assert [d.id for d in docs[:2]] == ["long#1", "long#2"]
    # Each passage after the first starts with the last sentence of the one before.
    for before, after in zip(docs, docs[1:], strict=False):
        last = before.text.rsplit(". ", 1)[-1]
        assert after.text.startswith(last)
    joined = " ".join(d.text for d in docs)
    assert all(s in joined for s in sentences)  # nothing lost


def test_a_sentence_longer_than_a_passage_is_cut_at_words():
    text = " ".join(f"word{i}" for i in range(100))
    chunks = chunk_section(text, ChunkSettings(size=30, overlap=5))
    assert all(count_tokens(c) <= 30 for c in chunks)
    assert chunks[0].split()[0] == "word0" and chunks[-1].split()[-1] == "word99"


@pytest.mark.parametrize("size, overlap", [(8, 0), (100, 50), (100, -1)])
def test_bad_chunk_settings_are_one_line(size, overlap):
    with pytest.raises(ConfigError, match="chunk"):
        ChunkSettings(size, overlap)


def test_collect_reuses_unchanged_files_and_parses_changed_ones(tmp_path, monkeypatch):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\nText of {name}.")
    first = collect(tmp_path)
    assert first.parsed == 3
    parsed = []
    original = collect_module.read_file
    monkeypatch.setattr(collect_module, "read_file", lambda path, *a, **k: parsed.append(path.name) or original(path, *a, **k))
    (tmp_path / "b.md").write_text("# b\n\nNew text of b.")
    again = collect(tmp_path, previous={f.rel: f for f in first.files})
    assert again.parsed == 1 and parsed == ["b.md"]
    assert [f.reused for f in again.files] == [True, False, True]
    assert [d.text for d in again.documents] == ["Text of a.", "New text of b.", "Text of c."]


def test_data_chunk_settings_reach_a_corpus_folder(tmp_path):
    from selfrag.config import DataSection
    from selfrag.eval.datasets import load_dataset

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "long.txt").write_text(" ".join(f"Fact {i} is here." for i in range(60)))
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "q", "answers": ["a"]}\n')
    small = load_dataset(DataSection(dataset="jsonl", path=str(questions), corpus=str(tmp_path / "docs"),
                                     chunk_size=40, chunk_overlap=0))
    default = load_dataset(DataSection(dataset="jsonl", path=str(questions), corpus=str(tmp_path / "docs")))
    assert len(small.corpus) > len(default.corpus) >= 1


def test_ask_takes_the_chunk_size(tmp_path, capsys):
    import json as jsonlib

    from selfrag.cli.main import main

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "long.md").write_text("# Tea\n\n" + " ".join(f"Tea fact {i} is here." for i in range(60)))
    script = tmp_path / "s.json"
    script.write_text(jsonlib.dumps({"Tea": "green"}))
    argv = ["ask", "Which tea?", "--docs", str(tmp_path / "docs"), "--method", "vanilla_rag", "--top-k", "50",
            "--llm", f"scripted:{script}", "--json"]
    assert main([*argv, "--chunk-size", "40"]) == 0
    small = jsonlib.loads(capsys.readouterr().out)["sources"]
    assert main(argv) == 0
    default = jsonlib.loads(capsys.readouterr().out)["sources"]
    assert len(small) > len(default) >= 1 and all(s["title"] == "long.md § Tea" for s in small)
