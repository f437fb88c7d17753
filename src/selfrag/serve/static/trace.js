// Draws one answer's trace (the "view" the server reads from it): the retrieval decision,
// the passages with their critiques and citations, the candidates, and the timeline of steps.
"use strict";

(function () {
  const { el, fmt } = window.SR;

  function pct(value) {
    return Math.max(0, Math.min(100, value * 100)).toFixed(1) + "%";
  }

  function bar(fraction, cls, label) {
    const fill = el("span", { class: "bar-fill" });
    fill.style.width = pct(fraction);
    return el("span", { class: "bar " + (cls || ""), title: label || "" }, fill);
  }

  function labelClass(kind, value) {
    const v = String(value || "").toLowerCase();
    if (kind === "relevance") return v.startsWith("irrel") ? "bad" : v ? "good" : "none";
    if (kind === "support") return v.startsWith("fully") ? "good" : v.startsWith("partial") ? "warn" : v ? "bad" : "none";
    return "none";
  }

  function notJudged(kind) {
    // A verdict the model did not give: drawn grey, never as a real verdict.
    return el("span", { class: "badge " + kind + " not-judged", title: kind + ": the model gave no verdict",
      text: kind + ": not judged" });
  }

  function badge(kind, value, item) {
    if ((item.not_judged || []).includes(kind)) return notJudged(kind);
    if (value === null || value === undefined || value === "") return null;
    // A verdict read as a probability shows it; the tooltip names the reader that gave it.
    const p = (item.values || {})[kind];
    const source = (item.sources || {})[kind];
    return el("span", { class: "badge " + kind + " " + labelClass(kind, value),
      title: kind + (source ? " · " + source : ""),
      text: kind + ": " + value + (typeof p === "number" ? " " + fmt.num(p, 2) : "") });
  }

  function verdicts(item) {
    return el("div", { class: "badges" }, badge("relevance", item.relevance, item),
      badge("support", item.support, item), utility(item.utility, item));
  }

  function utility(value, item) {
    if ((item.not_judged || []).includes("utility")) return notJudged("utility");
    if (typeof value !== "number") return null;
    const source = (item.sources || {}).utility;
    const pips = [];
    for (let i = 1; i <= 5; i++) pips.push(el("span", { class: "pip" + (i <= Math.round(value) ? " on" : "") }));
    return el("span", { class: "utility", title: "utility " + fmt.num(value, 2) + " of 5" + (source ? " · " + source : "") },
      "utility", pips);
  }

  function highlighted(text, spans) {
    // The cited sentences as <mark>; everything as text nodes (never HTML).
    const node = el("p", { class: "passage-text" });
    let at = 0;
    for (const [start, end] of spans || []) {
      if (start > at) node.append(text.slice(at, start));
      node.append(el("mark", { class: "cite", text: text.slice(start, end) }));
      at = end;
    }
    if (at < text.length) node.append(text.slice(at));
    return node;
  }

  function decision(d) {
    const verdict = d.needed === true ? "retrieve" : d.needed === false ? "no retrieval" : "unknown";
    const head = el("div", { class: "decision-head" },
      el("span", { class: "badge verdict " + (d.needed ? "good" : "none"), text: verdict }));
    const box = el("section", { class: "card decision", "data-kind": d.kind },
      el("h3", { text: "Retrieval decision" }), head);
    if (d.kind === "probability") {
      const fill = el("span", { class: "gauge-fill" });
      fill.style.width = pct(d.p);
      const gauge = el("div", { class: "gauge", title: (d.p_name || "p") + " = " + fmt.num(d.p) }, fill);
      if (typeof d.threshold === "number") {
        const mark = el("span", { class: "gauge-mark", title: "threshold " + fmt.num(d.threshold) });
        mark.style.left = pct(d.threshold);
        gauge.append(mark);
      }
      head.append(el("span", {
        class: "decision-numbers",
        text: (d.p_name || "p") + " = " + fmt.num(d.p) + (typeof d.threshold === "number" ? "  vs threshold " + fmt.num(d.threshold) : ""),
      }));
      box.append(gauge, el("div", { class: "gauge-scale" }, el("span", { text: "0" }), el("span", { text: "1" })));
    } else if (d.kind === "verdict" && d.verdict) {
      head.append(el("span", { class: "decision-numbers" }, "the model said ", el("q", { text: d.verdict })));
    }
    box.append(el("p", { class: "muted", text: d.text }));
    return box;
  }

  function passages(list) {
    const top = Math.max(0, ...list.map((p) => (typeof p.score === "number" ? p.score : 0)));
    const box = el("section", { class: "card passages" }, el("h3", { text: "Passages (" + list.length + ")" }));
    if (!list.length) box.append(el("p", { class: "muted", text: "Nothing was retrieved." }));
    list.forEach((p, i) => {
      box.append(el("article", { class: "passage" + (p.cited ? " cited" : ""), "data-id": p.id },
        el("header", {},
          el("span", { class: "rank", text: "#" + (i + 1) }),
          el("strong", { class: "title", text: p.title || p.id }),
          p.cited ? el("span", { class: "badge cited-badge", text: "cited" }) : null,
          typeof p.score === "number" ? bar(top ? p.score / top : 0, "score", "retrieval score " + fmt.num(p.score)) : null,
          typeof p.score === "number" ? el("span", { class: "muted small", text: fmt.num(p.score, 2) }) : null),
        verdicts(p),
        p.text ? highlighted(p.text, p.highlights) : el("p", { class: "muted small", text: "(text not recorded)" })));
    });
    return box;
  }

  function candidates(list) {
    const box = el("section", { class: "card candidates" }, el("h3", { text: "Candidates (" + list.length + ")" }));
    if (!list.length) {
      box.append(el("p", { class: "muted", text: "This method writes one answer; there are no candidates to compare." }));
      return box;
    }
    const scores = list.map((c) => c.score).filter((s) => typeof s === "number");
    const lo = Math.min(0, ...scores);
    const hi = Math.max(...scores, lo + 1e-9);
    const row = el("div", { class: "cand-row" });
    for (const c of list) {
      const from = c.joint ? "over several passages" : c.passage_title ? "from " + c.passage_title : "no passage";
      row.append(el("article", { class: "candidate" + (c.selected ? " selected" : "") },
        el("header", {}, el("span", { class: "muted small", text: from }),
          c.selected ? el("span", { class: "badge selected-badge", text: "✓ selected" }) : null),
        el("p", { class: "cand-text", text: c.text }),
        verdicts(c),
        typeof c.score === "number"
          ? el("div", { class: "cand-score" }, bar((c.score - lo) / (hi - lo), "score"), el("span", { text: "score " + fmt.num(c.score, 2) }))
          : null));
    }
    box.append(row);
    return box;
  }

  function timeline(steps) {
    const longest = Math.max(1, ...steps.map((s) => s.latency_ms || 0));
    const box = el("section", { class: "card timeline" }, el("h3", { text: "Timeline (" + steps.length + " steps)" }));
    const table = el("div", { class: "tl" });
    let tokens = 0, cost = 0, ms = 0;
    for (const s of steps) {
      tokens += s.tokens; cost += s.cost_usd; ms += s.latency_ms;
      table.append(el("div", { class: "tl-row " + s.kind, title: s.observation },
        el("span", { class: "tl-step", text: s.step }),
        el("span", { class: "tl-action", text: s.action }),
        bar(s.latency_ms / longest, "tl-bar " + s.kind, fmt.ms(s.latency_ms)),
        el("span", { class: "tl-num", text: s.kind === "llm" ? s.tokens + " tok" : s.kind }),
        el("span", { class: "tl-num", text: s.kind === "llm" ? fmt.usd(s.cost_usd) : "" }),
        el("span", { class: "tl-num", text: fmt.ms(s.latency_ms) + (s.cached ? " (cached)" : "") })));
    }
    table.append(el("div", { class: "tl-row total" }, el("span", {}), el("span", { class: "tl-action", text: "sum of the steps" }),
      el("span", {}), el("span", { class: "tl-num", text: tokens + " tok" }),
      el("span", { class: "tl-num", text: fmt.usd(cost) }), el("span", { class: "tl-num", text: fmt.ms(ms) })));
    box.append(table, el("p", { class: "muted small", text: "Bars: each step's latency (steps that ran in parallel overlap in time)." }));
    return box;
  }

  window.SR.renderTrace = function (root, view) {
    window.SR.clear(root);
    if (view.abstained) root.append(el("p", { class: "banner", text: "The method abstained: not enough evidence to answer." }));
    if (view.without_documents) {
      root.append(el("p", { class: "banner without-documents", text: "Answered without your documents: " + view.without_documents + "." }));
    }
    if (view.sufficiency) {
      // Whether the passages read seem to hold the answer; when not, said first and plainly.
      root.append(el("p", { class: "banner sufficiency" + (view.sufficiency.low ? " low" : ""), id: "sufficiency",
        title: view.sufficiency.source, text: view.sufficiency.words }));
    }
    if (view.confidence_words) {
      // How sure the answer is; a low value is said plainly, never only coloured.
      root.append(el("p", { class: "banner confidence" + (view.confidence_low ? " low" : ""), id: "confidence",
        text: view.confidence_words.charAt(0).toUpperCase() + view.confidence_words.slice(1) + "." }));
    }
    root.append(decision(view.decision), passages(view.passages), candidates(view.candidates), timeline(view.timeline));
  };
})();
