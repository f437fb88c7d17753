"""The answer's tokens streamed while they are written (serve and ask), stage progress and call logs,
and follow-up questions read with the earlier turns (chat and multi-turn serve)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from selfrag.cli.main import main
from selfrag.llm import streaming
from selfrag.llm.base import BaseBackend, LLMRequest
from selfrag.llm.scripted import ScriptedBackend
from selfrag.serve.background import BackgroundServer
from selfrag.types import Generation

from .test_serve_api import events
from .test_serve_kit import QUESTION, client, make_answerer, make_app

REPO = Path(__file__).resolve().parents[1]
WORDS = ["The", " capital", " of", " France", " is", " Paris."]


class Dripping(BaseBackend):
    """Writes "The capital of France is Paris." a word every ``pause`` seconds, streaming each as a
    decoding model does; any other call (a decision, a critique) is answered at once."""

    provider = "dripping"
    supports_logprobs = False

    def __init__(self, pause: float = 0.3) -> None:
        super().__init__("dripping")
        self.pause = pause

    async def _generate(self, request: LLMRequest) -> Generation:
        sink = streaming.token_sink()
        for word in WORDS:
            await asyncio.sleep(self.pause)
            if sink is not None:
                sink(word)
        return Generation(text="".join(WORDS), prompt_tokens=20, completion_tokens=len(WORDS))


def test_the_stream_is_shaped_as_the_answer_reads():
    out: list[str] = []
    with streaming.listening(out.append), streaming.answer_call():
        sink = streaming.token_sink()
        for piece in ("Answer", ": Pa", "ris", "\n[IsRel] rel", "evant"):
            sink(piece)
        streaming.finish("Answer: Paris\n[IsRel] relevant")
    assert "".join(out) == "Paris"
    out.clear()
    with streaming.listening(out.append), streaming.answer_call():  # a backend that does not stream
        streaming.finish("Paris, on the Seine")
    assert out == ["Paris, on the Seine"]
    with streaming.answer_call():  # nobody listens: nothing to send
        assert streaming.token_sink() is None


@pytest.mark.server
def test_serve_streams_tokens_before_the_answer_is_done():
    app = make_app(make_answerer(Dripping(), method="vanilla_rag"))
    body = {"model": "vanilla_rag", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    with BackgroundServer(app) as server:
        start = time.perf_counter()
        arrivals: list[tuple[float, dict]] = []
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    arrivals.append((time.perf_counter() - start, json.loads(line[6:])))
    content = [(t, c["choices"][0]["delta"].get("content")) for t, c in arrivals if c["choices"]]
    pieces = [(t, text) for t, text in content if text]
    # The answer as written, then its citation marker on a line of its own (as `selfrag ask` prints it).
    assert "".join(text for _, text in pieces) == "The capital of France is Paris.\n[1]"
    first, done = pieces[0][0], arrivals[-1][0]
    # Six words 0.3 s apart: the first arrives more than a second before the answer is complete.
    assert done - first > 1.0 and len(pieces) >= 3
    assert arrivals[-1][1]["selfrag"]["answer"] == "The capital of France is Paris."


def test_the_ask_stream_sends_token_events_then_the_result():
    with client(make_app(make_answerer(Dripping(pause=0.0), method="vanilla_rag"))) as c:
        r = c.post("/v1/ask", json={"question": QUESTION, "stream": True})
    got = events(r.text)
    names = [n for n, _ in got]
    assert names[0] == "start" and names[-1] == "result" and names.index("token") < names.index("result")
    assert "".join(d["text"] for n, d in got if n == "token") == "The capital of France is Paris."


def test_ask_streams_the_answer_to_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SELFRAG_STREAM", "1")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "paris.txt").write_text("Paris is the capital of France.")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"capital": "Answer: Paris is the capital.\n\nIt is."}))
    assert main(["ask", QUESTION, "--docs", str(tmp_path / "docs"), "--method", "vanilla_rag",
                 "--set", "vanilla.confidence=off", "--llm", f"scripted:{script}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["Paris is the capital.", "[1]"]


def test_progress_lines_come_at_once_and_v_logs_each_call(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "paris.txt").write_text("Paris is the capital of France.")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"capital": "Paris"}))
    env = {**os.environ, "SELFRAG_PROGRESS": "1", "PYTHONPATH": str(REPO / "src")}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "selfrag", "-v", "ask", QUESTION, "--docs", str(tmp_path / "docs"),
         "--method", "vanilla_rag", "--set", "vanilla.confidence=off", "--llm", f"scripted:{script}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    first = proc.stderr.readline()
    waited = time.perf_counter() - start
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert first.startswith("selfrag: starting") and waited < 1.0
    for stage in ("reading the documents", "retrieving passages", "writing the answer"):
        assert f"selfrag: {stage}" in err
    assert "INFO: call 1: generate · " in err and " tokens · " in err
    assert rest.startswith("Paris [1]")


def test_without_a_terminal_or_the_variable_ask_prints_no_progress(tmp_path, capsys):
    (tmp_path / "d.txt").write_text("Paris is the capital of France.")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"capital": "Paris"}))
    assert main(["ask", QUESTION, "--docs", str(tmp_path / "d.txt"), "--method", "vanilla_rag",
                 "--llm", f"scripted:{script}"]) == 0
    assert capsys.readouterr().err == ""


# -- follow-up questions ---------------------------------------------------------------------------

HERSCHEL = {
    "herschel.md": "William Herschel discovered Uranus in 1781.",
    "herschel_death.md": "William Herschel died on 25 August 1822 in Slough.",
    "espresso.md": "Espresso is brewed at 93 degrees.",
}
FOLLOWUP_SCRIPT = {
    # Keys are tried in order: the rewrite prompt first (it quotes the earlier turns).
    "Follow-up question: and when did he die?": "Rewritten question: When did William Herschel die?",
    "discovered Uranus in 1781.\n</document>": "William Herschel",
    "When did William Herschel die?": "25 August 1822",
}


@pytest.fixture
def herschel(tmp_path) -> tuple[Path, str]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in HERSCHEL.items():
        (docs / name).write_text(text)
    script = tmp_path / "chat.json"
    script.write_text(json.dumps(FOLLOWUP_SCRIPT))
    return docs, f"scripted:{script}"


def test_chat_reads_a_follow_up_with_the_earlier_turns(herschel, capsys, monkeypatch):
    import io

    docs, llm = herschel
    monkeypatch.setattr(sys, "stdin", io.StringIO("Who discovered Uranus?\nand when did he die?\nexit\nignored\n"))
    assert main(["chat", "--docs", str(docs), "--method", "vanilla_rag", "--top-k", "1",
                 "--set", "vanilla.confidence=off", "--llm", llm]) == 0
    out = capsys.readouterr().out
    assert out.index("William Herschel [1]") < out.index("(asked as: When did William Herschel die?)")
    assert "25 August 1822 [1]" in out and "herschel_death.md (herschel_death)" in out
    assert "2 LLM calls · 1 retrievals" in out  # the rewrite and the answer


def test_multi_turn_serve_reads_a_follow_up_with_the_earlier_turns(herschel):
    from selfrag.config import load_config
    from selfrag.retrieval import load_corpus
    from selfrag.retrieval.registry import create_retriever
    from selfrag.serve.answering import Answerer

    docs, _ = herschel
    cfg = load_config(None, base={"architecture": {"name": "vanilla_rag"}, "cache": {"enabled": False},
                                  "retrieval": {"top_k": 1}, "vanilla": {"confidence": "off"}})
    answerer = Answerer(cfg, ScriptedBackend(FOLLOWUP_SCRIPT), create_retriever("bm25", load_corpus(docs)),
                        timeout_s=30)
    messages = [{"role": "user", "content": "Who discovered Uranus?"},
                {"role": "assistant", "content": "William Herschel"},
                {"role": "user", "content": "and when did he die?"}]
    with client(make_app(answerer)) as c:
        data = c.post("/v1/chat/completions", json={"model": "vanilla_rag", "messages": messages}).json()
        streamed = c.post("/v1/chat/completions", json={"model": "vanilla_rag", "messages": messages,
                                                         "stream": True})
    assert data["choices"][0]["message"]["content"] == "25 August 1822 [1]"  # with its citation marker
    assert data["selfrag"]["details"]["followup"]["standalone"] == "When did William Herschel die?"
    assert data["selfrag"]["sources"] == [{"id": "herschel_death", "title": "herschel_death.md"}]
    chunks = [d for _, d in events(streamed.text) if isinstance(d, dict) and d.get("choices")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "25 August 1822\n[1]"


def test_a_rewrite_reply_is_cleaned_and_a_useless_one_ignored():
    from selfrag.methods.steps.followup import clean_rewrite

    asked = "and when did he die?"
    assert clean_rewrite('Rewritten question: "When did William Herschel die?"\nExplanation: ...', asked) == (
        "When did William Herschel die?")
    assert clean_rewrite("", asked) == asked
    assert clean_rewrite("User: who discovered Uranus?", asked) == asked
    assert clean_rewrite("x" * 500, asked) == asked


async def test_a_first_question_makes_no_rewrite_call():
    from selfrag.methods.steps.followup import Turn, standalone_question

    llm = ScriptedBackend([])
    rewrite = await standalone_question(llm, [Turn("assistant", "Hello!")], "Who discovered Uranus?")
    assert rewrite.gen is None and not rewrite.changed and llm.calls == []
