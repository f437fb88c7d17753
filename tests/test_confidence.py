"""A confidence for every answer: the signals, the fitted rule, the readings and where they show.

Logic through the scripted backend; numbers hand-computed.
"""

from __future__ import annotations

import json
import math

import pytest

from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.core.context import answer_prompt
from selfrag.methods.core.trace import Run
from selfrag.methods.critique.confidence import (
    DRAFT_SLACK_TOKENS,
    DRAFTS,
    Confidence,
    ConfidenceReading,
    contained,
    read_confidence,
    relevance,
)
from selfrag.reflection.confidence import (
    ConfidenceModel,
    Signals,
    area_under,
    auroc,
    fit,
    quality_at,
    risk_coverage,
    sigmoid,
)
from selfrag.types import Document, Question, RetrievalResult

Q = Question(id="q", text="Where was the director of Alien born?")
DOCS = (
    Document("1", "Alien is a 1979 film directed by Ridley Scott.", "Alien"),
    Document("2", "Ridley Scott was born in South Shields.", "Ridley Scott"),
)


# -- the pure part --------------------------------------------------------------------


def test_auroc_by_hand():
    # right: 0.9, 0.4; wrong: 0.5, 0.1 -> pairs (0.9>0.5, 0.9>0.1, 0.4<0.5, 0.4>0.1): 3 of 4
    assert auroc([0.9, 0.5, 0.4, 0.1], [True, False, True, False]) == 0.75
    assert auroc([0.3, 0.3], [True, False]) == 0.5  # a tie counts half
    assert auroc([0.3], [True]) is None


def test_risk_coverage_keeps_the_most_confident_first():
    curve = risk_coverage([0.9, 0.1, 0.6, 0.3], [1.0, 0.0, 1.0, 0.0])
    assert curve == [(0.25, 1.0), (0.5, 1.0), (0.75, 2 / 3), (1.0, 0.5)]
    assert quality_at(curve, 0.5) == 1.0 and quality_at(curve, 0.8) == 0.5
    assert area_under(curve) == pytest.approx((1 + 1 + 2 / 3 + 0.5) / 4)


def test_a_model_scores_standardised_signals_and_imputes_a_missing_one():
    model = ConfidenceModel(("seq", "p_true"), (-1.0, 0.5), (0.5, 0.25), (2.0, -1.0), 0.25, "hand")
    # z = 0.25 + 2 * (-0.5 + 1) / 0.5 - 1 * (0.75 - 0.5) / 0.25 = 0.25 + 2 - 1 = 1.25
    assert model.score(Signals(seq=-0.5, p_true=0.75)) == pytest.approx(sigmoid(1.25))
    # p_true unknown: its mean, so it adds nothing
    assert model.score(Signals(seq=-0.5)) == pytest.approx(sigmoid(2.25))
    with pytest.raises(ConfigError, match="unknown confidence signal"):
        ConfidenceModel(("mood",), (0.0,), (1.0,), (1.0,), 0.0)


def test_a_recorded_confidence_keeps_its_order_however_small():
    # A rule fitted on another model can score every answer below 0.0001; rounding to decimals would make
    # them all 0 and a report could no longer rank them.
    low, lower = (Confidence(v, ConfidenceReading.REFLECTION, Signals()).as_dict()["confidence"]
                  for v in (3.456789e-6, 1.23456e-7))
    assert low == pytest.approx(3.457e-6) and lower == pytest.approx(1.235e-7) and low > lower > 0
    assert Confidence(0.87654, ConfidenceReading.REFLECTION, Signals()).as_dict()["confidence"] == 0.8765


def test_fit_weights_the_signal_that_separates_and_round_trips(tmp_path):
    rows = [Signals(seq=v, p_true=0.5) for v in (-0.1, -0.2, -0.3, -1.5, -1.8, -2.0, -0.25, -1.7)]
    right = [True, True, True, False, False, False, False, True]  # mostly high seq is right
    model = fit(rows, right, ("seq", "p_true"), source="test")
    assert model.weights[0] > 0 and model.weights[1] == pytest.approx(0.0, abs=1e-9)  # p_true is constant
    assert auroc([model.score(r) for r in rows], right) == auroc([r.seq for r in rows], right)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model.as_dict()))
    assert ConfidenceModel.load(path) == model
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a confidence model"):
        ConfidenceModel.load(tmp_path / "bad.json")


