"""self_corrective's judge read from label probabilities (``self_corrective.judge: label_probs``).

Issue 16: both benchmark models write NO to nearly every search (the 1.5B model to all
of its first 100 HotpotQA searches), so the written verdict cannot tell a search that
holds the evidence from one that does not. These tests pin the probability reading, its
threshold, and every fallback to the written verdict.
"""

from __future__ import annotations

import math

import pytest

from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.types import Document
from tests.conftest import KeyedRetriever

QUESTION = "When was Pluto reclassified as a dwarf planet?"
DOCS = {
    "pluto": Document(id="pluto", title="Pluto", text="Pluto was discovered in 1930 by Clyde Tombaugh."),
    "iau": Document(id="iau", title="IAU 2006", text="In 2006 the IAU reclassified Pluto as a dwarf planet."),
}
TABLE = {QUESTION: ["pluto"], "IAU 2006 Pluto": ["iau"]}
# The model's habit: it writes NO and a reason, whatever the documents hold.
WRITTEN_NO = "NO. The documents do not give the year of the reclassification."


def first_token(**probs: float) -> dict[str, float]:
    return {token.replace("_", " "): math.log(p) for token, p in probs.items()}


def make(script, supports_logprobs=True, **config):
    llm = ScriptedBackend(script, supports_logprobs=supports_logprobs)
    cfg = {"judge": "label_probs", "judge_threshold": 0.3, **config}
    return create_method("self_corrective", llm, KeyedRetriever(DOCS, TABLE), {"self_corrective": cfg}), llm


def actions(response) -> list[str]:
    return [s.action for s in response.reasoning_chain]


async def test_a_written_no_is_accepted_when_p_yes_reaches_the_threshold():
    # P(YES) = (0.30 + 0.05) / (0.30 + 0.05 + 0.55) = 0.389 >= 0.3: accepted, though the reply says NO.
    reflect = {"text": WRITTEN_NO, "top_logprobs": first_token(NO=0.55, YES=0.30, _Yes=0.05, The=0.10)}
    method, llm = make([reflect, "2006"])
    r = await method.answer(QUESTION)
    assert r.answer == "2006" and actions(r) == ["retrieve", "reflect", "generate"]
    assert llm.calls[0].top_logprobs == 20  # the judge's call asks for the first token's alternatives
    step = r.reasoning_chain[1]
    assert step.details["p_yes"] == pytest.approx(0.3889, abs=1e-4)
    assert step.details["label_mass"] == pytest.approx(0.9, abs=1e-4)
    assert (step.details["decision"], step.details["written"], step.details["parsed_from"]) == ("YES", "NO", "label_probs")
    assert step.observation.startswith("YES (P(YES) 0.389 vs threshold 0.3; wrote NO)")
    assert r.details["stopped"] == "accepted"


async def test_below_the_threshold_the_search_is_rewritten_from_the_written_reason():
    low = {"text": WRITTEN_NO, "top_logprobs": first_token(NO=0.8, YES=0.2)}
    high = {"text": "NO. Still not sure.", "top_logprobs": first_token(NO=0.4, YES=0.6)}
    method, llm = make([low, "IAU 2006 Pluto", high, "2006"])
    r = await method.answer(QUESTION)
    assert actions(r) == ["retrieve", "reflect", "reformulate", "retrieve", "reflect", "generate"]
    assert r.reasoning_chain[1].details["decision"] == "NO"
    assert r.reasoning_chain[1].details["p_yes"] == pytest.approx(0.2)
    # the rewrite is asked with the reason the judge wrote
    assert "do not give the year of the reclassification" in llm.calls[1].messages[-1].content
    assert r.reasoning_chain[4].details["decision"] == "YES" and r.answer == "2006"


async def test_the_threshold_is_inclusive_and_configurable():
    reflect = {"text": WRITTEN_NO, "top_logprobs": first_token(NO=0.5, YES=0.5)}
    method, _ = make([reflect, "2006"], judge_threshold=0.5)
    assert (await method.answer(QUESTION)).details["stopped"] == "accepted"
    method, _ = make([reflect, "IAU 2006 Pluto", {"text": "NO", "top_logprobs": first_token(NO=0.9, YES=0.1)}, "x"],
                     judge_threshold=0.51, max_iterations=2)
    assert (await method.answer(QUESTION)).details["stopped"] == "exhausted"


async def test_the_written_verdict_is_used_when_the_first_token_is_not_a_verdict():
    # "The" holds 0.9 of the first token; YES/NO only 0.1 (< 0.2): the written YES decides.
    reflect = {"text": "YES, the IAU document gives it.", "top_logprobs": first_token(The=0.9, YES=0.05, NO=0.05)}
    method, _ = make([reflect, "2006"])
    r = await method.answer(QUESTION)
    step = r.reasoning_chain[1]
    assert step.details["decision"] == "YES" and step.details["parsed_from"] == "leading"
    assert "the written verdict is used" in step.details["judge_note"]
    assert "written" not in step.details  # no probability verdict was made


async def test_a_backend_without_log_probabilities_reads_the_written_verdict():
    method, llm = make([WRITTEN_NO, "IAU 2006 Pluto", "YES, it does.", "2006"], supports_logprobs=False)
    r = await method.answer(QUESTION)
    assert llm.calls[0].top_logprobs == 0
    assert r.reasoning_chain[1].details["decision"] == "NO"
    assert "no log-probabilities" in r.reasoning_chain[1].details["judge_note"]
    assert r.answer == "2006"


async def test_the_default_judge_reads_the_written_verdict_and_asks_for_no_probabilities():
    llm = ScriptedBackend([{"text": "YES, it does.", "top_logprobs": first_token(NO=0.9, YES=0.1)}, "2006"])
    r = await create_method("self_corrective", llm, KeyedRetriever(DOCS, TABLE)).answer(QUESTION)
    assert llm.calls[0].top_logprobs == 0
    assert r.details["stopped"] == "accepted" and "p_yes" not in r.reasoning_chain[1].details


@pytest.mark.parametrize("config, word", [({"judge": "maybe"}, "judge"), ({"judge_threshold": 1.5}, "judge_threshold")])
def test_bad_judge_settings_are_named(config, word):
    with pytest.raises(ConfigError, match=word):
        create_method("self_corrective", ScriptedBackend([]), KeyedRetriever(DOCS, TABLE), {"self_corrective": config})


async def test_the_judge_step_says_what_it_asks_with_and_without_an_iteration_prefix():
    from selfrag.methods.core.trace import Run
    from selfrag.methods.critique.corrective_judge import judge_documents
    from selfrag.types import Question

    llm = ScriptedBackend(["YES. It does.", "YES. It does."])
    docs = list(DOCS.values())
    bare, _ = await judge_documents(Run(llm, None, {}), Question(id="q", text=QUESTION), docs,
                                    max_context_tokens=500, max_tokens=32)
    assert bare.thought == "Can the 2 retrieved document(s) answer the question completely?"
    prefixed, _ = await judge_documents(Run(llm, None, {}), Question(id="q", text=QUESTION), docs,
                                        max_context_tokens=500, max_tokens=32, thought_prefix="Iteration 2: ")
    assert prefixed.thought == "Iteration 2: can the 2 retrieved document(s) answer the question completely?"
