"""What ``critic.relevance: label_and_likelihood`` would change in a finished ``self_rag_critic`` run.

``self_rag_critic`` answers with its joint draft (``vanilla_rag``'s prompt over
the 5 of its 10 passages with the best fused relevance) whenever that draft has
an answer, so a relevance reading changes an answer only by changing which
passages the joint draft reads, or their order. This script takes a finished
run made with the label question alone (``critic.relevance: passage``) and,
question by question:

1. reads each retrieved passage's P(relevant) from that run's ``rank_evidence``
   step (or, when the run's full trace is not on disk, asks the label question
   again) and the question likelihood of each passage (10 forced calls);
2. ranks the passages as the critic does (:func:`rank_evidence`) with the label
   reading alone and with the mean of the two;
3. when the two rankings keep the same passages in the same order, the answer is
   the run's own; otherwise it writes the joint answer over the new passages
   with the method's own reader (:func:`joint_answer`) and scores it.

It is a replay, not the pipeline: an unusable joint answer (which the pipeline
replaces by its one-passage candidates) keeps the run's answer and is flagged
``fallback``. One JSON line per question under ``critics/``, resumable; the
paired comparison with the run's answers is printed::

    python benchmarks/relevance_replay.py --llm llamacpp:PATH.gguf --dataset hotpotqa
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import dev_range
from quality_critics import gold_titles
from quality_runs import BASELINE, DATASETS, VARIANTS, load_cfg, model_tag, run_dir, say
from quality_stats import paired_bootstrap, question_score, read_jsonl

HERE = Path(__file__).resolve().parent
VARIANT = "self_rag_critic_label"  # the run made with the label question alone


def out_path(tag: str, dataset: str) -> Path:
    return HERE / "results" / "runs" / "quality" / tag / "critics" / f"replay_label_and_likelihood_{dataset}.jsonl"


def rank_rows(record: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The passages of the run's ``rank_evidence`` step (None when the trace lacks it)."""
    for step in record.get("reasoning_chain") or []:
        if step.get("action") == "rank_evidence":
            return (step.get("details") or {}).get("passages") or []
    return None


def label_values(record: dict[str, Any]) -> dict[str, float] | None:
    """P(relevant) per passage title the run judged (None when the trace lacks the ranking)."""
    rows = rank_rows(record)
    return None if rows is None else {r["title"]: r["model"] for r in rows if r.get("judged")}


def run_kept(record: dict[str, Any]) -> list[str] | None:
    """The passages the run's own ranking kept, best first (None when the trace lacks it)."""
    rows = rank_rows(record)
    if rows is None:
        return None
    return [r["title"] for r in sorted((r for r in rows if r.get("kept")), key=lambda r: (-r["fused"], r["index"]))]


def titles(ranked: Any) -> list[str]:
    """The passages a ranking kept for the joint draft, best first."""
    return [d.title for d in ranked.passages.docs]


async def replay(spec: str, dataset_name: str, path: Path) -> None:
    from selfrag.assemble import build_method
    from selfrag.eval.datasets import load_dataset
    from selfrag.llm.factory import create_backend
    from selfrag.methods.answer_shape import finalize_answer, keep_answers
    from selfrag.methods.critique import Critic, CriticConfig
    from selfrag.methods.critique.likelihood import likelihood_relevance
    from selfrag.methods.critique.relevance import averaged, label_relevance
    from selfrag.methods.joint_answer import joint_answer
    from selfrag.methods.self_rag_evidence import rank_evidence
    from selfrag.methods.trace import Run
    from selfrag.reflection.readings import Reading
    from selfrag.retrieval.registry import retriever_factory

    dataset, variant = DATASETS[dataset_name], VARIANTS[VARIANT]
    source = run_dir(HERE / "results", model_tag(spec), dataset, variant)
    full = source / "predictions.jsonl"
    records = {r["id"]: r for r in read_jsonl(full if full.exists() else source / "predictions.slim.jsonl")}
    done = {r.get("id") for r in read_jsonl(path)}
    cfg = load_cfg(dataset, variant, None, spec)
    questions = [q for q in load_dataset(cfg.data).questions if q.id in records and q.id not in done]
    if not questions:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    llm = create_backend(spec)
    method = build_method(cfg, llm)
    mcfg = method.config
    if mcfg.critic.relevance != "passage":
        raise SystemExit(f"{source}: the replay compares against a run made with critic.relevance: passage")
    label_critic = Critic(llm, CriticConfig(source="label_probs"))
    likely_critic = Critic(llm, CriticConfig(source="label_probs", relevance="question_likelihood"))
    bm25 = retriever_factory("bm25")
    say(f"replay: {len(questions)} question(s) of {source} -> {path}")
    for count, q in enumerate(questions, start=1):
        record = records[q.id]
        result = await bm25(list(q.contexts)).retrieve(q.text, mcfg.top_k)
        docs = list(result.documents)
        run = Run(llm, None, dict(method.llm_params))
        labels = label_values(record)
        if labels is None:
            labels = {}
            for doc in docs:
                labels[doc.title] = (await label_relevance(label_critic, run, q.text, doc, "replay")).value
        likely = await likelihood_relevance(likely_critic, run, q.text, result) or []
        label = [labels.get(d.title) for d in docs]
        lik = [None if r is None else r.value for r in likely]
        both = [averaged(None if v is None else Reading("relevance", {"relevant": v, "irrelevant": 1 - v}, "label_probs"), r)
                for v, r in zip(label, likely, strict=True)]
        mean = [None if r is None else r.value for r in both]
        old = titles(rank_evidence(run, q.text, docs, result.scores, label, mcfg.joint_passages))
        ranked = rank_evidence(run, q.text, docs, result.scores, mean, mcfg.joint_passages)
        new = titles(ranked)
        line: dict[str, Any] = {"id": q.id, "kept_run": run_kept(record), "kept_label": old, "kept_mean": new, "changed": old != new,
                                "fallback": False, "answer_label": record.get("prediction")}
        answer = record.get("prediction")
        if old != new:
            _, _, text = await joint_answer(run, q, ranked.passages.docs, mcfg.max_context_tokens,
                                            name=f"{len(new)} passages", facts_first=mcfg.facts_first,
                                            reader=method.reader)
            if keep_answers(run, [text], lambda s: s, q.text):
                answer = finalize_answer(q, text)
            else:
                line["fallback"] = True
        line.update(answer_mean=answer, gold=list(q.answers),
                    p_label=[None if v is None else round(v, 4) for v in label],
                    p_likelihood=[None if v is None else round(v, 4) for v in lik],
                    titles=[d.title for d in docs], llm_calls=sum(s.llm_calls for s in run.steps()))
        dev_range.append(path, line)
        if count % 10 == 0 or count == len(questions):
            say(f"replay: {count} of {len(questions)}")
    await llm.aclose()