def test_the_packaged_model_loads_and_says_what_it_was_fitted_on():
    model = ConfidenceModel.load()
    assert model.source
    assert 0.0 <= model.score(Signals()) <= 1.0


def test_contained_and_relevance():
    assert contained("South Shields", DOCS) == 1.0
    assert contained("Newcastle upon Tyne", DOCS) == 0.0
    assert contained("the South coast", DOCS) == 0.5  # "south" yes, "coast" no ("the" is an article)
    assert contained("", DOCS) is None
    assert relevance([0.2, 0.9, 0.5]) == pytest.approx(0.7) and relevance([0.4]) == 0.4 and relevance([]) is None


# -- the readings ---------------------------------------------------------------------


def reading_script(p_true: float = -0.2, p_false: float = -1.8) -> dict:
    return {
        "Is your answer above correct": {"text": "True", "top_logprobs": {"True": p_true, "False": p_false}},
        # forced scoring: after the passages, then after the question alone
        "Use the documents below": {"forced_logprobs": [-0.1, -0.3]},
        "Question:": {"forced_logprobs": [-2.0, -3.0]},
    }


async def test_p_true_reads_the_label_probabilities_after_the_answer():
    run = Run(ScriptedBackend(reading_script()), None, {})
    sure = await read_confidence(run, ConfidenceReading.P_TRUE, Q, "South Shields", seq=None, context="ctx", docs=DOCS)
    expected = math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8))
    assert sure.value == pytest.approx(expected) and sure.signals.p_true == pytest.approx(expected)
    prompt = run.llm.calls[0]
    roles = [m.role for m in prompt.messages]
    assert roles[-2:] == ["assistant", "user"] and prompt.messages[-2].content == "South Shields"
    assert [s.action for s in run.records] == ["confidence_p_true", "confidence"]


async def test_sequence_is_the_answer_s_own_probability_and_makes_no_call():
    run = Run(ScriptedBackend([]), None, {})
    sure = await read_confidence(run, ConfidenceReading.SEQUENCE, Q, "x", seq=-0.5, context="c", docs=DOCS)
    assert sure.value == pytest.approx(math.exp(-0.5)) and run.records == []
    off = await read_confidence(run, ConfidenceReading.OFF, Q, "x", seq=-0.5, context="c", docs=DOCS)
    assert off.value is None


async def test_reflection_reads_every_signal_and_scores_them_with_the_model(tmp_path):
    model = ConfidenceModel(("seq", "p_true", "lift", "contained", "relevance"), (0.0,) * 5, (1.0,) * 5,
                            (1.0, 1.0, 1.0, 1.0, 1.0), 0.0, "hand")
    run = Run(ScriptedBackend(reading_script()), None, {})
    sure = await read_confidence(run, ConfidenceReading.REFLECTION, Q, "South Shields", seq=-0.4, context="ctx",
                                 docs=DOCS, priors=[0.8, 0.6], model=model)
    s = sure.signals
    p_true = math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8))
    assert s.seq == -0.4 and s.p_true == pytest.approx(p_true)
    assert s.lift == pytest.approx(-0.2 - (-2.5))  # mean after the passages minus mean after the question
    assert s.contained == 1.0 and s.relevance == pytest.approx(0.7)
    assert sure.value == pytest.approx(sigmoid(-0.4 + p_true + 2.3 + 1.0 + 0.7))
    actions = [r.action for r in run.records]
    assert actions == ["confidence_p_true", "confidence_likelihood", "confidence_likelihood", "confidence"]


