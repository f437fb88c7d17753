"""The benchmark samples shipped inside the package: small, licensed, read by the loaders, and the configs' default."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from selfrag.config import DataSection, load_config, with_absolute_paths
from selfrag.data.shipped import DEFAULT_SAMPLE, SAMPLES, resolve, samples_dir
from selfrag.errors import DataError
from selfrag.eval.datasets import load_dataset

REPO = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def data(**kw) -> DataSection:
    return DataSection(**kw)


def test_every_sample_file_is_small_and_has_its_licence_beside_it():
    files = [p for p in samples_dir().rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")]
    assert len(files) == 12
    for path in files:
        assert path.stat().st_size < MiB, path
        licence = path.parent / "LICENSE"
        assert licence.is_file(), f"no LICENSE beside {path}"
    readme = (samples_dir() / "README.md").read_text(encoding="utf-8")
    for sample in SAMPLES.values():
        assert f"`{sample.name}`" in readme and sample.licence.split()[0] in readme
    assert "CC BY-SA 4.0" in (samples_dir() / "hotpotqa" / "LICENSE").read_text()
    assert "MIT License" in (samples_dir() / "pubmedqa" / "LICENSE").read_text()
    mmlu = (samples_dir() / "mmlu_evidence" / "LICENSE").read_text()
    assert "MIT License" in mmlu and "states no licence" in mmlu


def test_the_samples_are_packaged():
    # pyproject's package-data must carry the folder into a wheel.
    text = (REPO / "pyproject.toml").read_text()
    assert '"data/**/*"' in text


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_sample_loads_with_its_dataset_loader(name):
    sample = SAMPLES[name]
    ds = load_dataset(data(dataset=sample.dataset, path=f"sample:{name}"))
    assert len(ds) == sample.questions
    assert ds.sample == name and ds.source == f"sample:{name}"


def test_hotpotqa_sample_questions_carry_their_ten_paragraphs_and_gold_titles():
    ds = load_dataset(data(dataset="hotpotqa"))  # path null: the default sample
    assert ds.sample == "hotpotqa" and len(ds) == 50
    for q in ds.questions:
        assert len(q.contexts) == 10
        gold = set(q.metadata["supporting_titles"])
        assert gold and gold <= {d.title for d in q.contexts}
        assert q.answers[0].lower() not in ("yes", "no")
    assert ds.questions[0].text.startswith("What government position was held by the woman who portrayed")


def test_yes_no_sample_is_eight_yes_and_nine_no():
    ds = load_dataset(data(dataset="hotpotqa", path="sample:hotpotqa_yesno"))
    assert Counter(q.answers[0] for q in ds.questions) == {"yes": 8, "no": 9}
    assert all(q.type == "comparison" and not q.metadata["supporting_titles"] for q in ds.questions)


def test_pubmedqa_sample_keeps_both_official_splits():
    assert len(load_dataset(data(dataset="pubmedqa"))) == 50
    test = load_dataset(data(dataset="pubmedqa", split="test"))
    train = load_dataset(data(dataset="pubmedqa", split="train"))
    assert (len(test), len(train)) == (23, 27)
    assert not {q.id for q in test.questions} & {q.id for q in train.questions}
    truth = json.loads((samples_dir() / "pubmedqa" / "test_ground_truth.json").read_text())
    assert {q.id: q.answers[0] for q in test.questions} == truth


def test_mmlu_sample_has_every_subject_and_no_evidence():
    ds = load_dataset(data(dataset="mmlu_evidence"))
    assert len(ds) == 50
    subjects = Counter(q.metadata["subject"] for q in ds.questions)
    assert subjects == {"anatomy": 9, "clinical_knowledge": 9, "college_biology": 8, "college_medicine": 8,
                        "medical_genetics": 8, "professional_medicine": 8}
    for q in ds.questions:
        assert len(q.choices) == 4 and q.answers[0] in "ABCD" and not q.contexts
    one = load_dataset(data(dataset="mmlu_evidence", split="medical_genetics"))
    assert len(one) == 8 and one.sample == "mmlu_evidence"
    assert "selfrag data download mmlu_evidence" in ds.missing_contexts_hint


def test_a_retrieving_method_on_the_mmlu_sample_says_how_to_get_the_evidence(tmp_path, capsys):
    from selfrag.cli.main import main

    script = tmp_path / "s.json"
    script.write_text(json.dumps({" ": "A"}))
    code = main(["run", str(REPO / "configs" / "vanilla_rag.yaml"), "--set", "data.dataset=mmlu_evidence",
                 "--llm", f"scripted:{script}", "--limit", "2", "--no-cache", "--output", str(tmp_path / "out"),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "have no contexts" in err and "selfrag data download mmlu_evidence" in err
    code = main(["run", str(REPO / "configs" / "no_retrieval.yaml"), "--set", "data.dataset=mmlu_evidence",
                 "--llm", f"scripted:{script}", "--limit", "2", "--no-cache", "--output", str(tmp_path / "out"),
                 "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "mmlu_evidence (sample:mmlu_evidence)" in out and "accuracy" in out


def test_data_path_names_and_errors():
    assert resolve("jsonl", None) == (None, None)
    assert resolve("demo", None) == (None, None)
    path, sample = resolve("hotpotqa", "sample:hotpotqa_yesno")
    assert sample.name == "hotpotqa_yesno" and path.is_file()
    assert set(DEFAULT_SAMPLE) == {"hotpotqa", "pubmedqa", "mmlu_evidence"}
    with pytest.raises(DataError, match="no shipped sample 'nope'; samples: hotpotqa, hotpotqa_yesno"):
        load_dataset(data(dataset="hotpotqa", path="sample:nope"))
    with pytest.raises(DataError, match="is a pubmedqa sample; set data.dataset=pubmedqa"):
        load_dataset(data(dataset="hotpotqa", path="sample:pubmedqa"))
    with pytest.raises(DataError, match="is a hotpotqa sample; set data.dataset=hotpotqa"):
        load_dataset(data(dataset="demo", path="sample:hotpotqa"))


def test_a_sample_stays_a_sample_in_a_run_directory_config(tmp_path):
    cfg = load_config(REPO / "configs" / "base.yaml", ["data.path=sample:hotpotqa_yesno"])
    assert with_absolute_paths(cfg, tmp_path).data.path == "sample:hotpotqa_yesno"
    cfg = load_config(REPO / "configs" / "base.yaml", ["data.path=x.jsonl"])
    assert with_absolute_paths(cfg, tmp_path).data.path == str(tmp_path / "x.jsonl")


def test_every_shipped_config_reads_a_shipped_sample():
    for path in sorted((REPO / "configs").glob("*.yaml")):
        cfg = load_config(path)
        assert cfg.data.path is None or cfg.data.path.startswith("sample:"), path
        assert resolve(cfg.data.dataset, cfg.data.path)[1] is not None, path


def test_the_samples_are_the_first_questions_of_the_project_files(shared_data):
    """Against ../shared/data (skipped without it): each sample is the start of its file, unchanged."""
    hotpot = (shared_data / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl").read_text().splitlines()[:50]
    assert (samples_dir() / "hotpotqa" / "hotpotqa_dev_distractor_50.jsonl").read_text().splitlines() == hotpot
    yesno = shared_data / "hotpotqa" / "hotpotqa_dev_yesno_17.jsonl"
    assert (samples_dir() / "hotpotqa" / "hotpotqa_dev_yesno_17.jsonl").read_bytes() == yesno.read_bytes()
    full = json.loads((shared_data / "pubmedqa" / "ori_pqal.json").read_text())
    sample = json.loads((samples_dir() / "pubmedqa" / "ori_pqal.json").read_text())
    assert list(sample.items()) == list(full.items())[:50]
    truth = json.loads((shared_data / "pubmedqa" / "test_ground_truth.json").read_text())
    fit = json.loads((samples_dir() / "pubmedqa" / "ori_pqal_train_80.json").read_text())
    assert list(fit.items()) == [(k, v) for k, v in full.items() if k not in truth][:80]  # training ids only
    for path in (samples_dir() / "mmlu_evidence").glob("*.jsonl"):
        records = json.loads(path.read_text())
        original = json.loads((shared_data / "medical" / "evidence" / path.name).read_text())
        assert records == [{**r, "evidence": []} for r in original[: len(records)]]
