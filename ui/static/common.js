// Shared by every page: API calls (with the bearer token a user pasted,
// if any), media URLs, escaping, formatting. No framework, no build.
"use strict";

const FR = (() => {
  const tokenKey = "flightrec.token";

  function token() {
    return sessionStorage.getItem(tokenKey) || "";
  }

  function setToken(t) {
    if (t) sessionStorage.setItem(tokenKey, t);
    else sessionStorage.removeItem(tokenKey);
  }

  function headers() {
    const t = token();
    return t ? { Authorization: "Bearer " + t } : {};
  }

  // APIError carries the server's error envelope.
  class APIError extends Error {
    constructor(status, env) {
      const e = (env && env.error) || {};
      super(e.message || "HTTP " + status);
      this.status = status;
      this.code = e.code || "";
      this.next = e.next || "";
    }
  }

  async function fetchOK(path, opts) {
    const resp = await fetch(path, Object.assign({ headers: headers() }, opts || {}));
    if (!resp.ok) {
      let env = null;
      try { env = await resp.json(); } catch (_) { /* not JSON */ }
      throw new APIError(resp.status, env);
    }
    return resp;
  }

  async function api(path) {
    return (await fetchOK(path)).json();
  }

  async function text(path) {
    return (await fetchOK(path)).text();
  }

  // mediaURL is a URL an element (video, iframe, img) can load: the path
  // itself while no token is needed, else a blob: URL of the bytes
  // fetched with the token (elements cannot send headers).
  async function mediaURL(path) {
    if (!token()) return path;
    const blob = await (await fetchOK(path)).blob();
    return URL.createObjectURL(blob);
  }

  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, (c) => ({
      "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
    })[c]);
  }

  // el builds an element: el("td", {class: "x", text: "…"}, child…).
  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "text") n.textContent = v;
      else if (k === "class") n.className = v;
      else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) {
      if (c == null) continue;
      n.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return n;
  }

  function duration(ns) {
    if (!ns || ns < 0) return "–";
    const s = ns / 1e9;
    if (s < 60) return s.toFixed(1) + " s";
    const m = Math.floor(s / 60);
    return m + " min " + Math.round(s - m * 60) + " s";
  }

  function when(ns) {
    if (!ns) return "–";
    return new Date(ns / 1e6).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }

  // showError puts an error (with the server's next step) into a box.
  function showError(box, err) {
    box.replaceChildren(
      FR.el("strong", { text: err.code ? err.code + ": " : "" }),
      err.message || String(err),
      err.next ? FR.el("div", { class: "next", text: "next: " + err.next }) : null,
    );
    box.hidden = false;
  }

  return { token, setToken, api, text, fetchOK, mediaURL, esc, el, duration, when, showError, APIError };
})();
