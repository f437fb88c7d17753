"""Variants, datasets and run directories of the quality benchmark.

Layout (``<out>`` is ``lab/results`` by default)::

    <out>/runs/quality/<model_tag>/<dataset>/<variant>/   a normal selfrag run directory

``model_tag`` is the GGUF file's stem (``qwen2.5-coder-0.5b-instruct``) or
``embedded`` for the default model. A run directory may be made by hand with
the command :func:`command_line` prints; the benchmark then resumes it, or
reads it back when it already answers every question asked for.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shlex
import shutil
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.quality_kept import predictions, refresh
from lab.quality_stats import read_predictions
from selfrag.cli.signals import sigterm_stops

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT.parent / "shared" / "data"
CONFIGS = ROOT / "configs"


@dataclass(frozen=True)
class Variant:
    name: str
    config: str
    overrides: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: str  # the selfrag dataset type (data.dataset)
    path: Path
    metric: str  # headline metric, also the paired comparison's
    default_n: str  # which --n-* flag sets n: "hotpot", "other" or "all"
    note: str
    overrides: tuple[str, ...] = ()


VARIANT_LIST = [
    Variant("no_retrieval", "no_retrieval.yaml", note="the model alone"),
    Variant("vanilla_rag", "vanilla_rag.yaml", note="retrieve top 5, answer once"),
    Variant("vanilla_rag_evidence", "vanilla_rag_evidence.yaml",
            note="the evidence-ranked top 5 of 10, the passages the Self-RAG joint reads; answer once"),
    Variant("self_rag", "self_rag.yaml", note="the defaults: the joint answer over the evidence-ranked passages, candidates only when it is empty, a confidence"),
    Variant("self_rag_separate", "self_rag_separate.yaml", note="JSON critics"),
    Variant("self_rag_critic", "self_rag_critic.yaml",
            note="critiques from label probabilities; relevance: label question and question likelihood"),
    Variant("self_rag_segment", "self_rag_segment.yaml", ("self_rag_segment.short_answer=true",),
            note="segment-level beam search, then the short answer over the best beam's passages"),
    Variant("self_corrective", "self_corrective.yaml", ("self_corrective.top_k=5",),
            note="vanilla_rag's 5 passages per search (the seed's preset reads 3)"),
    Variant("react_rag", "react_rag.yaml"),
    Variant("self_rag_seed000", "self_rag_seed000.yaml", note="seed 000's 4-phase pipeline exactly (1 + 2n calls)"),
    Variant("self_rag_seed003", "self_rag_seed003.yaml", note="seed 003's 7-step JSON pipeline exactly (1 + 4k calls)"),
    # Not run by default (--only NAME): a setting other than the default that an open question is about.
    Variant("self_rag_critic_text", "self_rag_critic.yaml", ("self_rag_critic.critic.source=text",),
            "critic reading generated text labels (a backend without log-probabilities)"),
    Variant("vanilla_rag_top10", "vanilla_rag.yaml", ("retrieval.top_k=10",),
            "every retrieved passage (10), one call"),
    Variant("self_rag_abstain", "self_rag.yaml", ("self_rag.abstain=[relevance < 0.7]",),
            "abstains unless a passage's fused relevance reaches 0.7"),
    Variant("self_rag_abstain_support", "self_rag.yaml", ("self_rag.abstain=[support < partially_supported]",),
            "abstains unless a candidate is at least partially supported"),
    Variant("vanilla_rag_calibrated", "vanilla_rag.yaml", ("vanilla.answer_reading=calibrated",),
            "a choice answer read from label probabilities, the prompt's content-free bias divided out"),
    Variant("self_rag_abstain_confirmed", "self_rag.yaml",
            ("self_rag.abstain=[relevance < 0.7, unconfirmed]",),
            "abstains unless a passage's fused relevance reaches 0.7 and another candidate gives the same answer"),
]
VARIANTS = {v.name: v for v in VARIANT_LIST}
DEFAULT_VARIANTS = tuple(v.name for v in VARIANT_LIST[:9])
# Every method is compared with vanilla_rag over the same passages (the evidence ranking), and with
# plain vanilla_rag (BM25's top 5).
BASELINE = "vanilla_rag_evidence"
PLAIN = "vanilla_rag"

DATASET_LIST = [
    Dataset("hotpotqa", "hotpotqa", DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl", "f1", "hotpot",
            "HotpotQA dev distractor (first {n}); retrieval over each question's own 10 paragraphs"),
    Dataset("hotpotqa_yesno", "hotpotqa", DATA / "hotpotqa" / "hotpotqa_dev_yesno_17.jsonl", "yesno", "all",
            "HotpotQA dev yes/no comparison questions (all {n}); accuracy = the normalised answer is the gold yes/no"),
    Dataset("hotpotqa_next", "hotpotqa", DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl", "f1", "hotpot",
            "HotpotQA dev distractor, a second sample: the {n} questions from the 200th on (data.skip=200); "
            "no method setting was chosen on them, though the coverage of the joint candidate's 5-of-10 "
            "passages was counted over questions 100-499",
            ("data.skip=200",)),
    Dataset("hotpotqa_mix", "hotpotqa", DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl", "f1", "hotpot",
            "HotpotQA dev (first {n}) with the gold paragraphs removed from about half the questions "
            "(data.remove_gold=0.5, chosen by question id): abstaining is right on those",
            ("data.remove_gold=0.5",)),
    Dataset("hotpotqa_mix_next", "hotpotqa", DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl", "f1", "hotpot",
            "HotpotQA dev, the {n} questions from the 300th on (data.skip=300), with the gold paragraphs removed "
            "from about half (data.remove_gold=0.5): abstention on questions no confidence rule was fitted on",
            ("data.skip=300", "data.remove_gold=0.5")),
    Dataset("pubmedqa", "pubmedqa", DATA / "pubmedqa" / "ori_pqal.json", "accuracy", "other",
            "PubMedQA PQA-L (first {n}); retrieval over each question's own abstract contexts"),
    Dataset("mmlu_evidence", "mmlu_evidence", DATA / "medical" / "evidence", "accuracy", "other",
            "MMLU medical with Self-BioRAG evidence (first {n} in file order); retrieval over each "
            "question's 10 evidence passages"),
]
DATASETS = {d.name: d for d in DATASET_LIST}


def say(message: str) -> None:
    print(f"[quality] {message}", file=sys.stderr, flush=True)


def missing_configs() -> list[str]:
    return sorted({v.config for v in VARIANT_LIST if not (CONFIGS / v.config).is_file()})


# -- the model ----------------------------------------------------------------------------


def model_tag(spec: str | None) -> str:
    """``embedded`` for the default model, a GGUF file's stem, else the spec's model name made path-safe."""
    from selfrag.llm.factory import parse_spec

    provider, target, _ = parse_spec(spec)
    if provider == "llamacpp":
        return Path(target).stem if target else "embedded"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{provider}-{target}").strip("-") or "model"


def model_file(spec: str | None) -> Path | None:
    from selfrag.llm.factory import parse_spec

    provider, target, _ = parse_spec(spec)
    if provider != "llamacpp":
        return None
    if target:
        return Path(target).expanduser()
    try:
        from selfrag.llm.llamacpp import default_model_path

        return default_model_path()
    except Exception:  # the embedded model's package is missing: no path to report
        return None


def file_sha256(path: Path | None) -> str | None:
    if path is None or not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- one (dataset, variant) run --------------------------------------------------------------


def target_n(dataset: Dataset, args: Any) -> int | None:
    """Questions asked for (None: all of them)."""
    return {"hotpot": args.n_hotpot, "other": args.n_other, "all": None}[dataset.default_n]


def overrides(dataset: Dataset, variant: Variant, n: int | None, *, shown: bool = False) -> list[str]:
    """The ``--set`` overrides of one run (``shown``: the data path as :func:`command_line` prints it)."""
    path = _shown_path(dataset.path) if shown else str(dataset.path)
    out = [f"data.dataset={dataset.kind}", f"data.path={path}"]
    out.append(f"data.subset_size={'null' if n is None else n}")
    return [*out, "cache.enabled=false", *dataset.overrides, *variant.overrides]


def _shown_path(path: Path) -> str:
    """Paths under the repository's parent as ``../...`` (run from the repository root)."""
    try:
        return str(Path("..") / path.resolve().relative_to(ROOT.parent))
    except ValueError:
        return str(path)


