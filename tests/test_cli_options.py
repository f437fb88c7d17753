"""The commands that answer questions take the same options, from one definition, and report their own usage."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import pytest

from selfrag.cli.main import build_parser, main
from selfrag.cli.options import COMMAND_OPTIONS, COMMON, OPTIONS

REPO = Path(__file__).resolve().parents[1]
ANSWER_ALL = {" ": {"text": "yes", "forced_logprobs": [-0.5]}}
FLAGS = {"method": ["--method"], "llm": ["--llm"], "set": ["--set"], "cache": ["--cache", "--no-cache"],
         "trace": ["--trace"], "json": ["--json"], "config": ["--config"], "top_k": ["--top-k"],
         "retriever": ["--retriever"], "index": ["--index"]}


def subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def options_of(name: str) -> dict[str, str]:
    return {s: a.help for a in subparser(name)._actions for s in a.option_strings}


def test_every_answering_command_takes_the_common_options():
    assert set(COMMAND_OPTIONS) == {"ask", "chat", "demo", "run", "serve"}
    for command, names in COMMAND_OPTIONS.items():
        assert set(COMMON) <= set(names)
        flags = options_of(command)
        for name in OPTIONS:
            for flag in FLAGS[name]:
                assert (flag in flags) == (name in names), (command, flag)


def test_a_shared_option_means_the_same_everywhere():
    helps: dict[str, set[str]] = {}
    for command in COMMAND_OPTIONS:
        for flag, text in options_of(command).items():
            helps.setdefault(flag, set()).add(text)
    for flag in ("--method", "--llm", "--set", "--no-cache", "--top-k", "--retriever", "--index", "--config"):
        assert len(helps[flag]) == 1, (flag, helps[flag])
    # --trace and --json say what they print for each command; --cache names each command's default.
    assert len(helps["--trace"]) == 5


@pytest.mark.parametrize(("argv", "usage"), [
    (["demo", "--bogus"], "usage: selfrag demo "),
    (["run", "c.yaml", "--bogus"], "usage: selfrag run "),
    (["serve", "--docs", "d", "--json"], "usage: selfrag serve "),
    (["ask", "q", "--bogus"], "usage: selfrag ask "),
    (["data", "download", "hotpotqa", "--bogus"], "usage: selfrag data download "),
    (["index", "build", "--docs", "d", "--out", "o", "--bogus"], "usage: selfrag index build "),
])
def test_an_unknown_option_shows_the_commands_own_usage(argv, usage, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith(usage) and "unrecognized arguments: " in err and "COMMAND ..." not in err


def test_demo_trace_and_serve_trace_are_accepted():
    assert build_parser().parse_args(["demo", "--trace"]).trace is True
    assert build_parser().parse_args(["serve", "--docs", "d", "--trace"]).trace is True


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(ANSWER_ALL))
    return f"scripted:{path}"


def run(capsys, tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["run", str(REPO / "configs" / "vanilla_rag.yaml"), "--limit", "2", "--no-progress",
                 "--output", str(tmp_path / "out"), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_cache_takes_a_path(tmp_path, capsys, script):
    db = tmp_path / "calls.db"
    code, out, err = run(capsys, tmp_path, "--llm", script, "--cache", str(db), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["cache"]["enabled"] and summary["cache"]["misses"] == 2
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from sqlite_master").fetchone()[0] > 0
    code, out, err = run(capsys, tmp_path, "--llm", script, "--cache", str(db), "--json")
    assert code == 0 and json.loads(out)["cache"]["hits"] == 2  # the second run is answered from it
    code, out, err = run(capsys, tmp_path, "--llm", script, "--no-cache", "--json")
    assert code == 0 and json.loads(out)["cache"]["enabled"] is False


def test_run_method_and_trace(tmp_path, capsys, script):
    code, out, err = run(capsys, tmp_path, "--llm", script, "--no-cache", "--method", "self_rag", "--trace")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("5a8c7595554299585d9e36b6: ")]
    assert len(lines) == 1, out  # one line per question, as it is answered
    assert "'yes'" in lines[0] and "retrieved" in lines[0] and "chose" in lines[0]
    assert "self_rag (bm25" in out  # --method replaced the config's vanilla_rag


def test_serve_trace_logs_what_the_method_did(tmp_path, capsys, script):
    import asyncio

    from selfrag.cli.commands import serve

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "paris.txt").write_text("Paris is the capital of France.")
    args = build_parser().parse_args(["serve", "--docs", str(docs), "--llm", script, "--trace"])
    answerer = serve._build_answerer(args, 10.0)
    response = asyncio.run(answerer.answer("What is the capital of France?", "vanilla_rag"))
    asyncio.run(answerer.aclose())
    err = capsys.readouterr().err
    assert response.answer == "yes"
    assert "selfrag: vanilla_rag: retrieved 1 passage · then: generate" in err


@pytest.mark.parametrize("argv", [["ask"], ["chat"], ["serve"], ["index", "build"]])
def test_docs_help_lists_every_format_selfrag_reads(argv, capsys):
    """--docs's help names every suffix of the ingest formats table (and JSONL), and the extra each needs."""
    from selfrag.ingest.formats import FORMATS, JSONL_SUFFIXES

    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--docs PATH a folder")
    docs = text[start:text.index("--chunk-size N", start)]
    for suffix in (*[s for f in FORMATS for s in f.suffixes], *JSONL_SUFFIXES):
        assert suffix in docs, (suffix, docs)
    for extra in {f.extra for f in FORMATS if f.extra}:
        assert f"selfrag[{extra}]" in docs, docs
