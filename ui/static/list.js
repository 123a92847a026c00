// The recordings list: filters (reflected in the URL), search, paging,
// retention per visible row, and picking two runs to compare.
"use strict";

(() => {
  const $ = (s) => document.querySelector(s);
  const filters = $("#filters");
  const tbody = $("#recordings tbody");
  const errBox = $("#error");
  const moreBtn = $("#more");
  const compareBtn = $("#compare");
  const fields = ["project", "flow", "verdict", "since", "until"];
  const selected = []; // ids, in the order they were ticked
  let next = "";
  let gen = 0; // bumps on every new query, so late pages are dropped

  // apiTime turns a date input's day into the API's RFC 3339 bound.
  function apiTime(v, end) {
    if (/^\d{4}-\d{2}-\d{2}$/.test(v)) return v + (end ? "T23:59:59.999999999Z" : "T00:00:00Z");
    return v;
  }

  function current() {
    const out = {};
    for (const f of fields) out[f] = (filters.elements[f].value || "").trim();
    return out;
  }

  function fromURL() {
    const q = new URLSearchParams(location.search);
    for (const f of fields) filters.elements[f].value = q.get(f) || "";
    $("#q").value = q.get("q") || "";
  }

  function toURL() {
    const p = current();
    const q = $("#q").value.trim();
    if (q) p.q = q;
    history.replaceState(null, "", "/" + FR.query(p));
  }

  function row(r) {
    const dur = r.first_ts && r.last_ts ? r.last_ts - r.first_ts : 0;
    const box = FR.el("input", { type: "checkbox", class: "pick", "aria-label": "select " + r.id, value: r.id });
    box.checked = selected.includes(r.id);
    box.addEventListener("change", () => {
      const i = selected.indexOf(r.id);
      if (box.checked && i < 0) selected.push(r.id);
      if (!box.checked && i >= 0) selected.splice(i, 1);
      updateCompare();
    });
    const name = FR.el("a", { href: "/r/" + encodeURIComponent(r.id), class: "rec-link" },
      FR.el("span", { class: "project", text: r.project }),
      " / ",
      FR.el("span", { class: "flow", text: r.flow || "(no flow)" }));
    const verdict = r.verdict || (r.state === "open" ? "open" : "");
    return FR.el("tr", { "data-id": r.id, "data-verdict": r.verdict || "" },
      FR.el("td", {}, box),
      FR.el("td", {}, FR.badge(verdict, r.state === "open" && !r.verdict ? "warn" : undefined)),
      FR.el("td", {}, name, FR.el("div", { class: "muted small mono", text: r.id })),
      FR.el("td", { class: "nowrap", text: FR.when(r.created_at) }),
      FR.el("td", { class: "num", text: FR.duration(dur) }),
      FR.el("td", { class: "num", text: String(r.steps) }),
      FR.el("td", { class: "retention-cell" }, FR.el("span", { class: "muted", text: "…" })));
  }

  function updateCompare() {
    const ok = selected.length === 2;
    compareBtn.disabled = !ok;
    $("#compare-hint").textContent = ok ? "" :
      selected.length < 2 ? "select two recordings to compare" : "select exactly two (" + selected.length + " selected)";
  }

  compareBtn.addEventListener("click", () => {
    if (selected.length !== 2) return;
    location.href = "/compare" + FR.query({ a: selected[0], b: selected[1] });
  });

  // Retention is not in the list rows: fetch each shown row's recording,
  // four at a time.
  function fillRetention(rows, g) {
    FR.pool(rows, 4, async (r) => {
      if (g !== gen) return;
      const cell = tbody.querySelector('tr[data-id="' + CSS.escape(r.id) + '"] .retention-cell');
      if (!cell) return;
      try {
        const full = await FR.api(FR.rec(r.id));
        cell.replaceChildren(FR.retention(full.retention));
      } catch (e) {
        cell.replaceChildren(FR.el("span", { class: "muted", text: "?", title: e.message }));
      }
    });
  }

  async function load(reset) {
    const g = reset ? ++gen : gen;
    if (reset) { tbody.replaceChildren(); next = ""; }
    const f = current();
    const params = { project: f.project, flow: f.flow, verdict: f.verdict,
      since: apiTime(f.since, false), until: apiTime(f.until, true), limit: 50, after: next };
    errBox.hidden = true;
    moreBtn.disabled = true;
    try {
      const page = await FR.api("/v1/recordings" + FR.query(params));
      if (g !== gen) return;
      const rows = page.recordings || [];
      tbody.append(...rows.map(row));
      next = page.next || "";
      moreBtn.hidden = !next;
      $("#empty").hidden = tbody.children.length > 0;
      fillRetention(rows, g);
    } catch (e) {
      if (g === gen) FR.showError(errBox, e);
    } finally {
      moreBtn.disabled = false;
    }
  }

  // Search hits grouped by recording, each linking to its step.
  async function search() {
    const q = $("#q").value.trim();
    const out = $("#search-results");
    $("#search-clear").hidden = !q;
    if (!q) { out.replaceChildren(); return; }
    out.replaceChildren(FR.el("p", { class: "muted", text: "Searching…" }));
    try {
      const res = await FR.api("/v1/search" + FR.query({ q }));
      const groups = new Map();
      for (const h of res.hits || []) {
        if (!groups.has(h.recording)) groups.set(h.recording, []);
        groups.get(h.recording).push(h);
      }
      if (!groups.size) { out.replaceChildren(FR.el("p", { class: "muted", text: "No hits for " + q })); return; }
      const blocks = [];
      for (const [id, hits] of groups) {
        const items = hits.map((h) => {
          const href = "/r/" + encodeURIComponent(id) + (h.seq ? "?step=" + h.step : "");
          const what = [h.method, h.url, h.status ? String(h.status) : "", h.level, h.action, h.error_code, h.text]
            .filter(Boolean).join(" ");
          return FR.el("li", { class: "hit", "data-step": h.step },
            FR.el("a", { href }, h.seq ? "step " + h.step : "recording"),
            " ", FR.el("span", { class: "kind", text: h.kind || h.field || "" }),
            " ", FR.el("span", { class: "hit-text", text: what.length > 300 ? what.slice(0, 300) + "…" : what }));
        });
        blocks.push(FR.el("div", { class: "hit-group", "data-recording": id },
          FR.el("h3", {}, FR.el("a", { href: "/r/" + encodeURIComponent(id), class: "mono", text: id }),
            " ", FR.el("span", { class: "muted", text: hits.length + (hits.length === 1 ? " hit" : " hits") })),
          FR.el("ul", { class: "hits" }, ...items)));
      }
      if (res.truncated) blocks.push(FR.el("p", { class: "muted", text: "More hits than shown: narrow the query." }));
      out.replaceChildren(...blocks);
    } catch (e) {
      const box = FR.el("div", { class: "error", role: "alert" });
      FR.showError(box, e);
      out.replaceChildren(box);
    }
  }

  filters.addEventListener("submit", (ev) => { ev.preventDefault(); toURL(); load(true); });
  $("#filters-reset").addEventListener("click", () => { filters.reset(); toURL(); load(true); });
  moreBtn.addEventListener("click", () => load(false));
  $("#search").addEventListener("submit", (ev) => { ev.preventDefault(); toURL(); search(); });
  $("#search-clear").addEventListener("click", () => { $("#q").value = ""; toURL(); search(); });

  fromURL();
  updateCompare();
  Promise.all([load(true), search()]).finally(() => {
    document.body.dataset.ready = "1";
    performance.mark("flightrec-ready");
  });
})();
