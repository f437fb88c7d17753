"""The retrieval decision and the critiques, measured on their own.

* **Retrieval decision** (``self_rag``'s adaptive call, :func:`decide_retrieval`):
  how often it retrieves on HotpotQA (read from the ``self_rag`` HotpotQA run)
  and how often it skips on ``data/no_docs_questions.jsonl`` (40 written
  questions that need no documents), one decision per question, resumable
  (``no_docs/decisions.jsonl``).
* **Relevance**: gold supporting paragraphs against distractors, among the
  top-5 BM25 paragraphs of the first N HotpotQA questions, as read by the
  critic (P(relevant) from next-token label probabilities), by the lexical
  prior of :mod:`selfrag.retrieval.links`, by the two fused (their mean, as
  ``self_rag_critic`` ranks passages) and, unless ``--no-relevance-verdict``,
  by the combined mode's ``[IsRel]`` verdict (binary; one generation per
  paragraph, the expensive part). Resumable, one JSON line per question
  (``critics/relevance.jsonl``).
* **Support**: correct (F1 >= 0.5) against wrong (F1 = 0) candidate answers
  in the ``self_rag_critic`` and ``self_rag`` HotpotQA runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quality_runs import DATASETS, NO_DOCS, VARIANTS, load_cfg, runs_root, say
from quality_stats import auc, auc_row, paired_auc_bootstrap, read_jsonl, support_pairs

RELEVANCE_TOP_K = 5


def decisions_path(out: Path, tag: str) -> Path:
    return runs_root(out, tag) / "no_docs" / "decisions.jsonl"


def relevance_path(out: Path, tag: str) -> Path:
    return runs_root(out, tag) / "critics" / "relevance.jsonl"


def linked_path(out: Path, tag: str) -> Path:
    """The critic's linked relevance readings (each paragraph beside its anchor), one line per question."""
    return runs_root(out, tag) / "critics" / "relevance_linked.jsonl"


def likelihood_path(out: Path, tag: str) -> Path:
    """The critic's question-likelihood relevance readings, one line per question."""
    return runs_root(out, tag) / "critics" / "relevance_likelihood.jsonl"


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def _self_rag_method(args: Any, backend: Any, n: int | None):
    from selfrag.assemble import build_method

    cfg = load_cfg(DATASETS["hotpotqa"], VARIANTS["self_rag"], n, args.llm)
    llm = backend(cfg)
    method = build_method(cfg, llm)
    if method.config.critique != "combined" or method.config.retrieval_mode != "adaptive":
        raise SystemExit("configs/self_rag.yaml must be critique combined, retrieval_mode adaptive")
    return llm, method


# -- the retrieval decision on questions that need no documents --------------------------------


async def run_no_docs_decisions(args: Any, backend: Any) -> None:
    """The adaptive decision alone, with one calibration shared by all questions, on the
    no-documents set and on the first ``n_hotpot`` HotpotQA questions (the ``self_rag``
    pipeline itself retrieves without asking when a question carries its own documents)."""
    from selfrag.methods.self_rag_decision import Calibration, decide_retrieval
    from selfrag.methods.trace import Run
    from selfrag.types import Question

    path = decisions_path(args.out, args.tag)
    done = {(r.get("set", "no_docs"), r.get("id")) for r in read_jsonl(path)}
    items = [("no_docs", q["id"], q["question"], q.get("category")) for q in read_jsonl(NO_DOCS)]
    hotpot = DATASETS["hotpotqa"].path
    if hotpot.is_file():
        rows = read_jsonl(hotpot)[: args.n_hotpot]
        items += [("hotpotqa", str(r.get("_id") or r.get("id")), r["question"], None) for r in rows]
    pending = [it for it in items if (it[0], it[1]) not in done]
    if not pending or args.report_only:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    llm, method = _self_rag_method(args, backend, 1)
    calibration = Calibration()
    say(f"retrieval decision on {len(pending)} question(s) -> {path}")
    for kind, qid, text, category in pending:
        run = Run(llm, None, dict(method.llm_params))
        d = await decide_retrieval(
            run, method.decision_prompt, Question(id=qid, text=text),
            threshold=method.config.retrieval_threshold, max_tokens=method.mode.short_tokens,
            calibration=calibration,
        )
        _append(path, {
            "set": kind, "id": qid, "category": category, "retrieve": d.needed, "p_yes": d.p_yes,
            "source": d.source, "threshold": calibration.value if calibration.value is not None
            else method.config.retrieval_threshold,
        })


