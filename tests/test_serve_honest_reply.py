"""The OpenAI-compatible reply says what `selfrag ask` says: the `[n]` markers, the note that no
document was used, the low-confidence note, line for line, through a real `selfrag serve` process
and the official `openai` client; `"selfrag": {"plain": true}` (or `--plain-replies`) gives the bare
answer, and the citations are structured beside the text."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .test_serve_cli import REPO, ServeProcess

openai = pytest.importorskip("openai", reason="the openai client is in the `dev` extra")
pytestmark = pytest.mark.server

DOCS = [
    {"id": "espresso", "title": "espresso.md § Temperature", "text": "Brew espresso at 93 degrees."},
    {"id": "milk", "title": "milk.md § Milk", "text": "Steam milk to 60 degrees."},
]
# self_rag over two notes; its P(True) reading says its answer is probably false (a low confidence).
SCRIPT = {
    "Is your answer above correct": {"text": "False", "top_logprobs": {"True": -2.3, "False": -0.1}},
    "Brew espresso at 93 degrees.\n</document>": "93 degrees\n[IsRel] relevant",
    "Steam milk": "60 degrees\n[IsRel] irrelevant\n[IsSup] no support",
    "Answer: 93 degrees": "5",
    "Answer: 60 degrees": "2",
    "7 plus 6": "13",
}
GROUNDED = "At what temperature do I brew espresso?"
WITHOUT_DOCUMENTS = "What is 7 plus 6?"


def _options(tmp_path) -> list[str]:
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    return ["--docs", str(tmp_path / "docs.jsonl"), "--llm", f"scripted:{tmp_path / 'script.json'}", "--top-k", "2",
            "--set", "self_rag.num_candidates=2", "--set", "self_rag.joint_passages=0",
            "--set", "self_rag.confidence=p_true", "--set", "self_rag.critic=prompted"]


def _ask_prints(tmp_path, question: str, *, stream: bool, method: str = "self_rag") -> str:
    """What `selfrag ask` prints for the answer: its stdout up to the first blank line."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SELFRAG_PROGRESS": "0", "SELFRAG_STREAM": "1" if stream else "0"}
    out = subprocess.run([sys.executable, "-m", "selfrag", "ask", question, *_options(tmp_path), "--method", method],
                         capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    return out.split("\n\n", 1)[0]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("honest")
    server = ServeProcess(tmp_path / "serve.log", *_options(tmp_path))
    try:
        yield tmp_path, openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)
    finally:
        server.close()
    assert "Traceback" not in server.log.read_text()


def _ask(client, question: str, model: str = "self_rag", **kwargs):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}], **kwargs)


@pytest.mark.parametrize("question", [GROUNDED, WITHOUT_DOCUMENTS])
def test_the_reply_is_what_ask_prints(served, question):
    tmp_path, client = served
    reply = _ask(client, question)
    assert reply.choices[0].message.content == _ask_prints(tmp_path, question, stream=False)


def test_markers_and_the_low_confidence_note_are_in_the_content(served):
    _, client = served
    message = _ask(client, GROUNDED).choices[0].message
    assert message.content == ("93 degrees [1]\n"
                               "(low confidence: the passages may not support this answer; confidence 0.10)")
    # The structured citations, numbered as the markers are.
    assert message.model_extra["citations"] == [{"n": 1, "id": "espresso", "title": "espresso.md § Temperature"}]


def test_an_answer_without_documents_says_so_first(served):
    _, client = served
    content = _ask(client, WITHOUT_DOCUMENTS).choices[0].message.content
    assert content.splitlines()[0].startswith("(answered without your documents: none of the documents")
    assert content.splitlines()[-1] == "13"


@pytest.mark.parametrize(("model", "question"), [("self_rag", GROUNDED), ("self_rag", WITHOUT_DOCUMENTS),
                                               ("vanilla_rag", GROUNDED)])
def test_a_stream_adds_up_to_what_ask_prints_while_streaming(served, model, question):
    tmp_path, client = served
    chunks = list(_ask(client, question, model, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == _ask_prints(tmp_path, question, stream=True, method=model)
    if model == "vanilla_rag":  # its answer streams as it is written; the markers follow on a line of their own
        assert text == "93 degrees\n[1]" and len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    last = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1]
    assert [c["id"] for c in last.model_extra["citations"]] == (["espresso"] if question == GROUNDED else [])


def test_plain_asks_for_the_bare_answer(served):
    _, client = served
    plain = {"selfrag": {"plain": True}}
    assert _ask(client, GROUNDED, extra_body=plain).choices[0].message.content == "93 degrees"
    assert _ask(client, WITHOUT_DOCUMENTS, extra_body=plain).choices[0].message.content == "13"
    streamed = "".join(c.choices[0].delta.content or "" for c in _ask(client, GROUNDED, stream=True, extra_body=plain)
                       if c.choices)
    assert streamed == "93 degrees"
    with pytest.raises(openai.BadRequestError, match="plain"):
        _ask(client, GROUNDED, extra_body={"selfrag": {"plain": "yes"}})


def test_plain_replies_is_a_server_flag_too(tmp_path):
    server = ServeProcess(tmp_path / "serve.log", *_options(tmp_path), "--plain-replies")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        assert _ask(client, GROUNDED).choices[0].message.content == "93 degrees"
        # A request may still ask for the notes.
        notes = _ask(client, GROUNDED, extra_body={"selfrag": {"plain": False}}).choices[0].message.content
        assert notes.startswith("93 degrees [1]\n(low confidence")
    finally:
        server.close()
