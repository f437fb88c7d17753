"""The default critic on a local model: fitted heads, every verdict with its source, and the answer's first
line when the passages read do not seem to hold the answer (CLI, --json, the page, the OpenAI reply)."""

from __future__ import annotations

import json

import pytest

from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.eval.critic_read import load_readings
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.critique.fits import installed
from selfrag.reflection.critic_fit import CriticFit
from selfrag.reflection.heads import Head
from selfrag.retrieval.registry import create_retriever
from selfrag.serve.answering import Answerer
from selfrag.serve.app import create_app
from selfrag.serve.settings import ServeSettings
from selfrag.types import Document, Question

from .test_serve_kit import client

DOCS = [Document("espresso", "Brew espresso at 93 degrees.", "espresso.md"),
        Document("milk", "Steam milk to 60 degrees.", "milk.md")]
QUESTION = "At what temperature do I brew espresso?"
SCRIPT = {
    "Is your answer above correct": {"text": "True", "top_logprobs": {"True": -0.1, "False": -2.3}},
    "Question:": {"text": "93 degrees", "top_logprobs": {"93": -0.05}, "forced_logprobs": [-1.5, -1.0]},
}


def fixed(name: str, p_logit: float, features: tuple[str, ...] = ()) -> Head:
    """A head that says sigmoid(p_logit) whatever it reads."""
    return Head(name, features, (0.0,) * len(features), (1.0,) * len(features), (0.0,) * len(features), p_logit)


def fit(sufficiency: float, threshold: float = 0.5, reads: tuple[str, ...] = ("p_true", "lift")) -> CriticFit:
    return CriticFit({"relevance": fixed("relevance", 1.5), "support": fixed("support", 1.0),
                      "sufficiency": fixed("sufficiency", sufficiency, reads), "confidence": fixed("confidence", 2.0)},
                     threshold, model="scripted")


async def answer(sufficiency: float, reads: tuple[str, ...] = ("p_true", "lift"), **config):
    method = create_method("self_rag", ScriptedBackend(SCRIPT), create_retriever("bm25", DOCS),
                           {"self_rag": {"retrieval_mode": "always", **config}})
    with installed(fit(sufficiency, reads=reads), "test fit"):
        return await method.answer(Question(id="q", text=QUESTION))


@pytest.mark.parametrize(("reads", "calls"), [(("p_true", "lift"), {"confidence_p_true", "read_likelihood"}),
                                              (("p_true", "seq"), {"confidence_p_true"}),
                                              (("lift",), {"read_likelihood"}), (("seq", "coverage"), set())])
async def test_a_reading_that_costs_a_call_is_read_only_when_a_head_reads_it(reads, calls):
    response = await answer(sufficiency=3.0, reads=reads)
    asked = {s.action for s in response.reasoning_chain} & {"confidence_p_true", "read_likelihood"}
    assert asked == calls and response.num_llm_calls == 1 + len(calls)


async def test_every_phase_has_a_verdict_with_its_source():
    response = await answer(sufficiency=3.0)
    assert response.answer == "93 degrees" and response.num_llm_calls == 3
    [joint] = response.candidates
    assert set(joint.verdicts) == {"relevance", "support", "utility"}
    assert all(v.source.startswith("fitted: ") and v.source.endswith("(test fit)") for v in joint.verdicts.values())
    assert joint.support == "fully supported" and joint.relevance == "relevant" and joint.utility == 5
    relevance = next(s for s in response.reasoning_chain if s.action == "judge_relevance")
    assert len(relevance.details["relevance"]) == 2 and relevance.details["source"] == "fitted: evidence signals (test fit)"
    said = response.details["sufficiency"]
    assert said == {"value": pytest.approx(0.9526, abs=1e-4), "floor": 0.5,
                    "source": "fitted: answer readings (test fit)", "low": False}
    assert response.confidence == pytest.approx(0.8808, abs=1e-4)


@pytest.mark.parametrize(("text", "choices", "reply", "contained"), [
    (QUESTION, (), "93 degrees", 1.0),  # a written answer: its words are in the passage read
    (QUESTION, (), "400 degrees", 0.5),
    ("Is espresso brewed at 93 degrees?", (), "Yes", None),  # yes/no holds nothing to find: unknown, not 0
    ("Brew at?\nA. 93\nB. 60", ("93", "60"), "A", None),  # an option letter
    ("Brew at which?", ("93 degrees", "60 degrees"), "93 degrees", None),  # any answer to a choice question
])
async def test_a_closed_answer_has_no_containment(text, choices, reply, contained):
    script = {**SCRIPT, "Question:": {"text": reply, "top_logprobs": {reply.split()[0]: -0.05},
                                      "forced_logprobs": [-1.5, -1.0]}}
    method = create_method("self_rag", ScriptedBackend(script), create_retriever("bm25", DOCS),
                           {"self_rag": {"retrieval_mode": "always"}})
    with installed(fit(3.0, reads=("contained",)), "test fit"):
        response = await method.answer(Question(id="q", text=text, choices=choices))
    assess = next(s for s in response.reasoning_chain if s.action == "assess")
    assert response.answer.lower() == reply.lower() and assess.details["readings"]["contained"] == contained


