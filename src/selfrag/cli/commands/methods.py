"""selfrag methods: list the registered methods."""

from __future__ import annotations

import argparse
import json

from ...methods.registry import available_methods

NAME = "methods"
HELP = "list the registered methods"
ORDER = 30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print name, type, description and config keys as JSON")


def run(args: argparse.Namespace) -> int:
    methods = available_methods()
    if args.json:
        rows = [
            {
                "name": name,
                "type": cls.type.value,
                "section": cls.section(),
                "description": cls.description,
                "config": {k: repr(v[2]) for k, v in cls.get_config_schema().items()},
            }
            for name, cls in methods.items()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(n) for n in methods)
    for name, cls in methods.items():
        print(f"{name:<{width}}  {cls.description}")
    return 0
