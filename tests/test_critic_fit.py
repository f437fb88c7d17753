"""The fitted critic: fitting its heads, finding a model's fit by SHA-256, and `selfrag critic fit` for real."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from selfrag.cli.main import main
from selfrag.errors import ConfigError, DataError
from selfrag.eval.critic_fit import fit_critic, summary_lines
from selfrag.eval.critic_read import LABELS, RIGHT_MATCH_WORDS, is_right, load_readings
from selfrag.llm.model_files import file_sha256
from selfrag.methods.critique.fits import critic_dir, forget, load_fit
from selfrag.reflection.critic_fit import CriticFit, packaged
from selfrag.types import Question


def _records(n: int, seed: int = 0) -> list[dict]:
    """Readings of ``n`` questions whose labels follow known rates: an answer with seq -0.2 is right 80% of
    the time and one with seq -2.0 20%; a question keeps its gold (and reads it) when named_read is 1, and
    never otherwise; a passage is relevant 70% of the time at prior 0.9, 10% at prior 0.1."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        sure = i % 2 == 0
        answerable = i % 3 != 0
        passages = [{"prior": p, "score_share": 0.5, "named": 0.0, "linked": 0.0, "inv_rank": 1.0,
                     "relevant": bool(rng.random() < (0.7 if p > 0.5 else 0.1))} for p in (0.9, 0.1, 0.1)]
        out.append({
            "id": f"q{i}", "answerable": answerable, "passages": passages, "seconds": 1.0, "answer": "x",
            "joint": True, "read": [1, 2], "right": bool(rng.random() < (0.8 if sure else 0.2)),
            "sufficient": answerable,
            "readings": {"seq": -0.2 if sure else -2.0, "named_read": 1.0 if answerable else 0.0},
            "states": {}, "candidates": [{"joint": True, "likelihood": -0.2 if sure else -2.0,
                                          "right": bool(rng.random() < (0.8 if sure else 0.2))}],
        })
    return out


def test_fitted_heads_match_the_rates_they_were_fitted_on():
    fit = fit_critic(_records(1200), model="m.gguf", sha256="ab" * 32, layers=())
    conf = fit.head("confidence")
    assert conf.report["n"] == 800  # the answers to the questions whose gold was kept (every third was not)
    assert conf.probability({"seq": -0.2, "named_read": 1.0}) == pytest.approx(0.8, abs=0.05)
    assert conf.probability({"seq": -2.0, "named_read": 1.0}) == pytest.approx(0.2, abs=0.05)
    rel = fit.head("relevance")
    assert rel.probability({"prior": 0.9, "score_share": 0.5, "named": 0.0, "linked": 0.0, "inv_rank": 1.0}) \
        == pytest.approx(0.7, abs=0.06)
    assert fit.head("support").probability({"likelihood": -0.2, "joint": 1.0}) == pytest.approx(0.8, abs=0.06)
    suff = fit.head("sufficiency")
    assert suff.probability({"named_read": 1.0, "seq": -1.1}) > 0.9 > 0.1 > suff.probability(
        {"named_read": 0.0, "seq": -1.1})
    # The floor flags at most about 8% of the answerable fitting questions, and here every gold-removed one.
    assert fit.meta["floor"]["flagged_answerable"] <= 0.1 and fit.meta["floor"]["flagged_unanswerable"] == 1.0
    lines = summary_lines(fit)
    assert lines[0].startswith("relevance: 3600 examples") and "sufficiency floor" in lines[-1]


def test_a_fit_survives_its_file(tmp_path):
    fit = fit_critic(_records(200), model="m.gguf", sha256="cd" * 32, layers=())
    fit.write(tmp_path / "fit.json")
    back = CriticFit.read(tmp_path / "fit.json")
    assert back.threshold == fit.threshold and set(back.heads) == set(fit.heads)
    assert back.head("confidence").probability({"seq": -0.2}) == pytest.approx(
        fit.head("confidence").probability({"seq": -0.2}))


def test_readings_without_labels_say_what_is_missing():
    bare = [{"id": "q", "answerable": True, "passages": [], "answer": None}]
    with pytest.raises(DataError, match="supporting_titles"):
        fit_critic(bare, model="m", sha256="", layers=())


