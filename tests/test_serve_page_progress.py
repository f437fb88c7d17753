"""The page, in a real browser, while a method works and before anyone asks: the stage names `selfrag
ask` shows with a clock that moves, and which model and documents the server answers from (headless
Chromium; skips without it, like test_serve_browser)."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from selfrag.llm.base import RequestGenerator
from selfrag.llm.scripted import ScriptedBackend
from selfrag.methods.core.stages import STAGES
from selfrag.serve.background import BackgroundServer

from .test_serve_browser import browser  # noqa: F401 - the module's Chromium fixture
from .test_serve_cli import ServeProcess
from .test_serve_kit import QUESTION, SCRIPT, make_answerer, make_app

CALL_S = 2.5  # each model call takes this long, so the page has time to show it on a busy machine


class Slow(RequestGenerator):
    """The scripted model, each call taking CALL_S seconds (a small local model's pace, shortened)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def generate_request(self, request):
        await asyncio.sleep(CALL_S)
        return await self.inner.generate_request(request)

    async def aclose(self):
        await self.inner.aclose()


def _open(browser, url: str):  # noqa: F811 - the fixture, passed in
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url + "/")
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")
    return By


@pytest.mark.server
def test_the_page_shows_each_stage_and_a_clock_that_moves(browser):  # noqa: F811
    with BackgroundServer(make_app(make_answerer(Slow(ScriptedBackend(SCRIPT)), method="self_rag"))) as server:
        By = _open(browser, server.url)
        browser.find_element(By.ID, "question").send_keys(QUESTION)
        browser.find_element(By.ID, "ask").click()
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen.append(browser.find_element(By.ID, "status").text)
            if browser.find_element(By.ID, "answer-card").get_attribute("data-state") in ("done", "error"):
                break
            time.sleep(0.15)
        assert browser.find_element(By.ID, "answer-card").get_attribute("data-state") == "done"
        # The status read last may predate the result that ended the loop: read it once more.
        seen.append(browser.find_element(By.ID, "status").text)
    shown = [m for text in seen if (m := re.match(r"(.+)… \((\d+\.\d) s\)", text))]
    stages = [m.group(1) for m in shown]
    # The stages ask shows, in order: the retrieval decision, the passages judged (both at once here,
    # so the second one's number shows), the critique.
    order = [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s]
    wanted = [STAGES["retrieval_decision"], "judging passage 2", STAGES["assess_support"]]
    assert [s for s in order if s in wanted] == wanted, seen
    # The clock moves while one model call is under way (the same stage, later seconds).
    by_stage: dict[str, list[float]] = {}
    for m in shown:
        by_stage.setdefault(m.group(1), []).append(float(m.group(2)))
    assert any(len(set(times)) > 1 for times in by_stage.values()), seen
    clock = [float(m.group(2)) for m in shown]
    assert clock == sorted(clock), seen  # it never runs backwards
    assert seen[-1].startswith("done in "), seen[-1]


@pytest.mark.server
def test_the_page_says_which_model_and_documents_it_serves(browser, tmp_path):  # noqa: F811
    notes = tmp_path / "coffee-notes"
    notes.mkdir()
    (notes / "espresso.md").write_text("# Temperature\n\nBrew espresso at 93 degrees.\n")
    (notes / "milk.md").write_text("# Milk\n\nSteam milk to 60 degrees.\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"espresso": "93 degrees"}))
    # A model server address with credentials in it: the page shows them hidden.
    server = ServeProcess(tmp_path / "serve.log", "--docs", str(notes), "--method", "vanilla_rag",
                          "--llm", f"scripted:{script}")
    secret = ServeProcess(tmp_path / "secret.log", "--docs", str(notes), "--method", "vanilla_rag",
                          "--llm", "openai:my-model@http://alice:pa55-word-xyz@127.0.0.1:9/v1")
    try:
        By = _open(browser, server.url)
        serving = browser.find_element(By.ID, "serving").text
        assert f"scripted:{script.name}" in serving and "coffee-notes" in serving and "2 passages" in serving, serving
        assert "vanilla_rag" in serving and str(tmp_path) not in serving
        By = _open(browser, secret.url)
        serving = browser.find_element(By.ID, "serving").text
        assert "openai:my-model@http://***@127.0.0.1:9/v1" in serving, serving
        assert "pa55" not in browser.page_source and "alice" not in serving
    finally:
        server.close()
        secret.close()


@pytest.mark.server
def test_the_stream_the_page_reads_names_each_stage_and_the_server_says_what_it_serves():
    import httpx

    from .test_serve_api import events

    with BackgroundServer(make_app(make_answerer(method="self_rag"), api_key="k-progress-1")) as server:
        auth = {"authorization": "Bearer k-progress-1"}
        r = httpx.post(server.url + "/v1/ask", json={"question": QUESTION, "stream": True}, headers=auth, timeout=30)
        got = events(r.text)
        stages = [data["stage"] for name, data in got if name == "stage"]
        assert stages[:2] == [STAGES["retrieval_decision"], STAGES["retrieve"]], stages
        assert "judging passage 2" in stages and got[-1][0] == "result"
        assert all(isinstance(data["elapsed_ms"], float) for name, data in got if name == "stage")
        # What the page shows under the question, behind the key like every /v1/ call.
        assert httpx.get(server.url + "/v1/server", timeout=10).status_code == 401
        info = httpx.get(server.url + "/v1/server", headers=auth, timeout=10).json()
        assert info["method"] == "self_rag" and info["model"] == "scripted:scripted"
        assert info["documents"] == {"name": None, "passages": 3, "retriever": "bm25"}