# (A question worded for yes/no is answered from written notes, with no likelihood to judge: the candidate's
# own words are what make it closed here.)
@pytest.mark.parametrize(("text", "reply", "support"), [(QUESTION, "93 degrees", 0.1824), (QUESTION, "Yes", 0.8176)])
async def test_the_support_head_reads_whether_the_candidate_is_closed(text, reply, support):
    script = {**SCRIPT, "Question:": {"text": reply, "top_logprobs": {reply.split()[0]: -0.05},
                                      "forced_logprobs": [-1.5, -1.0]}}
    method = create_method("self_rag", ScriptedBackend(script), create_retriever("bm25", DOCS),
                           {"self_rag": {"retrieval_mode": "always"}})
    critic = fit(3.0)
    critic.heads["support"] = Head("support", ("closed",), (0.0,), (1.0,), (3.0,), -1.5)
    with installed(critic, "test fit"):
        response = await method.answer(Question(id="q", text=text))
    [joint] = response.candidates
    assert joint.verdicts["support"].value == pytest.approx(support, abs=1e-4)


def test_readings_recorded_before_closed_answers_had_no_containment_are_read_as_unknown(tmp_path):
    path = tmp_path / "readings.jsonl"
    rows = [{"id": "a", "answer": "No", "readings": {"contained": 0.0, "seq": -0.2}},
            {"id": "b", "answer": "Paris", "readings": {"contained": 0.0}}, {"id": "c", "answer": None}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a, b, c = load_readings(path)
    assert a["readings"] == {"contained": None, "seq": -0.2} and b["readings"]["contained"] == 0.0 and c == rows[2]


async def test_a_low_sufficiency_is_said_first_and_a_floor_of_off_always_answers():
    from selfrag.reflection.answer_text import answer_lines

    low = await answer(sufficiency=-3.0)
    assert low.details["sufficiency"]["low"] is True and not low.abstained
    lines = answer_lines(low)
    assert lines[0] == "The documents do not seem to say. Closest: 93 degrees [1]"
    assert lines[1] == "(sufficiency 0.05, below 0.50)"
    # Streamed, the answer is already out: the note follows it.
    assert "(The documents do not seem to say; the answer above is the closest they give: sufficiency 0.05, " \
           "below 0.50)" in answer_lines(low, answer_shown=True)
    seeds = await answer(sufficiency=-3.0, sufficiency_floor="off")
    assert seeds.details["sufficiency"]["low"] is False and seeds.details["sufficiency"]["floor"] is None
    assert answer_lines(seeds)[0] == "93 degrees [1]"
    fixed_floor = await answer(sufficiency=-3.0, sufficiency_floor=0.01)
    assert fixed_floor.details["sufficiency"] == pytest.approx({**fixed_floor.details["sufficiency"], "floor": 0.01})
    assert fixed_floor.details["sufficiency"]["low"] is False


def test_the_cli_json_and_trace_show_the_verdicts_and_their_sources(tmp_path, capsys):
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n"
                                                 for d in DOCS))
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    args = ["ask", QUESTION, "--docs", str(tmp_path / "docs.jsonl"), "--llm", f"scripted:{tmp_path / 'script.json'}"]
    with installed(fit(-3.0), "test fit"):
        assert main([*args, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert main([*args, "--trace"]) == 0
        out = capsys.readouterr().out
    assert data["details"]["sufficiency"]["low"] is True
    assert {v["source"] for v in data["candidates"][0]["verdicts"].values()} == {
        "fitted: evidence signals of the passages read (test fit)", "fitted: likelihood over the evidence (test fit)",
        "fitted: the confidence (test fit)"}
    assert out.startswith("The documents do not seem to say. Closest: 93 degrees [1]\n")
    assert "relevance=relevant (0.82; fitted: evidence signals of the passages read (test fit))" in out
    assert "support=fully supported (0.73; fitted: likelihood over the evidence (test fit))" in out
    assert "not judged" not in out


def test_the_page_and_the_openai_reply_say_it_first():
    cfg = load_config(None, base={"architecture": {"name": "self_rag"}, "cache": {"enabled": False},
                                  "self_rag": {"retrieval_mode": "always"}})
    app = create_app(ServeSettings(), Answerer(cfg, ScriptedBackend(SCRIPT), create_retriever("bm25", DOCS),
                                               timeout_s=30))
    with installed(fit(-3.0), "test fit"), client(app) as c:
        data = c.post("/v1/ask", json={"question": QUESTION}).json()
        reply = c.post("/v1/chat/completions", json={"model": "self_rag",
                                                     "messages": [{"role": "user", "content": QUESTION}]}).json()
    view = data["view"]
    assert view["sufficiency"]["low"] is True
    assert view["sufficiency"]["words"].startswith("The documents do not seem to say. The answer is the closest")
    assert data["reply"].splitlines()[0] == "The documents do not seem to say. Closest: 93 degrees [1]"
    assert all(p["relevance"] == "relevant" and p["sources"]["relevance"] == "fitted: evidence signals (test fit)"
               and p["not_judged"] == [] for p in view["passages"])
    [candidate] = view["candidates"]
    assert candidate["not_judged"] == [] and candidate["values"]["support"] == pytest.approx(0.7311, abs=1e-4)
    content = reply["choices"][0]["message"]["content"]
    assert content.splitlines()[0] == "The documents do not seem to say. Closest: 93 degrees [1]"


async def test_a_run_counts_the_answers_that_said_the_documents_do_not_hold_them():
    from selfrag.eval.scoring import question_metrics

    question = Question(id="q", text=QUESTION, answers=("93 degrees",))
    said = question_metrics(question, await answer(sufficiency=-3.0), 2)
    plain = question_metrics(question, await answer(sufficiency=3.0), 2)
    assert (said["said_insufficient"], plain["said_insufficient"]) == (1.0, 0.0)
    assert said["f1"] == plain["f1"] == 1.0  # the answer is the same; only its first line differs
