// Shared by every page: API calls (with the bearer token a user pasted,
// if any), media URLs, building elements (text only, never markup),
// formatting. No framework, no build.
"use strict";

const FR = (() => {
  const tokenKey = "flightrec.token";

  // A share link carries its secret in the address's fragment (#share=…),
  // which no request, log or Referer header carries; the page sends it as
  // its bearer credential and keeps it nowhere else.
  const shareOf = () => (location.hash.match(/[#&]share=([^&]+)/) || [])[1] || "";
  const shared = shareOf();
  // A link pasted over the page's own address changes only the fragment,
  // which loads nothing: load the page again as that link.
  window.addEventListener("hashchange", () => { if (shareOf() !== shared) location.reload(); });

  function token() {
    return shared || sessionStorage.getItem(tokenKey) || "";
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
    const o = Object.assign({}, opts || {});
    o.headers = Object.assign({}, headers(), o.headers || {});
    const resp = await fetch(path, o);
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

  // mediaURL is a URL an element (video, iframe, img) can load: the path
  // itself while no token is needed, else a blob: URL of the bytes
  // fetched with the token (elements cannot send headers).
  async function mediaURL(path) {
    if (!token()) return path;
    const blob = await (await fetchOK(path)).blob();
    return URL.createObjectURL(blob);
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

  // put replaces node's children, leaving out null and false ones
  // (replaceChildren would print them as text).
  function put(node, ...children) {
    node.replaceChildren(...children.filter((c) => c != null && c !== false));
    return node;
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
    put(box,
      FR.el("strong", { text: err.code ? err.code + ": " : "" }),
      err.message || String(err),
      err.next ? FR.el("div", { class: "next", text: "next: " + err.next }) : null,
    );
    box.hidden = false;
  }

  // rec is the path of a recording's API, with more path appended.
  function rec(id, more) {
    return "/v1/recordings/" + encodeURIComponent(id) + (more || "");
  }

  // query builds "?a=1&b=2" from an object, leaving out empty values.
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v != null && v !== "") q.set(k, String(v));
    }
    const s = q.toString();
    return s ? "?" + s : "";
  }

  // verdictClass is the badge modifier for a verdict or an outcome.
  function verdictClass(v) {
    switch (v) {
      case "pass": case "passed": case "done": case "ok": return "pass";
      case "fail": case "failed": case "error": return "fail";
      case "": case undefined: case null: return "none";
      default: return "warn";
    }
  }

  // badge is a coloured label that also says what it means in text.
  function badge(text, kind) {
    return el("span", { class: "badge badge-" + (kind || verdictClass(text)), text: text || "–" });
  }

  function bytes(n) {
    if (n == null || n < 0) return "–";
    if (n < 1024) return n + " B";
    const u = ["KB", "MB", "GB", "TB"];
    let i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < u.length - 1);
    return n.toFixed(n < 10 ? 1 : 0) + " " + u[i];
  }

  // pool runs fn over items with at most n in flight.
  async function pool(items, n, fn) {
    let next = 0;
    const worker = async () => {
      while (next < items.length) {
        const i = next++;
        try { await fn(items[i], i); } catch (_) { /* fn reports its own errors */ }
      }
    };
    await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  }

  // retention renders the retention member of a recording: class,
  // expiry, pins.
  function retention(r) {
    if (!r) return el("span", { class: "muted", text: "–" });
    if (r.policy_error) return el("span", { class: "warn-text", text: "policy error: " + r.policy_error });
    const parts = [el("span", { class: "ret-class", text: r.class || "–" })];
    if (r.open) parts.push(" · open");
    else if (r.expired) parts.push(" · expired (" + (r.why || "") + ")");
    else if (r.expires_at) parts.push(" · until " + when(r.expires_at).slice(0, 10));
    const active = (r.pins || []).filter((p) => !p.until || p.until > Date.now() * 1e6);
    if (active.length) parts.push(" · pinned");
    return el("span", { class: "retention" }, ...parts);
  }

  // download saves an API resource: a plain link while no token is
  // needed, else fetched with the token into a blob: URL.
  async function download(path, name) {
    const a = el("a", { href: path, download: name || "" });
    if (token()) {
      const blob = await (await fetchOK(path)).blob();
      a.href = URL.createObjectURL(blob);
      setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    }
    document.body.append(a);
    a.click();
    a.remove();
  }

  return { token, setToken, shared: () => shared !== "", api, fetchOK, mediaURL, el, duration, when, showError,
    put, rec, query, badge, bytes, pool, retention, download };
})();
