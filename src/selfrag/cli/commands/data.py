"""selfrag data: the benchmark samples shipped with selfrag, and downloading the full files."""

from __future__ import annotations

import argparse
import json
import sys

NAME = "data"
HELP = "list the shipped benchmark samples, or download the full benchmark files (with checksums)"
DESCRIPTION = (
    "`selfrag data list` shows the benchmark samples shipped inside selfrag (what configs/ run on by "
    "default) and the full files `selfrag data download NAME` fetches from their official locations, "
    "verified against pinned sizes and SHA-256 checksums. Name the result in a config's data.path."
)
ORDER = 52
DEFAULT_DIR = "data"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="{list,download}", required=True)
    listing = sub.add_parser("list", help="the shipped samples and the downloadable files")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    fetch = sub.add_parser(
        "download", help="fetch a benchmark's full files into DIR/NAME/ (verified, resumable)",
        description="Fetch a benchmark's official files into DIR/NAME/, with a progress bar. Each file is "
        "written as NAME.part and renamed only when its size and SHA-256 match; an interrupted download "
        "resumes where it stopped when run again.",
    )
    fetch.add_argument("name", metavar="NAME", help="hotpotqa, pubmedqa or mmlu_evidence (see `selfrag data list`)")
    fetch.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR", help=f"where to put it (default ./{DEFAULT_DIR})")
    fetch.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    return _download(args) if args.action == "download" else _list(args)


def _mb(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.1f} MB"


def _list(args: argparse.Namespace) -> int:
    from ...data.shipped import SAMPLES
    from ...eval.download import CATALOG

    if args.json:
        print(json.dumps({
            "samples": [{"name": s.name, "dataset": s.dataset, "data_path": f"sample:{s.name}",
                         "questions": s.questions, "description": s.description, "licence": s.licence}
                        for s in SAMPLES.values()],
            "downloads": [{"name": d.name, "dataset": d.dataset, "files": [f.url for f in d.files],
                           "bytes": d.total_size, "pinned": all(f.sha256 for f in d.files),
                           "checksum_source": d.checksum_source, "description": d.description,
                           "licence": d.licence, "homepage": d.homepage} for d in CATALOG.values()],
        }, indent=2))
        return 0
    print("Shipped samples (data.path: sample:NAME; data.path: null reads the sample named like the dataset):")
    width = max(len(n) for n in SAMPLES)
    for s in SAMPLES.values():
        print(f"  {s.name:<{width}}  {s.dataset:<13} {s.questions:>3} questions · {s.licence} · {s.description}")
    print("\nFull files (selfrag data download NAME):")
    width = max(len(n) for n in CATALOG)
    for d in CATALOG.values():
        pinned = "size + SHA-256 pinned" if all(f.sha256 for f in d.files) else "not pinned"
        print(f"  {d.name:<{width}}  {_mb(d.total_size):>8} · {pinned} · {d.licence} · {d.description}")
        print(f"  {'':<{width}}  from {d.homepage}")
    return 0


def _download(args: argparse.Namespace) -> int:
    from ...eval.download import fetch, get_download

    download = get_download(args.name)
    print(f"selfrag: {download.name}: {len(download.files)} file(s), {_mb(download.total_size)}, "
          f"licence {download.licence}", file=sys.stderr)
    path = fetch(download, args.dir, progress=not args.quiet)
    print(path)
    print(f"use it: selfrag run configs/self_rag.yaml --set data.dataset={download.dataset} --set data.path={path}",
          file=sys.stderr)
    return 0
