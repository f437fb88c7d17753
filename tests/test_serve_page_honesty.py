"""The page, in a real browser, never draws a verdict the model did not give, and says plainly when an
answer used no document (headless Chromium; skips without it, like test_serve_browser)."""

from __future__ import annotations

import pytest

from selfrag.config import load_config
from selfrag.llm.scripted import ScriptedBackend
from selfrag.retrieval.registry import create_retriever
from selfrag.serve.answering import Answerer
from selfrag.serve.app import create_app
from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import ServeSettings
from selfrag.types import Document

from .test_serve_browser import browser  # noqa: F401 - the module's Chromium fixture

NOTES = [
    Document("espresso", "Brew espresso at 93 degrees.", "espresso.md § Temperature"),
    Document("milk", "Steam milk to 60 degrees.", "milk.md § Milk"),
]
SCRIPT = {
    # The espresso candidate's reply has no [IsSup] line: its support is a default, not a verdict.
    "Brew espresso at 93 degrees.\n</document>": "93 degrees\n[IsRel] relevant",
    "Steam milk": "60 degrees\n[IsRel] irrelevant\n[IsSup] no support",
    "Answer: 93 degrees": "5",
    "Answer: 60 degrees": "2",
    "7 plus 6": "13",
}


def app():
    cfg = load_config(None, base={
        "architecture": {"name": "self_rag"}, "cache": {"enabled": False}, "retrieval": {"top_k": 2},
        "self_rag": {"num_candidates": 2, "joint_passages": 0, "confidence": "off", "critic": "prompted"},
    })
    answerer = Answerer(cfg, ScriptedBackend(SCRIPT), create_retriever("bm25", NOTES), timeout_s=30)
    return create_app(ServeSettings(), answerer)


def ask(browser, url: str, question: str):  # noqa: F811 - the fixture, passed in
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url + "/")
    wait = WebDriverWait(browser, 30)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")
    browser.find_element(By.ID, "question").send_keys(question)
    browser.find_element(By.ID, "ask").click()
    wait.until(lambda d: d.find_element(By.ID, "answer-card").get_attribute("data-state") in ("done", "error"))
    return By


@pytest.mark.server
def test_a_defaulted_verdict_is_drawn_not_judged(browser):  # noqa: F811
    with BackgroundServer(app()) as server:
        By = ask(browser, server.url, "At what temperature do I brew espresso?")
        assert browser.find_element(By.ID, "answer").text.startswith("93 degrees")
        espresso = browser.find_element(By.CSS_SELECTOR, ".candidate.selected")
        badges = [b.text for b in espresso.find_elements(By.CSS_SELECTOR, ".badge.not-judged")]
        assert badges == ["support: not judged"]
        assert "support: no support" not in espresso.text and "relevance: relevant" in espresso.text


@pytest.mark.server
def test_an_answer_without_documents_says_so_on_the_page(browser):  # noqa: F811
    with BackgroundServer(app()) as server:
        By = ask(browser, server.url, "What is 7 plus 6?")
        banner = browser.find_element(By.CSS_SELECTOR, ".banner.without-documents")
        assert banner.text == ("Answered without your documents: none of the documents shares a word with the "
                               "question.")
        assert browser.find_element(By.ID, "answer").text == "13"


def unsure_app():
    """self_rag whose P(True) reading says its answer is probably false: a low confidence."""
    script = {"Is your answer above correct": {"text": "False", "top_logprobs": {"True": -2.3, "False": -0.1}},
              **SCRIPT}
    cfg = load_config(None, base={
        "architecture": {"name": "self_rag"}, "cache": {"enabled": False}, "retrieval": {"top_k": 2},
        "self_rag": {"num_candidates": 2, "joint_passages": 0, "confidence": "p_true", "critic": "prompted"},
    })
    answerer = Answerer(cfg, ScriptedBackend(script), create_retriever("bm25", NOTES), timeout_s=30)
    return create_app(ServeSettings(), answerer)


@pytest.mark.server
def test_a_low_confidence_is_said_in_words_on_the_page(browser):  # noqa: F811
    with BackgroundServer(unsure_app()) as server:
        By = ask(browser, server.url, "At what temperature do I brew espresso?")
        banner = browser.find_element(By.ID, "confidence")
        assert "low" in banner.get_attribute("class").split()
        assert banner.text.startswith("Low confidence: the passages may not support this answer; confidence 0.1")
