"""The critic: choosing the critique source, reading probabilities, writing and critiquing candidates."""

from __future__ import annotations

import pytest

from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.core.trace import Run
from selfrag.methods.critique import Critic, CriticConfig, Task, choose_source, drafts
from selfrag.reflection.readings import first_sentence, normalised, rating, segment_score
from selfrag.reflection.score import Weights
from selfrag.types import Document, RetrievalResult
from tests.conftest import StaticRetriever
from tests.helpers.reflection import decision, lp, segment, word

DOC_A = Document(id="a", title="Doc A", text="Paris is the capital of France.")
DOC_B = Document(id="b", title="Doc B", text="France is in Europe.")
Q = "What is the capital of France?"


class FakeBackend:
    """Only the capabilities choose_source reads (the LLMBackend protocol's names)."""

    def __init__(self, *, logprobs=True, raw=True, model="m", vocab=None):
        self.supports_logprobs = logprobs
        self.supports_raw_prompt = raw
        self.model = model
        self.vocab = vocab
        self.decodes_serially = False

    def tokenize(self, text):
        # None: no tokenizer; else [Retrieval] as one token or as three.
        return None if self.vocab is None else [7] if self.vocab else [1, 2, 3]


def run_for(llm) -> Run:
    return Run(llm, None, {"max_tokens": 64, "temperature": 0.0})


# -- choosing the source ----------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "requested", "source", "fmt"),
    [
        (FakeBackend(), "auto", "label_probs", "instruction"),
        (FakeBackend(vocab=True), "auto", "reflection_tokens", "reflection_tokens"),
        (FakeBackend(vocab=False, model="selfrag_llama2_7b"), "auto", "label_probs", "instruction"),
        (FakeBackend(model="selfrag_llama2_7b"), "auto", "reflection_tokens", "reflection_tokens"),
        (FakeBackend(model="dmis-lab/selfbiorag_7b"), "auto", "reflection_tokens", "reflection_tokens"),
        (FakeBackend(raw=False, model="selfrag_llama2_7b"), "auto", "label_probs", "instruction"),
        (FakeBackend(logprobs=False), "auto", "text", "instruction"),
        (FakeBackend(logprobs=False), "label_probs", "text", "instruction"),
        (FakeBackend(logprobs=False, vocab=True), "auto", "text", "reflection_tokens"),
        (FakeBackend(), "reflection_tokens", "reflection_tokens", "reflection_tokens"),
        (FakeBackend(vocab=True), "text", "text", "reflection_tokens"),
        (FakeBackend(vocab=True), "label_probs", "label_probs", "instruction"),
    ],
)
def test_choose_source(backend, requested, source, fmt):
    choice = choose_source(backend, requested)
    assert (choice.source, choice.prompt_format) == (source, fmt)
    assert choice.reason


def test_a_backend_without_log_probs_falls_back_to_text_and_says_why():
    choice = choose_source(FakeBackend(logprobs=False), "label_probs")
    assert choice.source == "text"
    assert "no log-probabilities" in choice.reason


def test_reflection_tokens_need_plain_prompts():
    with pytest.raises(ConfigError, match="plain prompts"):
        choose_source(FakeBackend(raw=False), "reflection_tokens")


def test_critic_config_rejects_unknown_sources():
    with pytest.raises(ValueError):
        CriticConfig(source="vibes")


@pytest.mark.model
def test_embedded_model_has_no_reflection_tokens(embedded_llm):
    choice = choose_source(embedded_llm)
    assert (choice.source, choice.prompt_format) == ("label_probs", "instruction")
    assert "no reflection tokens" in choice.reason


# -- reading one critique --------------------------------------------------------------


async def test_label_probs_read_with_one_token_calls():
    llm = ScriptedBackend([word(Yes=0.5, yes=0.1, No=0.2, maybe=0.2)])
    run = run_for(llm)
    reading, step = await Critic(llm).retrieval(run, Task(Q))
    assert reading.source == "label_probs"
    assert reading.probs == pytest.approx({"yes": 0.6, "no": 0.2, "continue": 0.0})
    assert reading.value == pytest.approx(0.75)  # 0.6 / (0.6 + 0.2)
    call = llm.calls[0]
    assert (call.max_tokens, call.top_logprobs) == (1, 20)
    assert step.details["critique_source"] == "label_probs"
    assert step.details["logprobs"]["yes"] == pytest.approx(lp(0.6), abs=1e-4)
    assert step.details["logprobs"]["continue"] is None


async def test_text_source_counts_the_written_label_as_probability_one():
    llm = ScriptedBackend(["Yes, it does."], supports_logprobs=False)
    reading, step = await Critic(llm).retrieval(run_for(llm), Task(Q))
    assert reading.source == "text"
    assert reading.probs == {"yes": 1.0, "no": 0.0, "continue": 0.0}
    assert llm.calls[0].top_logprobs == 0 and llm.calls[0].max_tokens == 8
    assert step.details["critique_source"] == "text"


