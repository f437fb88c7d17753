"""Each seed's pipeline ships as a preset that runs as the seed says: its exact steps and call budget.

Every case runs ``selfrag run`` on the preset file as it ships (``inherits:`` it; only the data,
the scripted model and the output folder are set) and reads the recorded trace: seed 000
(``self_rag_seed000.yaml``, 1 + 2n), seed 003 (``self_rag_seed003.yaml``, 1 + 4k), seed 001
(``self_rag_segment.yaml``, the segment loop), seed 002 (``selfbio_rag.yaml``, the three
augmentations) and seed 004 (``self_corrective.yaml``, top_k 3). ``selfrag methods`` lists them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.assemble import build_method
from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.llm import ScriptedBackend
from selfrag.types import Document, Question
from tests.helpers.reflection import decision, france_docs, segment
from tests.test_augmentations import script as critic_script

REPO = Path(__file__).resolve().parents[1]
QUESTION = "What is the capital of France?"
DOCS = [
    ("Paris", "Paris is the capital of France and its largest city."),
    ("Lyon", "Lyon is the third largest city of France."),
    ("Europe", "France is a country in Western Europe."),
    ("Berlin", "Berlin is the capital of Germany."),
    ("Rome", "Rome is the capital of Italy."),
]


def run_preset(name: str, tmp_path: Path, capsys, script: dict, docs=DOCS) -> dict:
    """``selfrag run`` on the preset, one question with ``docs`` as its own passages; its record."""
    row = {"id": "q1", "question": QUESTION, "answers": ["Paris"],
           "contexts": [{"title": t, "text": x} for t, x in docs]}
    (tmp_path / "questions.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "exp.yaml").write_text(
        f"inherits: {REPO / 'configs' / f'{name}.yaml'}\n"
        f"llm: {{spec: 'scripted:{tmp_path / 'script.json'}'}}\n"
        f"data: {{dataset: jsonl, path: {tmp_path / 'questions.jsonl'}}}\n"
        f"experiment: {{output_dir: {tmp_path / 'results'}}}\n"
        "cache: {enabled: false}\n"
    )
    code = main(["run", str(tmp_path / "exp.yaml"), "--run-id", "r", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    [line] = (tmp_path / "results" / "r" / "predictions.jsonl").read_text().splitlines()
    return json.loads(line)


def actions(record: dict) -> list[str]:
    return [s["action"] for s in record["reasoning_chain"]]


def calls(record: dict) -> int:
    return record["accounting"]["llm_calls"]


def test_seed_000_four_phases_one_plus_two_n(tmp_path, capsys):
    script = {"checked in reference documents": "yes", "Reply with one digit": "4"}
    for title, text in DOCS:
        script[text] = f"{title}\n[IsRel] relevant\n[IsSup] {'fully' if title == 'Paris' else 'partially'} supported"
    record = run_preset("self_rag_seed000", tmp_path, capsys, script)
    # Phase 1 asks even though the question brought its passages; phase 3 for the first 3 of the 5.
    assert actions(record) == ["retrieval_decision", "retrieve", *["generate_and_critique", "rate_utility"] * 3,
                               "select_best"]
    assert calls(record) == 1 + 2 * 3
    # Phase 4: utility + 2 x support bonus + 0.5 if relevant: Paris 4 + 2 + 0.5 beats 4 + 1 + 0.5.
    assert record["prediction"] == "Paris"
    assert [c["score"] for c in record["candidates"]] == [6.5, 5.5, 5.5]
    assert "confidence" not in record["details"] and not any(c["joint"] for c in record["candidates"])


def test_seed_000_no_retrieval_is_two_calls(tmp_path, capsys):
    record = run_preset("self_rag_seed000", tmp_path, capsys,
                        {"checked in reference documents": "no", "capital of France": "Paris"})
    assert actions(record) == ["retrieval_decision", "direct_answer"] and calls(record) == 2


def test_seed_003_seven_steps_one_plus_four_k(tmp_path, capsys):
    script = {
        "needs_retrieval": '{"needs_retrieval": true}',
        "You judge whether a document is relevant": '{"relevance": "relevant"}',
        "Use the documents below": "Paris",
        "You judge how well a response is supported": '{"support": "fully_supported"}',
        "You rate how useful a response is": '{"utility": 5}',
    }
    record = run_preset("self_rag_seed003", tmp_path, capsys, script)
    # Every retrieved passage (top_k 3) is judged, then answered, supported and rated, one JSON verdict each.
    assert actions(record) == ["retrieval_decision", "retrieve",
                               *["evaluate_relevance", "generate", "assess_support", "rate_utility"] * 3,
                               "select_best"]
    assert calls(record) == 1 + 4 * 3
    assert record["details"]["relevant_docs_count"] == 3 and record["details"]["total_docs_retrieved"] == 3
    assert {"support", "utility", "context_used", "retrieval_needed", "all_candidates"} <= set(record["details"])


def test_seed_003_drops_irrelevant_passages_before_answering(tmp_path, capsys):
    script = {
        "needs_retrieval": '{"needs_retrieval": true}',
        "You judge whether a document is relevant": '{"relevance": "irrelevant"}',
        "Question: What is the capital": "Paris",
    }
    record = run_preset("self_rag_seed003", tmp_path, capsys, script)
    assert actions(record)[-2:] == ["no_relevant_documents", "direct_answer"]
    assert calls(record) == 1 + 3 + 1  # no passage kept: the answer is written without them


async def test_seed_001_segment_loop():
    """The paper's loop, the preset as it ships, on a reflection-token model (a Self-RAG fine-tune's name, so
    the critic reads its tokens): a retrieve decision, one candidate segment per passage (top_k 3), each
    critiqued (ISREL, ISSUP, ISUSE); the finished beam's segments are the answer."""
    head = "### Response:\n"
    script = {f"{head}[Retrieval]<paragraph>{title}": segment(f"{title} is it.", rel=0.9 if title == "Paris" else 0.3,
                                                               sup="full" if title == "Paris" else "no", util=5)
              for title, _ in DOCS}
    script[head] = decision(yes=0.9, no=0.1)
    cfg = load_config(REPO / "configs" / "self_rag_segment.yaml")
    docs = tuple(Document(id=t, title=t, text=x) for t, x in DOCS)
    method = build_method(cfg, ScriptedBackend(script, model="selfrag_llama2_7b"))
    response = await method.answer(Question(id="q1", text=QUESTION, contexts=docs))
    names = [s.action for s in response.reasoning_chain]
    assert names[:4] == ["critic", "critique_retrieval", "retrieve", "generate_segment"]
    assert names.count("generate_segment") == 3
    assert response.num_llm_calls == 1 + 3  # the decision, one segment per passage; each is final: one segment
    assert response.answer == "Paris is it."  # the segments themselves: the paper's long-form answer


