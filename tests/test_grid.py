"""selfrag grid: the grid file, cells run one by one in process, retries, and the same grid on Ray
(identical predictions; a worker killed with SIGKILL and its cell resumed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.errors import ConfigError
from selfrag.eval.grid import read_grid
from selfrag.eval.results import read_predictions
from tests.conftest import wait_for

REPO = Path(__file__).resolve().parents[1]
REPLIES = {"Red Planet": "Mars", "largest moon": "Ganymede", "Uranus": "William Herschel", "?": "I do not know"}


def grid_file(tmp_path: Path, *, delay: float = 0.0, concurrency: int = 2, extra: str = "", replies=None) -> Path:
    (tmp_path / "replies.json").write_text(json.dumps(replies or REPLIES))
    path = tmp_path / "grid.yaml"
    path.write_text(f"""
name: g
output: out
configs: [{REPO}/configs/vanilla_rag.yaml, {REPO}/configs/no_retrieval.yaml]
datasets: [{{label: demo, dataset: demo}}]
backends: [{{spec: "scripted:replies.json", label: script, delay: {delay}}}]
seeds: [0, 1]
set: ["cache.enabled=false", "run.concurrency={concurrency}"]
{extra}
""")
    return path


def answers(root: Path) -> dict[str, list[tuple[str, str]]]:
    """Each cell's (question id, answer) pairs, sorted by id."""
    cells = root / "cells"
    return {d.name: sorted((r["id"], r["prediction"]) for r in read_predictions(d / "predictions.jsonl"))
            for d in sorted(cells.iterdir())}


def test_the_grid_file_becomes_one_cell_per_combination(tmp_path):
    grid = read_grid(grid_file(tmp_path))
    assert [c.id for c in grid.cells] == [
        "vanilla_rag.demo.script.s0", "vanilla_rag.demo.script.s1",
        "no_retrieval.demo.script.s0", "no_retrieval.demo.script.s1",
    ]
    cell = grid.cells[1]
    assert cell.config["llm"]["seed"] == 1 and cell.config["run"]["seed"] == 1
    assert cell.config["llm"]["spec"] == f"scripted:{tmp_path / 'replies.json'}"
    assert cell.config["data"] == {**cell.config["data"], "dataset": "demo"}
    assert cell.config["cache"]["enabled"] is False
    assert cell.run_dir == str(tmp_path / "out" / "g" / "cells" / cell.id)
    assert cell.cpus == 0  # an API-style cell: one slot, no cores


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("configs: []", r"configs"),
        ("bogus: 1", r"bogus"),
        ("datasets: [{dataset: nope}]", r"grid cell .*unknown dataset"),
        ("backends: [scripted:a.json, scripted:b/a.json]", r"two cells are both named .*distinct labels"),
    ],
)
def test_a_bad_grid_file_is_a_one_line_error(tmp_path, extra, message):
    path = grid_file(tmp_path)
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith(extra.split(":")[0] + ":"))
    path.write_text(text + "\n" + extra + "\n")
    with pytest.raises(ConfigError, match=message) as info:
        read_grid(path)
    assert "\n" not in str(info.value)


def test_a_local_model_cell_holds_whole_cores(tmp_path):
    path = grid_file(tmp_path, extra='backends: [{spec: "llamacpp:/models/m.gguf", label: m, cpus: 2}, llamacpp]')
    cpus = {c.id.split(".")[2]: c.cpus for c in read_grid(path).cells}
    assert cpus == {"m": 2, "llamacpp": os.cpu_count()}


def test_in_process_grid_runs_every_cell_and_a_second_run_answers_nothing_again(tmp_path, capsys):
    path = grid_file(tmp_path)
    assert main(["grid", str(path), "--in-process"]) == 0
    out = capsys.readouterr().out
    assert "vanilla_rag.demo.script.s0" in out and "no_retrieval.demo.script.s1" in out
    root = tmp_path / "out" / "g"
    first = answers(root)
    assert len(first) == 4 and all(len(rows) == 12 for rows in first.values())
    assert dict(first["vanilla_rag.demo.script.s0"])["d1"] == "Mars"
    record = json.loads((root / "grid.json").read_text())
    assert record["complete"] and all(len(c["attempts"]) == 1 for c in record["cells"].values())
    assert "vanilla_rag.demo.script.s1" in (root / "report.md").read_text()

    lines = {d.name: (d / "predictions.jsonl").read_text() for d in (root / "cells").iterdir()}
    assert main(["grid", str(path), "--in-process"]) == 0
    capsys.readouterr()
    assert {d.name: (d / "predictions.jsonl").read_text() for d in (root / "cells").iterdir()} == lines
    assert all(c["attempts"][0]["resumed"] for c in json.loads((root / "grid.json").read_text())["cells"].values())