def _model_file(tmp_path: Path, name: str = "m.gguf") -> SimpleNamespace:
    path = tmp_path / name
    path.write_bytes(b"not really a model " + name.encode())
    return SimpleNamespace(spec=f"llamacpp:{path}", model_path=path)


def test_a_model_s_fit_is_found_by_the_sha256_of_its_file(tmp_path):
    llm = _model_file(tmp_path)
    fit = fit_critic(_records(200), model="m.gguf", sha256=file_sha256(llm.model_path), layers=())
    fit.write(critic_dir() / f"{fit.sha256}.json")
    found, origin = load_fit(llm)
    assert origin == str(critic_dir() / f"{fit.sha256}.json") and found.threshold == fit.threshold
    # Renamed or moved, the same file finds the same fit.
    moved = tmp_path / "elsewhere.gguf"
    llm.model_path.rename(moved)
    forget()
    assert load_fit(SimpleNamespace(spec="x", model_path=moved))[1] == origin


def test_a_model_without_a_fit_uses_the_packaged_defaults_and_says_so_once(tmp_path, caplog):
    llm = _model_file(tmp_path)
    with caplog.at_level(logging.WARNING, logger="selfrag"):
        first = load_fit(llm)
        second = load_fit(llm)
    assert first[1] == second[1] == "packaged defaults" and first[0].heads
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"fit one with `selfrag critic fit --llm llamacpp:{llm.model_path}`" in warnings[0]


@pytest.mark.parametrize("content", ["{not json", "[]", '{"format": 1, "heads": {}}', '{"format": 99}'])
def test_a_damaged_fit_file_means_the_defaults_and_one_warning(tmp_path, caplog, content):
    llm = _model_file(tmp_path)
    (critic_dir() / f"{file_sha256(llm.model_path)}.json").write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="selfrag"):
        fit, origin = load_fit(llm)
        load_fit(llm)
    assert origin == "packaged defaults" and fit.heads
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"fit it again with `selfrag critic fit --llm {llm.spec}`" in warnings[0]


def test_the_packaged_fits_are_readable():
    default = packaged("default.json")
    assert default is not None and {"relevance", "support", "sufficiency", "confidence"} <= set(default.heads)
    assert 0 < default.threshold < 1


def test_the_embedded_model_has_a_packaged_fit():
    from selfrag.llm.model_files import default_model_path

    try:
        path = default_model_path()
    except ConfigError:
        pytest.skip("the embedded model's package is not installed")
    fit, origin = load_fit(SimpleNamespace(spec="llamacpp", model_path=path))
    assert origin == "packaged fit" and fit.sha256 == file_sha256(path)


