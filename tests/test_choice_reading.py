"""Choice answers read from calibrated label probabilities (``answer_reading: calibrated``).

Issue 16: the benchmark models' label bias decided the closed-form sets (the 0.5B model
answered "A" to 43 of 50 MMLU-evidence questions, "yes" to 15 of 17 HotpotQA yes/no
questions). These tests pin the reading, the calibration arithmetic (hand-computed) and
every fallback to the written answer.
"""

from __future__ import annotations

import math

import pytest

from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.steps.choice_reading import calibrate, label_probs
from selfrag.types import Document, Question, RetrievalResult

MMLU = Question(id="m", text="Which organ makes insulin?\n\nA. liver\nB. pancreas\nC. heart\nD. lung",
                choices=("liver", "pancreas", "heart", "lung"))
YES_NO = Question(id="y", text="Were Scott Derrickson and Ed Wood of the same nationality?")
CALIBRATED_VANILLA = {"vanilla": {"answer_reading": "calibrated"}}


def logs(**probs: float) -> dict[str, float]:
    return {token.replace("_", " "): math.log(p) for token, p in probs.items()}


def test_every_surface_form_of_a_label_counts():
    top = {"Yes": math.log(0.5), " yes": math.log(0.2), "no": math.log(0.1), "The": math.log(0.2)}
    got = label_probs(top, ("yes", "no"))
    assert got == pytest.approx({"yes": 0.7, "no": 0.1})
    got = label_probs({" A.": math.log(0.4), "b": math.log(0.3), "**": math.log(0.3)}, ("A", "B", "C"))
    assert got == pytest.approx({"A": 0.4, "B": 0.3, "C": 0.0})
    # a token of three or more letters that begins exactly one label counts for it
    assert label_probs({"may": math.log(0.5), "n": math.log(0.5)}, ("yes", "no", "maybe")) == pytest.approx(
        {"yes": 0.0, "no": 0.0, "maybe": 0.5})


def test_calibration_divides_out_the_content_free_prior():
    # By hand: 0.8 / 0.9 = 0.889 and 0.2 / 0.1 = 2.0; normalised 0.308 and 0.692.
    got = calibrate({"yes": 0.8, "no": 0.2}, {"yes": 0.9, "no": 0.1})
    assert got == pytest.approx({"yes": 0.3077, "no": 0.6923}, abs=1e-4)
    # A label the template never writes is floored at 0.02, not divided by almost nothing.
    got = calibrate({"yes": 0.9, "no": 0.1}, {"yes": 1.0, "no": 0.0})
    assert got == pytest.approx({"yes": 0.9 / (0.9 + 5.0), "no": 5.0 / (0.9 + 5.0)})
    assert calibrate({"yes": 0.6, "no": 0.4}, None) == {"yes": 0.6, "no": 0.4}


def mmlu_script(real: dict[str, float], free: dict[str, float], text: str = "A") -> dict:
    return {
        "Question: N/A": {"text": "A", "top_logprobs": free},
        "Question: [MASK]": {"text": "A", "top_logprobs": free},
        "Question: Which organ": {"text": text, "top_logprobs": real},
        "Question: ": {"text": "A", "top_logprobs": free},  # the empty content-free prompt
    }


async def test_vanilla_reads_the_option_the_passages_favour_beyond_the_prompt_bias(france_retriever):
    # Raw: A 0.6 > B 0.3. Content-free: A 0.9, B 0.05, C 0.03, D 0.02 (normalised over the labels).
    # Calibrated: A 0.667, B 6.0, C 1.667 (0.05 / 0.03), D 1.25 (0.05 / 0.02 floored): B.
    llm = ScriptedBackend(mmlu_script(logs(A=0.6, B=0.3, C=0.05, D=0.05), logs(A=0.9, B=0.05, C=0.03, D=0.02)))
    method = create_method("vanilla_rag", llm, france_retriever, CALIBRATED_VANILLA)
    r = await method.answer(MMLU)
    assert r.answer == "B"
    assert [s.action for s in r.reasoning_chain] == ["retrieve", "read_choice"] + ["calibrate_choice"] * 3
    read = r.reasoning_chain[1]
    assert read.details["label_probs"]["A"] == pytest.approx(0.6) and read.details["final"] == "B"
    assert read.details["prior"]["A"] == pytest.approx(0.9)
    assert all(c.max_tokens == 1 and c.top_logprobs == 20 for c in llm.calls)
    assert [d.id for d in r.read] == ["1", "2", "3"]
    assert [d.id for d in r.citations] == ["1"]  # no passage holds "pancreas": the first one read is cited
    # The prior is measured once per prompt shape: the next question costs one call.
    again = await method.answer(MMLU)
    assert again.answer == "B" and again.num_llm_calls == 1


