// The runs page: pick a run (summary, per-question table with filters, any question's trace),
// or two runs to compare question by question.
"use strict";

(function () {
  const { el, fmt } = window.SR;
  const $ = (id) => document.getElementById(id);
  const q = encodeURIComponent;
  const state = { rows: [], filter: "all", mode: "run" };

  const FILTERS = {
    run: [["all", "all"], ["wrong", "wrong answers"], ["abstained", "abstentions"], ["errors", "errors"]],
    compare: [["all", "all"], ["differ", "outcome differs"], ["a only", "only A right"], ["b only", "only B right"], ["both wrong", "both wrong"]],
  };
  const KEEP = {
    all: () => true,
    wrong: (r) => r.correct === false,
    abstained: (r) => r.abstained,
    errors: (r) => !!r.error,
    differ: (r) => r.outcome === "a only" || r.outcome === "b only",
    "a only": (r) => r.outcome === "a only",
    "b only": (r) => r.outcome === "b only",
    "both wrong": (r) => r.outcome === "both wrong",
  };

  function mark(ok) {
    return ok === true ? el("span", { class: "ok", text: "✓" }) : ok === false ? el("span", { class: "no", text: "✗" }) : "–";
  }

  function summaryCard(s) {
    const box = window.SR.clear($("summary"));
    box.hidden = false;
    const metrics = s.metrics || {};
    const facts = [
      ["method", s.method], ["model", s.model], ["dataset", s.dataset],
      ["answered", `${s.n_answered || 0} of ${s.n_questions || "?"} (${s.n_errors || 0} errors, ${s.status || "?"})`],
      ...Object.entries(metrics).map(([k, v]) => [k, fmt.num(v)]),
      ["cost / question", fmt.usd((s.cost_usd || {}).per_question)],
      ["LLM calls / question", fmt.num((s.llm_calls || {}).per_question, 2)],
      ["latency p50 / p95", `${fmt.ms((s.latency_ms || {}).p50)} / ${fmt.ms((s.latency_ms || {}).p95)}`],
      ["retrieval rate", fmt.num(s.retrieval_rate, 2)],
    ];
    box.append(el("h2", { text: s.run_dir || s.run_id }),
      el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v === undefined || v === null ? "–" : v })])));
  }

  function filters() {
    const box = window.SR.clear($("filters"));
    for (const [key, label] of FILTERS[state.mode]) {
      const n = state.rows.filter(KEEP[key]).length;
      box.append(el("button", {
        type: "button", class: "filter" + (state.filter === key ? " on" : ""), "data-filter": key,
        text: `${label} (${n})`, onclick: () => { state.filter = key; filters(); table(); },
      }));
    }
  }

  function table() {
    const t = window.SR.clear($("table"));
    const rows = state.rows.filter(KEEP[state.filter]);
    if (state.mode === "run") {
      t.append(el("tr", {}, ["", "id", "question", "gold", "answer", "F1", "calls", "latency"].map((h) => el("th", { text: h }))));
      for (const r of rows) {
        t.append(el("tr", { class: "clickable", "data-id": r.id, onclick: () => openQuestion(r.id) },
          el("td", {}, r.error ? el("span", { class: "no", text: "error" }) : r.abstained ? el("span", { class: "warn", text: "abstained" }) : mark(r.correct)),
          el("td", { class: "small", text: r.id }), el("td", { text: r.question }),
          el("td", { text: (r.gold || []).join(" | ") }), el("td", { text: r.error || r.prediction || "" }),
          el("td", { class: "num", text: fmt.num(r.f1, 2) }), el("td", { class: "num", text: r.llm_calls ?? "–" }),
          el("td", { class: "num", text: fmt.ms(r.latency_ms) })));
      }
    } else {
      t.append(el("tr", {}, ["question", "gold", "A", "B", "outcome", "ΔF1"].map((h) => el("th", { text: h }))));
      for (const r of rows) {
        const side = (x, run) => el("td", { class: "clickable", onclick: () => openQuestion(r.id, run) },
          mark(x.correct), " ", x.error || x.prediction || "", el("span", { class: "muted small", text: " F1 " + fmt.num(x.f1, 2) }));
        t.append(el("tr", { "data-id": r.id }, el("td", { text: r.question }), el("td", { text: (r.gold || []).join(" | ") }),
          side(r.a, $("run-a").value), side(r.b, $("run-b").value),
          el("td", {}, el("span", { class: "badge outcome " + r.outcome.replace(" ", "-"), text: r.outcome })),
          el("td", { class: "num", text: r.f1_delta === null ? "–" : (r.f1_delta > 0 ? "+" : "") + fmt.num(r.f1_delta, 2) })));
      }
    }
    if (!rows.length) t.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "no questions match" })));
  }

  async function openQuestion(id, run) {
    run = run || $("run-a").value;
    try {
      const data = await window.SR.getJSON(`/v1/runs/question?run=${q(run)}&id=${q(id)}`);
      const r = data.record;
      $("detail").hidden = false;
      $("detail-title").textContent = r.question;
      $("detail-meta").textContent = `${run} · ${r.id} · gold: ${(r.gold || []).join(" | ")}` + (r.error ? ` · error: ${r.error.message}` : "");
      $("detail-answer").textContent = r.prediction || "";
      window.SR.renderTrace($("trace"), data.view);
      $("detail").scrollIntoView({ behavior: "smooth" });
    } catch (err) { $("status").textContent = err.message; }
  }

  async function load() {
    const a = $("run-a").value, b = $("run-b").value;
    $("detail").hidden = true;
    if (!a) { $("summary").hidden = true; $("questions").hidden = true; return; }
    $("status").textContent = "reading…";
    try {
      if (b) {
        const data = await window.SR.getJSON(`/v1/runs/compare?a=${q(a)}&b=${q(b)}`);
        state.mode = "compare"; state.rows = data.questions;
        const box = window.SR.clear($("summary"));
        box.hidden = false;
        const keys = ["method", "model", "n", "em", "f1", "accuracy", "cost_per_question", "calls_per_question", "p50_latency_s"];
        box.append(el("h2", { text: "A: " + a + "  vs  B: " + b }), el("table", { class: "compare" },
          el("tr", {}, el("th", { text: "" }), keys.map((k) => el("th", { text: k }))),
          [["A", data.a.row], ["B", data.b.row]].map(([n, row]) => el("tr", {}, el("th", { text: n }), keys.map((k) => el("td", { text: fmt.num(row[k]) }))))));
        if (data.only_in_a || data.only_in_b) box.append(el("p", { class: "muted small", text: `${data.only_in_a} question(s) only in A, ${data.only_in_b} only in B (not shown)` }));
      } else {
        const data = await window.SR.getJSON(`/v1/runs/table?run=${q(a)}`);
        state.mode = "run"; state.rows = data.questions;
        summaryCard(data.summary);
      }
      state.filter = "all";
      $("questions").hidden = false;
      filters(); table();
      $("status").textContent = "";
    } catch (err) { $("status").textContent = err.message; }
  }

  async function main() {
    const health = await window.SR.start($("key-box"));
    if (!health.runs) { $("off").hidden = false; $("pick").hidden = true; return; }
    const data = await window.SR.getJSON("/v1/runs");
    for (const r of data.runs) {
      const label = `${r.id}  (${r.method || "?"}, n=${r.n_answered ?? "?"}${r.f1 != null ? ", F1 " + fmt.num(r.f1, 2) : ""})`;
      $("run-a").append(el("option", { value: r.id, text: label }));
      $("run-b").append(el("option", { value: r.id, text: label }));
    }
    $("run-a").addEventListener("change", load);
    $("run-b").addEventListener("change", load);
    $("status").textContent = data.runs.length ? "" : "no run directories under the runs folder";
    document.body.dataset.ready = "yes";
  }

  main().catch((err) => { $("status").textContent = err.message; });
})();
