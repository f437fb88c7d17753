"""One default method everywhere (selfrag.defaults.METHOD), and a demo that shows what it did."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
import yaml

from selfrag import defaults
from selfrag.cli.main import build_parser, main
from selfrag.cli.options import config_from_args
from selfrag.config import ExperimentConfig, load_config
from selfrag.data import demo_questions
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method, get_method_class
from selfrag.retrieval.registry import create_retriever
from selfrag.types import Document

REPO = Path(__file__).resolve().parents[1]


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_the_default_is_self_rag_and_is_written_once():
    assert defaults.METHOD == "self_rag"
    assert ExperimentConfig().architecture.name == defaults.METHOD
    assert yaml.safe_load((REPO / "configs" / "base.yaml").read_text())["architecture"]["name"] == defaults.METHOD
    # No command keeps a default of its own.
    for path in (REPO / "src" / "selfrag" / "cli" / "commands").glob("*.py"):
        text = path.read_text()
        assert "DEFAULT_METHOD" not in text and not re.search(r"method\s*=\s*\"(vanilla_rag|self_rag)\"", text), path


@pytest.mark.parametrize("argv", [("ask", "q", "--docs", "d"), ("demo",), ("serve", "--docs", "d")])
def test_ask_demo_and_serve_resolve_the_one_default(argv):
    cfg = config_from_args(parsed(*argv), cache_default=False)
    assert cfg.architecture.name == defaults.METHOD
    # vanilla_rag is one flag away, and a config's own method wins over the default.
    assert config_from_args(parsed(*argv, "--method", "vanilla_rag"), cache_default=False).architecture.name \
        == "vanilla_rag"
    assert config_from_args(parsed(*argv, "--config", str(REPO / "configs" / "vanilla_rag.yaml")),
                            cache_default=False).architecture.name == "vanilla_rag"


def test_run_and_the_serve_answerer_use_it_too(tmp_path):
    assert load_config(REPO / "configs" / "base.yaml").architecture.name == defaults.METHOD
    from selfrag.serve.answering import Answerer

    answerer = Answerer(load_config(None), ScriptedBackend(["x"]), None, timeout_s=5)
    assert answerer.default_method == defaults.METHOD and answerer.resolve(None) == defaults.METHOD


def test_the_python_api_defaults_to_it():
    llm = ScriptedBackend(["x"])
    retriever = create_retriever("bm25", [Document("a", "Paris is in France.", "A")])
    method = create_method(llm=llm, retriever=retriever)
    assert isinstance(method, get_method_class(defaults.METHOD)) and method.name == "self_rag"
    assert create_method("vanilla_rag", llm, retriever).name == "vanilla_rag"  # positional use is unchanged
    with pytest.raises(TypeError, match="needs an llm"):
        create_method()


def demo_script(tmp_path: Path) -> str:
    """Each demo question's gold answer for any call about it; "yes" (and a score) for anything else."""
    script = {q.text: {"text": q.answers[0], "forced_logprobs": [-0.1]} for q in demo_questions()[:3]}
    script[" "] = {"text": "yes", "forced_logprobs": [-0.5]}
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(script))
    return f"scripted:{path}"


def test_the_demo_runs_self_rag_and_says_what_it_did(tmp_path, capsys):
    code = main(["demo", "--limit", "2", "--llm", demo_script(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("selfrag demo · method self_rag · model scripted")
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith("self_rag: ")]
    assert len(lines) == 2  # one line per question
    for line in lines:
        assert "decided to retrieve" in line and "retrieved 5 passages" in line
        assert "ranked the passages by lexical evidence" in line and "chose the joint answer" in line
        assert "1 candidate (the joint answer over the best passages)" in line
        assert re.search(r"confidence 0\.\d\d", line)
    assert "2/2 answers contain a gold answer" in out and "compare on" not in out


def test_demo_compare_ends_with_a_line_against_vanilla_rag(tmp_path, capsys):
    code = main(["demo", "--limit", "3", "--llm", demo_script(tmp_path), "--compare"])
    out, err = capsys.readouterr()
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    # the joint's answer and the two short calls the packaged heads read (P(True), the likelihood alone); the
    # decision reads the retrieved passages (look_first), which cover these questions: no call
    assert last.startswith("compare on the same 3 questions: self_rag 3/3 match, 3 LLM calls per question")
    assert "vanilla_rag 3/3 match, 1 LLM call per question" in last and "the same answer on 3 of 3" in last
    code = main(["demo", "--limit", "1", "--llm", demo_script(tmp_path), "--compare", "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["method"] == "self_rag" and rows[0]["what_it_did"].startswith("decided to retrieve")
    assert [c["method"] for c in rows[-1]["compare"]] == ["self_rag", "vanilla_rag"]
    assert main(["demo", "--method", "vanilla_rag", "--compare", "--llm", demo_script(tmp_path)]) == 2
    assert "choose another --method" in capsys.readouterr().err


def test_demo_trace_shows_every_step(tmp_path, capsys):
    code = main(["demo", "--limit", "1", "--llm", demo_script(tmp_path), "--trace"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "every step:" in out and "[1] retrieve" in out and "[2] retrieval_decision" in out
    assert "select_best" in out


@pytest.mark.model
def test_the_demo_shows_the_machinery_on_the_embedded_model(capsys):
    code = main(["demo", "--limit", "1", "--set", "llm.max_tokens=32"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "method self_rag · model SmolLM2-135M-Instruct" in out
    line = next(line for line in out.splitlines() if line.strip().startswith("self_rag: "))
    # Whatever the 135M model answers, the line says what Self-RAG did.
    assert "retrieve" in line and ("chose" in line or "abstained" in line)
