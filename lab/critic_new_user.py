"""A new user's folder, asked as a new user asks it: does the default `self_rag` say when its documents
cannot answer?

    python -m lab.critic_new_user --llm llamacpp:PATH [--llm ...]

Runs `selfrag ask QUESTION --docs lab/new_user_docs --json` (the defaults, as
shipped) for six questions the invented folder answers (one of them two-hop)
and two it cannot, and records for each the answer, whether the answer's
first line says the documents do not seem to hold it (the fitted
sufficiency below its floor), the sufficiency, the confidence and the
verdict sources. The model's fit is the one `selfrag` finds for it (the
critic folder, else the packaged fits); `--critic-dir DIR` names a folder
(e.g. one holding the lab's fits as ``<sha256>.json``). Writes
``results/critic_new_user.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from lab.machine import machine, machine_lines
from lab.quality_runs import model_tag
from selfrag.eval.critic_read import is_right
from selfrag.eval.metrics import best_over, f1_score
from selfrag.types import Question

HERE = Path(__file__).resolve().parent
DOCS = HERE / "new_user_docs"
OUT = HERE / "results"
QUESTIONS: list[tuple[str, list[str] | None]] = [
    ("Who designed the Millbrook town hall?", ["Sara Quill"]),
    ("On which day is the Millbrook Heritage Museum closed?", ["Monday", "Mondays"]),
    ("At what temperature does the Copper Kettle brew espresso?", ["93 degrees Celsius", "93 degrees"]),
    ("In which year was the first Millbrook apple fair held?", ["1926"]),
    ("Who built the mill of the family the apple fair's prize is named after?", ["Tobias Renn"]),
    ("Which river does the Ell join?", ["Tane", "the river Tane"]),
    ("Who is the mayor of Millbrook?", None),
    ("How many pupils attend Millbrook Secondary School?", None),
]


def ask(spec: str, question: str, critic_dir: str | None) -> dict:
    env = {**os.environ, "SELFRAG_PROGRESS": "0"}
    if critic_dir:
        env["SELFRAG_CRITIC_DIR"] = critic_dir
    proc = subprocess.run([sys.executable, "-m", "selfrag", "ask", question, "--docs", str(DOCS), "--llm", spec,
                           "--json"], capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout)


def row(question: str, gold: list[str] | None, reply: dict) -> dict:
    if "error" in reply:
        return {"question": question, "error": reply["error"]}
    said = (reply.get("details") or {}).get("sufficiency") or {}
    f1 = None if gold is None else best_over(f1_score, reply["answer"], gold)
    sources = sorted({v["source"] for c in reply.get("candidates") or [] for v in (c.get("verdicts") or {}).values()})
    right = None if gold is None else is_right(Question(id="q", text=question, answers=gold), reply["answer"])
    return {"question": question, "answerable": gold is not None, "answer": reply["answer"], "f1": f1, "right": right,
            "declined": bool(said.get("low")), "sufficiency": said.get("value"), "floor": said.get("floor"),
            "confidence": reply.get("confidence"), "sources": sources, "calls": reply.get("num_llm_calls"),
            "seconds": round(reply.get("latency_ms", 0) / 1000, 1)}


def render(reports: dict[str, list[dict]], env: dict) -> str:
    lines = ["# A new user's folder: does the default say when the documents cannot answer?", "",
             "Written by `python -m lab.critic_new_user`: `selfrag ask QUESTION --docs lab/new_user_docs --json` "
             "with the defaults, six questions the invented folder (Markdown, HTML, text) answers and two it "
             "cannot. *Said so*: the answer's first line says the documents do not seem to say (the fitted "
             "sufficiency below its floor). Right: as the critic's labels count it (F1 >= 0.5 against the answer "
             "written beside the question, or a sentence or two that contains it).", "",
             *machine_lines(env), ""]
    for model, rows in reports.items():
        lines += [f"## {model}", "", "| question | answer | right | said so | sufficiency | floor | confidence | "
                  "calls | s |", "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if "error" in r:
                lines.append(f"| {r['question']} | error: {r['error']} | | | | | | | |")
                continue
            right = "–" if r.get("right") is None else "yes" if r["right"] else "no"
            lines.append(f"| {r['question']} | {r['answer'][:80]} | {right} | {'yes' if r['declined'] else 'no'} | "
                         f"{_num(r['sufficiency'])} | {_num(r['floor'])} | {_num(r['confidence'])} | {r['calls']} | "
                         f"{r['seconds']} |")
        sources = sorted({s for r in rows for s in r.get("sources", ())})
        lines += ["", "Verdict sources: " + "; ".join(f"`{s}`" for s in sources), ""]
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", action="append", required=True, help="backend spec (repeatable)")
    parser.add_argument("--critic-dir", default=None, help="the folder of fits to use (SELFRAG_CRITIC_DIR)")
    args = parser.parse_args(argv)
    reports = {}
    for spec in args.llm:
        reports[model_tag(spec)] = [row(q, gold, ask(spec, q, args.critic_dir)) for q, gold in QUESTIONS]
        print(f"[new user] {model_tag(spec)} done", file=sys.stderr)
    env = machine()
    (OUT / "critic_new_user.json").write_text(json.dumps({"env": env, "models": reports}, indent=1), encoding="utf-8")
    (OUT / "critic_new_user.md").write_text(render(reports, env), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
