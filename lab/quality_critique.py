"""How well the critiques tell good from bad, read from the finished runs (no model call).

* **Relevance**: gold supporting paragraphs against distractors among each
  HotpotQA question's retrieved passages, as the ``rank_evidence`` step of the
  ``self_rag`` and ``self_rag_critic`` runs scored them: the model's reading
  alone, the lexical prior of :mod:`selfrag.retrieval.links` alone, and the
  two fused (their mean ranks the joint candidate's passages).
* **Support**: correct (F1 >= 0.5) against wrong (F1 = 0) candidate answers
  in the ``self_rag_critic`` and ``self_rag`` HotpotQA runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.quality_stats import auc_row, support_pairs

# (variant, how its rank step reads a passage), in report order.
EVIDENCE_RUNS = (("self_rag", "combined [IsRel] verdict (1 / 0)"),
                 ("self_rag_critic", "critic relevance (label question and question likelihood)"))
SUPPORT_RUNS = (("self_rag_critic", "support: self_rag_critic P(support)"),
                ("self_rag", "support: self_rag combined [IsSup] label (1 / 0.5 / 0)"))


def support_rows(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """AUCs of correct vs wrong candidates' support, from the self_rag_critic and self_rag runs."""
    out = []
    for variant, label in SUPPORT_RUNS:
        rows = runs.get(variant)
        if not rows:
            continue
        correct, wrong, questions = support_pairs(rows)
        out.append(auc_row(label, correct, wrong, questions))
    return out


def gold_titles(path: Path) -> dict[str, set[str]]:
    """Question id -> titles of its gold supporting paragraphs, as the HotpotQA loader reads them."""
    if not path.is_file():
        return {}
    from selfrag.config import DataSection
    from selfrag.eval.datasets import load_dataset

    questions = load_dataset(DataSection(dataset="hotpotqa", path=str(path))).questions
    return {q.id: set(q.metadata.get("supporting_titles") or []) for q in questions}


def _verdicts_by_title(row: dict[str, Any]) -> dict[str, float]:
    """The combined mode's ``[IsRel]`` verdict (1 relevant / 0 not) per passage title, read from the
    one-passage candidates (the joint candidate reads several passages and judges none)."""
    out: dict[str, float] = {}
    for c in (row.get("details") or {}).get("all_candidates") or []:
        title = c.get("passage_title")
        judged = c.get("relevance") is not None  # None: the reply held no verdict (see selfrag.reflection.judged)
        if title is not None and judged and not c.get("joint") and len(c.get("passage_indices") or [1]) == 1:
            out[title] = float(c.get("relevance") == "relevant")
    return out


def evidence_rows(runs: dict[str, list[dict[str, Any]]], gold: dict[str, set[str]]) -> list[dict[str, Any]]:
    """AUCs of gold vs distractor paragraphs among each question's retrieved passages, as the
    ``rank_evidence`` step of the self_rag / self_rag_critic runs scored them: the model's
    verdict alone, the lexical prior alone, and the two fused (when the run fused them).

    When ``self_rag`` ranked by the prior alone (``joint_ranking: prior``), its rank step holds no
    verdict; the ``[IsRel]`` verdicts are then read from the one-passage candidates."""
    out = []
    for variant, model_label in EVIDENCE_RUNS:
        passages, n = [], 0
        for row in runs.get(variant) or []:
            titles = gold.get(str(row.get("id")))
            step = next((s for s in row.get("reasoning_chain") or [] if s.get("action") == "rank_evidence"), None)
            if not titles or step is None:
                continue
            n += 1
            judged = _verdicts_by_title(row) if variant == "self_rag" else {}
            for p in (step.get("details") or {}).get("passages", []):
                p = dict(p)
                if p.get("model") is None and p.get("title") in judged:
                    p["model"], p["judged"] = judged[p["title"]], True
                passages.append((p, p.get("title") in titles))
        if not passages:
            continue
        for key, what in (("model", model_label + ", passages it judged"),
                          ("prior", "lexical prior (retrieval.links)"), ("fused", "fused (model + prior) / 2")):
            # A passage the model did not judge carries an imputed verdict, or none when the run
            # ranked by the prior alone: the verdict's AUC counts only judged ones.
            rows = [(p, g) for p, g in passages if p.get(key) is not None and (key != "model" or p.get("judged", True))]
            pos = [float(p[key]) for p, g in rows if g]
            neg = [float(p[key]) for p, g in rows if not g]
            if not pos or not neg:
                continue
            out.append(auc_row(f"relevance: {variant} {what}", pos, neg, n,
                               notes="retrieved passages of the run (top_k of the config)"))
    return out