@pytest.mark.model
def test_critic_fit_on_the_embedded_model_writes_a_fit_that_self_rag_then_reads(tmp_path, capsys):
    """`selfrag critic fit` on the first questions of both shipped fitting samples (HotpotQA, PubMedQA), with
    the real embedded model; a second run reads nothing again, a torn last line is read again; `selfrag ask`
    then reads the new fit."""
    args = ["critic", "fit", "--limit", "3", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    fits = sorted(critic_dir().glob("*.json"))
    assert len(fits) == 1 and f"wrote {fits[0]} (6 questions" in out and out.count("read 3 questions now") == 2
    files = sorted(critic_dir().glob("*.readings.jsonl"))
    assert len(files) == 2  # one readings file per --data
    records = [r for f in files for r in load_readings(f)]
    assert len(records) == 6 and all(r["passages"] and "readings" in r for r in records)
    assert all(len(r["states"]["prompt"]) == 3 for r in records)  # hidden states of three layers
    answered = [r for r in records if r["answer"] is not None]
    pubmed = [r for r in answered if r["id"].isdigit()]  # PubMed ids; HotpotQA's are hexadecimal
    assert pubmed and all(r["readings"]["contained"] is None for r in pubmed)  # yes/no/maybe: unknown, not 0
    assert all(r["sufficient"] is not None for r in answered)  # both kinds labelled
    fit = CriticFit.read(fits[0])
    assert fit.sha256 == fits[0].stem and fit.meta["questions"] == 6
    assert fit.meta["data"] == ["sample:hotpotqa_fit", "sample:pubmedqa_fit"] and fit.meta["balanced"] is True
    assert fit.meta["labels"] == LABELS

    assert main(args) == 0
    assert capsys.readouterr().out.count("read 0 questions now") == 2
    readings = files[0]
    text = readings.read_text(encoding="utf-8")
    readings.write_text(text[: text.rstrip("\n").rfind("\n") + 1] + text.splitlines()[-1][:40], encoding="utf-8")
    assert main(args) == 0
    assert "read 1 questions now" in capsys.readouterr().out
    assert len(load_readings(readings)) == 3
    # a record labelled by an earlier rule (no "labels") is read again, not mixed in or doubled
    lines = readings.read_text(encoding="utf-8").splitlines()
    old = {k: v for k, v in json.loads(lines[0]).items() if k != "labels"}
    readings.write_text("\n".join([json.dumps(old), *lines[1:]]) + "\n", encoding="utf-8")
    assert main(args) == 0
    assert "read 1 questions now" in capsys.readouterr().out
    again = load_readings(readings)
    assert len(again) == 3 and all(r["labels"] == LABELS for r in again)

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "town.md").write_text("# Millbrook\n\nThe Millbrook town hall was built in 1872 by Sara Quill.\n")
    assert main(["ask", "Who built the Millbrook town hall?", "--docs", str(docs), "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    sources = {v["source"] for c in reply["candidates"] for v in c["verdicts"].values()}
    assert sources and all(str(fits[0]) in s for s in sources)
    assess = next(s for s in reply["reasoning_chain"] if s["action"] == "assess")
    assert assess["details"]["fit"] == str(fits[0])
    if "sufficiency" in fit.heads:  # four questions may not hold both of its labels
        assert reply["details"]["sufficiency"]["source"].endswith(f"({fits[0]})")


def test_critic_fit_refuses_bad_input_in_one_line(tmp_path, capsys):
    assert main(["critic", "fit", "--data", str(tmp_path / "none.jsonl")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]
    assert main(["critic", "fit", "--remove-gold", "2"]) != 0
    assert "--remove-gold 2.0: give a share between 0 and 1" in capsys.readouterr().err
    assert main(["critic", "fit", "--llm", "openai:gpt-4o-mini@http://127.0.0.1:9", "--limit", "1"]) != 0
    assert "a critic is fitted for a local model file" in capsys.readouterr().err


def test_critic_show_says_which_fit_a_model_gets(tmp_path, capsys):
    llm = _model_file(tmp_path)
    assert main(["critic", "show", "--llm", llm.spec]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{llm.spec}: packaged defaults") and "relevance:" in out and "sufficiency floor" in out
    fit = fit_critic(_records(200), model="m.gguf", sha256=file_sha256(llm.model_path), layers=())
    fit.write(critic_dir() / f"{fit.sha256}.json")
    forget()
    assert main(["critic", "show", "--llm", llm.spec, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["origin"] == str(critic_dir() / f"{fit.sha256}.json") and shown["sha256"] == fit.sha256
    assert set(shown["heads"]) == {"relevance", "support", "sufficiency", "confidence"}


def test_a_reading_that_costs_a_call_joins_a_head_only_when_it_helps():
    """P(True) and the lift cost a call each: kept only where cross-validation says they add AUROC."""
    plain = fit_critic(_records(400), model="m.gguf", sha256="ab" * 32, layers=())
    assert not {"p_true", "lift"} & set(plain.head("confidence").features)
    records = _records(400)
    rng = np.random.default_rng(1)
    for r in records:  # now only P(True) tells right from wrong
        r["readings"]["p_true"] = float(rng.uniform(0.6, 1.0) if r["right"] else rng.uniform(0.0, 0.4))
    telling = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=())
    assert "p_true" in telling.head("confidence").features
    assert telling.meta["confidence_tried"]["readings and calls"] > telling.meta["confidence_tried"]["readings"]


def test_the_joint_flag_joins_the_support_head_only_when_it_helps():
    """Support reads the likelihood; whether the candidate is the joint one joins only on a CV gain."""
    plain = fit_critic(_records(400), model="m.gguf", sha256="ab" * 32, layers=())
    assert plain.head("support").features == ("likelihood",)
    assert set(plain.meta["support_tried"]) == {"likelihood", "likelihood and joint", "likelihood and closed"}
    records = _records(400)
    rng = np.random.default_rng(2)
    for r in records:  # one-passage candidates, mostly right at a likelihood where joint ones are mostly wrong
        r["candidates"].append({"joint": False, "likelihood": -2.0, "right": bool(rng.random() < 0.8)})
    telling = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=())
    assert telling.head("support").features == ("likelihood", "joint")
    support = telling.head("support")
    assert support.probability({"likelihood": -2.0, "joint": 0.0}) > 0.5 > support.probability(
        {"likelihood": -2.0, "joint": 1.0})


def test_a_closed_answer_s_support_is_read_on_its_own_scale_when_that_helps():
    """A "yes" may be right at a likelihood where a written answer is wrong: the closed flag joins then.
    Records read before candidates said whether they were closed take their record's answer's word."""
    records = _records(400)
    rng = np.random.default_rng(3)
    for r in records[::2]:  # yes/no questions: every candidate at -2.0, mostly right
        r["answer"] = "Yes"
        r["candidates"] = [{"joint": True, "likelihood": -2.0, "right": bool(rng.random() < 0.8)}]
    fit = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=())
    support = fit.head("support")
    assert support.features == ("likelihood", "closed")
    assert support.probability({"likelihood": -2.0, "closed": 1.0}) > 0.5 > support.probability(
        {"likelihood": -2.0, "closed": 0.0})


def test_critic_fit_reads_a_pubmedqa_file_given_as_data(capsys):
    """PubMedQA's JSON object is recognised as --data (loaded, gold removable) before any model is asked:
    the run goes as far as the backend, which an API model cannot pass."""
    from selfrag.data.shipped import samples_dir

    path = samples_dir() / "pubmedqa" / "ori_pqal_train_80.json"
    args = ["critic", "fit", "--data", str(path), "--data", "sample:hotpotqa_fit", "--limit", "2",
            "--llm", "openai:gpt-4o-mini@http://127.0.0.1:9"]
    assert main(args) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a critic is fitted for a local model file" in err[0]


def _two_kinds(coverage: bool) -> list[dict]:
    """2000 questions of two kinds at 9:1: at the same reading, the big kind's answers are right 90% of
    the time, the small kind's 30%; with ``coverage``, sufficiency is read from the coverage alone, on
    which the small kind's answerable questions sit lower."""
    rng = np.random.default_rng(4)
    records = []
    for i, r in enumerate(_records(2000)):
        kind = "big" if i % 10 else "small"
        r["readings"] = {"seq": -0.2, "named_read": r["readings"]["named_read"]}
        if coverage:  # what tells answerable questions, the small kind's lower: no longer named_read
            centre = (0.5 if kind == "small" else 0.8) if r["answerable"] else 0.2
            r["readings"] = {"seq": -0.2, "coverage": float(rng.normal(centre, 0.1))}
        r["right"] = bool(rng.random() < (0.9 if kind == "big" else 0.3))
        records.append({**r, "kind": kind})
    return records


def test_each_kind_of_fitting_data_counts_equally_when_balanced():
    """Pooled, the confidence follows the big kind (84% right at the common reading); balanced, each kind
    counts half (60%). The floor flags about 8% of each kind's answerable questions on average, where
    pooled it is the big kind's and flags most of the small kind's."""
    from selfrag.eval.critic_fit import kind_weights

    assert kind_weights(["a", "a", "a", "b"]) == [2 / 3, 2 / 3, 2 / 3, 2.0]
    assert kind_weights(["a", "a"]) is None and kind_weights(["a", "b"], balance=False) is None
    records = _two_kinds(coverage=False)
    pooled = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=())
    even = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=(), balance=True)
    reading = {"seq": -0.2, "named_read": 1.0}
    assert pooled.head("confidence").probability(reading) == pytest.approx(0.84, abs=0.04)
    assert even.head("confidence").probability(reading) == pytest.approx(0.6, abs=0.05)

    records = _two_kinds(coverage=True)
    pooled = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=())
    even = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=(), balance=True)

    def flagged(fit, kind):
        answerable = [r for r in records if r["kind"] == kind and r["answerable"]]
        head = fit.head("sufficiency")
        return np.mean([head.probability(r["readings"]) < fit.threshold for r in answerable])

    assert flagged(pooled, "small") > 0.5
    assert (flagged(even, "big") + flagged(even, "small")) / 2 == pytest.approx(0.08, abs=0.03)


