"""The unanswerable control, data.remove_gold: which questions, which paragraphs, and its errors."""

from __future__ import annotations

import json

import pytest

from selfrag.config import load_config
from selfrag.errors import ConfigError, DataError
from selfrag.eval.datasets import load_dataset
from selfrag.eval.unanswerable import picked, remove_gold
from selfrag.types import Document, Question


def q(qid: str, titles: list[str], gold: list[str] | None) -> Question:
    docs = tuple(Document(id=t, title=t, text=f"About {t}.") for t in titles)
    meta = {} if gold is None else {"supporting_titles": gold}
    return Question(id=qid, text="?", answers=("x",), contexts=docs, metadata=meta)


def test_picked_depends_on_the_id_alone_and_nests():
    ids = [f"q{i}" for i in range(400)]
    half = {i for i in ids if picked(i, 0.5)}
    assert 150 < len(half) < 250  # about half, not exactly
    assert half == {i for i in reversed(ids) if picked(i, 0.5)}  # order does not matter
    assert {i for i in ids if picked(i, 0.2)} <= half <= {i for i in ids if picked(i, 0.8)}
    assert all(picked(i, 1.0) for i in ids) and not any(picked(i, 0.0) for i in ids)


def test_gold_paragraphs_removed_and_questions_marked():
    questions = [q("a", ["G1", "D1", "G2", "D2"], ["G1", "G2"]), q("b", ["G3", "D3"], ["G3"])]
    out = remove_gold(questions, 1.0, "f")
    assert [d.title for d in out[0].contexts] == ["D1", "D2"] and [d.title for d in out[1].contexts] == ["D3"]
    assert all(x.metadata["answerable"] is False for x in out)
    assert out[0].metadata["supporting_titles"] == ["G1", "G2"] and out[0].answers == ("x",)  # gold kept for scoring
    # A share: the picked lose their gold, the others keep all paragraphs and are marked answerable.
    mixed = remove_gold(questions, 0.5, "f")
    for before, after in zip(questions, mixed, strict=True):
        if picked(before.id, 0.5):
            assert after.metadata["answerable"] is False and len(after.contexts) < len(before.contexts)
        else:
            assert after.metadata["answerable"] is True and after.contexts == before.contexts


def test_a_question_with_only_gold_paragraphs_borrows_its_neighbours_distractors():
    questions = [q("a", ["G1", "D1"], ["G1"]), q("b", ["G2", "G3"], ["G2", "G3"]), q("c", ["G4", "D4"], ["G4"])]
    out = remove_gold(questions, 1.0, "f")
    # "a" comes before "b": its paragraphs that are not gold for b, all of them (G1 is gold for a only).
    assert [d.title for d in out[1].contexts] == ["G1", "D1"] and out[1].metadata["distractors_from"] == "a"
    # The first question borrows from the next one.
    first = remove_gold([q("b", ["G2"], ["G2"]), q("c", ["G4", "D4"], ["G4"])], 1.0, "f")
    assert [d.title for d in first[0].contexts] == ["G4", "D4"]


@pytest.mark.parametrize(("question", "message"), [
    (q("a", ["T1"], None), "has no supporting titles"),
    (q("a", ["T1"], []), "has no supporting titles"),
    (Question(id="a", text="?", metadata={"supporting_titles": ["T"]}), "no paragraphs of its own"),
    (q("a", ["T1", "T2"], ["Other"]), "would remove nothing"),
])
def test_questions_that_cannot_lose_their_gold_are_one_line_errors(question, message):
    with pytest.raises(DataError, match=message) as info:
        remove_gold([question], 1.0, "data.jsonl")
    assert "\n" not in str(info.value) and "data.jsonl: question a" in str(info.value)
    assert remove_gold([question], 0.0, "f")[0].metadata["answerable"] is True  # not picked: untouched


@pytest.mark.parametrize(("overrides", "message"), [
    (["data.dataset=mmlu_evidence", "data.remove_gold=0.5"], "dataset mmlu_evidence has no gold paragraphs"),
    (["data.remove_gold=true"], "dataset demo has no gold paragraphs"),
    (["data.dataset=hotpotqa", "data.remove_gold=1.5"], "share of questions to remove it from"),
    (["data.dataset=hotpotqa", "data.remove_gold=half"], "use true, false, or the share"),
])
def test_remove_gold_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(overrides=overrides)
    assert "\n" not in str(info.value) and "data.remove_gold" in str(info.value)


