"""`selfrag ask --method self_rag` end to end through the CLI, with keyed scripted replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main

QUESTION = "What is the capital of France?"
PARIS, BERLIN = "Paris is the capital of France.", "Berlin is the capital of Germany."


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "paris.txt").write_text(PARIS)
    (d / "berlin.txt").write_text(BERLIN)
    (d / "bananas.txt").write_text("Bananas are a yellow fruit.")
    return d


def script(tmp_path: Path, replies: dict) -> str:
    p = tmp_path / "replies.json"
    p.write_text(json.dumps(replies))
    return f"scripted:{p}"


CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def ask(capsys, docs_dir, llm, *extra) -> tuple[int, str, str]:
    code = main(
        ["ask", QUESTION, "--docs", str(docs_dir), "--method", "self_rag", "--llm", llm, *extra]
    )
    out, err = capsys.readouterr()
    return code, out, err


# Seed 000's score picks Paris (3 + 2×1 + 0.5 = 5.5) over Berlin (4 + 0 + 0.5 = 4.5),
# though Berlin's utility alone is higher.
COMBINED = {
    "checked in reference documents": "yes",
    PARIS: "Paris\n[IsRel] relevant\n[IsSup] fully supported",
    BERLIN: "Berlin\n[IsRel] relevant\n[IsSup] no support",
    "Answer: Paris": "3",
    "Answer: Berlin": "4",
}


def test_combined_json_reports_one_plus_two_n_calls(tmp_path, docs_dir, capsys):
    code, out, err = ask(
        capsys,
        docs_dir,
        script(tmp_path, COMBINED),
        "--top-k",
        "2",
        "--config",
        str(CONFIGS / "self_rag_seed000.yaml"),  # seed 000's pipeline, as it ships
        "--set",
        "self_rag.num_candidates=2",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["method"] == "self_rag" and data["retrieval_needed"] is True
    assert data["num_llm_calls"] == 1 + 2 * 2 and data["num_retrieval_calls"] == 1
    assert data["answer"] == "Paris"
    scores = {c["passage"]["id"]: c["score"] for c in data["candidates"]}
    assert scores == {"paris": 5.5, "berlin": 4.5}
    assert data["details"]["relevant_docs_count"] == 2 and data["details"]["critic"] == "prompted"


def test_combined_trace_shows_each_candidates_critique(tmp_path, docs_dir, capsys):
    code, out, err = ask(
        capsys,
        docs_dir,
        script(tmp_path, COMBINED),
        "--top-k",
        "2",
        "--set",
        "self_rag.num_candidates=2",
        "--set",
        "self_rag.critic=prompted",
        "--trace",
    )
    assert code == 0, err
    assert out.startswith("Paris [1]\n")
    assert "retrieval_decision" in out and "generate_and_critique" in out and "select_best" in out
    candidates = out.split("Candidates:")[1]
    assert ("relevance=relevant (prompted), support=fully supported (prompted), utility=3 (prompted), "
            "score=5.500") in candidates
    assert "relevance=relevant (prompted), support=no support (prompted), utility=4 (prompted), score=4.500" \
        in candidates


def test_no_retrieval_path_is_two_calls(tmp_path, docs_dir, capsys):
    llm = script(tmp_path, {"checked in reference documents": "No.", QUESTION: "Paris"})
    code, out, err = ask(capsys, docs_dir, llm, "--set", "self_rag.retrieval_mode=adaptive", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["num_llm_calls"], data["num_retrieval_calls"]) == (2, 0)
    assert data["answer"] == "Paris" and data["retrieval_needed"] is False
    assert [s["action"] for s in data["reasoning_chain"]] == ["retrieval_decision", "direct_answer"]


# Support first: Paris (fully supported, utility 2) beats Berlin (partially, utility 5).
SEPARATE = {
    "needs_retrieval": '{"needs_retrieval": true}',
    PARIS: ['{"relevance": "relevant"}', "Paris", '{"support": "fully_supported"}'],
    BERLIN: ['{"relevance": "relevant"}', "Berlin", '{"support": "partially_supported"}'],
    "Response: Paris": '{"utility": 2}',
    "Response: Berlin": '{"utility": 5}',
}


def test_separate_json_reports_one_plus_four_k_calls(tmp_path, docs_dir, capsys):
    code, out, err = ask(
        capsys,
        docs_dir,
        script(tmp_path, SEPARATE),
        "--top-k",
        "2",
        "--config",
        str(CONFIGS / "self_rag_seed003.yaml"),  # seed 003's pipeline, as it ships
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["num_llm_calls"] == 1 + 4 * 2
    assert data["answer"] == "Paris"
    d = data["details"]
    assert d["critic"] == "json" and d["support"] == "fully_supported" and d["utility"] == 2
    assert d["total_docs_retrieved"] == 2 and d["relevant_docs_count"] == 2
    assert d["context_used"] == [PARIS]
    assert {c["passage_id"]: c["score"] for c in d["all_candidates"]} == {
        "paris": 32.0,
        "berlin": 25.0,
    }


def test_separate_no_retrieval_path_is_two_calls(tmp_path, docs_dir, capsys):
    llm = script(tmp_path, {"needs_retrieval": '{"needs_retrieval": false}', QUESTION: "Paris"})
    code, out, err = ask(capsys, docs_dir, llm, "--config", str(CONFIGS / "self_rag_seed003.yaml"), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["num_llm_calls"], data["num_retrieval_calls"]) == (2, 0)


def test_bad_critique_mode_is_a_one_line_error(tmp_path, docs_dir, capsys):
    code, _, err = ask(
        capsys, docs_dir, script(tmp_path, COMBINED), "--set", "self_rag.critic=both"
    )
    assert code == 2
    assert err.startswith("selfrag: error: config key 'self_rag.critic'") and err.count("\n") == 1
    code, _, err = ask(capsys, docs_dir, script(tmp_path, COMBINED), "--set", "self_rag.critique=combined")
    assert code == 2 and err.count("\n") == 1
    assert "'self_rag.critique' was retired: critic: prompted (was combined)" in err