def _decision_p_yes(row: dict[str, Any]) -> float | None:
    for step in row.get("reasoning_chain") or []:
        if step.get("action") == "retrieval_decision":
            p = (step.get("details") or {}).get("p_yes")
            return float(p) if isinstance(p, (int, float)) else None
    return None


def _needed(row: dict[str, Any]) -> bool | None:
    value = (row.get("details") or {}).get("retrieval_needed")
    if value is None:
        value = (row.get("accounting") or {}).get("retrieval_needed")
    return None if value is None else bool(value)


def decision_summary(out: Path, tag: str, hotpot_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Retrieval rate on HotpotQA (the self_rag run), skip rate on the no-documents questions."""
    decided = read_jsonl(decisions_path(out, tag))
    no_docs = [r for r in decided if r.get("set", "no_docs") == "no_docs"]
    hot = [r for r in decided if r.get("set") == "hotpotqa"]
    if hot:  # the decision alone on HotpotQA questions
        needed = [bool(r.get("retrieve")) for r in hot]
    else:
        needed = [n for n in (_needed(r) for r in hotpot_rows if r.get("error") is None) if n is not None]
    by_cat: dict[str, list[bool]] = {}
    for r in no_docs:
        by_cat.setdefault(str(r.get("category")), []).append(not r.get("retrieve"))
    hot_p = ([float(r["p_yes"]) for r in hot if isinstance(r.get("p_yes"), (int, float))] if hot
             else [p for p in (_decision_p_yes(r) for r in hotpot_rows) if p is not None])
    doc_p = [float(r["p_yes"]) for r in no_docs if isinstance(r.get("p_yes"), (int, float))]
    thresholds = sorted({round(r["threshold"], 4) if isinstance(r.get("threshold"), float) else r.get("threshold")
                         for r in decided if r.get("threshold") is not None}, key=str)
    return {
        "hotpotqa_n": len(needed),
        "hotpotqa_retrieval_rate": sum(needed) / len(needed) if needed else None,
        "no_docs_n": len(no_docs),
        "no_docs_total": len(read_jsonl(NO_DOCS)),
        "no_docs_skip_rate": sum(not r.get("retrieve") for r in no_docs) / len(no_docs) if no_docs else None,
        "no_docs_skip_by_category": {c: sum(v) / len(v) for c, v in sorted(by_cat.items())},
        "sources": sorted({str(r.get("source")) for r in no_docs}),
        "thresholds": thresholds,
        # How well P(yes) alone separates HotpotQA (should retrieve) from the no-documents set.
        "p_yes_auc": auc(hot_p, doc_p),
        "p_yes_n": [len(hot_p), len(doc_p)],
    }


# -- relevance: gold paragraphs against distractors ----------------------------------------------


async def run_relevance(args: Any, backend: Any, n_questions: int) -> None:
    from selfrag.eval.datasets import load_dataset
    from selfrag.llm.base import chat
    from selfrag.methods.answer_format import answer_kind
    from selfrag.methods.context import format_passage
    from selfrag.methods.critique import Critic, CriticConfig
    from selfrag.methods.self_rag_modes import Passages
    from selfrag.methods.trace import Run
    from selfrag.prompts import load_prompt, render
    from selfrag.reflection.parse import RELEVANT, parse_combined_critique
    from selfrag.retrieval.links import evidence_prior
    from selfrag.retrieval.registry import retriever_factory

    path, linked = relevance_path(args.out, args.tag), linked_path(args.out, args.tag)
    likely = likelihood_path(args.out, args.tag)
    cfg = load_cfg(DATASETS["hotpotqa"], VARIANTS["self_rag"], n_questions, args.llm)
    questions = load_dataset(cfg.data).questions

    def todo(file: Path) -> list[Any]:
        done = {r.get("id") for r in read_jsonl(file)}
        return [q for q in questions if q.id not in done]

    pending, pending_linked, pending_likely = todo(path), todo(linked), todo(likely)
    if not (pending or pending_linked or pending_likely) or args.report_only:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    llm, method = _self_rag_method(args, backend, n_questions)
    critic = Critic(llm, CriticConfig(source="label_probs"))
    bm25 = retriever_factory("bm25")
    if pending_likely and llm.supports_forced:
        likely_critic = Critic(llm, CriticConfig(source="label_probs", relevance="question_likelihood"))
        await _run_likelihood(likely_critic, method, bm25, pending_likely, likely)
    if pending_linked:
        linked_critic = Critic(llm, CriticConfig(source="label_probs", relevance="linked"))
        await _run_linked(linked_critic, method, bm25, pending_linked, linked)
    if not pending:
        return
    say(f"relevance critiques: {len(pending)} question(s) x top-{RELEVANCE_TOP_K} BM25 paragraphs -> {path}")
    for count, q in enumerate(pending, start=1):
        result = await bm25(list(q.contexts)).retrieve(q.text, RELEVANCE_TOP_K)
        gold = set(q.metadata.get("supporting_titles") or [])
        priors = evidence_prior(q.text, result.documents, result.scores)
        paragraphs = []
        for rank, (doc, prior) in enumerate(zip(result.documents, priors, strict=True), start=1):
            run = Run(llm, None, dict(method.llm_params))
            reading, _ = await critic.read(
                run, "relevance",
                critic.critique_prompt("critic_relevance", question=q.text, passage=format_passage(doc)),
                action="critique_relevance", thought="benchmark", action_input=q.text,
            )
            para = {"title": doc.title, "rank": rank, "gold": doc.title in gold,
                    "p_relevant": reading.value, "critic_source": reading.source, "prior": round(prior, 4)}
            if args.relevance_verdict:
                # The combined mode's first call (self_rag_modes.Combined.candidate), verdict only.
                step = await run.generate(
                    chat(None, render(load_prompt("self_rag_critique"),
                                      passage=method.mode.context(Passages((doc,), (rank,))),
                                      question=q.text, answer_kind=answer_kind(q))),
                    action="generate_and_critique",
                )
                critique = parse_combined_critique(step.text)
                para.update(isrel=critique.relevance == RELEVANT, isrel_default=critique.relevance_default)
            paragraphs.append(para)
        _append(path, {"id": q.id, "paragraphs": paragraphs})
        if count % 5 == 0 or count == len(pending):
            say(f"relevance critiques: {count} of {len(pending)}")


async def _run_linked(critic: Any, method: Any, bm25: Any, pending: list[Any], path: Path) -> None:
    """The critic's linked relevance (``selfrag.methods.critique.relevance``) of the same top-5
    paragraphs, each read beside its anchor, as ``self_rag_critic`` reads them."""
    from selfrag.methods.critique.relevance import anchors, linked_relevance
    from selfrag.methods.trace import Run

    say(f"linked relevance critiques: {len(pending)} question(s) x top-{RELEVANCE_TOP_K} BM25 paragraphs -> {path}")
    for count, q in enumerate(pending, start=1):
        result = await bm25(list(q.contexts)).retrieve(q.text, RELEVANCE_TOP_K)
        shown = anchors(q.text, result.documents, result.scores)
        readings = await linked_relevance(critic, Run(critic.llm, None, dict(method.llm_params)), q.text, result)
        if readings is None:
            raise ValueError(f"{q.id}: no linked readings (the critic needs relevance=linked and 2+ paragraphs)")
        _append(path, {"id": q.id, "paragraphs": [
            {"title": doc.title, "anchor": a.title if a is not None else None,
             "p_linked": reading.value if reading is not None else None}
            for doc, a, reading in zip(result.documents, shown, readings, strict=True)]})
        if count % 5 == 0 or count == len(pending):
            say(f"linked relevance critiques: {count} of {len(pending)}")


async def _run_likelihood(critic: Any, method: Any, bm25: Any, pending: list[Any], path: Path) -> None:
    """The critic's question-likelihood relevance (``selfrag.methods.critique.likelihood``) of the
    same top-5 paragraphs, as ``self_rag_critic`` reads them with ``critic.relevance: question_likelihood``."""
    from selfrag.methods.critique.likelihood import likelihood_relevance
    from selfrag.methods.trace import Run

    say(f"question-likelihood relevance: {len(pending)} question(s) x top-{RELEVANCE_TOP_K} BM25 paragraphs -> {path}")
    for count, q in enumerate(pending, start=1):
        result = await bm25(list(q.contexts)).retrieve(q.text, RELEVANCE_TOP_K)
        run = Run(critic.llm, None, dict(method.llm_params))
        readings = await likelihood_relevance(critic, run, q.text, result)
        if readings is None:
            raise ValueError(f"{q.id}: no question-likelihood readings")
        means = [step.details.get("mean_logprob") for step in run.records if step.action == "critique_relevance"]
        _append(path, {"id": q.id, "paragraphs": [
            {"title": doc.title, "p_likelihood": reading.value if reading is not None else None, "mean_logprob": mean}
            for doc, reading, mean in zip(result.documents, readings, means, strict=True)]})
        if count % 5 == 0 or count == len(pending):
            say(f"question-likelihood relevance: {count} of {len(pending)}")


def _merge(records: list[dict[str, Any]], extra: list[dict[str, Any]], key: str) -> None:
    """Add each paragraph's ``key`` (by question id and title) from ``extra`` to the relevance records, in place."""
    by_key = {(r.get("id"), p.get("title")): p.get(key) for r in extra for p in r.get("paragraphs") or []}
    for r in records:
        for p in r.get("paragraphs") or []:
            value = by_key.get((r.get("id"), p.get("title")))
            if isinstance(value, (int, float)):
                p[key] = value


def relevance_rows(out: Path, tag: str, wanted: list[str]) -> list[dict[str, Any]]:
    """AUCs of gold vs distractor paragraphs for each relevance source, over the wanted questions."""
    keep = set(wanted)
    records = [r for r in read_jsonl(relevance_path(out, tag)) if r.get("id") in keep]
    _merge(records, read_jsonl(linked_path(out, tag)), "p_linked")
    _merge(records, read_jsonl(likelihood_path(out, tag)), "p_likelihood")
    paras = [p for r in records for p in r.get("paragraphs") or []]
    if not paras:
        return []
    n, target = len(records), len(wanted)

    def row(name: str, scored: list[dict[str, Any]], value: Any, **extra: Any) -> dict[str, Any]:
        """One source's AUC: ``value(paragraph)`` of the gold paragraphs against the distractors."""
        return auc_row(name, [value(p) for p in scored if p["gold"]], [value(p) for p in scored if not p["gold"]],
                       n, target=target, **extra)

    probs = [p for p in paras if isinstance(p.get("p_relevant"), (int, float))]
    sources = sorted({str(p.get("critic_source")) for p in probs})
    rows = [row(f"relevance: critic P(relevant) ({'/'.join(sources) or 'label_probs'})", probs,
                lambda p: p["p_relevant"], unscored=len(paras) - len(probs))]
    # Records from before the prior was written lack it: the prior and fused rows count the others.
    primed = [p for p in probs if isinstance(p.get("prior"), (int, float))]
    if primed:
        rows += [row("relevance: lexical prior (retrieval.links), same paragraphs", primed, lambda p: p["prior"]),
                 row("relevance: critic fused with the prior, (P + prior) / 2", primed,
                     lambda p: (p["p_relevant"] + p["prior"]) / 2)]

    def alternative(key: str, reading: str, short: str) -> list[dict[str, Any]]:
        """Another reading of the same paragraphs (``key``): its AUC with a paired interval against
        the plain P(relevant) on the paragraphs it scored, that plain AUC, and the reading fused."""
        def has(p: dict[str, Any]) -> bool:
            return all(isinstance(p.get(k), (int, float)) for k in (key, "p_relevant", "prior"))

        scored = [p for p in primed if has(p)]
        if not scored:
            return []
        by_question = [[(p[key], p["p_relevant"], p["gold"]) for p in r.get("paragraphs") or [] if has(p)]
                       for r in records]
        return [row(f"relevance: {reading}, same paragraphs", scored, lambda p: p[key],
                    vs_plain=paired_auc_bootstrap(by_question)),
                row(f"relevance: critic P(relevant), plain, on the paragraphs {short} scored", scored,
                    lambda p: p["p_relevant"]),
                row(f"relevance: {short} fused with the prior, (P + prior) / 2", scored,
                    lambda p: (p[key] + p["prior"]) / 2)]

    rows += alternative("p_linked", "critic P(relevant) beside its anchor (linked)", "linked critic")
    rows += alternative("p_likelihood", "critic question likelihood (question_likelihood)", "question likelihood")
    rows += _mean_rows(records, primed, row)
    judged = [p for p in paras if "isrel" in p]
    if judged:
        rows.append(row("relevance: combined [IsRel] verdict (binary)", judged, lambda p: float(p["isrel"]),
                        defaults=sum(bool(p.get("isrel_default")) for p in judged)))
    return rows


def _mean_rows(records: list[dict[str, Any]], primed: list[dict[str, Any]], row: Any) -> list[dict[str, Any]]:
    """``critic.relevance: label_and_likelihood``: the mean of P(relevant) and the question
    likelihood, with a paired interval against the likelihood alone."""
    def both(p: dict[str, Any]) -> bool:
        return all(isinstance(p.get(k), (int, float)) for k in ("p_relevant", "p_likelihood"))

    def mean(p: dict[str, Any]) -> float:
        return (p["p_relevant"] + p["p_likelihood"]) / 2

    scored = [p for p in primed if both(p)]
    if not scored:
        return []
    by_question = [[(mean(p), p["p_likelihood"], p["gold"]) for p in r.get("paragraphs") or [] if both(p)]
                   for r in records]
    return [row("relevance: mean of P(relevant) and question likelihood (label_and_likelihood), same paragraphs",
                scored, mean, vs_likelihood=paired_auc_bootstrap(by_question))]


def support_rows(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """AUCs of correct vs wrong candidates' support, from the self_rag_critic(_label) and self_rag runs."""
    out = []
    for variant, label in (("self_rag_critic", "support: self_rag_critic P(support)"),
                           ("self_rag_critic_all", "support: self_rag_critic_all P(support)"),
                           ("self_rag_critic_label", "support: self_rag_critic_label P(support)"),
                           ("self_rag", "support: self_rag combined [IsSup] label (1 / 0.5 / 0)")):
        rows = runs.get(variant)
        if not rows:
            continue
        correct, wrong, questions = support_pairs(rows)
        out.append(auc_row(label, correct, wrong, questions))
    return out


# -- relevance read from the runs: the evidence ranking of the joint candidate -------------------


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
        if title is not None and not c.get("joint") and len(c.get("passage_indices") or [1]) == 1:
            out[title] = float(c.get("relevance") == "relevant")
    return out


def evidence_rows(runs: dict[str, list[dict[str, Any]]], gold: dict[str, set[str]]) -> list[dict[str, Any]]:
    """AUCs of gold vs distractor paragraphs among each question's retrieved passages, as the
    ``rank_evidence`` step of the self_rag / self_rag_critic runs scored them: the model's
    verdict alone, the lexical prior alone, and the two fused (when the run fused them).

    When ``self_rag`` ranked by the prior alone (``joint_ranking: prior``), its rank step holds no
    verdict; the ``[IsRel]`` verdicts are then read from the one-passage candidates."""
    out = []
    for variant, model_label in (("self_rag", "combined [IsRel] verdict (1 / 0)"),
                                 ("self_rag_critic", "critic relevance (label question and question likelihood)"),
                                 ("self_rag_critic_label", "critic P(relevant), label question alone")):
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
            # A passage the model did not judge carries an imputed verdict (self_rag_evidence.impute),
            # or none when the run ranked by the prior alone: the verdict's AUC counts only judged ones.
            rows = [(p, g) for p, g in passages if p.get(key) is not None and (key != "model" or p.get("judged", True))]
            pos = [float(p[key]) for p, g in rows if g]
            neg = [float(p[key]) for p, g in rows if not g]
            if not pos or not neg:
                continue
            out.append(auc_row(f"relevance: {variant} {what}", pos, neg, n,
                               notes="retrieved passages of the run (top_k of the config)"))
    return out
