"""Scoring one answered question: its metrics and its accounting.

Runs after the method has answered; methods never see gold answers. Answer
metrics come from :mod:`.metrics`, evidence and abstention metrics from
:mod:`.evidence`. A question made unanswerable (``data.remove_gold``) has no
gold paragraph left, so it gets no retrieval recall and no evidence metrics.
"""

from __future__ import annotations

from typing import Any

from ..types import Question, QuestionType, RAGResponse
from .choices import LETTERS, YES_NO_MAYBE
from .evidence import abstention_scores, answer_in_passages, evidence_scores, is_correct, joint_f1
from .metrics import (
    best_over,
    choice_accuracy,
    exact_match,
    extract_choice,
    f1_parts,
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


def cited_titles(response: RAGResponse) -> list[str]:
    return [doc.title or doc.id for doc in response.citations]


def gold_titles(question: Question) -> list[str]:
    """The question's gold supporting titles; none once they were removed (``answerable`` false)."""
    if question.metadata.get("answerable") is False:
        return []
    return list(question.metadata.get("supporting_titles") or [])


def answer_metrics(question: Question, prediction: str) -> dict[str, float]:
    """em, f1, match against every gold answer (best), and accuracy for a choice question."""
    golds = question.answers
    out: dict[str, float] = {
        "em": best_over(exact_match, prediction, golds),
        "f1": best_over(f1_score, prediction, golds),
        "match": best_over(match, prediction, golds),
    }
    acc = accuracy(question, prediction)
    if acc is not None:
        out["accuracy"] = acc
    return out


def question_metrics(question: Question, response: RAGResponse, top_k: int) -> dict[str, float]:
    """Answer metrics (em, f1, match, accuracy), retrieval recall, evidence and abstention metrics.

    ``retrieval_recall@k`` is the share of the question's gold titles among the
    passages retrieved (all retrieval calls together); it is left out when the
    question has no gold titles or the method did not retrieve for it.
    """
    out = answer_metrics(question, response.answer)
    gold = gold_titles(question)
    if gold and response.num_retrieval_calls:
        recall = retrieval_recall(retrieved_titles(response), gold)
        if recall is not None:
            out[recall_key(top_k)] = recall
    out.update(grounding_metrics(question, response, out))
    return out


def _checkable_answer(question: Question, prediction: str) -> str | None:
    """The text to look for in the cited passages: a chosen option's text; no label answer."""
    if question.type == QuestionType.YES_NO.value:
        return None
    if question.choices:
        index = extract_choice(prediction, question.choices)
        return question.choices[index] if index is not None else None
    return prediction


def grounding_metrics(question: Question, response: RAGResponse, answer: dict[str, float]) -> dict[str, float]:
    """Abstention metrics for every answer; evidence metrics for an answer that was given.

    ``answer`` holds the question's answer metrics (the correctness test reads them).
    An abstention that records the answer it withheld (``details.withheld_answer``)
    also gets ``withheld_correct``: 1.0 when that answer would have been correct.
    """
    out = abstention_scores(response.abstained, answer)
    said = response.details.get("sufficiency")
    if isinstance(said, dict) and not response.abstained:
        out["said_insufficient"] = 1.0 if said.get("low") else 0.0
    if response.abstained:
        withheld = response.details.get("withheld_answer")
        if isinstance(withheld, str) and withheld.strip():
            out["withheld_correct"] = float(is_correct(answer_metrics(question, withheld)))
        return out
    evidence = evidence_scores(cited_titles(response), gold_titles(question))
    if evidence is not None:
        _, precision, recall = max((f1_parts(response.answer, g) for g in question.answers), default=(0.0,) * 3)
        out.update(
            evidence_precision=evidence.precision,
            evidence_recall=evidence.recall,
            evidence_f1=evidence.f1,
            joint_f1=joint_f1(precision, recall, evidence.precision, evidence.recall),
        )
    text = _checkable_answer(question, response.answer)
    if text is not None:
        passages = [f"{doc.title}\n{doc.text}" for doc in response.citations]
        found = answer_in_passages(text, passages)
        if found is not None:
            out["answer_in_citations"] = found
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
