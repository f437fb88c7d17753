"""The lab (lab/) uses selfrag only through its public names, stays in small files, and runs every entry point.

A private name is one that starts with an underscore (dunders aside). The lab may not
import one from selfrag, import a private module (``selfrag.x._y``), or read a private
attribute of anything but its own ``self``/``cls`` or a module it imported from
elsewhere (``os._exit`` is not selfrag's business): any other object may be a selfrag
one, so the check is strict there. Where a study needs something internal, the
library gets a small public function, or the study goes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"
MAX_LINES = 400


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_selfrag(module: str) -> bool:
    return module == "selfrag" or module.startswith("selfrag.")


def _root(node: ast.AST) -> str | None:
    """The name an attribute chain starts from (``a`` in ``a.b().c[0]._d``), if it is a plain name."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def private_uses(source: str, filename: str = "<lab>") -> list[tuple[int, str]]:
    """Every private use of selfrag in ``source``: ``(line, what)``, in line order."""
    tree = ast.parse(source, filename)
    found: list[tuple[int, str]] = []
    elsewhere: set[str] = set()  # names bound by importing something other than selfrag
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _is_selfrag(alias.name):
                    elsewhere.add(alias.asname or alias.name.split(".")[0])
                elif any(_private(part) for part in alias.name.split(".")):
                    found.append((node.lineno, f"imports the private module {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or not _is_selfrag(module):
                elsewhere.update(alias.asname or alias.name for alias in node.names)
                continue
            if any(_private(part) for part in module.split(".")):
                found.append((node.lineno, f"imports from the private module {module}"))
            found += [(node.lineno, f"imports the private name {alias.name} from {module}")
                      for alias in node.names if _private(alias.name)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = _root(node.value)
            if root not in ("self", "cls") and root not in elsewhere:
                found.append((node.lineno, f"reads the private attribute .{node.attr} of {root or 'an expression'}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            found.append((node.lineno, f"reads the private attribute {node.args[1].value!r} through {node.func.id}"))
    return sorted(found)


def lab_files() -> list[Path]:
    return sorted(LAB.rglob("*.py"))


def test_the_lab_uses_only_public_selfrag_names():
    assert lab_files(), f"no Python file under {LAB}"
    problems = [f"{path.relative_to(ROOT)}:{line}: {what}"
                for path in lab_files()
                for line, what in private_uses(path.read_text(encoding="utf-8"), str(path))]
    assert not problems, "the lab uses private selfrag names:\n" + "\n".join(problems)


def test_the_check_finds_every_kind_of_private_use():
    planted = "\n".join([
        "import os",
        "import numpy as np",
        "import selfrag.retrieval._hidden",  # 3
        "from selfrag.retrieval.bm25 import BM25Retriever, _doc_text",  # 4
        "from selfrag.llm._secret import key",  # 5
        "from lab.machine import machine",
        "from .helpers import _local",
        "def f(llm, retriever):",
        "    retriever._docs",  # 9
        "    BM25Retriever(k1=1.5)._stemmer.stemWords([])",  # 10
        "    getattr(llm, '_calls')",  # 11
        "    os._exit(0); np._NoValue; machine.__name__; llm.__class__",
        "    self_rag = selfrag.retrieval._hidden.x",  # 13: the private module read as an attribute
        "class Mine:",
        "    def go(self):",
        "        return self._own, _local",
    ])
    assert [line for line, _ in private_uses(planted)] == [3, 4, 5, 9, 10, 11, 13]
    assert private_uses("from selfrag import Pipeline\nfrom selfrag.llm import ScriptedBackend\n") == []


def test_the_check_reports_a_planted_file_by_path_and_line(tmp_path):
    plant = tmp_path / "study.py"
    plant.write_text("from selfrag.methods.trace import Run\nx = Run(None, None, {})._records\n", encoding="utf-8")
    (line, what), = private_uses(plant.read_text(encoding="utf-8"), str(plant))
    assert (line, what) == (2, "reads the private attribute ._records of Run")


def test_no_lab_file_is_longer_than_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in lab_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these by responsibility (at most {MAX_LINES} lines each): {long}"


def _entry_points() -> set[str]:
    """Lab modules with a ``main`` function and a ``__main__`` guard: what ``python -m lab.NAME`` runs."""
    names = set()
    for path in lab_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        has_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
        guarded = any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)
        if has_main and guarded:
            names.add(path.stem)
    return names - {"run_all"}


def test_run_all_runs_every_entry_point_or_says_why_not():
    from lab.run_all import ENTRY_POINTS, NOT_RUN

    listed = {name for name, _ in ENTRY_POINTS} | set(NOT_RUN)
    assert listed == _entry_points()
    assert not {name for name, _ in ENTRY_POINTS} & set(NOT_RUN)


@pytest.mark.parametrize("name", sorted(_entry_points()))
def test_every_entry_point_imports_as_part_of_the_lab_package(name):
    import importlib

    module = importlib.import_module(f"lab.{name}")
    assert callable(module.main) and module.__doc__
