"""adaptive_rag's router: question features, labels, the fit and its file, `selfrag router fit` and `show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.errors import ConfigError, DataError
from selfrag.eval.router_fit import fit_runs
from selfrag.reflection.router import (
    FEATURES,
    STRATEGIES,
    Router,
    features,
    fit_router,
    label,
    packaged,
)

# A toy pool: sums the model knows (no retrieval is right), one-entity questions that need one search,
# and comparisons only the multi-step strategy answers.
KNOWN = ["What is two plus two?", "What colour is the sky?", "What is ten minus three?", "What do bees make?",
         "What is half of eight?", "What colour is grass?", "What is three times three?", "What do cows drink?"]
ONE_HOP = ["Who founded Acme Corporation?", "Who wrote Blue Harbour?", "Who painted Night Garden?",
           "Who built Stone Bridge?", "Who directed Paper Moon?", "Who discovered Uranus?",
           "Who composed Winter Light?", "Who invented Velcro?"]
MULTI_HOP = ["Which is older, Acme Corporation or Zenith Labs?", "Are Blue Harbour and Red Cliff both novels?",
             "Which is longer, Stone Bridge or Iron Gate?", "Were Paper Moon and Star Dust released the same year?",
             "Which came first, Night Garden or Day Field?", "Is Winter Light older than Summer Rain?",
             "Which river is longer, the Nile or the Amazon?", "Are Alpha Town and Beta City in the same country?"]
POOL = [(q, "no_retrieval") for q in KNOWN] + [(q, "vanilla_rag") for q in ONE_HOP] + [(q, "ircot") for q in MULTI_HOP]
CALLS = {"no_retrieval": 1, "vanilla_rag": 1, "ircot": 4}


def right_for(strategy: str, needs: str) -> bool:
    """A stronger strategy answers what a weaker one does (ircot answers all; no_retrieval only its own)."""
    return STRATEGIES.index(strategy) >= STRATEGIES.index(needs)


def write_run(root: Path, strategy: str, pool=POOL, model: str = "toy.gguf", method: str | None = None) -> Path:
    folder = root / strategy
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"q{i}", "question": q, "prediction": "x", "method": method or strategy, "model": model,
             "metrics": {"f1": 1.0 if right_for(strategy, needs) else 0.0},
             "accounting": {"llm_calls": CALLS[strategy]}} for i, (q, needs) in enumerate(pool)]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    return [write_run(tmp_path / "runs", s) for s in STRATEGIES]


def test_question_features():
    f = features("What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?")
    assert set(f) == set(FEATURES)
    assert (f["wh_what"], f["entities"], f["bridge"], f["comparison"]) == (1.0, 3.0, 1.0, 0.0)
    f = features("Were Scott Derrickson and Ed Wood of the same nationality?")
    assert (f["yes_no"], f["entities"], f["comparison"]) == (1.0, 2.0, 1.0)
    f = features("Which magazine was started first Arthur's Magazine or First for Women?")
    assert (f["wh_which"], f["entities"], f["comparison"]) == (1.0, 2.0, 1.0) and f["bridge"] >= 1
    f = features('How many episodes of "Lord of the Rings" were filmed in 2003?')
    assert (f["wh_how"], f["asks_number"], f["quoted"], f["has_digits"], f["entities"]) == (1, 1, 1, 1, 1)
    assert features("")["words"] == 0.0


def test_labels_are_the_cheapest_right_strategy_else_the_best_f1():
    assert label({"no_retrieval": (0.0, False), "vanilla_rag": (1.0, True), "ircot": (1.0, True)}) == "vanilla_rag"
    assert label({"no_retrieval": (0.6, True), "vanilla_rag": (1.0, True), "ircot": (1.0, True)}) == "no_retrieval"
    assert label({"no_retrieval": (0.1, False), "vanilla_rag": (0.2, False), "ircot": (0.4, False)}) == "ircot"
    assert label({"no_retrieval": (0.0, False), "vanilla_rag": (0.2, False), "ircot": (0.2, False)}) == "vanilla_rag"
    # Every strategy wrong alike: the question tells them nothing apart, so it has no label.
    assert label({"no_retrieval": (0.0, False), "vanilla_rag": (0.0, False), "ircot": (0.0, False)}) is None
    assert label({"vanilla_rag": (0.3, False), "ircot": (0.3, False)}) is None


def test_questions_every_strategy_got_wrong_alike_are_not_fitted_on_but_are_routed(tmp_path, capsys):
    """A weak model answers most questions wrong with every strategy: labelled "cheapest", those would
    teach the router never to retrieve; left out, the questions that tell the strategies apart decide."""
    hopeless = [(f"What is the name of thing number {i}?", "none") for i in range(30)]

    def run(strategy: str) -> Path:
        folder = tmp_path / strategy
        folder.mkdir()
        rows = [{"id": f"q{i}", "question": q, "prediction": "x", "method": strategy, "model": "toy.gguf",
                 "metrics": {"f1": 0.0 if needs == "none" else float(right_for(strategy, needs))},
                 "accounting": {"llm_calls": CALLS[strategy]}} for i, (q, needs) in enumerate(POOL + hopeless)]
        (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return folder

    dirs = [run(s) for s in STRATEGIES]
    assert main(["router", "fit", *map(str, dirs), "--out", str(tmp_path / "cli.json")]) == 0
    assert ": 54 questions, 24 of them fitted on (the rest every strategy got wrong alike)" in \
        capsys.readouterr().out
    router, report = fit_runs(dirs, tmp_path / "r.json")
    assert report["questions"] == 54 and report["n"] == 24
    assert report["labels"] == {"no_retrieval": 8, "vanilla_rag": 8, "ircot": 8}
    assert router.choose(features("Which is taller, North Tower or South Spire?")) == "ircot"
    assert sum(report["routed_out_of_fold"]["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert report["oracle"]["shares"]["no_retrieval"] == pytest.approx(38 / 54, abs=1e-3)


def test_a_fitted_toy_router_routes_each_kind_of_question(runs, tmp_path, capsys):
    out = tmp_path / "router.json"
    assert main(["router", "fit", *map(str, runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: 24 questions" in printed and "routed (out of fold)" in printed and "oracle" in printed
    router = Router.read(out)
    assert router.fitted and router.classes == STRATEGIES and router.model == "toy.gguf"
    assert router.choose(features("Which is taller, North Tower or South Spire?")) == "ircot"
    assert router.choose(features("Who founded Gamma Industries?")) == "vanilla_rag"
    assert router.choose(features("What is five plus one?")) == "no_retrieval"
    # Only the allowed strategies are chosen among.
    assert router.choose(features("What is five plus one?"), ["vanilla_rag", "ircot"]) == "vanilla_rag"
    meta = json.loads(out.read_text())["meta"]
    assert meta["fitted_on"]["questions"] == 24 and len(meta["fitted_on"]["runs"]) == 3
    report = meta["report"]
    assert report["labels"] == {"no_retrieval": 8, "vanilla_rag": 8, "ircot": 8}
    assert report["cv_accuracy"] >= 0.9 and report["majority_accuracy"] == pytest.approx(1 / 3, abs=1e-3)
    assert report["oracle"] == {"f1": 1.0, "calls": 2.0, "shares": dict.fromkeys(STRATEGIES, 0.3333)}
    assert report["alone"]["ircot"] == {"f1": 1.0, "calls": 4.0}
    assert report["routed_out_of_fold"]["calls"] < 4.0


def test_fitting_keeps_the_questions_every_run_answered(tmp_path):
    short = [write_run(tmp_path / "a", "vanilla_rag", POOL[:20]), write_run(tmp_path / "a", "ircot")]
    router, report = fit_runs(short, tmp_path / "r.json")
    assert report["n"] == 20 and router.meta["fitted_on"]["skipped"] == 4
    assert router.classes == ("vanilla_rag", "ircot")  # no_retrieval was not run: never chosen


@pytest.mark.parametrize(("make", "message"), [
    (lambda root: [write_run(root / "a", "vanilla_rag"), write_run(root / "b", "vanilla_rag")],
     "are both runs of vanilla_rag"),
    (lambda root: [write_run(root, "vanilla_rag"), write_run(root, "ircot", method="self_rag")],
     "a run of self_rag, which adaptive_rag does not route to"),
    (lambda root: [write_run(root, "vanilla_rag")], "give runs of at least two of"),
    (lambda root: [write_run(root, "vanilla_rag"), write_run(root, "ircot", model="other.gguf")],
     "the runs are of different models"),
    (lambda root: [write_run(root, "vanilla_rag", POOL[:3]), write_run(root, "ircot")],
     "the runs share 3 answered question"),
    (lambda root: [root / "missing", write_run(root, "ircot")], "no such run directory"),
])
def test_runs_that_cannot_fit_a_router_say_why_in_one_line(tmp_path, capsys, make, message):
    dirs = make(tmp_path)
    with pytest.raises(DataError, match=message):
        fit_runs(dirs, tmp_path / "r.json")
    assert main(["router", "fit", *map(str, dirs), "--out", str(tmp_path / "r.json")]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and not (tmp_path / "r.json").exists()


def test_a_constant_pool_fits_a_constant_router():
    rows = [features(q) for q, _ in POOL]
    router, oof = fit_router(rows, ["ircot"] * len(rows))
    assert router.classes == ("ircot",) and set(oof) == {"ircot"}
    with pytest.raises(ValueError, match="at least 4"):
        fit_router(rows[:3], ["ircot"] * 3)


def test_the_file_round_trips_and_a_bad_one_is_a_one_line_error(tmp_path):
    rows = [features(q) for q, _ in POOL]
    router, _ = fit_router(rows, [s for _, s in POOL])
    path = tmp_path / "r.json"
    router.write(path)
    again = Router.read(path)
    assert again.scores(rows[0]) == pytest.approx(router.scores(rows[0]))
    # A feature the file names that this selfrag does not compute counts as its mean: it moves nothing.
    data = json.loads(path.read_text())
    data["features"][0], before = "retrieve", again.scores(rows[0])
    assert Router.from_dict(data, "x").scores(rows[0]) != before  # "words" no longer read
    for broken, why in [({**data, "format": 9}, "format 9"), ({**data, "classes": ["self_rag"]}, "classes must be"),
                        ({**data, "means": [0.0]}, "one value per feature"), ({}, "format")]:
        path.write_text(json.dumps(broken))
        with pytest.raises(ConfigError, match=why):
            Router.read(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read"):
        Router.read(path)
    with pytest.raises(ConfigError, match="no such file"):
        Router.read(tmp_path / "missing.json")


def test_the_packaged_default_is_a_rule_not_a_fit():
    router = packaged()
    assert router is not None and not router.fitted and "not fitted" in router.rule
    assert router.choose(features("Who discovered Uranus?")) == "vanilla_rag"
    assert router.choose(features("Were Scott Derrickson and Ed Wood of the same nationality?")) == "ircot"
    assert router.choose(features("The Oberoi family is part of a hotel company that has a head office in what "
                                  "city?")) == "ircot"
    assert all(router.choose(features(q)) != "no_retrieval" for q, _ in POOL)


def test_router_show_names_the_router_a_model_uses(tmp_path, capsys, runs):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["x"]))
    assert main(["router", "show", "--llm", f"scripted:{script}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("packaged rule (not fitted)") and "rule: written by hand" in out
    fit = tmp_path / "r.json"
    fit_runs(runs, fit)
    assert main(["router", "show", "--router", str(fit), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["fitted"] is True and shown["origin"] == str(fit) and shown["classes"] == list(STRATEGIES)


def test_the_embedded_model_has_a_packaged_router_fit(tmp_path, monkeypatch, capsys):
    """The fit shipped for the embedded model is found by its file's SHA-256, is a fit (not the rule), and
    `selfrag router show` names it."""
    from selfrag.llm.model_files import default_model_path, file_sha256
    from selfrag.methods.catalog.adaptive_rag import find_router, forget

    try:
        path = default_model_path()
    except ConfigError:
        pytest.skip("the embedded model's package is not installed")
    monkeypatch.setenv("SELFRAG_ROUTER_DIR", str(tmp_path))  # no user fit in the way
    forget()
    router, origin = find_router("embedded", file_sha256(path))
    assert origin == "packaged fit" and router.fitted and "SmolLM2" in router.model
    assert set(router.classes) <= set(STRATEGIES) and router.meta["report"]["n"] >= 50
    assert router.choose(features("Were Scott Derrickson and Ed Wood of the same nationality?")) in router.classes
    assert main(["router", "show"]) == 0
    assert capsys.readouterr().out.startswith("packaged fit (fitted, on SmolLM2")
    forget()
