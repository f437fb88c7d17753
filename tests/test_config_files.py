"""Config files that are not UTF-8, empty, or hold an unknown top-level key (issue 55, defects 8-10).

Each is one line naming the file, through `selfrag run` as a real process, and
never runs anything: an empty config used to run the default experiment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import selfrag
from selfrag.config import load_config
from selfrag.errors import ConfigError

SRC = str(Path(selfrag.__file__).resolve().parents[1])


def run(config: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "selfrag", "run", str(config), "--output", "out", "--no-progress"],
                          cwd=config.parent, env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (config.parent / "out").exists()  # nothing was run
    return proc.stderr.strip()


@pytest.mark.parametrize("content", [b"\xff\xfe a: 1", b"llm:\n  spec: caf\xe9\n"], ids=["bom-like", "latin-1"])
def test_a_config_that_is_not_utf8_is_one_line_naming_the_file(tmp_path, content):
    bad = tmp_path / "c.yaml"
    bad.write_bytes(content)
    line = run(bad)
    assert f"config file {bad}:" in line and "is not UTF-8 text" in line
    (tmp_path / "child.yaml").write_text("inherits: c.yaml\nrun: {seed: 1}\n")
    assert f"config file {bad}:" in run(tmp_path / "child.yaml")  # the parent is named, not the child


def test_the_line_of_the_first_bad_byte_is_named(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_bytes(b"run:\n  seed: 1\nexperiment: {name: caf\xe9}\n")
    assert f"config file {bad}:3 is not UTF-8 text (byte 0xe9)" in run(bad)


@pytest.mark.parametrize("content", ["", "\n\n", "# nothing here yet\n# still nothing\n", "---\n"])
def test_an_empty_or_comment_only_config_says_so_instead_of_running_the_default(tmp_path, content):
    empty = tmp_path / "empty.yaml"
    empty.write_text(content)
    assert f"config file {empty} is empty" in run(empty)


def test_an_empty_parent_is_named(tmp_path):
    (tmp_path / "base.yaml").write_text("# to do\n")
    (tmp_path / "child.yaml").write_text("inherits: base.yaml\nrun: {seed: 1}\n")
    with pytest.raises(ConfigError, match=f"config file {tmp_path / 'base.yaml'} is empty"):
        load_config(tmp_path / "child.yaml")


@pytest.mark.parametrize("content", ["bogus_key: 1\n", "bogus_key: [1, 2]\n", "bogus_key: {a: 1}\n"])
def test_an_unknown_top_level_key_is_named_with_its_file_and_the_allowed_sections(tmp_path, content):
    config = tmp_path / "c.yaml"
    config.write_text("run: {seed: 1}\n" + content)
    line = run(config)
    assert f"unknown config key 'bogus_key' (in {config})" in line
    assert "top-level sections are architecture, augmentations, cache, data" in line and "self_rag" in line
    assert "valid dictionary" not in line


def test_a_method_section_that_is_not_a_mapping_is_named(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("self_rag: 3\n")
    assert f"config section 'self_rag' (in {config}) must be a mapping" in run(config)


def test_an_unknown_key_from_a_parent_names_the_parent(tmp_path):
    (tmp_path / "base.yaml").write_text("bogus_key: 1\n")
    (tmp_path / "child.yaml").write_text("inherits: base.yaml\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'bogus_key' \(in .*base\.yaml\)"):
        load_config(tmp_path / "child.yaml")


def test_a_folder_given_as_the_config_is_named_as_one(tmp_path):
    (tmp_path / "configs").mkdir()
    with pytest.raises(ConfigError, match="is a folder; give a YAML file"):
        load_config(tmp_path / "configs")


def test_yaml_nested_too_deep_is_one_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("run: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "not valid YAML (nested too deeply)" in run(config)


# -- YAML alias bombs: refused before anything expands them ------------------------------------

MEMORY_LIMIT = 1 << 30  # the child's address space: a regression fails the test instead of the machine


def laughs(levels: int = 9, flow: bool = False) -> str:
    """A "billion laughs" mapping: each level lists the one before nine times (9**levels values)."""
    items = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    items += [f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "{" + ", ".join(items) + "}" if flow else "\n".join("    " + item for item in items)


def bounded(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run([sys.executable, "-m", "selfrag", *argv], cwd=cwd, env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)


@pytest.fixture
def experiment(tmp_path) -> Path:
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "question": "What is the capital?", "answers": ["Paris"]}\n')
    (tmp_path / "script.json").write_text('{"capital": "Paris"}')
    (tmp_path / "plain.yaml").write_text("architecture: {name: no_retrieval}\ndata: {dataset: jsonl, path: q.jsonl}\n"
                                         "cache: {enabled: false}\n")
    return tmp_path


def refused_in_one_line(proc: subprocess.CompletedProcess, out: Path) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not out.exists()  # no run folder left with only ledger.jsonl and run.lock
    return proc.stderr.strip()


def test_an_alias_bomb_in_a_free_form_mapping_is_refused_in_one_line(experiment):
    """retrieval.index_params (dict[str, Any]) took 1.9 GB and 600 s, then a pydantic-core abort."""
    config = experiment / "bomb.yaml"
    config.write_text("retrieval:\n  index_params:\n" + laughs() + "\n" + (experiment / "plain.yaml").read_text())
    proc = bounded(["run", str(config), "--llm", "scripted:script.json", "--no-progress", "--output", "out"], experiment)
    line = refused_in_one_line(proc, experiment / "out")
    assert f"{config}:" in line and "holds more than 100,000 values, aliases (*name) counted" in line


def test_an_alias_bomb_through_set_is_refused_in_one_line(experiment):
    proc = bounded(["run", "plain.yaml", "--llm", "scripted:script.json", "--no-progress", "--output", "out",
                    "--set", "retrieval.index_params=" + laughs(flow=True)], experiment)
    line = refused_in_one_line(proc, experiment / "out")
    assert line.endswith("--set retrieval.index_params: this YAML value holds more than 100,000 values, aliases "
                         "(*name) counted each time they are used; a config never needs that many: remove the aliases")


def test_an_alias_bomb_in_a_parent_config_names_the_parent(experiment):
    parent = experiment / "parent.yaml"
    parent.write_text("retrieval:\n  index_params:\n" + laughs() + "\n")
    (experiment / "child.yaml").write_text("inherits: parent.yaml\n" + (experiment / "plain.yaml").read_text())
    proc = bounded(["run", "child.yaml", "--llm", "scripted:script.json", "--no-progress", "--output", "out"], experiment)
    assert f"{parent}:" in refused_in_one_line(proc, experiment / "out")


def test_an_alias_inside_its_own_anchor_is_refused(experiment):
    config = experiment / "loop.yaml"
    config.write_text("retrieval:\n  index_params: &a\n    x: [*a]\n" + (experiment / "plain.yaml").read_text())
    proc = bounded(["run", str(config), "--llm", "scripted:script.json", "--no-progress", "--output", "out"], experiment)
    assert f"{config}:2: a YAML alias (*name) is used inside the value its anchor names" in refused_in_one_line(
        proc, experiment / "out")


def test_ordinary_anchors_and_aliases_still_work(experiment):
    from selfrag.validation import load_yaml

    config = experiment / "anchors.yaml"
    config.write_text("llm: &llm {max_tokens: 64}\nretrieval:\n  index_params: {a: [1, 2], b: {c: 3}}\n"
                      + (experiment / "plain.yaml").read_text())
    cfg = load_config(config, ["retrieval.index_params={x: &v [1, 2], y: *v}"])
    assert cfg.llm.max_tokens == 64 and cfg.retrieval.index_params == {"x": [1, 2], "y": [1, 2]}
    assert load_yaml(laughs(levels=5), "t.yaml")["l4"][0][0][0][0][0] == "lol"  # 59,049 values: within the bound
