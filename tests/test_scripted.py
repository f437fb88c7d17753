"""The scripted test backend: list mode, keyed mode, logprobs, errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from selfrag.errors import BackendError, ConfigError, DataError, ScriptExhaustedError
from selfrag.llm import ScriptedBackend, create_backend


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_list_mode_replays_in_order_and_records_calls():
    llm = ScriptedBackend(["yes", {"text": "Paris", "prompt_tokens": 0, "completion_tokens": 20, "cost_usd": 0.002}])
    first = await llm.generate(user("decide"))
    second = await llm.generate(user("answer"))
    assert (first.text, second.text) == ("yes", "Paris")
    assert second.total_tokens == 20 and second.cost_usd == pytest.approx(0.002)
    assert [c.messages[0].content for c in llm.calls] == ["decide", "answer"]
    assert llm.remaining == 0


async def test_list_mode_runs_out_with_a_clear_error():
    llm = ScriptedBackend(["only one"])
    await llm.generate(user("a"))
    with pytest.raises(ScriptExhaustedError, match="ran out of responses"):
        await llm.generate(user("b"))


async def test_keyed_mode_answers_by_first_key_in_prompt_order_independent():
    llm = ScriptedBackend({"Doc A": "from A", "Doc B": ["B one", "B two"], "decide": "yes"})
    results = await asyncio.gather(
        llm.generate(user("passage Doc B please")),
        llm.generate(user("passage Doc A please")),
        llm.generate(user("passage Doc B again")),
        llm.generate(user("Doc A and decide")),  # first key in script order wins
    )
    assert [g.text for g in results] == ["B one", "from A", "B two", "from A"]


async def test_keyed_mode_errors_when_nothing_matches_or_list_is_used_up():
    llm = ScriptedBackend({"alpha": ["x"]})
    await llm.generate(user("alpha"))
    with pytest.raises(ScriptExhaustedError, match="no responses left for key 'alpha'"):
        await llm.generate(user("alpha"))
    with pytest.raises(ScriptExhaustedError, match="no scripted key occurs"):
        await llm.generate(user("beta"))


async def test_top_logprobs_only_when_requested_and_supported():
    item = {"text": "yes", "top_logprobs": {"yes": -0.1, "no": -2.4}}
    llm = ScriptedBackend([item, item])
    plain = await llm.generate(user("q"))
    asked = await llm.generate(user("q"), top_logprobs=1)
    assert plain.logprobs is None
    assert asked.logprobs[0].token == "yes"
    assert asked.logprobs[0].top == {"yes": -0.1}  # cut to the k asked for
    no_lp = ScriptedBackend([item], supports_logprobs=False)
    assert (await no_lp.generate(user("q"), top_logprobs=5)).logprobs is None


async def test_error_items_raise_backend_errors_with_retryability():
    llm = ScriptedBackend([{"error": "overloaded", "status": 503}, {"error": "bad request", "status": 400}])
    with pytest.raises(BackendError) as first:
        await llm.generate_request(llm_request("x"))
    # 503 is retried by the base class; the 400 that follows is not retryable.
    assert "bad request" in str(first.value)
    assert len(llm.calls) == 2


def llm_request(text):
    from selfrag.llm import build_request

    return build_request(user(text))


def test_bad_script_items_are_rejected_with_the_reason():
    with pytest.raises(ConfigError, match="unknown key"):
        ScriptedBackend([{"txt": "typo"}])
    with pytest.raises(ConfigError, match="use a string or an object"):
        ScriptedBackend([42])


async def test_from_file_via_spec(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(["hello"]))
    llm = create_backend(f"scripted:{path}")
    assert (await llm.generate(user("hi"))).text == "hello"
    assert llm.spec.startswith("scripted:script.json#")


async def test_a_script_file_is_known_by_its_content_not_its_name(tmp_path):
    """Same basename in two folders, or the same file edited: different specs, so the cache never mixes them."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "replies.json").write_text(json.dumps(["from a"]))
    (tmp_path / "b" / "replies.json").write_text(json.dumps(["from b"]))
    a = create_backend(f"scripted:{tmp_path / 'a' / 'replies.json'}")
    b = create_backend(f"scripted:{tmp_path / 'b' / 'replies.json'}")
    assert a.spec != b.spec
    same = tmp_path / "c" / "replies.json"
    same.parent.mkdir()
    same.write_text(json.dumps(["from a"]))
    assert create_backend(f"scripted:{same}").spec == a.spec  # same content, same answers
    (tmp_path / "a" / "replies.json").write_text(json.dumps(["edited"]))
    assert create_backend(f"scripted:{tmp_path / 'a' / 'replies.json'}").spec != a.spec


def test_from_file_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        ScriptedBackend.from_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[1,\n")
    with pytest.raises(DataError, match="bad.json: line 2"):
        ScriptedBackend.from_file(bad)


async def test_a_respond_function_answers_each_call_from_its_request():
    def respond(request):
        if request.top_logprobs:
            return {"text": "yes", "top_logprobs": {"yes": -0.1, "no": -2.4}}
        return "Paris" if "capital" in request.prompt_text() else {"text": "no idea", "completion_tokens": 2}

    llm = ScriptedBackend(respond=respond)
    assert (await llm.generate(user("the capital of France?"))).text == "Paris"
    asked = await llm.generate(user("decide"), top_logprobs=2)
    assert asked.text == "yes" and asked.logprobs[0].top == {"yes": -0.1, "no": -2.4}
    other = await llm.generate(user("anything else"))
    assert (other.text, other.completion_tokens) == ("no idea", 2)
    assert len(llm.calls) == 3
    bad = ScriptedBackend(respond=lambda request: 42)
    with pytest.raises(ConfigError, match="from respond"):
        await bad.generate(user("q"))
    with pytest.raises(ConfigError, match="either a script or a respond function"):
        ScriptedBackend(["x"], respond=respond)
