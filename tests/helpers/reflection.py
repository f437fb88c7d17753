"""Scripted outputs of a fine-tuned Self-RAG model, for the scripted backend.

A response is a list of generated positions; each position is a
``{token: logprob}`` dict whose most likely token is the one "generated".
"""

from __future__ import annotations

import math
from typing import Any

SUPPORT = {
    "full": "[Fully supported]",
    "partial": "[Partially supported]",
    "no": "[No support / Contradictory]",
}


def lp(p: float) -> float:
    return math.log(p)


def segment(
    text: str,
    *,
    rel: float | None = None,
    sup: str | None = None,
    util: int | None = None,
    end: str | None = None,
    text_logprob: float = 0.0,
) -> dict[str, Any]:
    """``[Relevant]`` (with P=rel) + text + support token + utility token, then ``end`` if given.

    Every reflection position puts all its mass on the written token except
    relevance, which splits ``rel`` / ``1 - rel``.
    """
    positions: list[dict[str, float]] = []
    if rel is not None:
        positions.append({"[Relevant]": 0.0} if rel >= 1 else {"[Relevant]": lp(rel), "[Irrelevant]": lp(1 - rel)})
    positions.append({text: text_logprob})
    if sup is not None:
        positions.append({SUPPORT[sup]: 0.0})
    if util is not None:
        positions.append({f"[Utility:{util}]": 0.0})
    if end is not None:
        positions.append({end: 0.0})
    return {"text": text, "top_logprobs": positions}


def decision(**probs: float) -> dict[str, Any]:
    """The next-token distribution over retrieval tokens: yes / no / cont probabilities."""
    names = {"yes": "[Retrieval]", "no": "[No Retrieval]", "cont": "[Continue to Use Evidence]"}
    return {"text": "", "top_logprobs": {names[k]: lp(v) for k, v in probs.items() if v > 0}}


def word(**probs: float) -> dict[str, Any]:
    """A one-token label answer: ``word(yes=0.7, no=0.3)``; keys may be any token text."""
    best = max(probs, key=probs.get)
    return {"text": best, "top_logprobs": {k: lp(v) for k, v in probs.items() if v > 0}}


# Three passages about France and a label-probability critic's view of them: the
# critique and answer replies the critic reranker reads (a > c > b).
FRANCE_Q = "What is the capital of France?"


def france_docs() -> tuple:
    from selfrag.types import Document

    return (
        Document(id="a", title="Doc A", text="Paris is the capital of France."),
        Document(id="b", title="Doc B", text="France is in Europe."),
        Document(id="c", title="Doc C", text="Lyon is a city in France."),
    )


def france_critic_script(lyon_utility: dict[str, float]) -> dict[str, Any]:
    """Relevance, answer, support and utility replies per passage; Lyon's utility is the caller's."""
    return {
        "capital of France.\n</document>\n\nDoes the document": word(relevant=0.9, irrelevant=0.1),
        "in Europe.\n</document>\n\nDoes the document": word(relevant=0.2, irrelevant=0.8),
        "city in France.\n</document>\n\nDoes the document": word(relevant=0.6, irrelevant=0.4),
        "capital of France.\n</document>\n\nAnswer the question": "Paris",
        "in Europe.\n</document>\n\nAnswer the question": "Europe",
        "city in France.\n</document>\n\nAnswer the question": "Lyon",
        "Answer: Paris\n\nIs the answer": word(fully=1.0),
        "Answer: Europe\n\nIs the answer": word(no=1.0),
        "Answer: Lyon\n\nIs the answer": word(partially=1.0),
        "Answer: Paris\n\nHow useful": word(**{"5": 1.0}),
        "Answer: Europe\n\nHow useful": word(**{"1": 1.0}),
        "Answer: Lyon\n\nHow useful": word(**lyon_utility),
        # self_rag_critic's default relevance also scores the question after each passage
        "Write one question that the document above helps answer": {"forced_logprobs": [-1.0]},
    }
