"""The quality benchmark's statistics: AUC, the paired bootstrap, reading and summarising runs (no model)."""

from __future__ import annotations

import pytest

from lab import quality_stats as qs
from tests.helpers.lab_records import pred, write


def test_auc_known_values_and_ties():
    assert qs.auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert qs.auc([0.1], [0.9]) == 0.0
    # Binary verdicts: every tie counts one half.
    assert qs.auc([1, 1, 0], [1, 0, 0, 0]) == pytest.approx((2 * 3 + 2 * 0.5 + 0.5 * 3) / 12)
    assert qs.auc([0.5, 0.5], [0.5]) == 0.5
    assert qs.auc([], [0.1]) is None and qs.auc([0.1], []) is None


def test_auc_matches_the_pairwise_definition():
    pos = [0.3, 0.7, 0.7, 0.2, 0.9]
    neg = [0.7, 0.1, 0.3, 0.3]
    pairs = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    assert qs.auc(pos, neg) == pytest.approx(pairs / (len(pos) * len(neg)))


def test_paired_bootstrap_known_data():
    out = qs.paired_bootstrap([1.0] * 10, [0.0] * 10)
    assert out == {"diff": 1.0, "lo": 1.0, "hi": 1.0, "n": 10}
    a = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    b = [0, 0, 1, 0, 0, 1, 0, 0, 1, 0]
    first = qs.paired_bootstrap(a, b)
    assert first["diff"] == pytest.approx(0.4)
    assert first["lo"] < 0.4 < first["hi"]
    assert first["lo"] >= 0.0 and first["hi"] <= 0.8  # differences are 0 or 1: the mean stays in [0, 0.8]
    assert qs.paired_bootstrap(a, b) == first  # fixed seed: the same interval every time
    assert qs.paired_bootstrap([], []) is None
    with pytest.raises(ValueError):
        qs.paired_bootstrap([1.0], [1.0, 0.0])


def test_read_predictions_keeps_one_record_per_id_in_wanted_order(tmp_path):
    path = write(tmp_path / "p.jsonl", [pred("b", "x", error=True), pred("a", "Paris"), pred("b", "Lyon")])
    with path.open("a") as fh:
        fh.write('{"id": "c", "predic')  # a torn last line
    rows = qs.read_predictions(path, ["a", "b", "c"])
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[1]["prediction"] == "Lyon"  # the answer wins over the earlier error
    assert qs.read_predictions(tmp_path / "missing.jsonl") == []


def test_join_by_id_pairs_only_questions_both_answered():
    a = [pred("1", "Paris"), pred("2", "x"), pred("3", "y", error=True)]
    b = [pred("2", "Paris"), pred("1", "Lyon"), pred("3", "Paris")]
    joined = qs.join_by_id(a, b)
    assert [(i, x["prediction"], y["prediction"]) for i, x, y in joined] == [("1", "Paris", "Lyon"), ("2", "x", "Paris")]
    cmp = qs.compare_to(a, b, "f1")
    assert cmp["n"] == 2 and cmp["diff"] == pytest.approx(0.0) and cmp["metric"] == "f1"


def test_malformed_answers_are_counted_by_reason():
    rows = [pred("1", ""), pred("2", '{"answer": "Paris"}'), pred("3", "[Relevant]"),
            pred("4", "Question: what is"), pred("5", "Paris"), pred("6", "", error=True)]
    assert qs.malformed_reasons(rows) == {"empty": 1, "json": 1, "reflection label": 1, "prompt text": 1}
    s = qs.summarize_rows(rows, target_n=6, metrics=("f1",))
    assert s["malformed"] == 4 and s["errors"] == 1 and s["n"] == 5


def test_yes_no_accuracy_is_the_normalised_answer_against_the_gold():
    assert qs.yes_no_correct("Yes.", ["yes"]) == 1.0
    assert qs.yes_no_correct("yes, they were", ["yes"]) == 0.0
    assert qs.yes_no_correct(None, ["no"]) == 0.0
    s = qs.summarize_rows([pred("1", "No", gold=("no",)), pred("2", "yes", gold=("no",))], target_n=2,
                          metrics=("em",), yes_no=True)
    assert s["metrics"]["yesno"] == 0.5
    # One "yes" answer of two, where the gold says "no" both times.
    assert s["metrics"]["answered_yes"] == 0.5 and s["metrics"]["gold_yes"] == 0.0


def test_an_answer_written_after_every_passage_was_filtered_out_is_counted():
    unread = pred("1", "yes", gold=("no",)) | {"reasoning_chain": [
        {"action": "retrieve"}, {"action": "evaluate_relevance"}, {"action": "no_relevant_documents"}]}
    read = pred("2", "no", gold=("no",)) | {"reasoning_chain": [{"action": "retrieve"}, {"action": "generate"}]}
    s = qs.summarize_rows([unread, read, pred("3", "Paris")], target_n=3, metrics=("em",))
    assert s["retrieval_rate"] == 1.0 and s["kept_none"] == 1


def test_support_pairs_split_correct_and_wrong_candidates():
    cands = [
        {"text": "Paris", "support": "no support", "details": {"sup": 0.9}},  # the probability wins
        {"text": "Lyon", "support": "fully supported", "details": {}},  # label: 1.0
        {"text": "Paris France city", "support": "partially supported", "details": {}},  # F1 0.5: correct
        {"text": "the city of Paris", "support": None, "details": {}},  # no score: left out
    ]
    correct, wrong, questions = qs.support_pairs([pred("1", "Paris", candidates=cands)])
    assert correct == [0.9, 0.5] and wrong == [1.0] and questions == 1
