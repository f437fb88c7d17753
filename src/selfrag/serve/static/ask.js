// The ask page: send a question to /v1/ask as a stream, show progress, then the answer and its trace.
"use strict";

(function () {
  const { el, fmt } = window.SR;
  const $ = (id) => document.getElementById(id);

  function setState(state) {
    $("answer-card").dataset.state = state;
    $("ask").disabled = state === "working";
  }

  // While a method works: the stage it is in (the stages `selfrag ask` shows) and a clock that moves
  // between the server's events, then the calls and tokens so far.
  const work = { stage: "starting", calls: 0, tokens: 0, started: 0, timer: null };

  function seconds() { return ((performance.now() - work.started) / 1000).toFixed(1); }

  function showWork() {
    const cost = work.calls ? ` · ${work.calls} model call${work.calls === 1 ? "" : "s"}, ${work.tokens} tokens` : "";
    $("status").textContent = `${work.stage}… (${seconds()} s)${cost}`;
  }

  // Screen readers hear each stage once, not every tick of the clock.
  function say(text) { $("stage-said").textContent = text; }

  function startWork() {
    Object.assign(work, { stage: "starting", calls: 0, tokens: 0, started: performance.now() });
    say(work.stage);
    clearInterval(work.timer);
    work.timer = setInterval(showWork, 100);
    showWork();
  }

  function stopWork(text) {
    clearInterval(work.timer);
    work.timer = null;
    $("status").textContent = text;
    say(text);
  }

  function showAnswer(data) {
    const low = data.view && data.view.sufficiency && data.view.sufficiency.low;
    // The first line says when the passages read do not seem to hold the answer (as selfrag ask does).
    $("answer").textContent = (low ? "The documents do not seem to say. Closest: " : "") +
      (data.answer_with_citations || data.answer);
    const cites = window.SR.clear($("citations"));
    if ((data.citations || []).length) {
      cites.append(el("span", { class: "muted small", text: "cites " }));
      for (const c of data.citations) cites.append(el("span", { class: "chip", "data-id": c.id, text: c.title || c.id }));
    }
    $("meta").textContent = [
      data.method, data.model, data.num_llm_calls + " LLM calls", data.num_retrieval_calls + " retrievals",
      data.total_tokens + " tokens", fmt.usd(data.total_cost_usd), fmt.ms(data.latency_ms),
    ].join(" · ");
    window.SR.renderTrace($("trace"), data.view);
  }

  async function ask(event) {
    event.preventDefault();
    const question = $("question").value.trim();
    if (!question) return;
    setState("working");
    $("answer-card").hidden = false;
    $("answer").textContent = "";
    window.SR.clear($("citations"));
    $("meta").textContent = "";
    window.SR.clear($("trace"));
    startWork();
    let finished = false;
    try {
      await window.SR.postEvents("/v1/ask", { question, method: $("method").value, stream: true }, (name, data) => {
        if (name === "token") {
          // The answer as the model writes it; the result replaces it with the final answer.
          $("answer").textContent += data.text;
        } else if (name === "stage") {
          work.stage = data.stage;
          say(work.stage);
          showWork();
        } else if (name === "progress") {
          Object.assign(work, { calls: data.calls, tokens: data.tokens });
          showWork();
        } else if (name === "result") {
          finished = true;
          showAnswer(data);
          stopWork(`done in ${seconds()} s`);
          setState("done");
        } else if (name === "error") {
          throw new Error(data.error ? data.error.message : "the server reported an error");
        }
      });
      if (!finished) throw new Error("the answer stream ended early");
    } catch (err) {
      stopWork("");
      $("answer").textContent = "Error: " + err.message;
      setState("error");
    }
  }

  // Which model and documents this server answers from (the model's address with credentials hidden).
  async function showServing() {
    const info = await window.SR.getJSON("/v1/server");
    const docs = info.documents;
    const over = docs ? ` over ${docs.name || "its documents"} (${docs.passages} passage${docs.passages === 1 ? "" : "s"}, ${docs.retriever})` : "";
    $("serving").textContent = `${info.method} on ${info.model}${over}`;
  }

  async function main() {
    const health = await window.SR.start($("key-box"));
    if (!health.answering) {
      $("off").hidden = false;
      $("ask-form").hidden = true;
      return;
    }
    const select = $("method");
    showServing().catch(() => { /* the page works without it */ });
    try {
      const methods = await window.SR.getJSON("/v1/methods");
      for (const m of methods.data) {
        if (!m.available) continue;
        select.append(el("option", { value: m.id, selected: m.default, title: m.description, text: m.id }));
      }
    } catch (err) {
      select.append(el("option", { value: health.default_method, text: health.default_method }));
      $("status").textContent = err.message;
    }
    $("ask-form").addEventListener("submit", ask);
    $("question").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask-form").requestSubmit(); }
    });
    document.body.dataset.ready = "yes";
  }

  main().catch((err) => { $("status").textContent = "cannot reach the server: " + err.message; });
})();