def test_seed_002_three_augmentations(tmp_path, capsys):
    """vanilla_rag with adaptive retrieval (threshold 0.5), the critic reranker (top 3) and
    self-reflection (up to 3 iterations): 1 decision + 4k reranker calls + the answer + 3 critiques."""
    docs = [(d.title, d.text) for d in france_docs()]
    record = run_preset("selfbio_rag", tmp_path, capsys, critic_script(), docs=docs)
    names = actions(record)
    assert names[:2] == ["critic", "critique_retrieval"] and "rerank" in names and "self_reflection" in names
    reflection = next(s for s in record["reasoning_chain"] if s["action"] == "self_reflection")
    iterations = len(reflection["details"]["iterations"]) - 1
    # A critique asked again with the same prompt is read once (its step says reused, no call).
    reused = sum(1 for s in record["reasoning_chain"] if (s.get("details") or {}).get("reused"))
    assert calls(record) == 1 + 4 * 3 + 1 + 3 + 3 * iterations - reused


@pytest.mark.parametrize("accepted_at", [1, 2])
def test_seed_004_reflect_reformulate_retry(tmp_path, capsys, accepted_at):
    verdicts = ["DECISION: NO. The documents do not name a capital."] * (accepted_at - 1) + [
        "DECISION: YES. The first document names it."]
    script = {
        "Can the documents above answer the question completely?": verdicts,
        "Search query used": "capital city of France",
        "Use the documents below": "Paris",
    }
    record = run_preset("self_corrective", tmp_path, capsys, script)
    retrievals = [s for s in record["reasoning_chain"] if s["action"] == "retrieve"]
    assert len(retrievals) == accepted_at and all(s["retrieval_calls"] == 1 for s in retrievals)
    assert all(len(s["details"]["documents"]) == 3 for s in retrievals)  # the seed's top_k = 3
    # Per round a reflection, and a reformulation after each rejected one; then the answer.
    assert calls(record) == accepted_at + (accepted_at - 1) + 1
    assert record["prediction"] == "Paris"


def test_selfrag_methods_lists_the_seed_presets(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    for preset in ("self_rag_seed000.yaml", "self_rag_seed003.yaml", "self_rag_segment.yaml", "selfbio_rag.yaml",
                   "self_corrective.yaml"):
        assert preset in out
    assert "seed 000" in out and "seed 004" in out


def test_every_listed_preset_ships_and_names_its_method():
    from selfrag.methods.presets import PRESETS

    for preset in PRESETS:
        assert load_config(REPO / "configs" / preset.file).architecture.name == preset.method
    listed = {p.file for p in PRESETS}
    assert {p.name for p in (REPO / "configs").glob("*seed*.yaml")} <= listed
    assert main(["methods", "--json", "--presets"]) == 0
