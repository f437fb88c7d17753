"""Flags that take paths or specs are strings, and a bad --cache is one line: through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "paris.txt").write_text("Paris is the capital of France.")
    return d


def write_script(path: Path, responses) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(responses))
    return f"scripted:{path}"


def ask(capsys, *argv: str) -> tuple[int, str, str]:
    # vanilla_rag: one call per question, so a one-reply script answers it.
    code = main(["ask", "--method", "vanilla_rag", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cache_path_that_looks_like_a_number_is_a_path(tmp_path, docs, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = ask(capsys, "q", "--docs", str(docs), "--llm", write_script(tmp_path / "s.json", ["Paris"]),
                         "--cache", "2024")
    assert code == 0, err
    assert (tmp_path / "2024").is_file()


def test_hash_in_a_path_is_kept(tmp_path, docs, capsys):
    folder = tmp_path / "run #2"
    code, out, err = ask(capsys, "q", "--docs", str(docs), "--llm", write_script(folder / "s #1.json", ["Paris"]),
                         "--cache", str(folder / "c #3.db"))
    assert code == 0, err
    assert out.startswith("Paris") and (folder / "c #3.db").is_file()


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--llm", "scripted:", "scripted backend needs a file: scripted:PATH.json"),
        ("--llm", "null", "unknown LLM backend 'null'"),
        ("--method", "2024", "unknown method '2024'"),
        ("--retriever", "yes", "unknown retriever 'yes'"),
    ],
)
def test_spec_and_name_flags_reach_their_own_checks_as_strings(docs, capsys, flag, value, message):
    code, out, err = ask(capsys, "q", "--docs", str(docs), flag, value)
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_set_values_stay_yaml_typed(docs, capsys, tmp_path):
    # --set parses its value as YAML (numbers, booleans, null): a string that looks like one must be quoted.
    code, _, err = ask(capsys, "q", "--docs", str(docs), "--set", "cache.path=2024")
    assert code == 2 and "config key 'cache.path' (in --set)" in err
    code, _, err = ask(capsys, "q", "--docs", str(docs), "--llm", write_script(tmp_path / "s.json", ["Paris"]),
                       "--set", f"cache.path='{tmp_path / '2024'}'", "--cache")
    assert code == 0, err
    assert (tmp_path / "2024").is_file()


@pytest.mark.parametrize(
    "target, message",
    [
        ("folder", "is a folder"),
        ("file.json/c.db", "is a file"),
        ("corrupt.db", "is not an SQLite database"),
    ],
)
def test_a_bad_cache_path_is_one_line_and_exit_2(tmp_path, docs, capsys, target, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.json").write_text("[]")
    (tmp_path / "corrupt.db").write_bytes(b"not a database " * 300)
    code, out, err = ask(capsys, "q", "--docs", str(docs), "--llm", write_script(tmp_path / "s.json", ["Paris"]),
                         "--cache", str(tmp_path / target))
    assert code == 2 and message in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("selfrag: error: ") and "Traceback" not in err


def test_cached_answers_follow_the_script_content(tmp_path, docs, capsys):
    cache = str(tmp_path / "c.db")
    first = write_script(tmp_path / "a" / "replies.json", ["from a"])
    second = write_script(tmp_path / "b" / "replies.json", ["from b"])
    assert ask(capsys, "q", "--docs", str(docs), "--llm", first, "--cache", cache)[1].startswith("from a")
    assert ask(capsys, "q", "--docs", str(docs), "--llm", second, "--cache", cache)[1].startswith("from b")
    write_script(tmp_path / "a" / "replies.json", ["edited a"])
    assert ask(capsys, "q", "--docs", str(docs), "--llm", first, "--cache", cache)[1].startswith("edited a")


def test_run_flags_are_strings_too(tmp_path, capsys):
    # `selfrag run --llm` takes the spec as given, like `ask`: no YAML reading of "scripted:".
    repo = Path(__file__).resolve().parents[1]
    # The shipped demo questions, so the check does not depend on ../shared/data being present.
    code = main(["run", str(repo / "configs" / "vanilla_rag.yaml"), "--llm", "scripted:",
                 "--limit", "1", "--set", f"experiment.output_dir={tmp_path}",
                 "--set", "data.dataset=demo", "--set", "data.path=null"])
    err = capsys.readouterr().err
    assert code == 2 and "scripted backend needs a file: scripted:PATH.json" in err, err