async def test_reflection_asks_only_for_the_signals_its_model_reads():
    model = ConfidenceModel(("seq", "contained"), (0.0, 0.0), (1.0, 1.0), (1.0, 1.0), 0.0, "hand")
    run = Run(ScriptedBackend([]), None, {})  # any call would exhaust the script
    sure = await read_confidence(run, ConfidenceReading.REFLECTION, Q, "South Shields", seq=-1.0, context="c",
                                 docs=DOCS, model=model)
    assert sure.value == pytest.approx(sigmoid(-1.0 + 1.0)) and sure.signals.p_true is None


async def test_agreement_samples_numbered_drafts_of_the_answer_from_its_own_prompt():
    model = ConfidenceModel(("agreement",), (0.0,), (1.0,), (1.0,), 0.0, "hand")
    replies = {1: "South Shields", 2: "Answer: South Shields", 3: "Shields, England", 4: "Newcastle"}
    llm = ScriptedBackend(respond=lambda request: replies[request.draw])
    run = Run(llm, None, {"max_tokens": 64})
    sure = await read_confidence(run, ConfidenceReading.REFLECTION, Q, "South Shields", seq=None, context="ctx",
                                 docs=DOCS, model=model, drafts=4, draft_temperature=0.5)
    # token F1 with "South Shields": 1, 1 (the label is cleaned off), 0.5, 0
    assert sure.signals.agreement == pytest.approx(2.5 / 4) and sure.value == pytest.approx(sigmoid(2.5 / 4))
    assert [c.draw for c in llm.calls] == [1, 2, 3, 4] and {c.temperature for c in llm.calls} == {0.5}
    assert all(c.messages == tuple(answer_prompt(Q)(Q.text, "ctx")) for c in llm.calls)
    assert {c.max_tokens for c in llm.calls} == {llm.count_tokens("South Shields") + DRAFT_SLACK_TOKENS}
    drafts = [r for r in run.records if r.action == "confidence_draft"]
    assert len(drafts) == 4 and drafts[-1].details["drafts"] == ["South Shields", "South Shields",
                                                                  "Shields, England", "Newcastle"]


async def test_a_draft_never_runs_past_the_method_s_own_answer_length():
    model = ConfidenceModel(("agreement",), (0.0,), (1.0,), (1.0,), 0.0, "hand")
    llm = ScriptedBackend(respond=lambda request: "x")
    run = Run(llm, None, {"max_tokens": 3})
    await read_confidence(run, ConfidenceReading.REFLECTION, Q, "South Shields", seq=None, context="c", docs=DOCS,
                          model=model, drafts=2)
    assert [c.max_tokens for c in llm.calls] == [3, 3]


def test_self_rag_says_where_its_retired_confidence_settings_went():
    with pytest.raises(ConfigError, match="'self_rag.confidence_drafts' was retired: a lab setting"):
        create_method("self_rag", ScriptedBackend([]), TwoDocs(), {"self_rag": {"confidence_drafts": 0}})
    with pytest.raises(ConfigError, match="'self_rag.confidence_model' was retired: confidence: PATH.json"):
        create_method("self_rag", ScriptedBackend([]), TwoDocs(), {"self_rag": {"confidence_model": "m.json"}})
    with pytest.raises(ConfigError, match="config key 'self_rag.confidence'"):
        create_method("self_rag", ScriptedBackend([]), TwoDocs(), {"self_rag": {"confidence": "maybe"}})


# -- in the methods ---------------------------------------------------------------------


class TwoDocs:
    name = "two"
    documents = DOCS

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        return RetrievalResult(documents=DOCS[:top_k], scores=(2.0, 1.0)[:top_k], query=query)


def joint_script() -> dict:
    return {
        "Is your answer above correct": {"text": "False", "top_logprobs": {"True": -2.0, "False": -0.1}},
        "Use the documents below": {"text": "South Shields", "top_logprobs": [{"South": -0.1}, {" Shields": -0.3}],
                                    "forced_logprobs": [-0.2, -0.2]},
        "Question:": {"forced_logprobs": [-1.0, -1.0]},
    }


def model_file(tmp_path, **weights) -> str:
    names = tuple(weights)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(ConfidenceModel(names, (0.0,) * len(names), (1.0,) * len(names),
                                               tuple(weights.values()), 0.0, "test").as_dict()))
    return str(path)


