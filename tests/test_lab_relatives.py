"""lab.relatives without a model: the open corpus it builds, its variants' configs, and its report's columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import relatives, relatives_report
from lab.quality_runs import load_cfg
from selfrag.eval.datasets import load_dataset

RECORDS = [
    {"id": "a", "question": "Who directed Jaws?", "answer": "Steven Spielberg", "type": "bridge", "level": "easy",
     "supporting_facts": {"title": ["Jaws (film)"], "sent_id": [0]},
     "context": {"title": ["Jaws (film)", "Shark"], "sentences": [["Jaws is a film", " by Steven Spielberg."],
                                                                  ["Sharks are fish."]]}},
    {"id": "b", "question": "Are sharks fish?", "answer": "yes", "type": "comparison", "level": "easy",
     "supporting_facts": {"title": ["Shark", "Shark"], "sent_id": [0, 1]},
     "context": {"title": ["Shark", "Whale"], "sentences": [["Sharks are fish."], ["Whales are mammals."]]}},
]


def test_the_open_corpus_holds_every_paragraph_once_and_the_questions_no_contexts(tmp_path: Path):
    source = tmp_path / "hotpot.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert relatives.build_open_corpus(tmp_path, source) == (3, 2)
    folder = relatives.open_dir(tmp_path)
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    assert [d["id"] for d in corpus] == ["Jaws (film)", "Shark", "Whale"]
    assert corpus[0] == {"id": "Jaws (film)", "title": "Jaws (film)", "text": "Jaws is a film by Steven Spielberg."}
    setting = relatives.open_setting("open_bm25", "bm25", tmp_path)
    cfg = load_cfg(setting, relatives.variants(tmp_path / "r.json")["ircot"], None, None)
    dataset = load_dataset(cfg.data)
    assert [q.id for q in dataset.questions] == ["a", "b"] and not dataset.questions[0].contexts
    assert dataset.questions[1].metadata["supporting_titles"] == ["Shark"] and len(dataset.corpus) == 3
    # Built once: a second call keeps the files the runs were made with.
    (folder / "corpus.jsonl").write_text(json.dumps(corpus[0]) + "\n")
    assert relatives.build_open_corpus(tmp_path, source) == (1, 2)


@pytest.mark.parametrize("name", relatives.METHODS)
def test_every_method_loads_in_every_setting(tmp_path: Path, name):
    for setting in relatives.settings(tmp_path).values():
        cfg = load_cfg(setting, relatives.variants(tmp_path / "router.json")[name], 3, None)
        assert cfg.architecture.name == ("vanilla_rag" if name.startswith("vanilla") else name)
        assert cfg.retrieval.method == {"open_bm25": "bm25", "open_hybrid": "hybrid"}.get(setting.name, "bm25")


def test_recall_and_routing_shares_read_off_the_records():
    rows = [{"id": "1", "prediction": "x", "metrics": {"retrieval_recall@5": 1.0},
             "details": {"route": {"strategy": "ircot"}}},
            {"id": "2", "prediction": "y", "metrics": {}, "details": {"route": {"strategy": "no_retrieval"}}},
            {"id": "3", "prediction": None, "error": {"type": "X"}}]
    assert relatives_report.recall(rows) == 0.5  # a question that retrieved nothing recalls nothing
    assert relatives_report.routed(rows) == {"no_retrieval": 0.5, "vanilla_rag": 0.0, "ircot": 0.5}
    assert relatives_report.routed(rows[2:]) is None


def test_the_report_has_a_row_per_method_with_its_interval_and_routing():
    row = {"setting": "hotpotqa", "method": "adaptive_rag", "n": 2, "target_n": 2, "partial": False,
           "metrics": {"f1": 0.5}, "vs_baseline": {"diff": 0.1, "lo": -0.2, "hi": 0.3, "n": 2}, "recall": 0.75,
           "llm_calls_per_q": 2.5, "tokens_per_q": 900.0, "seconds_per_q": 3.0,
           "routed": {"no_retrieval": 0.0, "vanilla_rag": 0.5, "ircot": 0.5}}
    data = {"environment": {"model": "m", "date": "d", "commit": "c", "platform": "p", "cpus": 2, "llm": "x"},
            "router": None, "router_file": "r.json", "settings": {"hotpotqa": "HotpotQA"}, "rows": [row]}
    text = relatives_report.render(data)
    assert ("| `adaptive_rag` | 2 | 0.500 | +0.100 [-0.200, +0.300] | 0.750 | – | 2.5 | 900 | 3.0 | "
            "no_retrieval 0%, vanilla_rag 50%, ircot 50% |") in text
    row.update(method="ircot", routed=None, recall_vs_vanilla={"diff": 0.25, "lo": 0.1, "hi": 0.4, "n": 2})
    assert "| `ircot` | 2 | 0.500 | +0.100 [-0.200, +0.300] | 0.750 | +0.250 [+0.100, +0.400] | 2.5 |" in \
        relatives_report.render(data)


def test_recall_is_paired_with_vanilla_rags_by_question():
    def rec(i, recall_value):
        return {"id": i, "prediction": "x", "metrics": {"retrieval_recall@5": recall_value}}

    ours = [rec("a", 1.0), rec("b", 0.5), rec("c", 1.0)]
    base = [rec("a", 0.5), rec("b", 0.5)]  # c not answered by the baseline: left out
    found = relatives_report.recall_vs(ours, base)
    assert found["n"] == 2 and found["diff"] == pytest.approx(0.25)


def test_help_and_the_entry_point_is_listed():
    from lab.run_all import NOT_RUN

    assert "relatives" in NOT_RUN
    with pytest.raises(SystemExit) as exit_:
        relatives.parse_args(["--help"])
    assert exit_.value.code == 0
    assert relatives.parse_args([]).only == list(relatives.METHODS)


def test_the_reports_keep_a_dotted_model_tag_whole(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(relatives, "collect", lambda args: {"rows": []})
    monkeypatch.setattr(relatives, "render", lambda data: "report")
    args = type("Args", (), {"out": tmp_path, "tag": "qwen2.5-coder-1.5b-instruct"})()
    written = relatives.write_reports(args)
    assert written == tmp_path / "relatives_qwen2.5-coder-1.5b-instruct.md" and written.read_text() == "report"
    assert (tmp_path / "relatives_qwen2.5-coder-1.5b-instruct.json").is_file()


def test_adaptive_rag_is_set_against_the_best_strategy_on_the_questions_all_answered():
    def rec(i, f1, calls, method):
        return {"id": i, "prediction": "x", "method": method, "metrics": {"f1": f1},
                "accounting": {"llm_calls": calls}}

    runs = {"no_retrieval": [rec("a", 0.0, 1, "n"), rec("b", 1.0, 1, "n"), rec("c", 0.0, 1, "n")],
            "vanilla_rag": [rec("a", 1.0, 1, "v"), rec("b", 0.0, 1, "v"), rec("c", 0.0, 1, "v")],
            "ircot": [rec("a", 1.0, 4, "i"), rec("b", 0.5, 3, "i")],  # c unanswered: left out everywhere
            "adaptive_rag": [rec("a", 1.0, 1, "a"), rec("b", 1.0, 1, "a"), rec("c", 1.0, 1, "a")]}
    found = relatives_report.against_strategies(runs)
    assert found["n"] == 2 and found["best"] == "ircot" and found["best_f1"] == pytest.approx(0.75)
    assert found["vs_best"]["diff"] == pytest.approx(0.25) and found["calls_alone"]["ircot"] == pytest.approx(3.5)
    assert relatives_report.against_strategies({k: v for k, v in runs.items() if k != "adaptive_rag"}) is None
    data = {"environment": {"model": "m", "date": "d", "commit": "c", "platform": "p", "cpus": 2, "llm": "x"},
            "router": None, "router_file": "r.json", "settings": {"hotpotqa": "HotpotQA"}, "rows": [],
            "adaptive": {"hotpotqa": found}}
    data["rows"] = [{"setting": "hotpotqa", "method": "ircot", "n": 2, "target_n": 2, "partial": False,
                     "metrics": {"f1": 0.75}, "vs_baseline": None, "recall": None, "llm_calls_per_q": 3.5,
                     "tokens_per_q": 1.0, "seconds_per_q": 1.0, "routed": None}]
    assert "F1 1.000 against the best strategy alone (`ircot`) 0.750, +0.250" in relatives_report.render(data)
