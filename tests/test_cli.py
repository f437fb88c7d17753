"""The selfrag command: ask, demo, methods, and one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.data import demo_questions


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "paris.txt").write_text("Paris is the capital of France.")
    (d / "berlin.txt").write_text("Berlin is the capital of Germany.")
    return d


def script(tmp_path: Path, responses) -> str:
    p = tmp_path / "script.json"
    p.write_text(json.dumps(responses))
    return f"scripted:{p}"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ask_json_vanilla_reports_one_call_and_one_retrieval(tmp_path, docs_dir, capsys):
    code, out, err = run_cli(
        capsys, "ask", "What is the capital of France?", "--docs", str(docs_dir),
        "--method", "vanilla_rag", "--llm", script(tmp_path, ["Paris"]), "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["answer"] == "Paris"
    assert data["num_llm_calls"] == 1 and data["num_retrieval_calls"] == 1
    assert data["method"] == "vanilla_rag" and data["retrieval_needed"] is True
    assert set(data) >= {
        "answer", "method", "retrieval_needed", "num_llm_calls", "num_retrieval_calls",
        "total_tokens", "total_cost_usd", "latency_ms", "sources", "candidates", "reasoning_chain",
    }
    assert data["sources"][0] == {"id": "paris", "title": "paris.txt"}
    assert [s["action"] for s in data["reasoning_chain"]] == ["retrieve", "generate"]


def test_ask_text_output_with_trace(tmp_path, docs_dir, capsys):
    code, out, _ = run_cli(
        capsys, "ask", "capital of France?", "--docs", str(docs_dir), "--top-k", "1", "--method", "vanilla_rag",
        "--llm", script(tmp_path, ["Paris"]), "--trace",
    )
    assert code == 0
    # Issue 17: the answer carries a marker per cited passage, listed under "Cited:".
    assert out.startswith("Paris [1]\n")
    assert "Cited:\n  [1] paris.txt (paris): Paris is" in out and "Trace:" in out and "[2] generate" in out
    assert "berlin" not in out.split("Trace:")[0]  # --top-k 1 kept only one source


def test_ask_with_set_override_and_cache(tmp_path, docs_dir, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["ask", "capital?", "--docs", str(docs_dir), "--method", "vanilla_rag", "--llm", script(tmp_path, ["Paris"]),
            "--set", "vanilla.top_k=1", "--cache", str(tmp_path / "c.db"), "--json"]
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and len(json.loads(out)["sources"]) == 1
    # The script has one response; the repeat is answered from the cache.
    code, out, _ = run_cli(capsys, *args)
    data = json.loads(out)
    assert code == 0 and data["reasoning_chain"][1]["cached"] is True and data["total_cost_usd"] == 0


def test_methods_lists_registered_methods(capsys):
    code, out, _ = run_cli(capsys, "methods")
    assert code == 0
    names = [line.split()[0] for line in out.split("\n\n")[0].splitlines()]
    assert "vanilla_rag" in names and "no_retrieval" in names
    code, out, _ = run_cli(capsys, "methods", "--json")
    rows = json.loads(out)
    assert {r["name"] for r in rows} >= {"vanilla_rag", "no_retrieval"}
    by_name = {r["name"]: r for r in rows}
    # Defaults are JSON values, nested sections as objects (not Python reprs).
    assert by_name["self_rag"]["config"]["num_candidates"] == 3
    assert by_name["self_rag"]["config"]["critic"] == "auto"
    assert by_name["self_rag"]["config"]["abstain"] == []
    assert by_name["self_rag_critic"]["config"]["adaptive"]["threshold"] == 0.2


def test_demo_with_scripted_backend(tmp_path, capsys):
    answers = {q.text: q.answers[0] for q in demo_questions()[:2]}
    code, out, err = run_cli(capsys, "demo", "--limit", "2", "--method", "vanilla_rag",
                             "--llm", script(tmp_path, answers), "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2 and all(r["match"] == 1.0 for r in rows)


@pytest.mark.model
def test_demo_runs_on_the_embedded_model(capsys):
    code, out, err = run_cli(capsys, "demo", "--limit", "1", "--set", "llm.max_tokens=32")
    assert code == 0, err
    assert "SmolLM2-135M-Instruct" in out and "Q: " in out and "A: " in out


@pytest.mark.model
def test_ask_json_on_the_embedded_model(docs_dir, capsys):
    code, out, err = run_cli(capsys, "ask", "What is the capital of France?", "--docs", str(docs_dir), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["answer"] and data["num_llm_calls"] >= 1 and data["total_cost_usd"] == 0
    assert data["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ask", "q", "--docs", "/nonexistent/docs"], "documents not found: /nonexistent/docs"),
        (["ask", "q", "--docs", "{empty}"], "no documents in"),
        (["ask", "q", "--docs", "{docs}", "--method", "magic"], "unknown method 'magic'"),
        (["ask", "q", "--docs", "{docs}", "--llm", "gemini:pro"], "unknown LLM backend 'gemini:pro'"),
        (["ask", "q", "--docs", "{docs}", "--llm", "openai:gpt-4o-mini"], "OPENAI_API_KEY is not set"),
        (["ask", "q", "--docs", "{bad_jsonl}"], "bad.jsonl:2: not valid JSON"),
        (["ask", "q", "--docs", "{docs}", "--set", "vanilla.topk=2"], "unknown config key 'vanilla.topk'"),
        (["ask", "q", "--method", "vanilla_rag"], "give --docs PATH or --index DIR"),
        (["ask", "q", "--docs", "{docs}", "--llm", "scripted:{tmp}/none.json"], "scripted LLM file not found"),
    ],
)
def test_errors_are_one_line_and_non_zero(tmp_path, docs_dir, capsys, monkeypatch, argv, message):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": broken}\n')
    argv = [a.format(docs=docs_dir, empty=empty, bad_jsonl=bad, tmp=tmp_path) for a in argv]
    code, out, err = run_cli(capsys, *argv)
    assert code != 0
    assert message in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("selfrag: error: "), err
    assert "Traceback" not in err


def test_console_script_prints_no_traceback(tmp_path):
    exe = shutil.which("selfrag", path=str(Path(sys.executable).parent))
    assert exe, "the selfrag console script is not installed"
    proc = subprocess.run([exe, "ask", "q", "--docs", str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("selfrag: error: documents not found")
    assert "Traceback" not in proc.stderr


def test_python_dash_m_selfrag_runs_the_same_cli():
    proc = subprocess.run([sys.executable, "-m", "selfrag", "methods"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "self_rag" in proc.stdout and "vanilla_rag" in proc.stdout