async def test_self_rag_reads_the_joint_s_confidence_and_every_call_feeds_the_answer_or_it(tmp_path):
    llm = ScriptedBackend(joint_script())
    cfg = {"self_rag": {"retrieval_mode": "always", "confidence": model_file(tmp_path, seq=1.0, p_true=1.0, lift=1.0)}}
    response = await create_method("self_rag", llm, TwoDocs(), cfg).answer(Q)
    assert response.answer == "South Shields"
    calls = [s.action for s in response.reasoning_chain if s.llm_calls]
    # The joint's answer, then P(True) and the two likelihoods: nothing else (no one-passage
    # candidate, no support or utility verdict that could not change the answer).
    assert calls == ["generate", "confidence_p_true", "confidence_likelihood", "confidence_likelihood"]
    signals = response.details["confidence"]["signals"]
    assert signals["seq"] == pytest.approx(-0.2) and signals["lift"] == pytest.approx(0.8)
    p_true = math.exp(-2.0) / (math.exp(-2.0) + math.exp(-0.1))
    assert response.confidence == pytest.approx(sigmoid(-0.2 + p_true + 0.8), abs=1e-4)
    assert response.details["confidence"]["reading"] == "reflection"


async def test_the_default_self_rag_makes_only_the_calls_its_answer_and_fitted_heads_read():
    """The default critic on a model that scores replies is the fitted one; the packaged heads read P(True)
    and the lift (fitted on two kinds of corpus, they add to it), so the joint's answer and those two short
    calls are all it makes."""
    from selfrag.reflection.critic_fit import packaged

    default = packaged("default.json")
    assert {"p_true", "lift"} <= {f for h in default.heads.values() for f in h.features}
    llm = ScriptedBackend(joint_script())
    response = await create_method("self_rag", llm, TwoDocs(), {"self_rag": {"retrieval_mode": "always"}}).answer(Q)
    assert [s.action for s in response.reasoning_chain if s.llm_calls] == ["generate", "confidence_p_true",
                                                                          "read_likelihood"]
    assess = next(s for s in response.reasoning_chain if s.action == "assess")
    assert assess.details["readings"]["p_true"] is not None and assess.details["readings"]["lift"] is not None
    assert assess.details["readings"]["seq"] is not None
    assert response.num_llm_calls == 3
    assert response.confidence == pytest.approx(assess.details["verdicts"]["confidence"], abs=1e-4)


async def test_a_fitted_rule_that_weighs_agreement_samples_the_drafts(tmp_path):
    cfg = {"self_rag": {"retrieval_mode": "always", "confidence": model_file(tmp_path, seq=1.0, agreement=0.0)}}
    response = await create_method("self_rag", ScriptedBackend(joint_script()), TwoDocs(), cfg).answer(Q)
    calls = [s.action for s in response.reasoning_chain if s.llm_calls]
    assert calls == ["generate"] + ["confidence_draft"] * DRAFTS
    signals = response.details["confidence"]["signals"]
    assert signals["agreement"] == 1.0 and signals["p_true"] is None
    assert response.confidence == pytest.approx(sigmoid(-0.2), abs=1e-4)  # agreement weighs 0 here


async def test_self_rag_abstains_below_a_confidence_threshold(tmp_path):
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["confidence < 0.9"],
                        "confidence": model_file(tmp_path, p_true=4.0)}}
    response = await create_method("self_rag", ScriptedBackend(joint_script()), TwoDocs(), cfg).answer(Q)
    assert response.abstained is True and response.answer == "insufficient evidence"
    assert response.details["withheld_answer"] == "South Shields"
    assert response.details["abstain_reason"].startswith("the answer's confidence")
    assert response.confidence is not None and response.confidence < 0.9
    off = await create_method("self_rag", ScriptedBackend(joint_script()), TwoDocs(),
                              {"self_rag": {"retrieval_mode": "always", "confidence": cfg["self_rag"][
                                  "confidence"]}}).answer(Q)
    assert off.abstained is False  # off by default, as in the seeds


