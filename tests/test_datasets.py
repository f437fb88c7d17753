"""Dataset loaders: small files in each official format, malformed records, and the real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.config import DATASETS, DataSection
from selfrag.errors import ConfigError, DataError
from selfrag.eval.datasets import available_datasets, load_dataset
from selfrag.eval.mmlu_evidence import parse_input
from selfrag.eval.records import InvalidRecord

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"


def data(**kwargs) -> DataSection:
    return DataSection(**kwargs)


def test_registry_names():
    assert available_datasets() == ["hotpotqa", "pubmedqa", "mmlu_evidence", "jsonl", "demo"]
    assert tuple(available_datasets()) == DATASETS  # the names configs may give
    with pytest.raises(Exception, match="unknown dataset"):
        DataSection(dataset="squad")


# -- hotpotqa ------------------------------------------------------------------------


def test_hotpotqa_official_json_list():
    ds = load_dataset(data(dataset="hotpotqa", path=str(FIXTURES / "hotpot_official.json")))
    assert [q.id for q in ds.questions] == ["5a8b57f25542995d1e6f1371", "5a8c7595554299585d9e36b6"]
    q = ds.questions[1]
    assert q.answers == ("Chief of Protocol",)
    assert (q.type, q.level) == ("bridge", "medium")
    assert [d.title for d in q.contexts] == ["Kiss and Tell (1945 film)", "Shirley Temple", "Janet Waldo"]
    assert q.contexts[1].id == "Shirley Temple"
    # Sentences are joined as in the source (they carry their own leading spaces).
    assert q.contexts[1].text.endswith("diplomat. As an adult, she served as Chief of Protocol of the United States.")
    assert q.metadata["supporting_titles"] == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    assert q.metadata["supporting_facts"][2] == ["Shirley Temple", 1]
    assert ds.corpus is None  # per-question corpora
    assert ds.questions[0].type == "comparison" and ds.questions[0].answers == ("yes",)


def test_hotpotqa_hugging_face_jsonl():
    ds = load_dataset(data(dataset="hotpotqa", path=str(FIXTURES / "hotpot_hf.jsonl")))
    assert len(ds) == 2
    q = ds.questions[0]
    assert q.id == "5a8c7595554299585d9e36b6" and q.level == "hard"
    assert [d.title for d in q.contexts] == ["Meet Corliss Archer", "Shirley Temple", "Kiss and Tell (1945 film)"]
    assert q.metadata["supporting_titles"] == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    assert ds.questions[1].answers == ("Animorphs",)


def test_hotpotqa_malformed_line_names_file_and_line(tmp_path):
    lines = (FIXTURES / "hotpot_hf.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    del bad["answer"]
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(bad), "{not json"]) + "\n")
    with pytest.raises(DataError, match=r"h\.jsonl:2: missing 'answer' field"):
        load_dataset(data(dataset="hotpotqa", path=str(path)))
    ds = load_dataset(data(dataset="hotpotqa", path=str(path), skip_invalid=True))
    assert len(ds) == 1 and ds.skipped == 2
    assert ds.skipped_examples[1].endswith("h.jsonl:3: not valid JSON (Expecting property name enclosed in double quotes)")


def test_hotpotqa_malformed_record_in_json_list_reports_its_line(tmp_path):
    records = json.loads((FIXTURES / "hotpot_official.json").read_text())
    records[1]["context"] = [["only a title"]]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(records, indent=2))
    start = path.read_text().splitlines().index("  {", 2) + 1  # the line the second record starts on
    with pytest.raises(DataError, match=rf"dev\.json:{start}: each 'context' entry must be \[title, \[sentences\]\]"):
        load_dataset(data(dataset="hotpotqa", path=str(path)))


def test_broken_json_array_is_a_file_error_with_line(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('[\n {"_id": "a"},\n {"_id": ]\n')
    with pytest.raises(DataError, match=r"dev\.json:3: not valid JSON"):
        load_dataset(data(dataset="hotpotqa", path=str(path), skip_invalid=True))


def test_missing_path_and_file_errors(tmp_path):
    with pytest.raises(DataError, match="dataset jsonl needs a file: set data.path"):
        load_dataset(data(dataset="jsonl"))
    with pytest.raises(DataError, match="data file not found"):
        load_dataset(data(dataset="hotpotqa", path=str(tmp_path / "nope.jsonl")))


# -- pubmedqa -------------------------------------------------------------------------


def test_pubmedqa_ori_pqal():
    ds = load_dataset(data(dataset="pubmedqa", path=str(FIXTURES / "ori_pqal.json")))
    assert [q.id for q in ds.questions] == ["21645374", "16418930", "9488747"]
    q = ds.questions[0]
    assert q.answers == ("yes",) and q.type == "yes_no" and q.choices == ("yes", "no", "maybe")
    assert q.text.startswith("Do mitochondria play a role") and "yes, no or maybe" in q.text
    assert q.metadata["question"].endswith("programmed cell death?")
    assert [(d.id, d.title) for d in q.contexts] == [("21645374-0", "Background"), ("21645374-1", "Results")]
    assert [q.gold_answer for q in ds.questions] == ["yes", "no", "maybe"]


def test_pubmedqa_splits_use_the_official_test_ids():
    test = load_dataset(data(dataset="pubmedqa", path=str(FIXTURES / "ori_pqal.json"), split="test"))
    train = load_dataset(data(dataset="pubmedqa", path=str(FIXTURES / "ori_pqal.json"), split="train"))
    assert [q.id for q in test.questions] == ["16418930", "9488747"]
    assert [q.id for q in train.questions] == ["21645374"]
    with pytest.raises(DataError, match="pubmedqa has splits test, train"):
        load_dataset(data(dataset="pubmedqa", path=str(FIXTURES / "ori_pqal.json"), split="dev"))


def test_pubmedqa_bad_decision_reports_record_and_line(tmp_path):
    raw = json.loads((FIXTURES / "ori_pqal.json").read_text())
    raw["16418930"]["final_decision"] = "perhaps"
    path = tmp_path / "ori_pqal.json"
    path.write_text(json.dumps(raw, indent=4))
    line = path.read_text().splitlines().index('    "16418930": {') + 1
    with pytest.raises(DataError, match=rf"ori_pqal\.json:{line}: record 16418930: 'final_decision' must be yes, no or maybe"):
        load_dataset(data(dataset="pubmedqa", path=str(path)))


# -- mmlu_evidence ----------------------------------------------------------------------


def test_mmlu_evidence_array_file_with_dict_and_python_literal_instances():
    ds = load_dataset(data(dataset="mmlu_evidence", path=str(FIXTURES / "retrieved_mmlu_anatomy_test.jsonl")))
    assert [q.id for q in ds.questions] == ["anatomy-0", "anatomy-1"]
    q = ds.questions[0]
    assert q.type == "multiple_choice" and len(q.choices) == 4
    assert q.choices[1] == "paralysis of the facial muscles and loss of taste."
    assert q.answers == ("A", "paralysis of the facial muscles.")
    assert "\nA. paralysis of the facial muscles.\nB. " in q.text and "letter of the correct option" in q.text
    assert q.metadata["subject"] == "anatomy"
    assert [d.id for d in q.contexts] == ["anatomy-0-e0", "anatomy-0-e1"]
    # instances given as a Python-literal string
    assert ds.questions[1].answers == ("B", "Cranial")
    assert ds.questions[1].metadata["question"] == "Which of the following is the body cavity that contains the pituitary gland?"


def test_mmlu_evidence_folder_and_subject_split(tmp_path):
    folder = tmp_path / "evidence"
    folder.mkdir()
    (folder / "retrieved_mmlu_anatomy_test.jsonl").write_text((FIXTURES / "retrieved_mmlu_anatomy_test.jsonl").read_text())
    records = json.loads((FIXTURES / "retrieved_mmlu_anatomy_test.jsonl").read_text())[:1]
    (folder / "retrieved_mmlu_medical_genetics_test.jsonl").write_text(json.dumps(records))
    ds = load_dataset(data(dataset="mmlu_evidence", path=str(folder)))
    assert [q.id for q in ds.questions] == ["anatomy-0", "anatomy-1", "medical_genetics-0"]
    ds = load_dataset(data(dataset="mmlu_evidence", path=str(folder), split="medical_genetics"))
    assert [q.id for q in ds.questions] == ["medical_genetics-0"]
    with pytest.raises(DataError, match="no MMLU subject virology"):
        load_dataset(data(dataset="mmlu_evidence", path=str(folder), split="virology"))


def test_mmlu_evidence_gold_not_an_option(tmp_path):
    records = json.loads((FIXTURES / "retrieved_mmlu_anatomy_test.jsonl").read_text())
    records[0]["instances"]["output"] = "something else"
    path = tmp_path / "retrieved_mmlu_anatomy_test.jsonl"
    path.write_text(json.dumps(records))
    with pytest.raises(DataError, match=r"retrieved_mmlu_anatomy_test\.jsonl:1: the answer 'something else' is neither"):
        load_dataset(data(dataset="mmlu_evidence", path=str(path)))


def test_parse_input_rejects_missing_options():
    assert parse_input("QUESTION: q?\nOption A: x\nOption B: y\nOption: ") == ("q?", ["x", "y"])
    with pytest.raises(InvalidRecord, match="fewer than two"):
        parse_input("QUESTION: q?\nOption A: x\nOption: ")
    with pytest.raises(InvalidRecord, match="not lettered"):
        parse_input("QUESTION: q?\nOption A: x\nOption C: y\n")


# -- generic jsonl and demo ---------------------------------------------------------------


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_jsonl_with_contexts_choices_and_defaults(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [
        {"id": "a", "question": "Capital of France?", "answers": ["Paris", "City of Paris"],
         "contexts": ["Paris is the capital of France.", {"id": "d2", "title": "Berlin", "text": "Berlin is in Germany."}],
         "supporting_titles": ["Berlin"]},
        {"question": "Which is a planet?", "answers": "B", "choices": ["Moon", "Mars", "Sun"]},
        {"id": "c", "question": "Is the sky blue?", "answer": "yes"},
    ])
    ds = load_dataset(data(dataset="jsonl", path=str(path)))
    a, b, c = ds.questions
    assert a.answers == ("Paris", "City of Paris") and a.type == "open"
    assert [(d.id, d.title) for d in a.contexts] == [("a-0", ""), ("d2", "Berlin")]
    assert a.metadata["supporting_titles"] == ["Berlin"]
    assert b.id == "line2" and b.type == "multiple_choice" and b.answers == ("B", "Mars")
    assert b.text.splitlines()[2:5] == ["A. Moon", "B. Mars", "C. Sun"]
    assert c.type == "yes_no" and c.contexts == ()


def test_jsonl_gold_given_as_option_text(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "x", "question": "?", "answers": ["mars"], "choices": ["Moon", "Mars"]}])
    assert load_dataset(data(dataset="jsonl", path=str(path))).questions[0].answers == ("B", "Mars")


def test_jsonl_with_shared_corpus(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "Capital of France?", "answers": ["Paris"]}])
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"id": "p", "title": "Paris", "text": "Paris is the capital of France."}])
    ds = load_dataset(data(dataset="jsonl", path=str(path), corpus=str(corpus)))
    assert [d.id for d in ds.corpus] == ["p"]


def test_jsonl_errors(tmp_path):
    cases = [
        ({"id": "a", "question": "q"}, "missing 'answers'"),
        ({"id": "a", "question": "q", "answers": []}, "'answers' is empty"),
        ({"id": "a", "question": "q", "answers": ["x"], "extra": 1}, "unknown field\\(s\\) extra"),
        ({"id": "a", "question": "q", "answers": ["Z"], "choices": ["x", "y"]}, "the answer 'Z' is neither an option letter"),
        ({"id": "a", "question": "q", "answers": ["x"], "contexts": [{"title": "t"}]}, "context 0 needs a non-empty 'text'"),
        (["not", "an", "object"], "expected a JSON object"),
    ]
    for row, message in cases:
        path = write_jsonl(tmp_path / "q.jsonl", [{"id": "ok", "question": "q", "answers": ["x"]}, row])
        with pytest.raises(DataError, match=rf"q\.jsonl:2: {message}"):
            load_dataset(data(dataset="jsonl", path=str(path)))


def test_duplicate_ids_are_rejected(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "q", "answers": ["x"]}] * 2)
    with pytest.raises(DataError, match="question id 'a' occurs twice"):
        load_dataset(data(dataset="jsonl", path=str(path)))


def test_subset_size_and_limit_take_the_first_questions(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": f"q{i}", "question": "q", "answers": ["x"]} for i in range(6)])
    assert [q.id for q in load_dataset(data(dataset="jsonl", path=str(path), subset_size=4)).questions] == ["q0", "q1", "q2", "q3"]
    assert len(load_dataset(data(dataset="jsonl", path=str(path), subset_size=4), limit=2)) == 2


def test_skip_leaves_out_the_first_questions_before_the_subset(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": f"q{i}", "question": "q", "answers": ["x"]} for i in range(6)])
    ids = [q.id for q in load_dataset(data(dataset="jsonl", path=str(path), skip=2, subset_size=3)).questions]
    assert ids == ["q2", "q3", "q4"]
    assert [q.id for q in load_dataset(data(dataset="jsonl", path=str(path), skip=5)).questions] == ["q5"]
    with pytest.raises(DataError, match=r"data.skip=6 leaves no questions: .*q\.jsonl has 6; use a smaller data.skip"):
        load_dataset(data(dataset="jsonl", path=str(path), skip=6))


def test_a_negative_skip_is_a_config_error():
    with pytest.raises(ValueError, match="skip"):
        data(dataset="jsonl", path="x.jsonl", skip=-1)


def test_demo_dataset_uses_the_shipped_corpus():
    ds = load_dataset(data(dataset="demo"))
    assert len(ds) >= 5 and ds.corpus and all(q.answers for q in ds.questions)
    with pytest.raises(DataError, match="shipped with selfrag"):
        load_dataset(data(dataset="demo", path="x.jsonl"))


def test_split_on_a_dataset_without_splits():
    with pytest.raises(DataError, match="has no splits"):
        load_dataset(data(dataset="hotpotqa", path=str(FIXTURES / "hotpot_hf.jsonl"), split="dev"))


def test_unknown_dataset_name_fails_at_config_load():
    from selfrag.config import load_config

    with pytest.raises(ConfigError, match="data.dataset.*unknown dataset"):
        load_config(overrides=["data.dataset=squad"])


# -- the real files in ../shared/data ----------------------------------------------------


def test_real_hotpotqa_sample(shared_data):
    ds = load_dataset(data(dataset="hotpotqa", path=str(shared_data / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl")))
    assert len(ds) == 500 and ds.skipped == 0
    sizes = [len(q.contexts) for q in ds.questions]
    assert sizes.count(10) == 497 and min(sizes) == 2  # three dev questions come with only their 2 gold paragraphs
    assert {q.type for q in ds.questions} == {"bridge", "comparison"}
    assert {q.level for q in ds.questions} <= {"easy", "medium", "hard"}
    for q in ds.questions:
        titles = {d.title for d in q.contexts}
        assert set(q.metadata["supporting_titles"]) <= titles and len(q.metadata["supporting_titles"]) == 2


def test_real_pubmedqa(shared_data):
    path = str(shared_data / "pubmedqa" / "ori_pqal.json")
    ds = load_dataset(data(dataset="pubmedqa", path=path))
    assert len(ds) == 1000 and {q.gold_answer for q in ds.questions} == {"yes", "no", "maybe"}
    assert all(q.contexts for q in ds.questions)
    assert len(load_dataset(data(dataset="pubmedqa", path=path, split="test"))) == 500


def test_real_mmlu_evidence(shared_data):
    ds = load_dataset(data(dataset="mmlu_evidence", path=str(shared_data / "medical" / "evidence")))
    assert len(ds) == 1089 and ds.skipped == 0
    assert all(len(q.choices) == 4 and len(q.contexts) == 10 for q in ds.questions)
    assert {q.gold_answer for q in ds.questions} == {"A", "B", "C", "D"}
    assert len({q.metadata["subject"] for q in ds.questions}) == 6
