"""Relevance readings on HotpotQA questions outside the quality benchmark's samples.

The quality benchmark (``quality.py --critics``) measures the critic's relevance
readings on its own first 100 questions. A reading chosen on those questions
would be tuned to them, so choices are made here first, on a later range
(default: dev questions 300-359), and only then measured there.

For each question, the top-5 BM25 paragraphs of its own ten are read two ways
by the critic: the label question's P(relevant) (``critic.relevance:
passage``) and the question likelihood (``question_likelihood``), and the
lexical prior is recorded. One JSON line per question, resumable; the AUCs of
gold against distractor paragraphs and the paired intervals are printed::

    python benchmarks/relevance_dev.py --llm llamacpp:PATH.gguf [--skip 300 --n 60]
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import dev_range
from quality_runs import model_tag, say
from quality_stats import auc, paired_auc_bootstrap, read_jsonl

TOP_K = 5


def out_path(tag: str, skip: int) -> Path:
    return dev_range.out_path(tag, "relevance_dev", skip)


async def measure(spec: str, skip: int, n: int, path: Path) -> None:
    from selfrag.llm.factory import create_backend
    from selfrag.methods.context import format_passage
    from selfrag.methods.critique import Critic, CriticConfig
    from selfrag.methods.critique.likelihood import likelihood_relevance
    from selfrag.methods.trace import Run
    from selfrag.retrieval.links import evidence_prior
    from selfrag.retrieval.registry import retriever_factory

    pending = dev_range.pending(skip, n, path)
    if not pending:
        return
    llm = create_backend(spec)
    plain = Critic(llm, CriticConfig(source="label_probs"))
    likely = Critic(llm, CriticConfig(source="label_probs", relevance="question_likelihood"))
    bm25 = retriever_factory("bm25")
    say(f"relevance readings: {len(pending)} question(s) from #{skip} -> {path}")
    for count, q in enumerate(pending, start=1):
        result = await bm25(list(q.contexts)).retrieve(q.text, TOP_K)
        gold = set(q.metadata.get("supporting_titles") or [])
        readings = await likelihood_relevance(likely, Run(llm, None, {}), q.text, result)
        assert readings is not None
        priors = evidence_prior(q.text, result.documents, result.scores)
        paragraphs = []
        for doc, reading, prior in zip(result.documents, readings, priors, strict=True):
            label, _ = await plain.read(
                Run(llm, None, {}), "relevance",
                plain.critique_prompt("critic_relevance", question=q.text, passage=format_passage(doc)),
                action="critique_relevance", thought="benchmark", action_input=q.text,
            )
            paragraphs.append({"title": doc.title, "gold": doc.title in gold, "p_relevant": label.value,
                               "p_likelihood": None if reading is None else reading.value, "prior": round(prior, 4)})
        dev_range.append(path, {"id": q.id, "paragraphs": paragraphs})
        if count % 10 == 0 or count == len(pending):
            say(f"relevance readings: {count} of {len(pending)}")
    await llm.aclose()


def summary(records: list[dict]) -> dict:
    """AUC of each reading (gold vs distractors) and paired differences, questions resampled."""
    paras = [p for r in records for p in r["paragraphs"] if p.get("p_likelihood") is not None]
    readings = {"label question P(relevant)": lambda p: p["p_relevant"],
                "question likelihood": lambda p: p["p_likelihood"],
                "mean of the two": lambda p: (p["p_relevant"] + p["p_likelihood"]) / 2,
                "lexical prior": lambda p: p["prior"],
                "question likelihood fused with the prior": lambda p: (p["p_likelihood"] + p["prior"]) / 2}
    out: dict = {"questions": len(records), "gold": sum(p["gold"] for p in paras),
                 "distractors": sum(not p["gold"] for p in paras)}
    for name, f in readings.items():
        out[name] = auc([f(p) for p in paras if p["gold"]], [f(p) for p in paras if not p["gold"]])

    def paired(a, b):
        return paired_auc_bootstrap([[(a(p), b(p), p["gold"]) for p in r["paragraphs"]
                                      if p.get("p_likelihood") is not None] for r in records])

    out["likelihood - label question"] = paired(readings["question likelihood"], readings["label question P(relevant)"])
    out["mean of the two - likelihood"] = paired(readings["mean of the two"], readings["question likelihood"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = dev_range.arguments(__doc__, "backend spec that scores a given reply, e.g. llamacpp:PATH.gguf", 300, 60)
    args = ap.parse_args(argv)
    path = out_path(model_tag(args.llm), args.skip)
    if not args.report_only:
        asyncio.run(measure(args.llm, args.skip, args.n, path))
    print(json.dumps(summary(read_jsonl(path)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
