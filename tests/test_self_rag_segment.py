"""The self_rag_segment method: segment loop, retrieve yes/no/continue, beam search, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.catalog.self_rag_segment import Beam, evidence, keep_best
from selfrag.types import Candidate, Document, RetrievalResult
from tests.conftest import KeyedRetriever, StaticRetriever
from tests.helpers.reflection import decision, segment, word

REPO = Path(__file__).resolve().parents[1]
MARS = "Tell me about Mars."
MARS_DOCS = (
    Document(id="a", title="Doc A", text="Mars is the fourth planet."),
    Document(id="b", title="Doc B", text="Mars has two moons."),
)
HEAD = "### Response:\n"
LONG_FORM = {"self_rag_segment": {"short_answer": False}}  # the answer is the segments written (the paper's)


@pytest.fixture
def mars_retriever() -> StaticRetriever:
    return StaticRetriever(RetrievalResult(documents=MARS_DOCS, scores=(0.9, 0.8), query=MARS))


def beam_script():
    """Built so that greedy search loses.

    Segment 1: "Mars is red." (Doc A) scores 0.9 + 1.0 = 1.9 and "Mars is small." (Doc B)
    0.8 + 0.5 = 1.3, so greedy keeps only the first. Segment 2 reuses the passages
    ("continue"): after "Mars is red." the best continuation scores 0.3 + 0.5 − 0.25 = 0.55
    (total 2.45); after "Mars is small." it scores 1.0 + 1.0 + 0.5 = 2.5 (total 3.8).
    Scores here leave out the sequence term (use_seq_score: false).
    """
    return {
        f"{HEAD}Mars is red.[Retrieval]<paragraph>Doc A": segment("It is cold.", rel=0.2, sup="no", util=1),
        f"{HEAD}Mars is red.[Retrieval]<paragraph>Doc B": segment("It is dusty.", rel=0.3, sup="partial", util=2),
        f"{HEAD}Mars is small.[Retrieval]<paragraph>Doc A": segment("It has two moons.", rel=1.0, sup="full", util=5),
        f"{HEAD}Mars is small.[Retrieval]<paragraph>Doc B": segment("It is far.", rel=0.9, sup="partial", util=4),
        f"{HEAD}[Retrieval]<paragraph>Doc A": segment("Mars is red.", rel=0.9, sup="full", end="[Continue to Use Evidence]"),
        f"{HEAD}[Retrieval]<paragraph>Doc B": segment("Mars is small.", rel=0.8, sup="partial", end="[Continue to Use Evidence]"),
        f"{HEAD}Mars is": decision(cont=0.7, yes=0.2, no=0.1),
        HEAD: decision(yes=0.6, no=0.4),
    }


def beam_config(width: int) -> dict:
    # The search itself: its answer is the segments written (short_answer is tested on its own below).
    return {"self_rag_segment": {"beam_width": width, "top_k": 2, "weights": {"use_seq_score": False},
                                 "short_answer": False}}


def kept_per_segment(response) -> list[list[str]]:
    return [s.details["kept"] for s in response.reasoning_chain if s.action == "beam"]


async def test_greedy_loses_and_beam_width_two_wins(mars_retriever):
    greedy_llm = ScriptedBackend(beam_script(), model="selfrag_llama2_7b")
    greedy = await create_method("self_rag_segment", greedy_llm, mars_retriever, beam_config(1)).answer(MARS)
    beam_llm = ScriptedBackend(beam_script(), model="selfrag_llama2_7b")
    beam = await create_method("self_rag_segment", beam_llm, mars_retriever, beam_config(2)).answer(MARS)

    assert greedy.answer == "Mars is red. It is dusty."
    assert greedy.details["score"] == pytest.approx(2.45)
    assert kept_per_segment(greedy) == [["1"], ["1.2"]]
    assert greedy.num_llm_calls == 6  # (1 decision + 2 candidates) × 2 segments

    assert beam.answer == "Mars is small. It has two moons."
    assert beam.details["score"] == pytest.approx(3.8)
    assert kept_per_segment(beam) == [["1", "2"], ["2.1", "2.2"]]
    assert beam.num_llm_calls == 9  # segment 1: 1 + 2; segment 2: two beams × (1 + 2)

    for r in (greedy, beam):
        assert r.details["decisions"] == ["yes", "continue"]
        assert r.num_retrieval_calls == 1  # "continue" reuses the passages
        assert r.details["final"] is True and r.details["critique_source"] == "reflection_tokens"

    # The beam trace: segment 2 expands both beams, and its pool holds all four paths.
    cand = [s.details for s in beam.reasoning_chain if s.action == "candidates"]
    assert [(c["segment"], c["beam"], c["decision"]) for c in cand] == [(1, "root", "yes"), (2, "1", "continue"), (2, "2", "continue")]
    assert [row["cumulative"] for row in cand[1]["candidates"]] == [1.6, 2.45]
    assert [row["cumulative"] for row in cand[2]["candidates"]] == [3.8, 2.95]
    pool = [s.details["pool"] for s in beam.reasoning_chain if s.action == "beam"][1]
    assert [(p["beam"], p["score"]) for p in pool] == [("1.1", 1.6), ("1.2", 2.45), ("2.1", 3.8), ("2.2", 2.95)]
    # Candidates of the response are the winning path's segments.
    assert [c.text for c in beam.candidates] == ["Mars is small.", "It has two moons."]
    assert [c.score for c in beam.candidates] == [1.3, 2.5]
    # The greedy run never wrote a segment after "Mars is small.".
    assert not any("Mars is small.[Retrieval]" in (c.prompt or "") for c in greedy_llm.calls)


def label_segment_script(final_yes: float = 0.9):
    return {
        "(nothing yet)\n\nWhat does the next": word(yes=0.8, no=0.2),
        "capital of France.\n</document>\n\nDoes the document": word(relevant=1.0),
        "capital of France.\n</document>\n\nAnswer so far": {
            "text": "Paris is the capital of France.", "top_logprobs": [{"Paris": -0.1}, {" is the capital of France.": -0.1}],
        },
        "Answer: Paris is the capital of France.\n\nIs the answer supported": word(fully=1.0),
        "Answer: Paris is the capital of France.\n\nHow useful": word(**{"5": 1.0}),
        "Answer: Paris is the capital of France.\n\nDoes the answer above": word(yes=final_yes, no=1 - final_yes),
    }


async def test_label_probs_segment_budget_and_trace(france_retriever):
    llm = ScriptedBackend({**label_segment_script(), "capital of France.\n</document>\n\nQuestion: What is the capital": "Paris"})
    method = create_method("self_rag_segment", llm, france_retriever, {"self_rag_segment": {"top_k": 1}})
    france_retriever.result = RetrievalResult(
        documents=france_retriever.result.documents[:1], scores=(0.9,), query="q"
    )
    r = await method.answer("What is the capital of France?")
    # The segments, then one call over their passage (vanilla_rag's prompt) gives the short
    # answer the question asks for.
    assert r.answer == "Paris"
    assert r.details["segments_text"] == "Paris is the capital of France."
    assert r.num_llm_calls == 7  # decision + (relevance, segment, support, utility, final) + short answer
    assert [s.action for s in r.reasoning_chain] == [
        "critic", "critique_retrieval", "retrieve", "critique_relevance", "generate_segment",
        "critique_support", "critique_utility", "critique_final", "candidates", "beam", "short_answer",
    ]
    prompt = llm.calls[-1].prompt_text()
    assert 'title="Doc A">\nParis is the capital of France.\n</document>' in prompt
    assert r.reasoning_chain[-1].details["passages_in_context"] == ["1"]
    # seq 0.904837 + rel 1 + sup 1 + 0.5·1
    assert r.details["score"] == pytest.approx(3.4048, abs=1e-4)
    assert r.details["segments"] == 1 and r.details["final"] is True
    assert france_retriever.calls == [("What is the capital of France?", 1)]


async def test_no_decision_writes_without_passages(france_retriever):
    llm = ScriptedBackend(
        {
            "What does the next": word(yes=0.05, no=0.95),
            "Write the next sentence": "France is a country.",
            "How useful": word(**{"3": 1.0}),
            "Does the answer above": word(yes=1.0),
        }
    )
    r = await create_method("self_rag_segment", llm, france_retriever, LONG_FORM).answer("Tell me about France.")
    assert france_retriever.calls == []
    assert r.answer == "France is a country." and r.retrieval_needed is False
    assert r.num_llm_calls == 4  # decision, segment, utility, final
    assert r.candidates[0].passage is None and r.details["decisions"] == ["no"]


async def test_max_segments_bounds_the_loop(mars_retriever):
    llm = ScriptedBackend(
        {
            "<paragraph>Doc A": [segment(f"Fact {i}.", rel=1.0, sup="full", end="[Retrieval]") for i in range(3)],
            "<paragraph>Doc B": [segment(f"Other {i}.", rel=0.5, sup="no", end="[Retrieval]") for i in range(3)],
            HEAD: decision(yes=1.0),
        },
        model="selfrag",
    )
    method = create_method(
        "self_rag_segment", llm, mars_retriever,
        {"self_rag_segment": {"beam_width": 1, "max_segments": 3, "top_k": 2, "short_answer": False}}
    )
    r = await method.answer(MARS)
    assert r.answer == "Fact 0. Fact 1. Fact 2."
    assert r.details["segments"] == 3 and r.details["final"] is False
    assert r.num_retrieval_calls == 3
    assert mars_retriever.calls[1] == (f"{MARS} Fact 0.", 2)  # the question plus the answer so far


async def test_drop_unsupported_segments_from_the_answer(mars_retriever):
    script = {
        f"{HEAD}Mars is red.[Retrieval]": segment("Mars is made of cheese.", rel=1.0, sup="no", util=2),
        f"{HEAD}[Retrieval]": segment("Mars is red.", rel=1.0, sup="full", end="[Continue to Use Evidence]"),
        f"{HEAD}Mars is red.": decision(cont=1.0),
        HEAD: decision(yes=1.0),
    }
    cfg = {"self_rag_segment": {"beam_width": 1, "top_k": 1, "drop_unsupported": True, "short_answer": False}}
    llm = ScriptedBackend(script, model="selfrag")
    r = await create_method("self_rag_segment", llm, mars_retriever, cfg).answer(MARS)
    assert r.answer == "Mars is red."
    assert r.details["dropped_segments"] == [2]
    assert [c.details["dropped"] for c in r.candidates] == [False, True]
    cfg["self_rag_segment"]["drop_unsupported"] = False
    llm2 = ScriptedBackend(script, model="selfrag")
    r2 = await create_method("self_rag_segment", llm2, mars_retriever, cfg).answer(MARS)
    assert r2.answer == "Mars is red. Mars is made of cheese."


async def test_a_repeated_segment_ends_the_beam_without_adding_score(mars_retriever):
    llm = ScriptedBackend(
        {
            f"{HEAD}Mars is red.[Retrieval]": segment("Mars is red.", rel=1.0, sup="full"),
            f"{HEAD}[Retrieval]": segment("Mars is red.", rel=1.0, sup="full", end="[Continue to Use Evidence]"),
            HEAD: decision(cont=1.0),
        },
        model="selfrag",
    )
    cfg = {"self_rag_segment": {"beam_width": 1, "top_k": 1, "weights": {"use_seq_score": False}, "short_answer": False}}
    r = await create_method("self_rag_segment", llm, mars_retriever, cfg).answer(MARS)
    assert r.answer == "Mars is red."
    assert r.details["score"] == pytest.approx(2.0) and r.details["final"] is True
    rows = [s.details for s in r.reasoning_chain if s.action == "candidates"][1]["candidates"]
    assert rows[0]["stalled"] == "repeat"


def test_keep_best_ranks_by_cumulative_score_and_drops_duplicate_answers():

    def beam(id_, texts, scores, final=False):
        return Beam(id=id_, segments=tuple(Candidate(t) for t in texts), scores=tuple(scores), final=final)

    pool = [beam("1", ["A."], [1.0], final=True), beam("2", ["B."], [0.5]), beam("3", ["a."], [0.9]), beam("4", ["C."], [2.0])]
    assert [b.id for b in keep_best(pool, 2)] == ["4", "1"]
    assert [b.id for b in keep_best(pool, 5)] == ["4", "1", "2"]  # "a." duplicates "A."


@pytest.mark.parametrize("name", ["self_rag_segment", "self_rag_segment_dense", "self_rag_segment_hybrid"])
def test_configs_load(name):
    cfg = load_config(REPO / "configs" / f"{name}.yaml")
    assert cfg.architecture.name == "self_rag_segment"
    section = cfg.method_section()
    assert section["beam_width"] == 2 and section["adaptive"]["threshold"] == 0.2


def test_cli_ask_prints_segments_candidates_and_beams(tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) for d in MARS_DOCS))
    script = tmp_path / "script.json"
    script.write_text(json.dumps(beam_script()))
    code = main([
        "ask", MARS, "--docs", str(docs), "--method", "self_rag_segment",
        "--llm", f"scripted:{script}", "--trace",
        "--set", "self_rag_segment.top_k=2", "--set", "self_rag_segment.weights.use_seq_score=false",
        "--set", "self_rag_segment.critic.source=reflection_tokens", "--set", "self_rag_segment.short_answer=false",
    ])
    out = capsys.readouterr().out
    assert code == 0
    # It read both passages; only Doc B ("Mars has two moons.") states a sentence of the answer.
    assert out.startswith("Mars is small. It has two moons. [1]\n\nCited:\n  [1] Doc B (b)")
    assert "Read, not cited:\n  - Doc A [a]" in out
    for text in (
        "critique_source: reflection_tokens",
        "CONTINUE WITH THE SAME PASSAGES",
        "Segment 2, beam 2: decision continue",
        "Segment 2: keep the best 2 of 4 partial answers by cumulative score.",
        "kept 2.1 (3.800, final), 2.2 (2.950, final)",
        "cumulative=3.800",
    ):
        assert text in out, text


def _one_segment_script(short_reply: str) -> dict:
    return {
        "What does the next": word(yes=0.05, no=0.95),
        "Write the next sentence": "Both of them were born in the United States.",
        "How useful": word(**{"3": 1.0}),
        "Does the answer above": word(yes=1.0),
        "Using the notes, answer the question.": short_reply,
    }


@pytest.mark.parametrize("reply", ["", "[Utility:5]", "```json\n{}\n```"])
async def test_a_reply_with_no_usable_short_answer_keeps_the_segments(france_retriever, reply):
    llm = ScriptedBackend(_one_segment_script(reply))
    r = await create_method("self_rag_segment", llm, france_retriever).answer("Where were they born?")
    assert r.answer == "Both of them were born in the United States."
    step = r.reasoning_chain[-1]
    assert step.action == "short_answer" and "the answer is the segments written" in step.observation


async def test_a_yes_no_question_gets_yes_or_no_from_the_segments(france_retriever):
    llm = ScriptedBackend(_one_segment_script("Yes, both were born there."))
    r = await create_method("self_rag_segment", llm, france_retriever).answer(
        "Were Scott Derrickson and Ed Wood of the same nationality?")
    assert r.answer == "yes"
    assert r.details["segments_text"] == "Both of them were born in the United States."


BOMBER_Q = "Which aircraft was used in the South West Pacific theatre as a jet-powered medium bomber?"
BOMBER_DOCS = (
    Document(id="pacific", title="South West Pacific", text="The B-25 flew in the South West Pacific theatre."),
    Document(id="canberra", title="Canberra", text="The English Electric Canberra is a jet-powered medium bomber."),
)


def bomber_script() -> dict:
    """The segment from the second passage wins; over the segment alone the model shortens the
    name it holds ("Canberra"), over the passages it copies the span ("English Electric Canberra"),
    as the benchmark models did."""
    written = "The English Electric Canberra was used there as a medium bomber."
    return {
        "(nothing yet)\n\nWhat does the next": word(yes=0.9, no=0.1),
        "Pacific theatre.\n</document>\n\nDoes the document": word(relevant=0.3, irrelevant=0.7),
        "medium bomber.\n</document>\n\nDoes the document": word(relevant=0.9, irrelevant=0.1),
        "Pacific theatre.\n</document>\n\nAnswer so far": "The B-25 flew there.",
        "medium bomber.\n</document>\n\nAnswer so far": written,
        "Is the answer supported": word(fully=0.8, partially=0.2),
        "How useful": word(**{"4": 1.0}),
        "Does the answer above": word(yes=1.0),
        "</document>\n\nQuestion: Which aircraft": "English Electric Canberra",
        "Using the notes, answer the question.": "Canberra",
    }


async def test_the_short_answer_reads_the_passages_the_winning_segment_came_from_first():
    retriever = StaticRetriever(RetrievalResult(documents=BOMBER_DOCS, scores=(0.9, 0.8), query=BOMBER_Q))
    cfg = {"self_rag_segment": {"top_k": 2, "beam_width": 1, "weights": {"use_seq_score": False}}}
    llm = ScriptedBackend(bomber_script())
    r = await create_method("self_rag_segment", llm, retriever, cfg).answer(BOMBER_Q)
    assert r.answer == "English Electric Canberra"
    step = r.reasoning_chain[-1]
    assert step.action == "short_answer"
    # The passage the kept segment was written from leads the context; the other retrieved one follows.
    assert step.details["passages_in_context"] == ["canberra", "pacific"]
    prompt = llm.calls[-1].prompt_text()
    assert prompt.index('title="Canberra"') < prompt.index('title="South West Pacific"')
    assert "The English Electric Canberra was used there" not in prompt  # the passages, not the segment


async def test_the_short_answer_can_read_the_segments_alone():
    # The cheaper reading, over the segments alone: the benchmark models shortened names there.
    retriever = StaticRetriever(RetrievalResult(documents=BOMBER_DOCS, scores=(0.9, 0.8), query=BOMBER_Q))
    cfg = {"self_rag_segment": {"top_k": 2, "beam_width": 1, "weights": {"use_seq_score": False},
                                "short_answer_reads": "segments"}}
    llm = ScriptedBackend(bomber_script())
    r = await create_method("self_rag_segment", llm, retriever, cfg).answer(BOMBER_Q)
    assert r.answer == "Canberra"
    assert "<document" not in llm.calls[-1].prompt_text()


async def test_a_yes_no_question_gets_yes_or_no_over_the_passages(france_retriever):
    # With facts_first off, vanilla_rag's prompt over the passages; the sentence reply becomes "yes".
    llm = ScriptedBackend({**label_segment_script(),
                           "</document>\n\nQuestion: Is Paris": "Yes, it is."})
    france_retriever.result = RetrievalResult(documents=france_retriever.result.documents[:1], scores=(0.9,), query="q")
    cfg = {"self_rag_segment": {"top_k": 1, "facts_first": "off"}}
    r = await create_method("self_rag_segment", llm, france_retriever, cfg).answer("Is Paris the capital of France?")
    assert r.answer == "yes"
    assert "Reply with only yes or no." in llm.calls[-1].prompt_text()


async def test_a_yes_no_short_answer_is_written_after_the_facts(france_retriever):
    """By default (facts_first: yes_no, as self_rag's joint) the verdict is written over the passages
    after the facts it compares, not read off the segment."""
    llm = ScriptedBackend({**label_segment_script(),
                           "Do not answer at once": "- Paris: capital of France\n- Lyon: a city in France\nAnswer: no"})
    france_retriever.result = RetrievalResult(documents=france_retriever.result.documents[:1], scores=(0.9,), query="q")
    r = await create_method("self_rag_segment", llm, france_retriever, {"self_rag_segment": {"top_k": 1}}).answer(
        "Are Paris and Lyon both capitals?")
    assert r.answer == "no"
    step = r.reasoning_chain[-1]
    assert step.action == "generate_after_facts"
    assert step.details["facts"] == ["Paris: capital of France", "Lyon: a city in France"]
    assert step.details["passages_in_context"] == [france_retriever.result.documents[0].id]


async def test_a_bare_yes_no_verdict_falls_back_to_the_plain_prompt(france_retriever):
    # "Answer: no" with no facts before it compared nothing: the plain prompt answers instead.
    llm = ScriptedBackend({**label_segment_script(), "Do not answer at once": "Answer: no",
                           "Reply with only yes or no.": "Yes."})
    france_retriever.result = RetrievalResult(documents=france_retriever.result.documents[:1], scores=(0.9,), query="q")
    r = await create_method("self_rag_segment", llm, france_retriever, {"self_rag_segment": {"top_k": 1}}).answer(
        "Is Paris the capital of France?")
    assert r.answer == "yes"
    assert r.reasoning_chain[-1].action == "short_answer"


def test_evidence_is_the_segments_passages_then_every_retrieval_the_question_s_first():
    a, b, c, d = (Document(id=x, title=x.upper(), text=f"Passage {x}.") for x in "abcd")
    first = Candidate(text="Segment one.", passages=(a,))
    second = Candidate(text="Segment two.", passages=(b,))
    # Retrieved for the question: a, c; then for the question and segment one: b, d.
    beam = Beam(segments=(first, second), passages=(b, d), retrieved=(a, c, b, d))
    assert [doc.id for doc in evidence(beam)] == ["a", "b", "c", "d"]
    # A beam written without passages still reads what it retrieved before.
    assert [doc.id for doc in evidence(Beam(segments=(Candidate(text="x"),), retrieved=(c,)))] == ["c"]


# The question retrieves Doc A and Doc C; the question plus the first segment, Doc B and Doc D.
_FOUR = {x.lower(): Document(id=x.lower(), title=f"Doc {x}", text=f"Mars fact {x}.") for x in "ABCD"}


@pytest.mark.parametrize(("others", "context"), [(None, ["a", "b", "c", "d"]), ("path", ["a", "b", "c", "d"]),
                                               ("last", ["a", "b", "d"])])
async def test_the_short_answer_reads_every_retrieval_along_the_path_or_the_last(others, context):
    llm = ScriptedBackend(
        {
            "<paragraph>Doc A": segment("Fact A.", rel=1.0, sup="full", end="[Retrieval]"),
            "<paragraph>Doc C": segment("Fact C.", rel=0.2, sup="no", end="[Retrieval]"),
            "<paragraph>Doc B": segment("Fact B.", rel=1.0, sup="full"),
            "<paragraph>Doc D": segment("Fact D.", rel=0.2, sup="no"),
            HEAD: decision(yes=1.0),
            "</document>\n\nQuestion: Tell me": "Two facts.",
        },
        model="selfrag",
    )
    retriever = KeyedRetriever(_FOUR, {MARS: ["a", "c"], f"{MARS} Fact A.": ["b", "d"]})
    cfg = {"self_rag_segment": {"beam_width": 1, "max_segments": 2, "top_k": 2}}
    if others is not None:  # None: the default
        cfg["self_rag_segment"]["short_answer_passages"] = others
    r = await create_method("self_rag_segment", llm, retriever, cfg).answer(MARS)
    assert [q for q, _ in retriever.calls] == [MARS, f"{MARS} Fact A."]
    assert r.details["segments_text"] == "Fact A. Fact B." and r.answer == "Two facts."
    step = r.reasoning_chain[-1]
    # The segments' passages (A, then B) lead; then the question's own retrieval (C) and the last (D),
    # or the last retrieval alone.
    assert step.action == "short_answer" and step.details["passages_in_context"] == context
