"""Readings for the fitted critic's study (issue 68): every question read as ``selfrag critic fit`` reads it.

    python -m lab.critic_reads --llm llamacpp:PATH --set pool --set hotpotqa_next [--limit N]

Each set's questions go through the default ``self_rag`` up to its conclusion
with no heads (``selfrag.eval.critic_read.Reader``): the passage signals, the
answer, its readings and hidden states, and on every ``--candidates-every``-th
question the one-passage candidates with their likelihood over the answer's
passages. One line per question is appended to
``results/runs/critic/<model>/<set>.jsonl`` as it is read, so a stopped
reading resumes. The fits, the learning curves and the measures come from
these files without another call (``python -m lab.critic_study``).

``pool`` is the fitting pool (980 HotpotQA dev questions in no evaluation
sample, gold removed from about half) and ``pubmedqa_pool`` a second one of
another kind (PubMedQA's official training ids, untitled one-hop abstracts,
the nearest other abstract in place of the own for about half);
``pubmedqa_test_mix`` is its report set (the official test ids, the same
way). The other sets are the quality benchmark's (``lab.quality_runs``), read
at its sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab.quality_runs import DATA, DATASETS, model_tag

HERE = Path(__file__).resolve().parent
RUNS = HERE / "results" / "runs" / "critic"
POOL = DATA / "hotpotqa" / "hotpotqa_dev_pool_980.jsonl"
PUBMED = DATA / "pubmedqa" / "ori_pqal.json"


@dataclass(frozen=True)
class ReadSet:
    name: str
    kind: str
    path: Path
    n: int | None
    remove_gold: float = 0.0
    skip: int = 0
    split: str | None = None


def read_sets() -> dict[str, ReadSet]:
    sets = {"pool": ReadSet("pool", "hotpotqa", POOL, None, 0.5),
            # A second kind of corpus to fit on: one-hop questions over untitled abstract sections (the
            # official PubMedQA training ids), the nearest other abstract in place of its own for about half.
            "pubmedqa_pool": ReadSet("pubmedqa_pool", "pubmedqa", PUBMED, None, 0.5, split="train"),
            # ... and to report on: the official test ids, the same way.
            "pubmedqa_test_mix": ReadSet("pubmedqa_test_mix", "pubmedqa", PUBMED, 100, 0.5, split="test")}
    sizes = {"hotpotqa_yesno": None, "pubmedqa": 50, "mmlu_evidence": 50}
    for name, d in DATASETS.items():
        over = dict(o.split("=", 1) for o in d.overrides)
        sets[name] = ReadSet(name, d.kind, d.path, sizes.get(name, 100), float(over.get("data.remove_gold", 0)),
                             int(over.get("data.skip", 0)))
    return sets


def models_read(given: list[str] | None) -> list[str]:
    """The model tags given, else every one with readings under results/runs/critic/."""
    return list(given) if given else sorted(p.name for p in RUNS.iterdir() if p.is_dir()) if RUNS.is_dir() else []


def readings_path(tag: str, name: str) -> Path:
    return RUNS / tag / f"{name}.jsonl"


def slim_path(tag: str, name: str) -> Path:
    return RUNS / tag / f"{name}.slim.jsonl.gz"


def readings(tag: str, name: str) -> list[dict]:
    """A set's readings; without the full file (not committed: hidden states), the committed slim copy,
    whose fits have no hidden-state heads."""
    from selfrag.eval.critic_read import load_readings

    path, slim = readings_path(tag, name), slim_path(tag, name)
    if path.is_file():
        return load_readings(path)
    if slim.is_file():
        return [json.loads(line) for line in gzip.decompress(slim.read_bytes()).decode("utf-8").splitlines()]
    return []


def write_slim(full: Path, slim: Path) -> None:
    """The readings without their hidden states, gzipped: small enough to commit, so a fresh clone can
    refit and study every scalar head (and relabel) without reading a question again."""
    if not full.is_file():
        return
    lines = []
    for line in full.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.dumps({**json.loads(line), "states": {}}, ensure_ascii=False))
        except ValueError:
            continue  # a torn last line: the next read rewrites it
    slim.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))


def say(message: str) -> None:
    print(f"[critic] {message}", file=sys.stderr, flush=True)


async def read_set(spec: str | None, s: ReadSet, limit: int | None, every: int) -> None:
    from selfrag.assemble import build_backend, build_method
    from selfrag.eval.critic_read import Reader, hidden_layers, read_all, reading_config
    from selfrag.eval.datasets import load_dataset

    overrides = ([f"data.skip={s.skip}"] if s.skip else []) + ([f"data.split={s.split}"] if s.split else [])
    cfg = reading_config(spec, s.kind, str(s.path), s.remove_gold, overrides)
    sizes = [n for n in (s.n, limit) if n is not None]
    dataset = load_dataset(cfg.data, limit=min(sizes) if sizes else None)
    llm = build_backend(cfg)
    reader = Reader(build_method(cfg, llm, None), hidden_layers(llm), candidates_every=every)
    path = readings_path(model_tag(spec), s.name)
    started = time.perf_counter()

    def tick(done: int | None, total: int | None, record: dict | None) -> None:
        if record is not None and (done % 10 == 0 or done == total):
            rate = (time.perf_counter() - started) / max(1, done - first[0])
            say(f"{s.name}: {done}/{total} read ({rate:.1f} s/question this session)")
        elif record is None and done is not None:
            first[0] = done

    first = [0]
    try:
        read = await read_all(reader, dataset.questions, path, tick)
    finally:
        await llm.aclose()
        write_slim(path, slim_path(model_tag(spec), s.name))
    say(f"{s.name}: {read} read now; {path}")


def main(argv: list[str] | None = None) -> int:
    sets = read_sets()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default=None, help="backend spec (default: the embedded model)")
    parser.add_argument("--set", dest="sets", action="append", required=True, choices=sorted(sets))
    parser.add_argument("--limit", type=int, default=None, help="read at most the first N of each set")
    parser.add_argument("--candidates-every", type=int, default=None,
                        help="one-passage candidates on every K-th question (default: 4 on the pool, 1 elsewhere)")
    args = parser.parse_args(argv)
    for name in args.sets:
        every = args.candidates_every or (4 if name == "pool" else 1)
        asyncio.run(read_set(args.llm, sets[name], args.limit, every))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