async def test_uncalibrated_text_reading_is_the_default(france_retriever):
    llm = ScriptedBackend(mmlu_script(logs(A=0.6, B=0.3, C=0.05, D=0.05), logs(A=0.9, B=0.05, C=0.03, D=0.02)))
    r = await create_method("vanilla_rag", llm, france_retriever, {}).answer(MMLU)
    assert r.answer == "A" and [s.action for s in r.reasoning_chain] == ["retrieve", "generate"]


@pytest.mark.parametrize("question", [MMLU, Question(id="f", text="What is the capital of France?")])
async def test_without_probabilities_or_a_choice_the_written_answer_is_read(france_retriever, question):
    llm = ScriptedBackend(["B"], supports_logprobs=False)
    r = await create_method("vanilla_rag", llm, france_retriever, CALIBRATED_VANILLA).answer(question)
    assert r.answer == "B" and r.num_llm_calls == 1 and r.reasoning_chain[-1].action == "generate"


async def test_a_first_token_that_is_not_a_label_falls_back_to_the_text(france_retriever):
    # The labels hold 0.1 of the first token (< 0.2): the model meant to write something else.
    llm = ScriptedBackend([{"text": "The", "top_logprobs": logs(The=0.9, B=0.1)}, "B"])
    r = await create_method("vanilla_rag", llm, france_retriever, CALIBRATED_VANILLA).answer(MMLU)
    assert r.answer == "B" and [s.action for s in r.reasoning_chain] == ["retrieve", "read_choice", "generate"]
    assert r.reasoning_chain[1].details["final"] is None and "0.10" in r.reasoning_chain[1].observation


DOCS = (
    Document(id="1", title="Scott Derrickson", text="Scott Derrickson is an American director."),
    Document(id="2", title="Ed Wood", text="Ed Wood was a Canadian filmmaker."),
)


@pytest.fixture
def retriever(static_retriever_factory):
    return static_retriever_factory(
        RetrievalResult(documents=DOCS, scores=(2.0, 1.0), query="q", retrieval_time_ms=0.0, method="bm25"))


def critiques(answer: str) -> dict[str, str]:
    """Replies to the one-passage candidates' calls and the joint's support and utility calls."""
    return {
        "Judge whether the documents support": "fully supported",
        "Answer: ": "5",
        "[IsRel]": f"{answer}\n[IsRel] relevant\n[IsSup] fully supported",
    }


async def test_self_corrective_reads_its_option_answer_from_calibrated_probabilities(france_retriever):
    # The accepted search's answer is read from the calibrated option probabilities: B, not the biased A.
    llm = ScriptedBackend({
        "Can the documents above answer the question completely?": "YES. The documents name the organ.",
        **mmlu_script(logs(A=0.6, B=0.3, C=0.05, D=0.05), logs(A=0.9, B=0.05, C=0.03, D=0.02)),
    })
    cfg = {"self_corrective": {"answer_reading": "calibrated"}}
    r = await create_method("self_corrective", llm, france_retriever, cfg).answer(MMLU)
    assert r.answer == "B" and r.details["stopped"] == "accepted"
    assert [s.action for s in r.reasoning_chain][:3] == ["retrieve", "reflect", "read_choice"]
    # The default reads the written letter.
    r = await create_method("self_corrective", llm, france_retriever, {}).answer(MMLU)
    assert r.answer == "A"