async def test_an_unreadable_text_label_has_no_mass():
    llm = ScriptedBackend(["I am not sure."], supports_logprobs=False)
    reading, step = await Critic(llm).retrieval(run_for(llm), Task(Q))
    assert normalised(reading) is None and reading.value is None
    assert step.details["probs"] == "none (no probability mass)"
    assert step.details["note"] == "no label in the text"


async def test_missing_log_probs_are_reported_not_hidden():
    # The backend claims log-probabilities but this response has none: the text label is used, visibly.
    llm = ScriptedBackend(["no"])
    reading, step = await Critic(llm).retrieval(run_for(llm), Task(Q))
    assert reading.source == "text"
    assert reading.probs["no"] == 1.0
    assert "no log-probabilities" in step.details["note"]


async def test_reflection_retrieval_reads_the_special_tokens():
    llm = ScriptedBackend([decision(yes=0.3, no=0.1)], model="selfrag_llama2_7b")
    reading, _ = await Critic(llm).retrieval(run_for(llm), Task(Q, answer_so_far="Paris is big. "))
    assert reading.value == pytest.approx(0.75)
    assert llm.calls[0].prompt == f"### Instruction:\n{Q}\n\n### Response:\nParis is big."


# -- candidates ------------------------------------------------------------------------


def label_script():
    return {
        "capital of France.\n</document>\n\nDoes the document": word(relevant=0.8, Ir=0.2),
        "Europe.\n</document>\n\nDoes the document": word(relevant=0.25, irrelevant=0.75),
        "capital of France.\n</document>\n\nAnswer the question": {"text": "Paris", "top_logprobs": [{"Paris": -0.1}]},
        "Europe.\n</document>\n\nAnswer the question": {"text": "Lyon", "top_logprobs": [{"Ly": -0.4}, {"on": -0.2}]},
        "Answer: Paris\n\nIs the answer": word(fully=0.6, Part=0.4),
        "Answer: Lyon\n\nIs the answer": word(no=0.9, partially=0.1),
        "Answer: Paris\n\nHow useful": word(**{"5": 0.5, "4": 0.5}),
        "Answer: Lyon\n\nHow useful": word(**{"1": 1.0}),
    }


async def test_instruction_drafts_budget_scores_and_grouped_trace():
    llm = ScriptedBackend(label_script())
    run = run_for(llm)
    out = await drafts(Critic(llm), run, Task(Q), [DOC_A, DOC_B])
    a, b = out
    assert (a.text, b.text) == ("Paris", "Lyon")
    assert a.value('relevance') == pytest.approx(0.8) and a.value('support') == pytest.approx(0.8)  # 0.6 + 0.5·0.4
    assert a.value('utility') == pytest.approx(0.75) and rating(a) == pytest.approx(4.5)
    assert a.seq == pytest.approx(0.904837, abs=1e-6)  # exp(-0.1)
    assert b.seq == pytest.approx(0.740818, abs=1e-6)  # exp(mean(-0.4, -0.2))
    assert b.label("support") == "no support" and b.value('utility') == -1.0
    # 4 calls per candidate; the trace groups each candidate's calls, in passage order.
    assert len(llm.calls) == 8
    assert [s.action for s in run.steps()] == [
        "critique_relevance", "generate_candidate", "critique_support", "critique_utility",
    ] * 2
    assert [s.details.get("passage") for s in run.steps() if s.action == "generate_candidate"] == ["a", "b"]
    # Critique reads are one-token calls; the candidate asks for its token log-probabilities.
    for call in llm.calls:
        text = call.prompt_text()
        if "Answer the question" in text:
            assert call.top_logprobs == 1 and call.max_tokens == 64
        else:
            assert (call.max_tokens, call.top_logprobs) == (1, 20)


async def test_prompts_put_the_question_before_the_passage_for_prefix_sharing():
    llm = ScriptedBackend(label_script())
    await drafts(Critic(llm), run_for(llm), Task(Q), [DOC_A, DOC_B])
    rel_prompts = [c.prompt_text() for c in llm.calls if "relevant or irrelevant" in c.prompt_text()]
    assert len(rel_prompts) == 2
    shared = 0
    while rel_prompts[0][shared] == rel_prompts[1][shared]:
        shared += 1
    assert Q in rel_prompts[0][:shared]  # system message and question are a shared prefix
    for prompt in (c.prompt_text() for c in llm.calls):
        if DOC_A.text in prompt:
            assert prompt.index(Q) < prompt.index(DOC_A.text)