def repo_path(path: Path) -> str:
    """``path`` relative to the repository root when it lies under it (as reports and commands name it)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def runs_root(out: Path, tag: str) -> Path:
    return out / "runs" / "quality" / tag


def run_dir(out: Path, tag: str, dataset: Dataset, variant: Variant) -> Path:
    return runs_root(out, tag) / dataset.name / variant.name


def command_line(out: Path, tag: str, dataset: Dataset, variant: Variant, n: int | None, llm: str | None) -> str:
    """The ``selfrag run`` command that makes this run directory by hand (from the repository root)."""
    parts = ["selfrag", "run", f"configs/{variant.config}"]
    if llm:
        parts += ["--llm", llm]
    for o in overrides(dataset, variant, n, shown=True):
        parts += ["--set", o]
    dest = run_dir(out, tag, dataset, variant)
    parts += ["--output", repo_path(dest.parent), "--run-id", variant.name]
    return shlex.join(parts)


def load_cfg(dataset: Dataset, variant: Variant, n: int | None, llm: str | None):
    from selfrag.config import load_config

    sets: list[Any] = list(overrides(dataset, variant, n))
    if llm:
        sets.append(("llm.spec", llm, "--llm"))  # as `selfrag run --llm` takes it: not YAML-parsed
    return load_config(CONFIGS / variant.config, sets)


def selection(cfg) -> list[str]:
    from selfrag.eval.datasets import load_dataset

    return [q.id for q in load_dataset(cfg.data).questions]


@dataclass
class RunState:
    rows: list[dict[str, Any]]  # the selection's records, in question order
    wanted: list[str]
    note: str = ""


async def ensure_run(dataset: Dataset, variant: Variant, args: Any, backend: Any) -> RunState:
    """Answer what is missing of one run (resuming its directory), or read it back when complete.

    ``backend()`` returns the shared LLM backend (built on first use).
    """
    from selfrag.errors import ConfigError, DataError
    from selfrag.eval.runner import run_experiment_async

    n = target_n(dataset, args)
    cfg = load_cfg(dataset, variant, n, args.llm)
    wanted = selection(cfg)
    dest = run_dir(args.out, args.tag, dataset, variant)
    preds = predictions(dest)  # restored from the committed slim copy on a fresh clone
    done = {r["id"] for r in read_predictions(preds, wanted) if r.get("error") is None}
    if all(q in done for q in wanted):
        return RunState(read_predictions(preds, wanted), wanted)
    if args.report_only:
        return RunState(read_predictions(preds, wanted), wanted)
    resume = dest if (dest / "config.yaml").is_file() else None
    if resume is None and dest.exists():
        if any(dest.iterdir()) and preds.is_file():
            return RunState(read_predictions(preds, wanted), wanted, f"{dest} has predictions but no config.yaml")
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    say(f"{dataset.name} / {variant.name}: {len(done)} of {len(wanted)} answered, "
        f"{'resuming' if resume else 'starting'} {dest}")
    note = ""
    try:
        await run_experiment_async(
            cfg, output_root=dest.parent, run_id=dest.name, resume_dir=resume,
            progress=args.progress, llm=backend(cfg),
        )
    except (DataError, ConfigError) as exc:
        # A hand-started run holds the directory, or the variant's settings changed since its answers
        # were written (resume would mix two set-ups; --fresh starts it over): report what it has.
        note = f"not resumed: {exc}"
        say(f"{dataset.name} / {variant.name}: {note}")
    refresh(dest)
    return RunState(read_predictions(preds, wanted), wanted, note)


def settings_remark(dataset: Dataset, variant: Variant, n: int | None, llm: str | None, dest: Path) -> str:
    """A remark when ``dest``'s answers were written with other settings than the variant's today ("" if not).

    A config changed after a run was measured leaves its row standing for the old settings; the
    report says so rather than present it as today's (``--fresh`` measures it again).
    """
    from selfrag.errors import ConfigError
    from selfrag.eval.resume import default_changes, setting_differences

    try:
        today = load_cfg(dataset, variant, n, llm)
    except ConfigError as exc:
        # The YAML changed under a long run (a key this process's code does not know): the
        # answers are on disk; the report says so instead of dying at its last step.
        return f"not compared with configs/{variant.config}, which does not load in this process: {exc}"
    diffs = setting_differences(today, dest) + default_changes(today, dest)
    return f"measured with other settings than configs/{variant.config} has now ({', '.join(diffs)})" if diffs else ""


def discard(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def measure_then_report(measure: Callable[[], Awaitable[None]], report: Callable[[], Path]) -> tuple[int, Path]:
    """Run ``measure`` (``kill PID`` stops it like Ctrl-C) and write the report whatever happened:
    the exit code (130 when stopped) and the report's path."""
    code = 0
    try:
        with sigterm_stops():
            asyncio.run(measure())
    except KeyboardInterrupt:
        say("interrupted: the report covers what was answered (rerun the same command to resume)")
        code = 130
    finally:
        path = report()
    return code, path