async def test_vanilla_reports_its_sequence_probability_for_free():
    llm = ScriptedBackend({"Use the documents below": {"text": "South Shields",
                                                       "top_logprobs": [{"South": -0.1}, {" Shields": -0.3}]}})
    response = await create_method("vanilla_rag", llm, TwoDocs()).answer(Q)
    assert response.num_llm_calls == 1 and response.confidence == pytest.approx(math.exp(-0.2))
    assert llm.calls[0].top_logprobs == 1


# -- measuring and refitting from run directories ----------------------------------------


def write_run(path, rows):
    path.mkdir(parents=True)
    lines = []
    for i, (seq, p_true, f1) in enumerate(rows):
        lines.append(json.dumps({
            "id": f"q{i}", "prediction": "x", "model": "m.gguf", "metrics": {"f1": f1}, "abstained": False,
            "details": {"confidence": {"confidence": 0.5, "reading": "reflection",
                                       "signals": {"seq": seq, "p_true": p_true}}},
        }))
    (path / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_confidence_fit_and_report_from_run_directories(tmp_path, capsys):
    from selfrag.cli.main import main

    run = write_run(tmp_path / "results" / "dev", [(-0.1, 0.9, 1.0), (-0.2, 0.4, 1.0), (-1.5, 0.8, 0.0),
                                                   (-2.0, 0.3, 0.0), (-0.3, 0.6, 0.4), (-0.05, 0.7, 0.67)])
    out = tmp_path / "fit.json"
    assert main(["confidence", "fit", str(run), "--out", str(out), "--features", "seq,p_true"]) == 0
    model = ConfidenceModel.load(out)
    assert model.features == ("seq", "p_true") and model.weights[0] > 0
    assert "m.gguf" in model.source and str(tmp_path) not in model.source  # no local path in the file
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "in-sample: 6 answers, 3 right" in printed
    assert main(["confidence", "report", str(run)]) == 0
    report = capsys.readouterr().out
    # The recorded confidence is 0.5 for all: AUROC 0.5. Right (F1 >= 0.5): q0, q1, q5, whose seq
    # all exceed the wrong ones'; P(True) 0.9, 0.4, 0.7 against 0.8, 0.3, 0.6 wins 6 of 9 pairs.
    assert "AUROC: confidence 0.500, seq 1.000, p_true 0.667" in report


def test_a_fit_keeps_only_the_signals_the_runs_read(tmp_path, capsys):
    """A signal no answer read (here lift and agreement) would cost calls at every answer for a weight
    fitted on nothing: the default fit leaves it out."""
    from selfrag.cli.main import main

    run = write_run(tmp_path / "dev", [(-0.1, 0.9, 1.0), (-0.2, 0.4, 1.0), (-1.5, 0.8, 0.0), (-2.0, 0.3, 0.0)])
    out = tmp_path / "fit.json"
    assert main(["confidence", "fit", str(run), "--out", str(out)]) == 0
    assert ConfidenceModel.load(out).features == ("seq", "p_true")


def test_fitting_needs_answers_both_right_and_wrong(tmp_path):
    from selfrag.errors import DataError
    from selfrag.eval.confidence import fit_runs

    run = write_run(tmp_path / "r", [(-0.1, 0.9, 1.0), (-0.2, 0.4, 1.0)])
    with pytest.raises(DataError, match="all 2 answers are right"):
        fit_runs([run], tmp_path / "x.json")
    with pytest.raises(DataError, match="no answered questions"):
        fit_runs([tmp_path / "missing"], tmp_path / "x.json")


async def test_a_failing_confidence_call_leaves_the_signal_unknown_not_the_answer_lost():
    llm = ScriptedBackend({"Is your answer above correct": {"error": "model server down", "status": 400}})
    run = Run(llm, None, {})
    sure = await read_confidence(run, ConfidenceReading.P_TRUE, Q, "x", seq=None, context="c", docs=DOCS)
    assert sure.value is None and sure.signals.p_true is None
    note = run.records[-1]
    assert note.action == "confidence" and "model server down" in note.details["unavailable"][0]