async def test_reflection_drafts_one_call_per_passage():
    llm = ScriptedBackend(
        {
            "<paragraph>Doc A": segment("Paris", rel=0.9, sup="full", util=5, end="</s>"),
            "<paragraph>Doc B": segment("Lyon", rel=0.2, sup="no", util=1),
        },
        model="selfrag_llama2_7b",
    )
    run = run_for(llm)
    a, b = await drafts(Critic(llm, answer_tokens=32), run, Task(Q), [DOC_A, DOC_B])
    assert len(llm.calls) == 2
    assert llm.calls[0].prompt == (
        f"### Instruction:\n{Q}\n\n### Response:\n[Retrieval]<paragraph>Doc A\n{DOC_A.text}</paragraph>"
    )
    assert (llm.calls[0].max_tokens, llm.calls[0].top_logprobs) == (32, 20)
    assert (a.value('relevance'), a.value('support'), a.value('utility')) == (pytest.approx(0.9), 1.0, 1.0)
    assert (b.value('relevance'), b.value('support'), b.value('utility')) == (pytest.approx(0.2), 0.0, -1.0)
    # seq over [Relevant], text, support, utility: exp(mean(log 0.9, 0, 0, 0))
    assert a.seq == pytest.approx(0.9 ** 0.25)
    assert a.final and b.final
    step = run.steps()[0]
    assert step.details["critique_source"] == "reflection_tokens"
    assert step.details["relevance"] == {"relevant": 0.9, "irrelevant": 0.1}


async def test_reflection_draft_without_a_support_token_is_missing_not_minus_100():
    llm = ScriptedBackend({"<paragraph>": segment("Paris", rel=0.9)}, model="selfrag")
    run = run_for(llm)
    [draft] = await drafts(Critic(llm), run, Task(Q), [DOC_A])
    assert draft.value('support') is None and draft.value('utility') is None
    breakdown = segment_score(draft, Weights())
    assert breakdown.missing == ("sup", "use")
    assert run.steps()[0].details["support"] == "none (no probability mass)"


async def test_reflection_text_only_backend_parses_tokens_from_text():
    llm = ScriptedBackend(
        {"<paragraph>": "[Relevant]Paris[Partially supported][Utility:4]"},
        model="selfrag_llama2_7b", supports_logprobs=False,
    )
    run = run_for(llm)
    [draft] = await drafts(Critic(llm), run, Task(Q), [DOC_A])
    assert draft.text == "Paris"
    assert (draft.value('relevance'), draft.value('support'), draft.value('utility')) == (1.0, 0.5, 0.5)
    assert draft.verdicts["support"].source == "text"
    assert llm.calls[0].top_logprobs == 0
    assert run.steps()[0].details["critique_source"] == "text"


async def test_segment_drafts_cut_to_one_sentence_and_ask_if_final():
    llm = ScriptedBackend(
        {
            "Does the document": word(relevant=1.0),
            "Write the next sentence": {
                "text": "Mars has two moons. They are small.",
                "top_logprobs": [{"Mars": -0.2}, {" has two moons.": -0.4}, {" They are small.": -3.0}],
            },
            "Is the answer supported": word(fully=1.0),
            "How useful": word(**{"4": 1.0}),
            "already answer the question completely": word(yes=0.3, no=0.7),
        }
    )
    run = run_for(llm)
    [draft] = await drafts(Critic(llm, segment_tokens=20), run, Task(Q, answer_so_far="Mars is red.", segment=True), [DOC_A])
    assert draft.text == "Mars has two moons."
    assert draft.seq == pytest.approx(2.718281828 ** -0.3)  # the two tokens kept, not the third
    assert draft.final is False  # P(yes) = 0.3
    gen = next(c for c in llm.calls if "Write the next sentence" in c.prompt_text())
    assert gen.stop == ("\n",) and gen.max_tokens == 20
    final_call = next(c for c in llm.calls if "completely" in c.prompt_text())
    assert "Answer: Mars is red. Mars has two moons." in final_call.prompt_text()


async def test_known_relevance_is_not_asked_again():
    llm = ScriptedBackend(label_script())
    first = await drafts(Critic(llm), run_for(llm), Task(Q), [DOC_A])
    before = len(llm.calls)
    await drafts(Critic(llm), run_for(llm), Task(Q), [DOC_A], known=[first[0].verdicts["relevance"]])
    assert len(llm.calls) - before == 3  # generate, support, utility


def test_first_sentence():
    assert first_sentence("  Mars is red. It is cold.") == "Mars is red."
    assert first_sentence("Version 2.5 is out! Yes.") == "Version 2.5 is out!"
    assert first_sentence("no end here") == "no end here"


# -- call schedule ---------------------------------------------------------------------


def test_schedule_auto_is_sequential_for_a_backend_that_decodes_serially():
    serial = FakeBackend()
    serial.decodes_serially = True
    assert Critic(serial).sequential and Critic(serial).describe()["schedule"] == "sequential"
    assert not Critic(FakeBackend()).sequential
    assert Critic(FakeBackend(), CriticConfig(schedule="sequential")).sequential


