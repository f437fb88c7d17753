"""How answers and traces look on the terminal and as JSON."""

from __future__ import annotations

from typing import Any, TextIO

from ..reflection.answer_text import answer_lines
from ..reflection.answer_text import confidence_line as confidence_line  # kept importable from here
from ..reflection.judged import NOT_JUDGED, VERDICTS, not_judged
from ..types import RAGResponse, ReasoningStep


def _fmt_num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def print_step(step: ReasoningStep, out: TextIO) -> None:
    cost = []
    if step.llm_calls:
        cost.append(f"{step.tokens_used} tok")
        if step.cost_usd:
            cost.append(f"${step.cost_usd:.5f}")
        if step.cached:
            cost.append("cached")
    if step.latency_ms:
        cost.append(f"{step.latency_ms:.0f} ms")
    suffix = f"  ({', '.join(cost)})" if cost else ""
    print(f"  [{step.step_id}] {step.action}{suffix}", file=out)
    if step.thought:
        print(f"      thought: {step.thought}", file=out)
    if step.action_input:
        print(f"      input:   {_one_line(step.action_input)}", file=out)
    if step.observation:
        print(f"      result:  {_one_line(step.observation)}", file=out)
    view = {k: v for k, v in step.details.items() if k not in ("raw_output", "documents", "evaluated_prompt_tokens")}
    for key in _defaulted(step.details):
        view[key] = f"{NOT_JUDGED} (no usable verdict in the reply; scored as {_fmt_value(view[key])})"
    for key, value in view.items():
        print(f"      {key}: {_one_line(_fmt_value(value))}", file=out)


def _defaulted(details: dict[str, Any]) -> list[str]:
    """The verdicts of a step that are a parser's default, not the model's."""
    names = list(details.get("defaults_used") or [])
    if details.get("default_used") is True:
        names += [k for k in (*VERDICTS, "needs_retrieval") if k in details]
    return [k for k in dict.fromkeys(names) if k in details]


def _verdict_text(candidate: Any, name: str) -> str:
    """A verdict as the trace shows it: its label, its probability when it was read as one, its source."""
    text = _fmt_num(getattr(candidate, name))
    verdict = candidate.verdicts.get(name)
    if verdict is None:
        return text
    extra = [f"{verdict.value:.2f}"] if verdict.probs is None and verdict.value is not None and name != "utility" \
        and verdict.source.startswith("fitted") else []
    if verdict.source:
        extra.append(verdict.source)
    return f"{text} ({'; '.join(extra)})" if extra else text


def _fmt_value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt_num(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "; ".join(_fmt_value(v) for v in value)
    return _fmt_num(value)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def print_response(response: RAGResponse, out: TextIO, *, trace: bool = False, answer_shown: bool = False) -> None:
    """The answer (unless ``answer_shown``: it was streamed already), its sources and, with ``trace``, every step."""
    cited = response.citations
    for line in answer_lines(response, answer_shown=answer_shown):  # the same lines the server replies with
        print(line, file=out)
    print(file=out)
    if cited:
        print("Cited:", file=out)
        for i, d in enumerate(cited, start=1):
            print(f"  [{i}] {d.title or d.id} ({d.id}): {_one_line(d.text, 160)}", file=out)
    cited_ids = {d.id for d in cited}
    unused = [d for d in response.read if d.id not in cited_ids]
    if unused:
        print("Read, not cited:", file=out)
        for d in unused:
            print(f"  - {d.title or d.id} [{d.id}]", file=out)
    seen = cited_ids | {d.id for d in response.read}
    others = [d for d in response.sources if d.id not in seen]
    if others:
        print("Also retrieved:" if seen else "Retrieved, not read:", file=out)
        for d in others:
            print(f"  - {d.title or d.id} [{d.id}]", file=out)
    if trace:
        print("\nTrace:", file=out)
        for step in response.reasoning_chain:
            print_step(step, out)
        if response.candidates:
            print("\nCandidates:", file=out)
            for i, c in enumerate(response.candidates, start=1):
                src = c.passage.title or c.passage.id if c.passage else "-"
                missing = not_judged(c)
                parts = [f"{name}={NOT_JUDGED if name in missing else _verdict_text(c, name)}" for name in VERDICTS]
                if c.score is not None:
                    parts.append(f"score={_fmt_num(c.score)}")
                print(f"  {i}. [{src}] {_one_line(c.text, 120)}", file=out)
                print(f"     {', '.join(parts)}", file=out)
    print(
        f"\n{response.architecture} · {response.model} · {response.num_llm_calls} LLM call{'' if response.num_llm_calls == 1 else 's'} · "
        f"{response.num_retrieval_calls} retrievals · {response.total_tokens} tokens · "
        f"${response.total_cost_usd:.5f} · {response.latency_ms / 1000:.2f} s",
        file=out,
    )
