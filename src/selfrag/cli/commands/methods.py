"""selfrag methods: list the registered methods."""

from __future__ import annotations

import argparse
import json

from ...methods.factory import available_methods
from ...serialize import to_jsonable

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
                # Each key's default as a JSON value (nested sections as objects).
                "config": {
                    k: to_jsonable(default)
                    for k, (_, _, default) in cls.get_config_schema().items()
                },
            }
            for name, cls in methods.items()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(n) for n in methods)
    for name, cls in methods.items():
        print(f"{name:<{width}}  {cls.description}")
    return 0