def test_remove_gold_config_values():
    assert load_config(overrides=["data.dataset=hotpotqa", "data.remove_gold=0.5"]).data.remove_gold == 0.5
    assert load_config(overrides=["data.dataset=jsonl", "data.remove_gold=true"]).data.remove_gold is True
    assert load_config(overrides=["data.dataset=pubmedqa", "data.remove_gold=false"]).data.remove_gold is False


def test_a_pubmedqa_question_without_its_abstract_gets_the_nearest_other_one():
    """Through the config a user writes: the shipped PubMedQA sample with every abstract removed."""
    plain = load_dataset(load_config(overrides=["data.dataset=pubmedqa"]).data).questions
    cfg = load_config(overrides=["data.dataset=pubmedqa", "data.remove_gold=true"])
    swapped = load_dataset(cfg.data).questions
    by_id = {x.id: x for x in plain}
    assert [x.id for x in swapped] == [x.id for x in plain]
    for x in swapped:
        donor = by_id[x.metadata["distractors_from"]]
        assert donor.id != x.id and x.contexts == donor.contexts and x.metadata["answerable"] is False
        assert x.answers == by_id[x.id].answers  # the gold answer still says what a right one would be
    assert len({x.metadata["distractors_from"] for x in swapped}) > len(swapped) // 3  # not one donor for all


def test_the_nearest_abstract_is_the_one_sharing_most_words():
    def abstract(qid: str, text: str, words: str) -> Question:
        return Question(id=qid, text=text, contexts=(Document(id=f"{qid}-0", title="Background", text=words),),
                        metadata={"gold_contexts": "all"})

    questions = [abstract("a", "Does aspirin reduce stroke risk?", "Aspirin trial in stroke patients."),
                 abstract("b", "Is coffee linked to sleep loss?", "Coffee and sleep in students."),
                 abstract("c", "Does aspirin prevent migraine?", "Aspirin for migraine and stroke risk.")]
    out = remove_gold(questions, 1.0, "f")
    assert [x.metadata["distractors_from"] for x in out] == ["c", "a", "a"]
    with pytest.raises(DataError, match="only this one"):
        remove_gold(questions[:1], 1.0, "f")


def test_jsonl_with_a_shared_corpus_cannot_remove_gold(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": "?", "answers": ["x"], "supporting_titles": ["T"]}) + "\n")
    cfg = load_config(overrides=["data.dataset=jsonl", f"data.path={path}", "data.remove_gold=true"])
    with pytest.raises(DataError, match="q1 has no paragraphs of its own"):
        load_dataset(cfg.data)


def test_real_hotpotqa_distractor_file(shared_data):
    """Every question keeps 8 distractors (or borrows some); none keeps a gold paragraph; ids are unchanged."""
    hotpot = shared_data / "hotpotqa"
    path = hotpot / "hotpotqa_dev_distractor_500.jsonl"
    plain = load_dataset(load_config(overrides=["data.dataset=hotpotqa", f"data.path={path}"]).data)
    cfg = load_config(overrides=["data.dataset=hotpotqa", f"data.path={path}", "data.remove_gold=true"])
    control = load_dataset(cfg.data)
    assert [x.id for x in control.questions] == [x.id for x in plain.questions]
    for x in control.questions:
        assert x.contexts and not {d.title for d in x.contexts} & set(x.metadata["supporting_titles"])
    assert sum("distractors_from" in x.metadata for x in control.questions) == 3  # the 3 with only gold paragraphs
    # A share is applied before subset_size cuts, so the first 20 are marked the same either way.
    cfg = load_config(overrides=["data.dataset=hotpotqa", f"data.path={path}", "data.remove_gold=0.5"])
    full = [x.metadata["answerable"] for x in load_dataset(cfg.data).questions]
    cfg.data.subset_size = 20
    assert [x.metadata["answerable"] for x in load_dataset(cfg.data).questions] == full[:20]
    # The yes/no sample has no supporting facts: one line naming the file and the question.
    cfg = load_config(overrides=["data.dataset=hotpotqa", f"data.path={hotpot / 'hotpotqa_dev_yesno_17.jsonl'}",
                                 "data.remove_gold=true"])
    with pytest.raises(DataError, match="hotpotqa_dev_yesno_17.jsonl: question .* has no supporting titles"):
        load_dataset(cfg.data)
