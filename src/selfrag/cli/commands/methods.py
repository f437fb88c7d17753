"""selfrag methods: list the registered methods."""

from __future__ import annotations

import argparse
import json

from ...methods.factory import available_methods
from ...methods.presets import PRESETS
from ...serialize import to_jsonable

NAME = "methods"
HELP = "list the registered methods"
ORDER = 30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print name, type, description and config keys as JSON")
    parser.add_argument("--presets", action="store_true", help="with --json: the seed presets instead of the methods")


def run(args: argparse.Namespace) -> int:
    methods = available_methods()
    if args.json:
        rows = [
            {
                "name": name,
                "type": cls.type.value,
                "section": cls.section(),
                "description": cls.description,
                # Each key's default as a JSON value (nested sections as objects).
                "config": {
                    k: to_jsonable(default)
                    for k, (_, _, default) in cls.get_config_schema().items()
                },
            }
            for name, cls in methods.items()
        ]
        presets = [{"file": f"configs/{p.file}", "method": p.method, "seed": p.seed, "pipeline": p.pipeline}
                   for p in PRESETS]
        print(json.dumps(rows if not args.presets else presets, indent=2))
        return 0
    width = max(len(n) for n in methods)
    for name, cls in methods.items():
        print(f"{name:<{width}}  {cls.description}")
    print("\nThe seeds' pipelines, as presets (selfrag run configs/FILE, or ask --config configs/FILE):")
    width = max(len(p.file) for p in PRESETS)
    for p in PRESETS:
        print(f"  {p.file:<{width}}  {p.seed}, {p.method}: {p.pipeline}")
    return 0
