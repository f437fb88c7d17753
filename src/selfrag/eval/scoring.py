"""Scoring one answered question: its metrics and its accounting.

Runs after the method has answered; methods never see gold answers.
"""

from __future__ import annotations

from typing import Any

from ..types import Question, QuestionType, RAGResponse
from .choices import LETTERS, YES_NO_MAYBE
from .metrics import (
    best_over,
    choice_accuracy,
    exact_match,
    f1_score,
    label_accuracy,
    match,
    retrieval_recall,
)


def recall_key(top_k: int) -> str:
    return f"retrieval_recall@{top_k}"


def _gold_index(question: Question) -> int | None:
    gold = question.gold_answer
    if len(gold) == 1 and gold in LETTERS[: len(question.choices)]:
        return LETTERS.index(gold)
    if gold in question.choices:
        return question.choices.index(gold)
    return None


def accuracy(question: Question, prediction: str) -> float | None:
    """Accuracy for yes/no/maybe and multiple-choice questions; None for open questions."""
    if question.type == QuestionType.YES_NO.value:
        labels = question.choices or YES_NO_MAYBE
        return label_accuracy(prediction, question.gold_answer, labels)
    if question.choices:
        index = _gold_index(question)
        return choice_accuracy(prediction, question.choices, index) if index is not None else None
    return None


def retrieved_titles(response: RAGResponse) -> list[str]:
    return [doc.title or doc.id for result in response.retrieved_docs for doc in result.documents]


def question_metrics(question: Question, response: RAGResponse, top_k: int) -> dict[str, float]:
    """em, f1, match (best over gold aliases), accuracy and retrieval recall where they apply.

    ``retrieval_recall@k`` is the share of the question's gold titles among the
    passages retrieved (all retrieval calls together); it is left out when the
    question has no gold titles or the method did not retrieve for it.
    """
    prediction = response.answer
    golds = question.answers
    out: dict[str, float] = {
        "em": best_over(exact_match, prediction, golds),
        "f1": best_over(f1_score, prediction, golds),
        "match": best_over(match, prediction, golds),
    }
    acc = accuracy(question, prediction)
    if acc is not None:
        out["accuracy"] = acc
    gold_titles = question.metadata.get("supporting_titles") or []
    if gold_titles and response.num_retrieval_calls:
        recall = retrieval_recall(retrieved_titles(response), gold_titles)
        if recall is not None:
            out[recall_key(top_k)] = recall
    return out


def accounting(response: RAGResponse) -> dict[str, Any]:
    """What answering cost: calls, tokens, money, time, and whether it retrieved."""
    return {
        "llm_calls": response.num_llm_calls,
        "retrieval_calls": response.num_retrieval_calls,
        "retrieved": response.num_retrieval_calls > 0,
        "retrieval_needed": response.retrieval_needed,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "total_tokens": response.total_tokens,
        "cost_usd": response.total_cost_usd,
        "latency_ms": round(response.latency_ms, 3),
        "cached_calls": sum(1 for s in response.reasoning_chain if s.cached and s.llm_calls),
    }
