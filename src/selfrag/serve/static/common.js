// Shared by both pages: building elements, calling the API (with the key, if any), reading event streams.
"use strict";

const SR = (window.SR = window.SR || {});

// el("div", {class: "x", text: "hi"}, child, ...): an element; text goes in as text, never as HTML.
SR.el = function (tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
};

SR.clear = function (node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
};

SR.fmt = {
  num(value, digits = 3) {
    if (value === null || value === undefined) return "–";
    return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(digits) : String(value);
  },
  ms(value) {
    if (value === null || value === undefined) return "–";
    return value >= 1000 ? (value / 1000).toFixed(2) + " s" : Math.round(value) + " ms";
  },
  usd(value) {
    if (!value) return "$0";
    return "$" + value.toFixed(6).replace(/0+$/, "").replace(/\.$/, "");
  },
};

// The API key lives in this tab's session storage, only when the server asks for one.
SR.key = {
  get() { return sessionStorage.getItem("selfrag-key") || ""; },
  set(value) { sessionStorage.setItem("selfrag-key", value); },
};

SR.headers = function (json) {
  const headers = {};
  if (json) headers["Content-Type"] = "application/json";
  const key = SR.key.get();
  if (key) headers["Authorization"] = "Bearer " + key;
  return headers;
};

SR.errorText = async function (response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (e) { /* not JSON */ }
  return "HTTP " + response.status;
};

SR.getJSON = async function (path) {
  const response = await fetch(path, { headers: SR.headers(false) });
  if (!response.ok) throw new Error(await SR.errorText(response));
  return response.json();
};

// POST a JSON body and call onEvent(name, data) for each server-sent event of the reply.
SR.postEvents = async function (path, body, onEvent) {
  const response = await fetch(path, { method: "POST", headers: SR.headers(true), body: JSON.stringify(body) });
  if (!response.ok) throw new Error(await SR.errorText(response));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
};

// The server's facts (no key needed), and a key field when it wants one.
SR.start = async function (keyBox) {
  const health = await SR.getJSON("/health");
  if (health.auth_required && keyBox) {
    keyBox.hidden = false;
    const input = keyBox.querySelector("input");
    input.value = SR.key.get();
    input.addEventListener("change", () => SR.key.set(input.value.trim()));
  }
  return health;
};
