"""The experiment runner in-process: files written, summary numbers, concurrency, errors, resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from selfrag.config import load_config
from selfrag.errors import BackendError, ConfigError, DataError
from selfrag.eval.results import read_predictions
from selfrag.eval.runner import run_experiment_async
from selfrag.llm.scripted import ScriptedBackend

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
GOLD = {"q1": "Paris", "q2": "Berlin", "q3": "Rome", "q4": "Madrid"}


def dataset(tmp_path: Path, n: int = 4, contexts: bool = True, name: str = "q.jsonl") -> Path:
    rows = []
    for i in range(1, n + 1):
        qid = f"q{i}"
        gold = GOLD.get(qid, f"City{i}")
        row = {"id": qid, "question": f"What is the capital number {i}?", "answers": [gold],
               "type": "bridge" if i % 2 else "comparison", "level": "easy"}
        if contexts:
            row["contexts"] = [{"title": f"T{i}", "text": f"The capital number {i} is {gold}."},
                               {"title": "Noise", "text": "Unrelated text about rivers."}]
            row["supporting_titles"] = [f"T{i}"]
        rows.append(row)
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def config(tmp_path: Path, data_path: Path, *extra: str, method: str = "vanilla_rag"):
    return load_config(overrides=[
        f"architecture.name={method}", "data.dataset=jsonl", f"data.path={data_path}",
        f"experiment.output_dir={tmp_path / 'results'}", f"cache.path={tmp_path / 'cache.db'}",
        "experiment.name=test", "retrieval.top_k=1", *extra,
    ])


def answers_script(answers: dict[int, object]) -> dict[str, object]:
    """Dict-mode script: the question text (which every prompt contains) -> the reply."""
    return {f"capital number {i}?": reply for i, reply in answers.items()}


def script_file(tmp_path: Path, script) -> str:
    p = tmp_path / "script.json"
    p.write_text(json.dumps(script))
    return f"llm.spec=scripted:{p}"


class SlowScripted(ScriptedBackend):
    """A scripted backend whose calls take a while, recording how many overlap."""

    def __init__(self, script, delay: float = 0.02) -> None:
        super().__init__(script)
        self.delay = delay
        self.active = self.peak = 0

    async def _generate(self, request):
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(self.delay)
            return await super()._generate(request)
        finally:
            self.active -= 1


async def test_run_writes_config_predictions_and_summary(tmp_path):
    data = dataset(tmp_path)
    script = answers_script({1: "Paris", 2: "Berlin.", 3: "It is Rome, Italy", 4: "Lisbon"})
    cfg = config(tmp_path, data, script_file(tmp_path, script), "run.concurrency=2")
    result = await run_experiment_async(cfg, progress=False)
    run_dir = result.run_dir
    assert run_dir.parent == tmp_path / "results" and run_dir.name.endswith("_test")
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.yaml", "ledger.jsonl", "predictions.jsonl", "summary.json"]

    written = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert written["data"]["path"] == str(data) and written["architecture"]["name"] == "vanilla_rag"
    assert load_config(run_dir / "config.yaml").data.dataset == "jsonl"  # the written config loads back

    records = {r["id"]: r for r in read_predictions(run_dir / "predictions.jsonl")}
    assert set(records) == {"q1", "q2", "q3", "q4"}
    r3 = records["q3"]
    assert r3["prediction"] == "It is Rome, Italy" and r3["gold"] == ["Rome"]
    assert r3["metrics"]["em"] == 0.0 and r3["metrics"]["match"] == 1.0
    assert r3["metrics"]["f1"] == pytest.approx(0.4)  # "it is rome italy" vs "rome": P 1/4, R 1
    assert r3["metrics"]["retrieval_recall@1"] == 1.0
    assert r3["accounting"]["llm_calls"] == 1 and r3["accounting"]["retrieved"] is True
    assert [s["action"] for s in r3["reasoning_chain"]] == ["retrieve", "generate"]
    assert r3["sources"] == [{"id": "q3-0", "title": "T3"}]

    s = json.loads((run_dir / "summary.json").read_text())
    assert s == result.summary
    assert (s["n_questions"], s["n_answered"], s["n_errors"], s["complete"]) == (4, 4, 0, True)
    assert s["metrics"]["em"] == pytest.approx(0.5)  # Paris, Berlin. ok; Rome sentence and Lisbon not
    assert s["metrics"]["match"] == pytest.approx(0.75)
    assert s["metrics"]["f1"] == pytest.approx((1 + 1 + 0.4 + 0) / 4)
    assert s["llm_calls"] == {"total": 4, "per_question": 1.0}
    assert s["retrieval_rate"] == 1.0
    assert s["tokens"]["total"] == sum(r["accounting"]["total_tokens"] for r in records.values())
    assert s["latency_ms"]["p50"] is not None and s["latency_ms"]["p95"] >= s["latency_ms"]["p50"]
    assert {k: v["n"] for k, v in s["by_type"].items()} == {"bridge": 2, "comparison": 2}
    assert s["by_level"]["easy"]["n"] == 4 and s["by_retrieval"]["retrieved"]["n"] == 4
    assert s["cache"] == {"enabled": True, "hits": 0, "misses": 4}
    assert (s["method"], s["retriever"], s["top_k"], s["model"]) == ("vanilla_rag", "bm25", 1, "scripted")
    assert len(s["sessions"]) == 1 and s["sessions"][0]["finished"]


async def test_questions_run_concurrently_up_to_the_bound(tmp_path):
    data = dataset(tmp_path, n=9)
    llm = SlowScripted({"capital number": "x"}, delay=0.05)
    cfg = config(tmp_path, data, "run.concurrency=3")
    result = await run_experiment_async(cfg, progress=False, llm=llm)
    assert llm.peak == 3
    assert result.summary["n_answered"] == 9
    cfg = config(tmp_path, data, "run.concurrency=1")
    llm = SlowScripted({"capital number": "x"}, delay=0.01)
    await run_experiment_async(cfg, progress=False, llm=llm)
    assert llm.peak == 1


async def test_a_failing_question_is_an_error_line_and_the_run_goes_on(tmp_path):
    data = dataset(tmp_path)
    script = answers_script({1: "Paris", 2: {"error": "server on fire (key sk-abcdefghijklmnopqrstuv)", "status": 503},
                             3: "Rome", 4: "Madrid"})
    cfg = config(tmp_path, data, script_file(tmp_path, script), "llm.max_attempts=1")
    result = await run_experiment_async(cfg, progress=False)
    records = {r["id"]: r for r in read_predictions(result.run_dir / "predictions.jsonl")}
    assert len(records) == 4
    err = records["q2"]["error"]
    assert err["type"] == "BackendError" and "server on fire" in err["message"]
    assert "sk-abcdefghijklmnopqrstuv" not in (result.run_dir / "predictions.jsonl").read_text()
    s = result.summary
    assert (s["n_answered"], s["n_errors"], s["errors_by_type"]) == (3, 1, {"BackendError": 1})
    assert s["metrics"]["em"] == 1.0  # means are over answered questions
    # One question in four is above the default run.max_error_rate (10%): the run failed.
    assert (s["status"], s["complete"]) == ("failed", False)
    assert s["failure"].startswith("1 of 4 questions failed (25% > run.max_error_rate 10%); first: q2: BackendError")


async def test_a_backend_that_rejects_the_key_stops_the_run(tmp_path):
    data = dataset(tmp_path)
    script = answers_script({i: {"error": "invalid api key", "status": 401} for i in range(1, 5)})
    cfg = config(tmp_path, data, script_file(tmp_path, script))
    with pytest.raises(BackendError, match="invalid api key"):
        await run_experiment_async(cfg, progress=False)
    (run_dir,) = (tmp_path / "results").iterdir()
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["complete"] is False and s["n_answered"] == 0


class BrokenInstall(ScriptedBackend):
    """A backend whose code cannot import what it needs (a half-updated or broken installation)."""

    async def _generate(self, request):
        self.attempts = getattr(self, "attempts", 0) + 1
        raise ImportError("cannot import name 'X' from 'selfrag.something'")


async def test_an_import_error_stops_the_run_instead_of_failing_every_question(tmp_path):
    data = dataset(tmp_path)
    llm = BrokenInstall({"capital number": "x"})
    with pytest.raises(ImportError, match="cannot import name 'X'"):
        await run_experiment_async(config(tmp_path, data, "run.concurrency=1"), progress=False, llm=llm)
    assert llm.attempts == 1  # the first question only, not all four
    (run_dir,) = (tmp_path / "results").iterdir()
    assert not (run_dir / "predictions.jsonl").read_text().strip()  # nothing to retry by hand on resume


async def test_shared_corpus_and_no_retrieval(tmp_path):
    data = dataset(tmp_path, contexts=False)
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(json.dumps({"id": "rome", "title": "Rome", "text": "The capital number 3 is Rome."}) + "\n"
                      + json.dumps({"id": "paris", "title": "Paris", "text": "The capital number 1 is Paris."}) + "\n")
    cfg = config(tmp_path, data, f"data.corpus={corpus}")
    result = await run_experiment_async(cfg, progress=False, llm=ScriptedBackend({"capital number": "Rome"}))
    q3 = next(r for r in read_predictions(result.run_dir / "predictions.jsonl") if r["id"] == "q3")
    assert q3["sources"] == [{"id": "rome", "title": "Rome"}]
    # The no_retrieval baseline needs no documents at all.
    cfg = config(tmp_path, data, method="no_retrieval")
    result = await run_experiment_async(cfg, progress=False, llm=ScriptedBackend({"capital number": "Rome"}))
    s = result.summary
    assert s["retriever"] is None and s["retrieval_rate"] == 0.0
    # One right answer of four; nothing cited, so the answer is in no cited passage.
    assert s["by_retrieval"] == {"no retrieval": {
        "n": 4, "em": 0.25, "f1": 0.25, "match": 0.25, "abstention": 0.0, "answered_accuracy": 0.25,
        "truthfulness": -0.5, "answer_in_citations": 0.0}}


async def test_retrieving_method_without_documents_fails_before_writing(tmp_path):
    data = dataset(tmp_path, contexts=False)
    with pytest.raises(DataError, match="have no contexts; give a shared collection with data.corpus"):
        await run_experiment_async(config(tmp_path, data), progress=False, llm=ScriptedBackend(["x"]))
    assert not (tmp_path / "results").exists()


async def test_multiple_choice_accuracy_through_the_runner(tmp_path):
    cfg = load_config(overrides=[
        "architecture.name=vanilla_rag", "data.dataset=mmlu_evidence",
        f"data.path={FIXTURES / 'retrieved_mmlu_anatomy_test.jsonl'}",
        f"experiment.output_dir={tmp_path}", "cache.enabled=false",
    ])
    result = await run_experiment_async(cfg, progress=False, llm=ScriptedBackend({"letter of the correct option": "B"}))
    assert result.summary["metrics"]["accuracy"] == 0.5  # gold A and B
    assert result.summary["by_subject"]["anatomy"]["n"] == 2


async def test_resume_answers_only_the_rest(tmp_path):
    data = dataset(tmp_path, n=4)
    llm = ScriptedBackend({"capital number": "x"})
    first = await run_experiment_async(config(tmp_path, data, "data.subset_size=2"), progress=False, llm=llm)
    assert len(llm.calls) == 2
    result = await run_experiment_async(config(tmp_path, data), resume_dir=first.run_dir, progress=False, llm=llm)
    assert len(llm.calls) == 4  # only q3 and q4 were asked
    ids = [r["id"] for r in read_predictions(first.run_dir / "predictions.jsonl")]
    assert sorted(ids) == ["q1", "q2", "q3", "q4"] and len(ids) == 4
    s = result.summary
    assert s["n_answered"] == 4 and len(s["sessions"]) == 2 and s["sessions"][1]["resumed"] is True
    # Resuming with a smaller selection than was answered is refused.
    with pytest.raises(DataError, match="answers questions outside this selection"):
        await run_experiment_async(config(tmp_path, data, "data.subset_size=1"), resume_dir=first.run_dir,
                                   progress=False, llm=llm)


async def test_resume_through_the_api_refuses_other_settings_before_answering(tmp_path):
    # The benchmark resumes through this API: a changed setting (here the method's retrieval depth)
    # must not silently mix two set-ups in one run (it did: 10 answers over 5 passages, 90 over 10).
    data = dataset(tmp_path, n=4)
    llm = ScriptedBackend({"capital number": "x"})
    first = await run_experiment_async(config(tmp_path, data, "data.subset_size=2"), progress=False, llm=llm)
    stored = (first.run_dir / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"differs from the run's .*config.yaml at retrieval.top_k; resume with"):
        await run_experiment_async(config(tmp_path, data, "retrieval.top_k=2"), resume_dir=first.run_dir,
                                   progress=False, llm=llm)
    assert len(llm.calls) == 2 and (first.run_dir / "config.yaml").read_text() == stored
    assert len(read_predictions(first.run_dir / "predictions.jsonl")) == 2


async def one_answered(tmp_path: Path, n: int):
    """A vanilla_rag run over ``n`` questions stopped after the first: data, backend, run, summary."""
    data = dataset(tmp_path, n=n)
    llm = ScriptedBackend({"capital number": "x"})
    first = await run_experiment_async(config(tmp_path, data, "data.subset_size=1"), progress=False, llm=llm)
    return data, llm, first, json.loads((first.run_dir / "summary.json").read_text())


async def test_resume_refuses_a_default_changed_since_the_run_started(tmp_path):
    # The stored config.yaml holds the method section as written, so a changed code default passed
    # unseen (self_rag_critic's relevance reading did). The summary records every method setting.
    data, llm, first, summary = await one_answered(tmp_path, n=3)
    assert summary["method_settings"] == {"top_k": 1, "max_context_tokens": 2000, "answer_reading": "text",
                                          "confidence": "sequence"}
    # As if the run had been written when the default was 1500.
    summary["method_settings"]["max_context_tokens"] = 1500
    (first.run_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match=r"at vanilla.max_context_tokens \(1500 then, 2000 now\) \(a default "
                       r"changed since the run started\); set the run's value in the config \(or with --set"):
        await run_experiment_async(config(tmp_path, data), resume_dir=first.run_dir, progress=False, llm=llm)
    assert len(llm.calls) == 1
    # Setting the run's value explicitly resumes it, though the section's text now differs.
    await run_experiment_async(config(tmp_path, data, "vanilla.max_context_tokens=1500"),
                               resume_dir=first.run_dir, progress=False, llm=llm)
    assert len(read_predictions(first.run_dir / "predictions.jsonl")) == 3
    # Another value than the run's is still refused.
    with pytest.raises(ConfigError, match=r"vanilla.max_context_tokens \(1500 then, 1000 now\)"):
        await run_experiment_async(config(tmp_path, data, "vanilla.max_context_tokens=1000"),
                                   resume_dir=first.run_dir, progress=False, llm=llm)


async def test_a_run_from_before_the_settings_record_resumes_and_then_records_them(tmp_path):
    data, llm, first, summary = await one_answered(tmp_path, n=2)
    del summary["method_settings"]
    (first.run_dir / "summary.json").write_text(json.dumps(summary))
    result = await run_experiment_async(config(tmp_path, data), resume_dir=first.run_dir, progress=False, llm=llm)
    assert result.summary["method_settings"]["max_context_tokens"] == 2000 and len(llm.calls) == 2


async def test_resume_from_another_checkout_accepts_another_cache_path(tmp_path):
    # A fresh clone in another folder resolves the cache path against itself: not another set-up.
    data = dataset(tmp_path, n=3)
    llm = ScriptedBackend({"capital number": "x"})
    first = await run_experiment_async(
        config(tmp_path, data, "data.subset_size=1", f"cache.path={tmp_path / 'a' / 'cache.sqlite'}"),
        progress=False, llm=llm)
    await run_experiment_async(config(tmp_path, data, f"cache.path={tmp_path / 'b' / 'cache.sqlite'}"),
                               resume_dir=first.run_dir, progress=False, llm=llm)
    assert len(read_predictions(first.run_dir / "predictions.jsonl")) == 3 and len(llm.calls) == 3


async def test_resume_retries_error_lines(tmp_path):
    data = dataset(tmp_path, n=2)
    script = {"capital number 1?": "Paris", "capital number 2?": [{"error": "flaky", "status": 400}, "Berlin"]}
    llm = ScriptedBackend(script)
    first = await run_experiment_async(config(tmp_path, data), progress=False, llm=llm)
    assert first.summary["n_errors"] == 1
    result = await run_experiment_async(config(tmp_path, data), resume_dir=first.run_dir, progress=False, llm=llm)
    records = read_predictions(first.run_dir / "predictions.jsonl")
    assert sorted(r["id"] for r in records) == ["q1", "q2"] and all("error" not in r for r in records)
    assert result.summary["n_errors"] == 0 and result.summary["metrics"]["em"] == 1.0


async def test_cache_off_warning_only_when_a_resume_has_questions_left(tmp_path, caplog):
    data = dataset(tmp_path, n=2)
    llm = ScriptedBackend({"capital number": "x"})
    first = await run_experiment_async(
        config(tmp_path, data, "data.subset_size=1", "cache.enabled=false"), progress=False, llm=llm
    )
    with caplog.at_level("WARNING"):
        await run_experiment_async(config(tmp_path, data, "data.subset_size=1", "cache.enabled=false"),
                                   resume_dir=first.run_dir, progress=False, llm=llm)
    assert "cache is off" not in caplog.text  # nothing left to answer, nothing asked again
    with caplog.at_level("WARNING"):
        await run_experiment_async(config(tmp_path, data, "cache.enabled=false"),
                                   resume_dir=first.run_dir, progress=False, llm=llm)
    assert "the cache is off" in caplog.text
    assert len(llm.calls) == 2