async def test_sequential_schedule_keeps_each_candidates_calls_together_sharing_the_passage_prefix():
    llm = ScriptedBackend(label_script())
    run = run_for(llm)
    await drafts(Critic(llm, CriticConfig(schedule="sequential")), run, Task(Q), [DOC_A, DOC_B])
    texts = [c.prompt_text() for c in llm.calls]
    kinds = ["relevant or irrelevant", "Answer the question", "fully, partially or no", "1, 2, 3, 4 or 5"]
    assert [next(k for k in kinds if k in t) for t in texts] == kinds * 2
    # relevance -> candidate -> support of one passage share everything up to the end of the passage.
    for a, b in ((texts[0], texts[1]), (texts[1], texts[2])):
        end = a.index("</document>") + len("</document>")
        assert a[:end] == b[:end] and DOC_A.text in a[:end]
    # The trace is the same whatever the schedule.
    assert [s.action for s in run.steps()] == [
        "critique_relevance", "generate_candidate", "critique_support", "critique_utility",
    ] * 2


# -- a critique asked twice for one question -------------------------------------------


async def test_a_critique_asked_again_reuses_its_reading_without_a_call():
    llm = ScriptedBackend([word(yes=0.8, no=0.2), word(yes=0.1, no=0.9)])
    critic = Critic(llm)
    run = run_for(llm)
    first, _ = await critic.retrieval(run, Task(Q))
    again, step = await critic.retrieval(run, Task(Q))
    assert len(llm.calls) == 1  # the second script entry is left: the same prompt was not sent again
    assert again.probs == first.probs and again.value == pytest.approx(0.8)
    frozen = run.steps()
    assert [s.llm_calls for s in frozen] == [1, 0]
    assert frozen[1].action == "critique_retrieval" and frozen[1].details["reused"] is True
    assert "reading reused (no call)" in frozen[1].observation
    # Another prompt is asked.
    other, _ = await critic.retrieval(run, Task(Q, answer_so_far="Paris.", segment=True))
    assert len(llm.calls) == 2 and other.value == pytest.approx(0.1)


async def test_concurrent_asks_of_one_critique_share_one_call():
    from selfrag.llm import DelayedBackend

    llm = DelayedBackend(ScriptedBackend([word(yes=0.8, no=0.2)]), 0.05)
    critic = Critic(llm, CriticConfig(schedule="concurrent"))
    runs = [run_for(llm) for _ in range(3)]
    readings = await critic.gather([critic.retrieval(r, Task(Q)) for r in runs])
    assert len({id(reading) for reading, _ in readings}) == 1
    assert sum(s.llm_calls for r in runs for s in r.steps()) == 1


async def test_a_failed_critique_is_asked_again():
    llm = ScriptedBackend([{"error": "boom", "status": 400}, word(yes=0.8, no=0.2)])
    critic = Critic(llm)
    with pytest.raises(Exception, match="boom"):
        await critic.retrieval(run_for(llm), Task(Q))
    reading, _ = await critic.retrieval(run_for(llm), Task(Q))
    assert len(llm.calls) == 2 and reading.value == pytest.approx(0.8)


async def test_the_segment_loop_asks_a_passages_relevance_once_per_question():
    # Two segments over the same passage: its relevance and the unchanged support of an
    # identical sentence are read once; everything that depends on the answer so far is asked again.
    script = {
        "(nothing yet)\n\nWhat does the next": word(yes=0.8, no=0.2),
        "Answer so far: Paris is the capital of France.\n\nWhat does the next": word(yes=0.8, no=0.2),
        "capital of France.\n</document>\n\nDoes the document": word(relevant=1.0),
        "capital of France.\n</document>\n\nAnswer so far": {
            "text": "Paris is the capital of France.", "top_logprobs": [{"Paris": -0.1}],
        },
        "Is the answer supported": word(fully=1.0),
        "How useful": word(**{"5": 1.0}),
        "Does the answer above": word(no=1.0),
    }
    llm = ScriptedBackend(script)
    retriever_docs = RetrievalResult(documents=(DOC_A,), scores=(0.9,), query=Q)
    method = create_method(
        "self_rag_segment", llm, StaticRetriever(retriever_docs),
        {"self_rag_segment": {"top_k": 1, "beam_width": 1, "max_segments": 2, "short_answer": False}},
    )
    r = await method.answer(Q)
    relevance = [s for s in r.reasoning_chain if s.action == "critique_relevance"]
    assert [s.llm_calls for s in relevance] == [1, 0]
    assert relevance[1].details["reused"] is True
    asked = [c.prompt_text() for c in llm.calls]
    assert sum("Does the document" in t for t in asked) == 1
    assert sum("Answer so far" in t and "What does the next" in t for t in asked) == 2
