// The compare view, /compare?a=ID&b=ID: two runs aligned step by step
// (GET /v1/diff), the first divergence highlighted and explained, and the
// differences of the selected row per channel. Everything comes from the
// same-origin API; nothing is fetched from anywhere else.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const el = FR.el;

  // The order channels are shown in, and how they are named.
  const CHANNELS = [
    ["outcome", "Outcome"],
    ["network", "Requests and statuses"],
    ["console", "Console"],
    ["check", "Checks"],
    ["snapshot", "Snapshot text"],
    ["pixels", "Pixels"],
    ["timing", "Timing"],
  ];
  const OPS = {
    match: { mark: "=", label: "aligned: the same step" },
    changed: { mark: "≠", label: "aligned: another target or page" },
    inserted: { mark: "+", label: "only in b" },
    deleted: { mark: "−", label: "only in a" },
  };

  const state = {
    a: "", b: "",
    report: null,
    rec: { a: null, b: null },
    steps: { a: new Map(), b: new Map() },
    rows: [],
    selected: -1,
    divergent: -1,
  };

  function ready() {
    document.body.dataset.ready = "1";
  }

  function playerURL(id, step) {
    return "/r/" + encodeURIComponent(id) + (step > 0 ? "?step=" + step : "");
  }

  // ---- errors and the forms ----

  function showForm(a, b) {
    $("pick-a").value = a || "";
    $("pick-b").value = b || "";
    $("pick").hidden = false;
  }

  function showError(err) {
    FR.showError($("error"), err);
    if (err && (err.status === 401 || err.status === 403)) $("token").hidden = false;
  }

  $("token").addEventListener("submit", (e) => {
    e.preventDefault();
    FR.setToken($("token-value").value.trim());
    location.reload();
  });

  // ---- loading ----

  async function load() {
    const q = new URLSearchParams(location.search);
    state.a = (q.get("a") || "").trim();
    state.b = (q.get("b") || "").trim();
    if (!state.a || !state.b) {
      showForm(state.a, state.b);
      $("pick-" + (state.a ? "b" : "a")).focus();
      return;
    }
    const enc = encodeURIComponent;
    const calls = [
      FR.api("/v1/diff?a=" + enc(state.a) + "&b=" + enc(state.b)),
      FR.api("/v1/recordings/" + enc(state.a)),
      FR.api("/v1/recordings/" + enc(state.b)),
      FR.api("/v1/recordings/" + enc(state.a) + "/steps"),
      FR.api("/v1/recordings/" + enc(state.b) + "/steps"),
    ];
    const [diff, ra, rb, sa, sb] = await Promise.allSettled(calls);
    if (diff.status === "rejected") {
      showError(diff.reason);
      showForm(state.a, state.b);
      return;
    }
    state.report = diff.value;
    state.rec.a = ra.status === "fulfilled" ? ra.value : null;
    state.rec.b = rb.status === "fulfilled" ? rb.value : null;
    for (const [side, r] of [["a", sa], ["b", sb]]) {
      if (r.status !== "fulfilled") continue;
      for (const s of r.value.steps || []) state.steps[side].set(s.step, s);
    }
    const failed = [ra, rb, sa, sb].find((r) => r.status === "rejected");
    if (failed) showError(failed.reason); // the diff still shows
    render();
  }

  // ---- rendering ----

  function verdictBadge(v) {
    const cls = v === "pass" ? "pass" : v === "fail" || v === "error" ? "fail" : "other";
    return el("span", { class: "tag " + cls, text: v || "no verdict" });
  }

  function runCard(side, sum, rec) {
    const d = state.report.first_divergence;
    const step = d ? (side === "a" ? d.step_a : d.step_b) : 0;
    const project = (rec && rec.project) || sum.project || "";
    const flow = (rec && rec.flow) || sum.flow || "(unnamed flow)";
    const verdict = (rec && rec.verdict) || sum.verdict;
    return el("div", { class: "run run-" + side },
      el("div", { class: "run-head" },
        el("span", { class: "who", text: side }),
        el("span", { class: "run-name" },
          project ? el("span", { class: "project", text: project + " / " }) : null,
          el("strong", { text: flow })),
        verdictBadge(verdict),
        sum.state === "open" ? el("span", { class: "tag other", text: "open" }) : null),
      el("div", { class: "run-meta" },
        el("span", { text: side === "a" ? "reference" : "under suspicion" }),
        el("span", { text: "created " + (rec ? FR.when(rec.created_at) : "–") }),
        el("span", { text: sum.steps + " steps" }),
        el("a", { href: playerURL(sum.id, step), class: "mono", text: sum.id,
          title: "open run " + side + " in the player" + (step ? " at step " + step : "") })),
      sum.signature ? el("div", { class: "run-sig", text: "failure signature: " + sum.signature }) : null,
    );
  }

  // sigParts splits a pair's signature ("verb target @ path", and "a's →
  // b's" for a changed pair) into one side's action and page path.
  function sigParts(pair, side) {
    let sig = pair.signature || "";
    if (pair.op === "changed") {
      const parts = sig.split(" → ");
      sig = parts.length === 2 ? parts[side === "a" ? 0 : 1] : "";
    }
    const at = sig.lastIndexOf(" @ ");
    return at < 0 ? { action: sig, path: "" } : { action: sig.slice(0, at), path: sig.slice(at + 3) };
  }

  function stepCell(side, n, pair) {
    const id = side === "a" ? state.report.a.id : state.report.b.id;
    const td = el("td", { class: "cell col-" + side });
    td.append(el("span", { class: "narrow-side", text: side }));
    if (!n) {
      td.classList.add("gap");
      td.append(el("span", { class: "gap-text", text: "no step in " + side }));
      return td;
    }
    const s = state.steps[side].get(n);
    const sig = sigParts(pair, side);
    const action = sig.action || (s ? [s.action, s.target].filter(Boolean).join(" ") : "");
    const outcome = s ? s.outcome || "" : "";
    td.append(
      el("a", { class: "stepno", href: playerURL(id, n), title: "open run " + side + " at step " + n + " in the player" },
        "step " + n),
      el("span", { class: "action", text: action || "(no receipt)", title: s && s.target ? s.action + " " + s.target : null }),
      sig.path ? el("span", { class: "path", text: "@ " + sig.path }) : null,
      outcome ? el("span", { class: "outcome " + (outcome === "done" ? "ok" : "bad"),
        text: outcome + (s.error_code ? " " + s.error_code : "") }) : null,
    );
    return td;
  }

  function render() {
    const rep = state.report;
    // The runs.
    $("runs").replaceChildren(runCard("a", rep.a, state.rec.a), runCard("b", rep.b, state.rec.b));
    $("runs").hidden = false;
    document.title = "compare " + (rep.a.flow || rep.a.id) + " · flightrec";

    const notes = rep.notes || [];
    $("notes").replaceChildren(...notes.map((n) => el("li", { text: n })));
    $("notes").hidden = notes.length === 0;

    // The pairs.
    const pairs = rep.pairs || [];
    const d = rep.first_divergence;
    state.rows = [];
    state.divergent = -1;
    const body = $("pairs").tBodies[0];
    body.replaceChildren();
    pairs.forEach((p, i) => {
      const diffs = p.differences || [];
      const op = OPS[p.op] || { mark: "?", label: p.op };
      const isDiv = !!d && p.step_a === d.step_a && p.step_b === d.step_b && state.divergent < 0;
      const cls = ["pair", "op-" + p.op];
      if (diffs.length) cls.push("differs");
      if (p.material) cls.push("material");
      if (isDiv) cls.push("divergent");
      const mark = el("td", { class: "col-mark", title: op.label },
        el("span", { class: "mark", "aria-hidden": "true", text: isDiv ? "⚑" : p.material ? "!" : diffs.length ? "•" : op.mark }),
        el("span", { class: "sr-only", text: (isDiv ? "first divergence; " : "") + op.label +
          (diffs.length ? "; " + diffs.length + " difference" + (diffs.length > 1 ? "s" : "") + (p.material ? ", material" : "") : "") }));
      const tr = el("tr", {
        id: "pair-" + i, class: cls.join(" "), tabindex: "-1",
        "data-index": String(i), "data-a-step": String(p.step_a || 0), "data-b-step": String(p.step_b || 0),
        "data-op": p.op,
        "aria-describedby": isDiv ? "explanation" : null,
      }, stepCell("a", p.step_a, p), mark, stepCell("b", p.step_b, p));
      if (isDiv) state.divergent = i;
      body.append(tr);
      state.rows.push(tr);
    });
    if (!pairs.length) {
      body.append(el("tr", {}, el("td", { colspan: "3", class: "no-pairs", text: "Neither run has a step." })));
    }

    // The explanation.
    const ex = $("explanation");
    if (d) {
      ex.replaceChildren(el("span", { class: "ex-label", text: "First divergence" + (d.channel ? " · " + d.channel : "") }),
        el("span", { class: "ex-text", text: d.explanation }));
      ex.disabled = state.divergent < 0;
      ex.title = "jump to the divergent step";
      ex.classList.remove("none");
    } else {
      ex.replaceChildren(el("span", { class: "ex-label", text: "No divergence" }),
        el("span", { class: "ex-text", text: "no step differs materially" +
          (rep.same_flow ? "" : " (the runs are of different flows)") }));
      ex.disabled = true;
      ex.classList.add("none");
    }
    ex.hidden = false;
    $("layout").hidden = false;

    // The selection: the divergent row, else the first material one, else the first.
    let start = state.divergent;
    if (start < 0) start = pairs.findIndex((p) => p.material);
    if (start < 0) start = pairs.findIndex((p) => (p.differences || []).length);
    if (start < 0) start = pairs.length ? 0 : -1;
    if (start >= 0) {
      select(start, { focus: false });
      state.rows[start].scrollIntoView({ block: "center" });
    } else {
      $("channels").replaceChildren(el("p", { class: "muted", text: "Nothing to compare." }));
    }
  }

  // ---- the selected row's differences ----

  function sideLine(side, n) {
    const id = side === "a" ? state.report.a.id : state.report.b.id;
    if (!n) return el("div", { class: "side-line gap-text" }, el("span", { class: "who", text: side }), "no step");
    const s = state.steps[side].get(n);
    return el("div", { class: "side-line" },
      el("span", { class: "who", text: side }),
      el("a", { href: playerURL(id, n), text: "step " + n }),
      s ? el("span", { class: "receipt", text: [s.action, s.target].filter(Boolean).join(" ") }) : null,
      s && s.outcome ? el("span", { class: "outcome " + (s.outcome === "done" ? "ok" : "bad"),
        text: s.outcome + (s.error_code ? " " + s.error_code : "") }) : null);
  }

  function renderChannels(i) {
    const p = state.report.pairs[i];
    const diffs = p.differences || [];
    const isDiv = i === state.divergent;
    const op = OPS[p.op] || { label: p.op };
    const box = $("channels");
    const out = [
      el("h2", { class: "ch-title" },
        isDiv ? el("span", { class: "tag fail", text: "first divergence" }) : null,
        " " + op.label),
      el("div", { class: "sides", "data-a-step": String(p.step_a || 0), "data-b-step": String(p.step_b || 0) },
        sideLine("a", p.step_a), sideLine("b", p.step_b)),
      el("div", { class: "pair-sig mono", text: p.signature }),
    ];
    if (!diffs.length) {
      out.push(el("p", { class: "muted nodiff", text: "No difference on any channel." }));
    }
    const known = new Set(CHANNELS.map((c) => c[0]));
    const order = CHANNELS.concat([...new Set(diffs.map((x) => x.channel))].filter((c) => !known.has(c)).map((c) => [c, c]));
    for (const [ch, name] of order) {
      const list = diffs.filter((x) => x.channel === ch);
      if (!list.length) continue;
      const material = list.some((x) => x.material);
      out.push(el("section", { class: "channel" + (material ? " material" : ""), "data-channel": ch },
        el("h3", {}, name, material ? el("span", { class: "tag fail", text: "material" }) : null),
        el("ul", {}, ...list.map((x) => el("li", { class: x.material ? "material" : "" },
          el("span", { class: "diff-kind", text: x.kind.replace(/_/g, " ") }),
          el("span", { class: "diff-detail", text: x.detail }),
          x.material ? el("span", { class: "sr-only", text: " (material)" }) : null)))));
    }
    box.replaceChildren(...out);
    box.dataset.index = String(i);
    box.scrollTop = 0;
  }

  function select(i, opts) {
    if (i < 0 || i >= state.rows.length) return;
    const o = opts || {};
    const prev = state.rows[state.selected];
    if (prev) {
      prev.classList.remove("selected");
      prev.removeAttribute("aria-current");
      prev.tabIndex = -1;
    }
    state.selected = i;
    const row = state.rows[i];
    row.classList.add("selected");
    row.setAttribute("aria-current", "true");
    row.tabIndex = 0;
    renderChannels(i);
    if (o.focus !== false) {
      row.focus({ preventScroll: true });
      row.scrollIntoView({ block: o.block || "nearest" });
    }
  }

  // ---- interaction ----

  $("pairs").addEventListener("click", (e) => {
    if (e.target.closest("a")) return; // a step link opens the player
    const row = e.target.closest("tr.pair");
    if (row) select(Number(row.dataset.index));
  });

  $("pairs").addEventListener("keydown", (e) => {
    const row = e.target.closest("tr.pair");
    if (!row || e.target !== row) return; // Enter on a link follows it
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      select(Number(row.dataset.index));
    }
  });

  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (!state.rows.length) return;
    let next = -1;
    const cur = state.selected < 0 ? 0 : state.selected;
    switch (e.key) {
      case "j": case "ArrowDown": next = Math.min(cur + 1, state.rows.length - 1); break;
      case "k": case "ArrowUp": next = Math.max(cur - 1, 0); break;
      case "Home": if (t && t.closest && t.closest("#pairs")) next = 0; break;
      case "End": if (t && t.closest && t.closest("#pairs")) next = state.rows.length - 1; break;
      default: return;
    }
    if (next < 0) return;
    if ((e.key === "ArrowDown" || e.key === "ArrowUp") && !(t && t.closest && t.closest("#pairs"))) return; // keep arrows scrolling the page
    e.preventDefault();
    select(next);
  });

  $("explanation").addEventListener("click", () => {
    if (state.divergent >= 0) select(state.divergent, { block: "center" });
  });

  load().catch((err) => {
    showError(err);
  }).finally(ready);
})();