def test_a_failing_cell_is_retried_and_reported(tmp_path, capsys):
    replies = {**REPLIES, "?": {"error": "upstream overloaded", "status": 400}}
    path = grid_file(tmp_path, replies=replies, extra="retries: 1")
    assert main(["grid", str(path), "--in-process"]) == 1
    out = capsys.readouterr().out
    assert "running it again from its run directory (attempt 2 of 2)" in out
    record = json.loads((tmp_path / "out" / "g" / "grid.json").read_text())
    assert all(c["status"] == "failed" and len(c["attempts"]) == 2 for c in record["cells"].values())
    assert "not complete:" in (tmp_path / "out" / "g" / "report.md").read_text()


def test_an_error_no_retry_can_fix_is_not_retried(tmp_path, capsys):
    path = grid_file(tmp_path, extra=f"datasets: [{{dataset: jsonl, path: {tmp_path}/missing.jsonl}}]")
    assert main(["grid", str(path), "--in-process"]) == 1
    assert "missing.jsonl" in capsys.readouterr().out
    record = json.loads((tmp_path / "out" / "g" / "grid.json").read_text())
    assert all(len(c["attempts"]) == 1 for c in record["cells"].values())


# -- on Ray -------------------------------------------------------------------------------------------

ray_needed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None,
    reason="Ray is not installed: pip install 'selfrag[ray]'",
)


def run_grid_process(path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "selfrag", "grid", str(path), *args], cwd=path.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@ray_needed
@pytest.mark.ray
def test_the_same_grid_on_ray_and_in_process_gives_identical_predictions(tmp_path):
    here, there = tmp_path / "plain", tmp_path / "ray"
    here.mkdir()
    there.mkdir()
    plain = run_grid_process(grid_file(here), "--in-process")
    assert plain.wait(timeout=300) == 0, plain.stdout.read()
    on_ray = run_grid_process(grid_file(there), "--slots", "2")
    assert on_ray.wait(timeout=300) == 0, on_ray.stdout.read()
    record = json.loads((there / "out" / "g" / "grid.json").read_text())
    assert record["executor"] == "Ray (local)"
    pids = {c["attempts"][0]["pid"] for c in record["cells"].values()}
    assert os.getpid() not in pids  # the cells ran in Ray's worker processes
    assert answers(here / "out" / "g") == answers(there / "out" / "g")


@ray_needed
@pytest.mark.ray
def test_a_cell_whose_worker_is_killed_resumes_without_answering_twice(tmp_path):
    path = grid_file(tmp_path, delay=0.4, concurrency=1)
    grid = run_grid_process(path, "--slots", "2")
    cells = tmp_path / "out" / "g" / "cells"

    def started() -> list[Path]:
        return [d for d in cells.glob("*") if 2 <= len(read_predictions(d / "predictions.jsonl")) < 12] \
            if cells.is_dir() else []

    try:
        assert wait_for(lambda: started(), timeout=180), "no cell got going"
        cell = started()[0]
        # The Ray worker running this cell holds its run lock, which names its pid.
        victim = int((cell / "run.lock").read_text())
        assert victim != grid.pid and Path(f"/proc/{victim}/cmdline").read_bytes().startswith(b"ray::run_cell")
        os.kill(victim, signal.SIGKILL)
        assert grid.wait(timeout=300) == 0, grid.stdout.read()
    finally:
        if grid.poll() is None:
            grid.kill()
    output = grid.stdout.read()
    assert f"grid: {cell.name}: its worker process died; running it again from its run directory" in output, output
    record = json.loads((tmp_path / "out" / "g" / "grid.json").read_text())
    killed = [c for c in record["cells"].values() if len(c["attempts"]) > 1]
    assert len(killed) == 1
    assert killed[0]["attempts"][0]["error"] == "its worker process died"
    assert killed[0]["attempts"][1]["status"] == "complete" and killed[0]["attempts"][1]["resumed"]
    for cell in record["cells"].values():  # every question answered exactly once
        rows = read_predictions(Path(cell["run_dir"]) / "predictions.jsonl")
        assert sorted(r["id"] for r in rows) == sorted({r["id"] for r in rows}) and len(rows) == 12
    # The questions answered before the kill were kept (the first session), the rest answered after it.
    sessions = {r["session"] for r in read_predictions(Path(killed[0]["run_dir"]) / "predictions.jsonl")}
    assert sessions == {1, 2}


def test_without_ray_the_grid_runs_in_process_and_address_is_refused(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    path = grid_file(tmp_path)
    assert main(["grid", str(path), "--address", "auto"]) == 2
    assert capsys.readouterr().err.strip() == "selfrag: error: --address needs Ray: pip install 'selfrag[ray]'"
    assert main(["grid", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Ray is not installed (pip install 'selfrag[ray]'); running the cells one by one here" in out
    assert json.loads((tmp_path / "out" / "g" / "grid.json").read_text())["executor"] == "in-process"


def test_a_yaml_alias_bomb_in_a_grid_file_is_one_line(tmp_path, capsys):
    """The grid file goes through the same YAML reader as configs: an alias bomb is refused before it expands."""
    from selfrag.cli.main import main

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    grid = tmp_path / "grid.yaml"
    grid.write_text("\n".join(lines) + "\nconfigs: *a8\n")
    code = main(["grid", str(grid), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(grid) in err and "aliases" in err
