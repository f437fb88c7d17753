"""The page in a real browser: headless Chromium asks a question and sees the answer, its cited
sentence highlighted and the selected candidate marked. The screenshot goes to the test's temporary
directory; ``SELFRAG_UPDATE_SCREENSHOT=1`` writes it to docs/serve.png instead (so running the suite
never rewrites a tracked file).

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and the
``selenium`` package (the ``dev`` extra); skips, saying which is missing, without them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from selfrag.config import load_config
from selfrag.data import demo_corpus
from selfrag.llm.base import RequestGenerator
from selfrag.llm.scripted import ScriptedBackend
from selfrag.retrieval.registry import create_retriever
from selfrag.serve.answering import Answerer
from selfrag.serve.app import create_app
from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import ServeSettings

REPO = Path(__file__).resolve().parents[1]
SCREENSHOT = REPO / "docs" / "serve.png"
QUESTION = "Which planet has the Great Red Spot?"
ANSWER = "Jupiter: its Great Red Spot is a storm larger than Earth."


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver") or (
        "/usr/lib/chromium/chromedriver" if Path("/usr/lib/chromium/chromedriver").exists() else None
    )
    if not chromium or not driver:
        pytest.skip("headless Chromium is not installed: apt-get install chromium chromium-driver (.ci/run does)")
    return chromium, driver


class Timed(RequestGenerator):
    """The scripted model with the latency a small local model would report (no waiting),
    so the timeline has something to draw: 0.6 ms per prompt token, 35 ms per generated one."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def generate_request(self, request):
        gen = await self.inner.generate_request(request)
        return dataclasses.replace(gen, latency_ms=0.6 * gen.prompt_tokens + 35.0 * gen.completion_tokens)

    async def aclose(self):
        await self.inner.aclose()


def scripted_app():
    """self_rag over the demo corpus with a scripted model: a P(yes) decision and three critiqued candidates."""
    docs = {d.id: d for d in demo_corpus()}
    script = {
        "checked in reference documents": {"text": "yes", "top_logprobs": {"yes": -0.2, "no": -1.8}},
        docs["jupiter"].text: f"{ANSWER}\n[IsRel] relevant\n[IsSup] fully supported",
        docs["mars"].text: "Mars\n[IsRel] relevant\n[IsSup] no support",
        docs["saturn"].text: "Saturn\n[IsRel] irrelevant\n[IsSup] no support",
        "Answer: Jupiter": "5",
        "Answer: Mars": "2",
        "Answer: Saturn": "1",
    }
    cfg = load_config(None, base={
        "architecture": {"name": "self_rag"}, "cache": {"enabled": False}, "retrieval": {"top_k": 3},
        "self_rag": {"num_candidates": 3, "joint_passages": 0, "critic": "prompted",
                     "retrieval_mode": "adaptive"},  # the question-only P(yes) decision, drawn as a gauge
    })
    retriever = create_retriever("bm25", list(docs.values()))
    answerer = Answerer(cfg, Timed(ScriptedBackend(script, model="scripted-demo")), retriever, timeout_s=30)
    return create_app(ServeSettings(), answerer)


@pytest.fixture(scope="module")
def browser():
    chromium, driver_path = _browser_paths()
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the `dev` extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--force-device-scale-factor=1", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    yield driver
    driver.quit()


@pytest.mark.server
def test_the_page_answers_and_draws_the_trace(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with BackgroundServer(scripted_app()) as server:
        browser.get(server.url + "/")
        wait = WebDriverWait(browser, 30)
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")
        assert browser.find_element(By.ID, "method").get_attribute("value") == "self_rag"
        browser.find_element(By.ID, "question").send_keys(QUESTION)
        browser.find_element(By.ID, "ask").click()
        wait.until(lambda d: d.find_element(By.ID, "answer-card").get_attribute("data-state") in ("done", "error"))

        assert browser.find_element(By.ID, "answer").text == ANSWER + " [1]"  # the marker of the passage that supports it
        # The decision: P(yes) drawn against the threshold measured on the anchor questions (the scripted
        # model gives every anchor the same P(yes), 1 / (1 + e^-1.6) = 0.832, so the mark sits there).
        gauge = browser.find_element(By.CSS_SELECTOR, ".decision[data-kind='probability'] .gauge")
        assert gauge.find_element(By.CSS_SELECTOR, ".gauge-mark").get_attribute("style") == "left: 83.2%;"
        # The cited passage, its supporting sentence highlighted.
        jupiter = browser.find_element(By.CSS_SELECTOR, ".passage.cited[data-id='jupiter']")
        marks = [m.text for m in jupiter.find_elements(By.CSS_SELECTOR, "mark.cite")]
        assert marks == ["Its Great Red Spot is a storm larger than Earth."]
        assert "relevance: relevant" in jupiter.text and "support: fully supported" in jupiter.text
        # The candidates side by side, the selected one marked.
        candidates = browser.find_elements(By.CSS_SELECTOR, ".candidates .candidate")
        selected = browser.find_elements(By.CSS_SELECTOR, ".candidate.selected")
        assert len(candidates) == 3 and len(selected) == 1
        assert ANSWER in selected[0].text and "selected" in selected[0].text and "from Jupiter" in selected[0].text
        # The timeline: one row per step, with tokens.
        rows = browser.find_elements(By.CSS_SELECTOR, ".timeline .tl-row")
        assert len(rows) >= 8 and "tok" in rows[0].text
        assert browser.execute_script("return document.querySelectorAll('script[src^=\"http\"]').length") == 0

        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1280, min(height + 40, 2400))
        shot = SCREENSHOT if os.environ.get("SELFRAG_UPDATE_SCREENSHOT") == "1" else tmp_path / "serve.png"
        assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


@pytest.mark.server
def test_the_runs_page_filters_opens_a_trace_and_compares(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from .test_serve_runs import make_runs

    runs = make_runs(tmp_path) / "results"
    with BackgroundServer(create_app(ServeSettings(runs_dir=runs), None)) as server:
        browser.set_window_size(1280, 1000)
        browser.get(server.url + "/runs")
        wait = WebDriverWait(browser, 30)
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")
        Select(browser.find_element(By.ID, "run-a")).select_by_value("nested/a")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#table tr[data-id]")) == 4)
        assert "vanilla_rag" in browser.find_element(By.ID, "summary").text

        def only(filter_name: str) -> list[str]:
            browser.find_element(By.CSS_SELECTOR, f"button[data-filter='{filter_name}']").click()
            return [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#table tr[data-id]")]

        assert only("wrong") == ["q2"]
        assert only("errors") == ["q3"]
        assert only("abstained") == []
        only("all")
        browser.find_element(By.CSS_SELECTOR, "#table tr[data-id='q1']").click()
        wait.until(lambda d: d.find_element(By.ID, "detail").is_displayed())
        assert browser.find_element(By.ID, "detail-answer").text == "Author 1"
        assert "this method always retrieves" in browser.find_element(By.CSS_SELECTOR, "#trace .decision").text

        Select(browser.find_element(By.ID, "run-b")).select_by_value("nested/b")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "button[data-filter='differ']"))
        assert only("differ") == ["q2"]
        assert "b only" in browser.find_element(By.CSS_SELECTOR, "#table tr[data-id='q2']").text


@pytest.mark.server
def test_the_runs_page_without_runs_says_how_to_open_them(browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with BackgroundServer(scripted_app()) as server:
        browser.get(server.url + "/runs")
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "off").is_displayed())
        assert "--runs DIR" in browser.find_element(By.ID, "off").text
