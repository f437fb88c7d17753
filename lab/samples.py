"""Rebuild the benchmark samples shipped inside the package (src/selfrag/data/samples/).

    python -m lab.samples                 # from ../shared/data (the default)
    python -m lab.samples --data DIR      # from another copy of the same files
    python -m lab.samples --with-evidence # also copy the Self-BioRAG evidence passages

Each sample is the first questions of a benchmark file in file order, written in
that file's own format, so the same loader reads the sample and the full file:

- HotpotQA dev distractor: the first 50 of ``hotpotqa_dev_distractor_500.jsonl``;
- HotpotQA yes/no: all 17 of ``hotpotqa_dev_yesno_17.jsonl`` (copied unchanged);
- HotpotQA fitting pool: the first 150 of ``hotpotqa_dev_pool_980.jsonl`` (what
  ``selfrag critic fit`` reads by default);
- PubMedQA PQA-L: the first 50 records of ``ori_pqal.json``, with
  ``test_ground_truth.json`` cut to those of them in the official test split;
  and the first 80 records of the official training ids (``ori_pqal_train_80.json``:
  what ``selfrag critic fit`` reads by default beside the HotpotQA pool's);
- MMLU medical: the first 9 or 8 questions of each of the six subjects (50 in all).
  The Self-BioRAG evidence passages are left out unless ``--with-evidence``:
  dmis-lab/self-biorag states no licence for them (src/selfrag/data/samples/README.md).

The licence notes beside the files are written by hand, not by this script.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "src" / "selfrag" / "data" / "samples"
MMLU_SUBJECTS = ("anatomy", "clinical_knowledge", "college_biology", "college_medicine", "medical_genetics",
                 "professional_medicine")
N_HOTPOT = N_PUBMED = N_MMLU = 50
N_FIT = 150
N_PUBMED_FIT = 80


def _first_lines(src: Path, dest: Path, n: int) -> None:
    lines = [line for line in src.read_text(encoding="utf-8").splitlines() if line.strip()][:n]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")


def hotpotqa(data: Path, out: Path) -> None:
    folder = out / "hotpotqa"
    folder.mkdir(parents=True, exist_ok=True)
    _first_lines(data / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl",
                 folder / "hotpotqa_dev_distractor_50.jsonl", N_HOTPOT)
    shutil.copyfile(data / "hotpotqa" / "hotpotqa_dev_yesno_17.jsonl", folder / "hotpotqa_dev_yesno_17.jsonl")
    _first_lines(data / "hotpotqa" / "hotpotqa_dev_pool_980.jsonl", folder / "hotpotqa_dev_pool_150.jsonl", N_FIT)


def pubmedqa(data: Path, out: Path) -> None:
    folder = out / "pubmedqa"
    folder.mkdir(parents=True, exist_ok=True)
    records = json.loads((data / "pubmedqa" / "ori_pqal.json").read_text(encoding="utf-8"))
    truth = json.loads((data / "pubmedqa" / "test_ground_truth.json").read_text(encoding="utf-8"))
    kept = dict(list(records.items())[:N_PUBMED])
    (folder / "ori_pqal.json").write_text(json.dumps(kept, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
    test = {pmid: label for pmid, label in truth.items() if pmid in kept}
    (folder / "test_ground_truth.json").write_text(json.dumps(test, indent=4) + "\n", encoding="utf-8")
    train = dict([(pmid, r) for pmid, r in records.items() if pmid not in truth][:N_PUBMED_FIT])
    (folder / f"ori_pqal_train_{N_PUBMED_FIT}.json").write_text(json.dumps(train, indent=4, ensure_ascii=False) + "\n",
                                                              encoding="utf-8")


def mmlu(data: Path, out: Path, with_evidence: bool) -> None:
    folder = out / "mmlu_evidence"
    folder.mkdir(parents=True, exist_ok=True)
    per_subject, extra = divmod(N_MMLU, len(MMLU_SUBJECTS))
    for i, subject in enumerate(MMLU_SUBJECTS):
        name = f"retrieved_mmlu_{subject}_test.jsonl"
        records = json.loads((data / "medical" / "evidence" / name).read_text(encoding="utf-8"))
        kept = records[: per_subject + (1 if i < extra else 0)]
        if not with_evidence:
            kept = [{**r, "evidence": []} for r in kept]
        (folder / name).write_text(json.dumps(kept, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the benchmark data folder (default ../shared/data)")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the samples")
    parser.add_argument("--with-evidence", action="store_true",
                        help="keep the Self-BioRAG evidence passages in the MMLU sample (no stated licence)")
    args = parser.parse_args()
    if not args.data.is_dir():
        raise SystemExit(f"lab.samples: {args.data} is not a folder; give --data with the benchmark files")
    hotpotqa(args.data, args.out)
    pubmedqa(args.data, args.out)
    mmlu(args.data, args.out, args.with_evidence)
    for path in sorted(args.out.rglob("*")):
        if path.is_file():
            print(f"{path.relative_to(args.out)}  {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
