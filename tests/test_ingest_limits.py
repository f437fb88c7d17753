"""The size caps of document files as settings, what each skip says, and the command a stale index's
error gives to rebuild it (the real folder, not a placeholder)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from selfrag.cli.main import main
from selfrag.config import DataSection, validate
from selfrag.errors import ConfigError, DataError
from selfrag.ingest import (
    DEFAULT_MAX_FILE_MB,
    DEFAULT_MAX_PASSAGES,
    DEFAULT_MAX_TEXT_MB,
    DEFAULT_MAX_UNPACKED_MB,
    IngestLimits,
    collect,
)
from selfrag.ingest.loading import _TakenIds
from selfrag.retrieval import load_corpus
from tests.helpers.documents import write_pdf

HAS_PYPDF = importlib.util.find_spec("pypdf") is not None


def test_the_caps_are_config_settings_with_the_documented_defaults():
    data = DataSection()
    assert (data.max_text_mb, data.max_file_mb, data.max_unpacked_mb, data.max_passages) == (
        DEFAULT_MAX_TEXT_MB, DEFAULT_MAX_FILE_MB, DEFAULT_MAX_UNPACKED_MB, DEFAULT_MAX_PASSAGES) == (
        10, 100, 16, 50_000)
    assert IngestLimits.of(data) == IngestLimits() == IngestLimits.of(None)
    cfg = validate({"data": {"max_text_mb": 0.5, "max_file_mb": 3, "max_unpacked_mb": 4, "max_passages": 7}})
    assert IngestLimits.of(cfg.data) == IngestLimits(0.5, 3, 4, 7)


@pytest.mark.parametrize("value", [0, -1, "ten"])
def test_a_bad_cap_is_one_line(value):
    with pytest.raises(ConfigError, match=r"data\.max_text_mb"):
        validate({"data": {"max_text_mb": value}})
    with pytest.raises(ConfigError, match=r"data\.max_text_mb must be a number of megabytes above 0"):
        IngestLimits(max_text_mb=value)


def test_a_text_file_over_the_cap_is_skipped_in_a_folder_and_an_error_alone(tmp_path):
    (tmp_path / "big.md").write_text("# Big\n" + "All work and no play. " * 10_000)
    (tmp_path / "small.md").write_text("Small.")
    limits = IngestLimits(max_text_mb=0.1)
    found = collect(tmp_path, limits=limits)
    assert [f.rel for f in found.files] == ["small.md"]
    assert found.skipped.too_large == [("big.md", "215 KB of text, over the 102 KB limit (data.max_text_mb)")]
    with pytest.raises(DataError, match=r"big\.md: 215 KB of text, over the 102 KB limit \(data\.max_text_mb\); "
                                        r"raise the limit or split the file"):
        load_corpus(tmp_path / "big.md", limits=limits)


@pytest.mark.parametrize("value", [0, 1.5, True])
def test_a_bad_passage_cap_is_one_line(value):
    with pytest.raises(ConfigError, match=r"data\.max_passages must be a whole number above 0"):
        IngestLimits(max_passages=value)


def test_a_file_cut_into_more_passages_than_the_cap_is_skipped(tmp_path):
    (tmp_path / "sections.md").write_text("".join(f"# Part {i}\nText {i}.\n" for i in range(30)))
    (tmp_path / "small.md").write_text("Small.")
    found = collect(tmp_path, limits=IngestLimits(max_passages=29))
    assert found.skipped.too_large == [("sections.md", "cut into more than 29 passages (data.max_passages)")]
    assert len(collect(tmp_path, limits=IngestLimits(max_passages=30)).documents) == 31


def test_jsonl_is_passages_already_and_is_not_capped(tmp_path):
    rows = [{"id": str(i), "text": "A passage of a large corpus. " * 20} for i in range(500)]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(load_corpus(tmp_path, limits=IngestLimits(max_text_mb=0.01, max_file_mb=0.01))) == 500


@pytest.mark.skipif(not HAS_PYPDF, reason="needs the docs extra (pypdf)")
def test_a_pdf_over_the_file_cap_is_skipped_and_one_under_it_read(tmp_path):
    write_pdf(tmp_path / "paper.pdf", [[("Method", ["We measured it twice."])]])
    assert collect(tmp_path, limits=IngestLimits(max_text_mb=0.001)).skipped.too_large == []  # 20 bytes of text
    found = collect(tmp_path, limits=IngestLimits(max_file_mb=0.0005))
    assert found.skipped.too_large == [("paper.pdf", f"{found.skipped.too_large[0][1].split(',')[0]}, "
                                        "over the 1 KB limit (data.max_file_mb)")]


def test_file_ids_are_taken_as_before():
    """The constant-time check gives the ids the scan over every taken id gave."""
    taken = _TakenIds()
    for doc_id in ("a", "b#1", "b#2", "c#d#1", "e.md"):
        taken.add(doc_id)
    assert [taken.base_taken(b) for b in ("a", "b", "c", "c#d", "e", "e.md", "b#1", "d")] == [
        True, True, True, True, False, True, True, False]


def test_clashing_ids_in_a_folder(tmp_path):
    (tmp_path / "a.md").write_text("# One\nFirst.\n# Two\nSecond.")
    (tmp_path / "a.txt").write_text("Plain.")
    (tmp_path / "a#1.md").write_text("Hash in the name.")
    ids = [d.id for d in load_corpus(tmp_path)]
    assert ids == ["a#1", "a.md#1", "a.md#2", "a.txt"]  # as the scan over every taken id gave them


# -- the stale index's rebuild command ------------------------------------------------------


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("given", ["folder", "file"])
def test_a_stale_index_names_the_documents_to_rebuild_from(tmp_path, capsys, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    notes = tmp_path / "my notes"
    notes.mkdir()
    (notes / "tea.md").write_text("Green tea steeps two minutes.")
    docs = "my notes" if given == "folder" else "my notes/tea.md"
    script = tmp_path / "s.json"
    script.write_text('["x"]')
    assert cli(capsys, "index", "build", "--docs", docs, "--out", "idx")[0] == 0
    (notes / "tea.md").write_text("Green tea steeps three minutes.")
    code, _, err = cli(capsys, "ask", "q", "--docs", docs, "--index", "idx", "--llm", f"scripted:{script}")
    assert code == 2
    assert f"index idx is stale: the documents changed since it was built; rebuild it: " \
           f"selfrag index build --docs '{docs}' --retriever bm25 --out idx" in err