def test_an_answer_is_right_when_close_to_gold_or_a_short_sentence_that_names_it():
    """The confidence's label: F1 >= 0.5, or at most RIGHT_MATCH_WORDS words containing a gold answer. A
    model that answers in sentences is not taught that its right answers are wrong."""
    q = Question(id="q", text="On which day is the museum closed?", answers=["Mondays"])
    assert is_right(q, "Mondays") and is_right(q, "on Mondays")
    assert is_right(q, "The Millbrook Heritage Museum is closed on Mondays.")  # F1 0.29, but it says it
    assert not is_right(q, "The Millbrook Heritage Museum is closed on Tuesdays.")
    assert not is_right(q, "Mondaysville")  # whole words only
    rambling = " ".join(["The museum has many rooms and"] * (RIGHT_MATCH_WORDS // 5)) + " is closed on Mondays."
    assert len(rambling.split()) > RIGHT_MATCH_WORDS and not is_right(q, rambling)
    assert is_right(Question(id="n", text="Who?", answers=[]), "Anyone") is None
    yes_no = Question(id="y", text="Are both cities in France?", answers=["no"], type="comparison")
    assert is_right(yes_no, "No, they are not.") and not is_right(yes_no, "Yes, but not in the north.")
    pubmed = Question(id="p", text="Does X cause Y?", answers=["no"], type="yes_no", choices=("yes", "no", "maybe"))
    assert is_right(pubmed, "No.") and not is_right(pubmed, "Yes: the trial found no harm.")


def test_readings_of_an_earlier_label_rule_are_dropped_with_one_warning(tmp_path, caplog):
    from selfrag.eval.critic_read import done_ids

    path = tmp_path / "r.readings.jsonl"
    path.write_text(json.dumps({"id": "old"}) + "\n[1, 2]\n" + json.dumps({"id": "new", "labels": LABELS}) + "\n",
                    encoding="utf-8")  # a line that is not a reading is dropped too
    with caplog.at_level(logging.WARNING, logger="selfrag"):
        assert done_ids(path) == {"new"}
    assert "1 readings were labelled by an earlier rule; reading them again" in caplog.text
    assert [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()] == ["new"]


def test_the_confidence_reads_a_probe_of_the_answer_state_when_right_answers_lie_along_a_quiet_direction():
    """Right and wrong answers differ along one quiet dimension of the answer's state, under loud ones:
    a state's principal directions miss it, the probe finds it and the confidence reads that."""
    from selfrag.reflection.heads import pack_f16

    rng = np.random.default_rng(6)
    records = _records(600)
    for r in records:
        state = rng.normal(scale=0.3, size=48)
        state[:16] += rng.normal(scale=10.0, size=16)
        state[30] += 0.4 if r["right"] else -0.4
        r["readings"] = {"seq": -1.0, "named_read": r["readings"]["named_read"]}  # the readings cannot tell
        r["states"] = {"answer": {"21": pack_f16(state)}}
    fit = fit_critic(records, model="m.gguf", sha256="ab" * 32, layers=(21,))
    conf, tried = fit.head("confidence"), fit.meta["confidence_tried"]
    assert conf.reads_hidden and conf.hidden.fitted == "probe" and (conf.hidden.where, conf.hidden.layer) == ("answer", 21)
    assert tried["readings"] < 0.6 and tried["answer@21"] < 0.6 < 0.85 < tried["probe answer@21"]
    assert fit.layers == (21,) and "a probe of the answer state of layer 21" in summary_lines(fit)[3]
    assert fit.head("sufficiency").hidden is None or fit.head("sufficiency").hidden.fitted == "pca"