def summary(path: Path, dataset_name: str, tag: str) -> dict[str, Any]:
    """The run's answers against the replayed ones, paired (F1 for HotpotQA, yes/no accuracy for the 17)."""
    from selfrag.eval.metrics import best_over, f1_score

    dataset = DATASETS[dataset_name]
    records = {r["id"]: r for r in read_jsonl(run_dir(HERE / "results", tag, dataset, VARIANTS[VARIANT])
                                              / "predictions.slim.jsonl")}
    lines = read_jsonl(path)

    def score(prediction: str | None, gold: list[str]) -> float:
        if dataset.metric == "yesno":
            return question_score({"prediction": prediction, "gold": gold}, "yesno")
        return best_over(f1_score, prediction or "", gold)

    old = [question_score(records[r["id"]], dataset.metric) for r in lines]
    new = [score(r["answer_mean"], r["gold"]) for r in lines]
    base_rows = {r["id"]: r for r in read_jsonl(run_dir(HERE / "results", tag, dataset, VARIANTS[BASELINE])
                                                / "predictions.slim.jsonl")}
    paired = [(n, question_score(base_rows[r["id"]], dataset.metric))
              for r, n in zip(lines, new, strict=True) if r["id"] in base_rows]
    gold = gold_titles(dataset.path)

    def both_gold(kept: str) -> int | None:  # None: the data names no supporting paragraphs
        if not any(gold.get(r["id"]) for r in lines):
            return None
        return sum(bool(gold.get(r["id"])) and gold[r["id"]] <= set(r[kept]) for r in lines)

    return {
        "dataset": dataset_name, "n": len(lines), "metric": dataset.metric,
        "every gold paragraph among the joint's passages (label / mean)": [both_gold("kept_label"),
                                                                           both_gold("kept_mean")],
        "label (the run)": sum(old) / len(old) if old else None,
        "label_and_likelihood (replayed)": sum(new) / len(new) if new else None,
        "difference": paired_bootstrap(new, old),
        "better": sum(a > b for a, b in zip(new, old, strict=True)),
        "worse": sum(a < b for a, b in zip(new, old, strict=True)),
        "passages changed": sum(r["changed"] for r in lines),
        "fallbacks": sum(r["fallback"] for r in lines),
        f"replayed - {BASELINE}": paired_bootstrap([a for a, _ in paired], [b for _, b in paired]),
        f"run - {BASELINE}": paired_bootstrap(
            [question_score(records[r["id"]], dataset.metric) for r in lines if r["id"] in base_rows],
            [question_score(base_rows[r["id"]], dataset.metric) for r in lines if r["id"] in base_rows]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", required=True, help="backend spec that scores a given reply, e.g. llamacpp:PATH.gguf")
    ap.add_argument("--dataset", default="hotpotqa", choices=("hotpotqa", "hotpotqa_next", "hotpotqa_yesno"))
    ap.add_argument("--report-only", action="store_true", help="read what is on disk; run nothing")
    args = ap.parse_args(argv)
    tag = model_tag(args.llm)
    path = out_path(tag, args.dataset)
    if not args.report_only:
        asyncio.run(replay(args.llm, args.dataset, path))
    print(json.dumps(summary(path, args.dataset, tag), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
