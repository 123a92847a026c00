// The player: a recording's steps, video (or its frames), the DOM at a
// step in an inert sandboxed frame, network, console, receipt, snapshots,
// checks and reports, all following one selected step. Everything is read
// from the API; nothing recorded is ever put into this page as HTML.
"use strict";

(() => {
  const $ = (s) => document.querySelector(s);
  const PREVIEW = 2000; // characters of a long text shown before "show all"
  const CHUNK = 100000; // characters of it added to the page at a time after

  const id = decodeURIComponent((location.pathname.match(/^\/r\/([^/]+)/) || [])[1] || "");
  const state = {
    rec: null,
    // steps holds the timeline by position; a position whose page has not
    // arrived yet is a hole (undefined) until it does.
    steps: [],
    t0: 0, // the first step's start_ts
    paging: false, // true once the first page is shown: holes drawn load their pages
    byStep: new Map(),
    index: new Map(), // step → its position in steps
    firstDOM: null, // the first step with a DOM event
    cur: null,
    at: "after",
    videoOK: null, // null: unknown yet, true: playable, false: fall back to frames
    videoNote: "",
    frames: [],
    frameIdx: 0,
    domURL: "",
    net: [],
    logs: [],
  };
  const cache = new Map(); // step → Promise of its StepView, a few kept
  // Hooks for the features in player-extras.js (deep links to a moment,
  // speed, filmstrip, filters, cURL, comments), kept apart from this file.
  const hooks = { initialStep: null, onStep: [], onReady: [], onTimeline: [], filterNet: null, filterLogs: null, netDetail: null };

  const errBox = $("#error");
  const video = $("#video");
  const frame = $("#dom-frame");

  // ---- helpers -----------------------------------------------------------

  // preview shows the start of a long text, and on demand all of it: in a
  // scrolling pre, a chunk at a time (laying out megabytes of text at once
  // would freeze the page), with the whole as a file to save.
  function preview(text, limit) {
    text = text == null ? "" : String(text);
    limit = limit || PREVIEW;
    if (text.length <= limit) return FR.el("span", { class: "text", text });
    const wrap = FR.el("span", { class: "text long" });
    const more = FR.el("button", { type: "button", class: "link show-all",
      text: "show all (" + FR.bytes(text.length) + ")" });
    more.addEventListener("click", () => {
      const pre = FR.el("pre", { class: "full", tabindex: "0" });
      const next = FR.el("button", { type: "button", class: "link show-more" });
      let shown = 0;
      const step = () => {
        const end = Math.min(text.length, shown + CHUNK);
        pre.append(text.slice(shown, end));
        shown = end;
        next.hidden = shown >= text.length;
        next.textContent = "show " + FR.bytes(Math.min(CHUNK, text.length - shown)) + " more (" +
          FR.bytes(text.length - shown) + " not shown)";
      };
      next.addEventListener("click", step);
      let save = null;
      if (text.length > CHUNK) {
        save = FR.el("a", { class: "save", download: "flightrec-text.txt", text: "save the whole text",
          href: URL.createObjectURL(new Blob([text], { type: "text/plain" })) });
      }
      FR.put(wrap, pre, next, save ? " · " : null, save);
      step();
      pre.focus();
    });
    wrap.append(FR.el("span", { text: text.slice(0, limit) + "…" }), " ", more);
    return wrap;
  }

  function kv(rows) {
    const dl = FR.el("dl", { class: "kv" });
    for (const [k, v] of rows) {
      if (v == null || v === "" || (Array.isArray(v) && !v.length)) continue;
      dl.append(FR.el("dt", { text: k }), FR.el("dd", {}, v instanceof Node ? v : String(v)));
    }
    return dl;
  }

  function targetText(t) {
    if (!t) return "";
    const parts = [];
    if (t.role) parts.push(t.role);
    if (t.name) parts.push(JSON.stringify(t.name));
    if (t.selector) parts.push(t.selector);
    if (t.ref) parts.push(t.ref);
    return parts.join(" ");
  }

  function ms(v) {
    return v == null || v < 0 ? "–" : (v < 10 ? v.toFixed(1) : Math.round(v)) + " ms";
  }

  function errorBox(e) {
    const box = FR.el("div", { class: "error", role: "alert" });
    FR.showError(box, e);
    return box;
  }

  function empty(text) {
    return FR.el("p", { class: "muted empty", text });
  }

  function blobURL(cid) {
    return FR.rec(id, "/blobs/" + encodeURIComponent(cid));
  }

  // ---- long lists ------------------------------------------------------------

  // virtual shows only the rows of a long list that are in its scroller's
  // view, and a screenful either side, between two spacers that stand for
  // the rest: the page holds tens of rows whether the list has 20 or
  // 10,000, so opening it and scrolling it cost the same. Rows are built
  // by row(i) when they come into view and kept while they stay (a row a
  // user expanded stays expanded); their heights are measured once shown
  // and estimated from those measured until then.
  function virtual(scroller, list, spacer) {
    const v = { n: 0, row: null, empty: null, h: null, fw: null, est: 0, nodes: new Map() };
    const top = spacer();
    const bot = spacer();
    const setH = (sp, px) => { (sp.firstElementChild || sp).style.height = px + "px"; };
    // Rows not measured yet are taken to be as high as the first ones
    // drawn were on average. The estimate is fixed from then on: were it
    // to follow later measurements, every row below the view would move
    // when one in view is measured, under the user's pointer.
    const unit = () => v.est || 28;
    const height = (i) => v.h[i] || unit();
    // Where rows are: fw is a Fenwick tree of the measured rows' heights
    // less the estimate, so a row's offset, the list's height and the row
    // at a height cost log n each, not n: a draw at step 9,000 of 10,000
    // walks no row it does not draw.
    const fwAdd = (i, d) => { for (i++; i <= v.n; i += i & -i) v.fw[i] += d; };
    const fwSum = (i) => { let t = 0; for (; i > 0; i -= i & -i) t += v.fw[i]; return t; };
    const measure = (i, px) => {
      fwAdd(i, (px - unit()) - (v.h[i] ? v.h[i] - unit() : 0));
      v.h[i] = px;
    };
    v.offset = (i) => i * unit() + fwSum(i);
    const total = () => v.offset(v.n);
    // rowAt is the row holding height y of the list (its first row for y
    // < 0, its last for y past the end).
    const rowAt = (y) => {
      let pos = 0;
      let acc = 0;
      for (let step = 1 << Math.floor(Math.log2(Math.max(1, v.n))); step > 0; step >>= 1) {
        const next = pos + step;
        if (next <= v.n && next * unit() + acc + v.fw[next] <= y) { pos = next; acc += v.fw[next]; }
      }
      return Math.max(0, Math.min(v.n - 1, pos));
    };
    // base is where the list starts in the scroller's content.
    const base = () => list === scroller ? 0
      : list.getBoundingClientRect().top - scroller.getBoundingClientRect().top + scroller.scrollTop;
    // draw draws the rows in the scroller's view, and a screenful either
    // side; or, given at, those around row at (a list about to be scrolled
    // there: drawing its top first would be wasted).
    v.draw = (at) => {
      if (!v.n) { list.replaceChildren(...(v.empty ? [v.empty] : [])); v.nodes.clear(); return; }
      const margin = scroller.clientHeight || 400;
      const y0 = at == null ? scroller.scrollTop - base() : v.offset(at);
      const from = y0 - margin;
      const to = y0 + (scroller.clientHeight || 400) + margin;
      const start = rowAt(from);
      const above = v.offset(start);
      let y = above;
      let i = start;
      while (i < v.n && (y < to || i - start < 8)) y += height(i++);
      const end = i;
      const below = total() - y;
      // Rows that stay are left where they are, never taken out and put
      // back: a click whose press and release straddle a redraw would be
      // lost, and so would focus.
      for (const [k, node] of v.nodes) if (k < start || k >= end) node.remove();
      if (list.firstChild !== top) list.prepend(top);
      if (list.lastChild !== bot) list.append(bot);
      const keep = new Map();
      let prev = top;
      for (let k = start; k < end; k++) {
        let node = v.nodes.get(k);
        if (!node) {
          node = v.row(k);
          prev.after(node);
        }
        keep.set(k, node);
        prev = node;
      }
      v.nodes = keep;
      setH(top, above);
      setH(bot, below);
      // A placeholder (aria-busy: its row's data is on the way) is not
      // measured: the row that replaces it is what takes the space.
      let sum = 0;
      let measured = 0;
      const heights = [];
      for (const [k, node] of keep) {
        if (node.getAttribute("aria-busy") === "true") continue;
        heights.push([k, node.offsetHeight]);
      }
      for (const [k, px] of heights) {
        if (px) measure(k, px);
        if (v.h[k]) { sum += v.h[k]; measured++; }
      }
      if (!v.est && sum) {
        // The estimate is set: the tree holds heights less it, again.
        v.est = sum / measured;
        v.fw.fill(0);
        for (let k = 0; k < v.n; k++) if (v.h[k]) fwAdd(k, v.h[k] - v.est);
        // and the spacers stand for the rows at it.
        setH(top, v.offset(start));
        setH(bot, total() - v.offset(end));
      }
    };
    // reset shows n rows from the top, or around row at; empty is shown
    // when n is 0.
    v.reset = (n, row, empty, at) => {
      Object.assign(v, { n, row, empty, h: new Float64Array(n), fw: new Float64Array(n + 1), est: 0, nodes: new Map() });
      list.replaceChildren();
      scroller.scrollTop = 0;
      v.draw(at == null || at < 0 || at >= n ? null : at);
    };
    // rebuild builds the drawn rows from..to-1 again (a page of steps
    // arrived for rows drawn as placeholders), each in its place: taking
    // them out first would shorten the list for a moment, and the browser
    // would pull a view at the end of it back by as much.
    v.rebuild = (from, to) => {
      let built = 0;
      for (const [k, node] of v.nodes) {
        if (k < from || k >= to) continue;
        const fresh = v.row(k);
        node.replaceWith(fresh);
        v.nodes.set(k, fresh);
        built++;
      }
      return built;
    };
    // show scrolls the least that brings row i into view, and draws.
    v.show = (i) => {
      if (i < 0 || i >= v.n) return;
      // A few passes at most: the rows drawn at the first place tried are
      // measured, which moves row i by what the estimate missed (and the
      // spacers must hold the estimate before scrolling, or the scroller
      // stops short of it: reset drew them so).
      for (let pass = 0; pass < 3; pass++) {
        if (pass > 0 || !v.est) v.draw(); // with an estimate, go straight there
        const y = base() + v.offset(i);
        const top = scroller.scrollTop;
        if (y < top) scroller.scrollTop = y - 8;
        else if (y + height(i) > top + scroller.clientHeight) scroller.scrollTop = y + height(i) - scroller.clientHeight + 8;
        else if (v.nodes.has(i)) return;
      }
      v.draw();
    };
    let queued = 0;
    scroller.addEventListener("scroll", () => {
      if (!queued) queued = requestAnimationFrame(() => { queued = 0; v.draw(); });
    }, { passive: true });
    return v;
  }

  const stepList = virtual($("#steps-pane"), $("#steps"), () => FR.el("li", { class: "spacer", "aria-hidden": "true" }));
  const netList = virtual($("#network .net-wrap"), $("#network tbody"),
    () => FR.el("tr", { class: "spacer", "aria-hidden": "true" }, FR.el("td", { colspan: "4" })));
  const logList = virtual($("#console"), $("#console"), () => FR.el("div", { class: "spacer", "aria-hidden": "true" }));

  // ---- header and reports --------------------------------------------------

  function renderTitle(r) {
    const dur = r.first_ts && r.last_ts ? r.last_ts - r.first_ts : 0;
    document.title = "flightrec · " + (r.flow || r.id);
    FR.put($("#rec-title"),
      FR.badge(r.verdict || r.state, r.verdict ? undefined : "warn"),
      FR.el("span", { class: "rec-name" }, FR.el("strong", { text: r.project }), " / ", r.flow || "(no flow)"),
      FR.el("span", { class: "muted small", text: FR.when(r.created_at) + " · " + FR.duration(dur) + " · " +
        r.steps + " steps · " + r.state }),
      r.failure_signature ? FR.el("span", { class: "sig small", title: "failure signature", text: r.failure_signature }) : null,
      // A recording rewritten by a newer redaction policy (audit scan --fix)
      // says so, with the root it replaced.
      (r.re_redacted || []).length ? FR.el("span", { class: "badge badge-warn", id: "re-redacted",
        title: r.re_redacted.map((x) => "replaced root " + x.old_root + " (" + (x.rules || []).join(", ") + ")").join("\n"),
        text: "re-redacted " + FR.when(r.re_redacted[r.re_redacted.length - 1].at) }) : null,
      FR.el("span", { class: "muted small mono", text: r.id }));
  }

  function renderDownloads(r) {
    const finished = r.state === "finished";
    const items = [
      ["HAR", "/har", r.id + ".har", true],
      ["WebM video", "/video.webm", r.id + ".webm", true],
      ["Bundle (CAR)", "/bundle", r.id + ".car", finished],
      ["Attestation", "/attestation", r.id + ".intoto.json", finished],
      ["rrweb events", "/rrweb", r.id + ".rrweb.json", true],
    ];
    const box = $("#downloads");
    box.replaceChildren(FR.el("h3", { text: "Downloads" }));
    const list = FR.el("ul", { class: "dl-list" });
    for (const [label, path, name, ok] of items) {
      const a = FR.el("a", { href: FR.rec(id, path), download: name, class: "dl", "data-kind": path.slice(1) }, label);
      if (!ok) {
        list.append(FR.el("li", {}, FR.el("span", { class: "muted", text: label + " (once finished)" })));
        continue;
      }
      a.addEventListener("click", (ev) => {
        if (!FR.token()) return; // the plain link works
        ev.preventDefault();
        FR.download(FR.rec(id, path), name).catch((e) => FR.showError(errBox, e));
      });
      list.append(FR.el("li", {}, a));
    }
    box.append(list);
  }

  function renderRetention(ret) {
    const box = $("#retention");
    box.replaceChildren(FR.el("h3", { text: "Retention" }));
    if (!ret) { box.append(empty("not reported")); return; }
    const pins = (ret.pins || []).map((p) => FR.el("li", {
      text: (p.reason || "pin") + (p.ref ? " (" + p.ref + ")" : "") + " · " +
        (p.until ? "until " + FR.when(p.until) : "no end"),
    }));
    box.append(kv([
      ["class", ret.class ? ret.class + (ret.days ? " (" + ret.days + " days)" : "") : ""],
      ["expires", ret.expires_at ? FR.when(ret.expires_at) : ""],
      ["held until", ret.held_until === -1 ? "no end (pinned)" : ret.held_until ? FR.when(ret.held_until) : ""],
      ["state", ret.open ? "open: never swept" : ret.expired ? "expired: " + (ret.why || "") : "kept"],
      ["policy error", ret.policy_error],
      ["pins", pins.length ? FR.el("ul", { class: "pins" }, ...pins) : "none"],
    ]));
  }

  async function loadRedaction() {
    const box = $("#redaction");
    box.replaceChildren(FR.el("h3", { text: "Redaction" }));
    try {
      const rep = await FR.api(FR.rec(id, "/redaction"));
      box.append(kv([
        ["redactions", String(rep.total || 0)],
        ["events", (rep.redacted_events || 0) + " of " + (rep.events || 0) + " redacted"],
        ["plan", FR.el("span", { class: "mono small", text: rep.plan_digest || "–" })],
      ]));
      const rules = rep.rules || [];
      if (rules.length) {
        const tb = FR.el("tbody");
        for (const r of rules) {
          tb.append(FR.el("tr", { "data-rule": r.rule, "data-channel": r.channel },
            FR.el("td", { text: r.rule }), FR.el("td", { text: r.channel }), FR.el("td", { class: "num", text: String(r.count) })));
        }
        box.append(FR.el("table", { class: "grid compact", id: "redaction-rules" },
          FR.el("thead", {}, FR.el("tr", {}, FR.el("th", { text: "Rule" }), FR.el("th", { text: "Channel" }),
            FR.el("th", { text: "Count" }))), tb));
      }
    } catch (e) {
      box.append(errorBox(e));
    }
  }

  // ---- steps ---------------------------------------------------------------

  // renderSteps draws the step list around step first (the one about to
  // be selected), or from its top.
  function renderSteps(first) {
    stepList.reset(state.steps.length, stepRow, FR.el("li", { class: "muted", text: "No steps indexed yet." }),
      state.index.get(first));
  }

  function stepRow(i) {
    const s = state.steps[i];
    if (!s) {
      // Its page comes after flightrec-ready (loadRest), or now if the
      // user scrolled here first: a placeholder until then.
      if (state.paging) ensure(i);
      // It is built like a row, so that it is as high as one: the list's
      // height estimate may come from placeholders.
      return FR.el("li", { class: "pending", "aria-posinset": i + 1, "aria-setsize": state.steps.length, "aria-busy": "true" },
        FR.el("button", { type: "button", class: "step", disabled: true, tabindex: "-1" },
          FR.el("span", { class: "n", text: "…" }),
          FR.el("span", { class: "what" }, FR.el("span", { class: "action muted", text: "loading" })),
          FR.el("span", { class: "meta" }, FR.badge("…", "none"))));
    }
    const failed = s.outcome === "failed";
    const what = s.action ? s.action + (s.target ? " " + s.target : "") : (s.step === 0 ? "setup" : "(no receipt)");
    const c = s.counts || {};
    const extras = [];
    if (c.har) extras.push(c.har + " req");
    if (c.console) extras.push(c.console + " log");
    const sel = s.step === state.cur;
    const btn = FR.el("button", {
      type: "button",
      class: "step" + (failed ? " failed" : "") + (sel ? " selected" : ""),
      "data-step": s.step,
      "data-outcome": s.outcome || "",
      "aria-current": sel ? "step" : null,
      title: what,
    },
    FR.el("span", { class: "n", text: String(s.step) }),
    FR.el("span", { class: "what" },
      FR.el("span", { class: "action", text: s.action || (s.step === 0 ? "setup" : "–") }),
      s.target ? FR.el("span", { class: "target", text: " " + s.target }) : null),
    FR.el("span", { class: "meta" },
      s.outcome ? FR.badge(s.outcome) : null,
      s.error_code ? FR.el("span", { class: "code", text: s.error_code }) : null,
      extras.length ? FR.el("span", { class: "muted small", text: extras.join(" · ") }) : null));
    return FR.el("li", { "aria-posinset": i + 1, "aria-setsize": state.steps.length }, btn);
  }

  function stepButton(n) {
    return document.querySelector('#steps button[data-step="' + n + '"]');
  }

  // neighbour is the step delta positions from the current one, once its
  // page is there.
  async function neighbour(delta) {
    const i = state.index.get(state.cur);
    const j = Math.max(0, Math.min(state.steps.length - 1, i + delta));
    if (!state.steps[j]) await ensure(j);
    return state.steps[j] ? state.steps[j].step : null;
  }

  // ---- the timeline, in pages ------------------------------------------------

  // The page that opens the player is FIRST_PAGE steps around the step it
  // shows; the rest arrive after flightrec-ready in pages of PAGE, each
  // small enough to parse and add well within a frame.
  const FIRST_PAGE = 300;
  const PAGE = 500;
  const pending = new Map(); // page start → Promise

  function timelineURL(params) {
    return FR.rec(id, "/steps?form=compact&" + new URLSearchParams(params));
  }

  // addPage puts a page of the compact timeline (GET …/steps?form=compact)
  // into the timeline, and has its rows drawn again.
  function addPage(tl) {
    if (state.steps.length !== tl.total) state.steps.length = tl.total;
    state.t0 = tl.t0;
    for (let k = 0; k < tl.step.length; k++) {
      const i = tl.offset + k;
      const s = {
        step: tl.step[k],
        start_ts: tl.t0 + tl.start[k] * 1000,
        end_ts: tl.t0 + tl.end[k] * 1000,
        action: tl.action[k],
        target: tl.target[k],
        outcome: tl.outcome[k],
        error_code: tl.error_code[k],
        counts: { har: tl.har[k], console: tl.console[k], dom: tl.dom[k] },
      };
      state.steps[i] = s;
      state.byStep.set(s.step, s);
      state.index.set(s.step, i);
    }
    return stepList.rebuild(tl.offset, tl.offset + tl.step.length);
  }

  // ensure loads the page holding position i, once.
  function ensure(i) {
    const from = Math.floor(i / PAGE) * PAGE;
    if (!pending.has(from)) {
      const p = FR.api(timelineURL({ offset: from, limit: PAGE })).then((tl) => {
        // Only a page whose rows are drawn is drawn again (measured).
        if (addPage(tl)) stepList.draw();
      });
      p.catch(() => pending.delete(from));
      pending.set(from, p);
    }
    return pending.get(from);
  }

  // idle resolves when the page has nothing better to do (input, a frame),
  // or after a while.
  const idle = () => new Promise((resolve) => window.requestIdleCallback
    ? requestIdleCallback(() => resolve(), { timeout: 300 }) : setTimeout(resolve, 0));

  // loadRest loads every page not there yet, one at a time and each when
  // the page is idle, so a step change or a scroll meanwhile goes first.
  async function loadRest() {
    let loaded = 0;
    for (let from = 0; from < state.steps.length; from += PAGE) {
      let full = true;
      for (let i = from; i < Math.min(from + PAGE, state.steps.length); i++) {
        if (!state.steps[i]) { full = false; break; }
      }
      if (full) continue;
      try {
        await idle();
        await ensure(from);
        loaded++;
      } catch (e) {
        FR.showError(errBox, e);
        return;
      }
    }
    // The whole timeline is there: what shows all of it draws it again.
    if (loaded) for (const f of hooks.onTimeline) f();
  }

  function loadStep(n) {
    if (cache.has(n)) {
      const p = cache.get(n);
      cache.delete(n);
      cache.set(n, p); // most recent last
      return p;
    }
    const p = FR.api(FR.rec(id, "/steps/" + n));
    p.catch(() => cache.delete(n));
    cache.set(n, p);
    while (cache.size > 6) cache.delete(cache.keys().next().value);
    return p;
  }

  // select makes step n current: list, URL, video, DOM and every panel.
  async function select(n, opts) {
    opts = opts || {};
    if (!state.byStep.has(n)) return;
    const focusWasInList = document.activeElement && document.activeElement.closest &&
      document.activeElement.closest("#steps");
    state.cur = n;
    for (const b of document.querySelectorAll("#steps button.selected")) {
      b.classList.remove("selected");
      b.removeAttribute("aria-current");
    }
    // Scroll the step list (only it, not the page) to the step: its row
    // is drawn then if it was not.
    stepList.show(state.index.get(n));
    const btn = stepButton(n);
    if (btn) {
      btn.classList.add("selected");
      btn.setAttribute("aria-current", "step");
      if (focusWasInList || opts.focus) btn.focus({ preventScroll: true });
    }
    document.body.dataset.step = String(n);
    history.replaceState(null, "", "/r/" + encodeURIComponent(id) + "?step=" + n + location.hash);
    $("#dom-step").textContent = String(n);
    if (!opts.fromVideo) seekVideo();
    setDOM();
    let view;
    try {
      view = await loadStep(n);
    } catch (e) {
      if (state.cur !== n) return;
      renderPanels(null, e);
      return;
    }
    if (state.cur !== n) return; // a later selection won
    renderPanels(view);
    for (const f of hooks.onStep) f(n, view);
    prefetch(n);
  }

  // prefetch loads the views of the steps either side of step n, so that
  // j or k shows the next one without waiting for a round trip (a request
  // in flight is waited for, not made again).
  function prefetch(n) {
    const i = state.index.get(n);
    for (const j of [i + 1, i - 1]) {
      const s = state.steps[j];
      if (s && !cache.has(s.step)) loadStep(s.step).catch(() => {}); // a failure shows when it is selected
    }
  }

  // ---- video, or its frames --------------------------------------------------

  function stepTimes(n) {
    const s = state.byStep.get(n);
    const first = state.rec.first_ts || state.t0 || 0;
    return [(s.start_ts - first) / 1e9, (s.end_ts - first) / 1e9];
  }

  function seekVideo() {
    if (state.cur == null || state.videoOK === false || video.readyState < 1) return;
    const [start, end] = stepTimes(state.cur);
    // A hair inside the chapter, so the time is unambiguously this step's.
    let t = start + Math.min(0.001, Math.max(0, (end - start) / 2));
    // A moment the address named (?t=) once, rather than the step's start.
    if (state.pendingT != null) { t = state.pendingT; state.pendingT = null; }
    if (isFinite(video.duration)) t = Math.min(t, video.duration);
    video.currentTime = Math.max(0, t);
  }

  // followVideo selects the step that holds the video's time.
  function followVideo() {
    if (!state.rec || !state.steps.length) return;
    const first = state.rec.first_ts || state.t0;
    const t = first + video.currentTime * 1e9;
    const cur = state.byStep.get(state.cur);
    if (cur && cur.start_ts <= t && t <= cur.end_ts) return;
    let pick = null;
    for (const s of state.steps) {
      if (!s) continue; // not loaded yet
      if (s.start_ts <= t && t <= s.end_ts) { pick = s; break; }
      if (s.start_ts <= t) pick = s;
    }
    if (pick && pick.step !== state.cur) select(pick.step, { fromVideo: true });
  }

  async function videoFailed(err) {
    if (state.videoOK === false) return;
    state.videoOK = false;
    let why = err;
    if (!why) {
      // The element says only that it failed: ask the server why.
      try {
        await FR.fetchOK(FR.rec(id, "/video.webm?via=player"), { headers: { Range: "bytes=0-0" } });
        why = new Error("the browser could not play the video");
      } catch (e) {
        why = e;
      }
    }
    const msg = (why.code ? why.code + ": " : "") + (why.message || "the video is unavailable") +
      (why.next ? " (next: " + why.next + ")" : "");
    state.videoNote = "No video: " + msg + ". Showing the step's recorded frames instead.";
    video.removeAttribute("src");
    video.hidden = true;
    $("#frames").hidden = false;
    $("#frames-note").textContent = state.videoNote;
    document.body.dataset.video = "frames";
    renderFrames();
  }

  function setupVideo() {
    video.addEventListener("error", () => videoFailed(null));
    video.addEventListener("loadedmetadata", () => {
      state.videoOK = true;
      document.body.dataset.video = "ok";
      seekVideo();
    });
    video.addEventListener("timeupdate", () => {
      if (!video.paused && !video.seeking) followVideo();
    });
    video.addEventListener("seeked", () => {
      followVideo();
      video.dataset.step = String(state.cur); // the step the picture is of (tests wait on it)
    });
    FR.mediaURL(FR.rec(id, "/video.webm?via=player")).then((u) => { video.src = u; }, (e) => videoFailed(e));
  }

  function renderFrames() {
    if (state.videoOK !== false) return;
    const img = $("#frame-img");
    const fs = state.frames;
    if (!fs.length) {
      img.hidden = true;
      $("#frame-pos").textContent = "no frame in this step";
      return;
    }
    state.frameIdx = Math.max(0, Math.min(fs.length - 1, state.frameIdx));
    const f = fs[state.frameIdx];
    img.hidden = false;
    FR.mediaURL(blobURL(f.data.image_cid)).then((u) => { img.src = u; }, () => { img.hidden = true; });
    $("#frame-pos").textContent = "frame " + (state.frameIdx + 1) + " of " + fs.length;
    $("#frame-prev").disabled = state.frameIdx === 0;
    $("#frame-next").disabled = state.frameIdx >= fs.length - 1;
  }

  // ---- DOM at the step ---------------------------------------------------------

  function hasDOM(n, at) {
    const limit = at === "before" ? n - 1 : n;
    return state.firstDOM != null && state.firstDOM <= limit;
  }

  function setDOM() {
    const n = state.cur;
    const at = state.at;
    for (const b of document.querySelectorAll("#dom-at button")) {
      b.setAttribute("aria-pressed", String(b.dataset.at === at));
    }
    const note = $("#dom-note");
    frame.dataset.step = String(n);
    frame.dataset.at = at;
    if (!hasDOM(n, at)) {
      note.textContent = "No page was recorded " + (at === "before" ? "before" : "by the end of") + " step " + n + ".";
      note.hidden = false;
      frame.hidden = true;
      return;
    }
    note.hidden = true;
    frame.hidden = false;
    const path = FR.rec(id, "/steps/" + n + "/dom?at=" + at);
    FR.mediaURL(path).then((u) => {
      if (state.cur !== n || state.at !== at) {
        if (u.startsWith("blob:")) URL.revokeObjectURL(u);
        return;
      }
      if (state.domURL.startsWith("blob:")) URL.revokeObjectURL(state.domURL);
      state.domURL = u;
      frame.src = u;
    }, (e) => {
      note.replaceChildren(errorBox(e));
      note.hidden = false;
      frame.hidden = true;
    });
  }

  // ---- panels ------------------------------------------------------------------

  function renderPanels(view, err) {
    const evs = (view && view.events) || [];
    const by = { receipt: [], snapshot: [], har: [], console: [], check: [], frame: [], screenshot: [] };
    for (const e of evs) if (by[e.kind]) by[e.kind].push(e);
    if (err) $("#receipt").replaceChildren(errorBox(err));
    else renderReceipt(by.receipt[by.receipt.length - 1], by.screenshot);
    state.allNet = by.har;
    state.allLogs = by.console;
    renderNetwork(by.har);
    renderConsole(by.console);
    renderSnapshots(by.snapshot);
    renderChecks(by.check);
    state.frames = by.frame;
    state.frameIdx = 0;
    renderFrames();
  }

  function renderReceipt(ev, shots) {
    const box = $("#receipt");
    const s = state.byStep.get(state.cur);
    if (!ev) {
      box.replaceChildren(empty(s && s.step === 0 ? "Setup: events before the first action (no receipt)." : "No receipt for this step."));
      return;
    }
    const r = ev.data || {};
    const a = r.action || {};
    const eff = r.effects || {};
    const err = r.error;
    const effects = [];
    if (eff.navigation) effects.push(FR.el("li", { text: "navigation " + (eff.navigation.from || "") + " → " + eff.navigation.to }));
    for (const q of eff.requests || []) {
      effects.push(FR.el("li", { class: q.status >= 400 || q.status === 0 ? "bad" : "" },
        "request " + q.method + " " + q.url + " → " + (q.status || "failed")));
    }
    for (const d of eff.dialogs || []) effects.push(FR.el("li", { text: "dialog " + d.type + (d.message ? ": " + d.message : "") }));
    for (const p of eff.popups || []) effects.push(FR.el("li", { text: "popup " + p }));
    for (const d of eff.downloads || []) effects.push(FR.el("li", { text: "download " + d }));
    if (eff.console_errors) effects.push(FR.el("li", { class: "bad", text: eff.console_errors + " console error(s)" }));
    if (eff.snapshot_delta) effects.push(FR.el("li", {}, "snapshot change: ", FR.el("code", {}, preview(eff.snapshot_delta, 400))));
    const timing = [];
    if (r.started_at && r.ended_at) timing.push(FR.duration(r.ended_at - r.started_at) + " wall");
    if (r.browser_seconds) timing.push(r.browser_seconds.toFixed(3) + " s in the browser");
    if (r.started_at) timing.push("from " + FR.when(r.started_at));
    const args = a.args && Object.keys(a.args).length ? JSON.stringify(a.args) : "";
    const children = [kv([
      ["action", (a.verb || "") + (a.target ? " " + targetText(a.target) : "")],
      ["arguments", args ? preview(args, 400) : ""],
      ["resolved", targetText(r.resolved)],
      ["outcome", FR.badge(r.outcome)],
      ["error", err ? FR.el("span", {}, FR.el("strong", { class: "code", text: err.code }), err.message ? " " + err.message : "") : ""],
      ["next", err && err.next],
      ["effects", effects.length ? FR.el("ul", { class: "effects" }, ...effects) : ""],
      ["rule", r.rule],
      ["timings", timing.join(" · ")],
    ])];
    for (const sh of shots || []) {
      if (!sh.data || !sh.data.image_cid) continue;
      const link = FR.el("a", { href: blobURL(sh.data.image_cid), target: "_blank", rel: "noopener", class: "shot-link" },
        "screenshot" + (sh.data.reason ? " (" + sh.data.reason + ")" : ""));
      children.push(FR.el("p", {}, link));
    }
    FR.put(box, ...children);
    box.dataset.outcome = r.outcome || "";
  }

  // Network: only the rows in view, whatever the step holds.
  function renderNetwork(all) {
    const hars = hooks.filterNet ? hooks.filterNet(all) : all;
    state.net = hars;
    $("#network-detail").hidden = true;
    $("#network-count").textContent = !all.length ? "" : hars.length === all.length ? "(" + all.length + ")" :
      "(" + hars.length + " of " + all.length + ")";
    netList.reset(hars.length, netRow,
      FR.el("tr", { class: "none" }, FR.el("td", { colspan: "4", class: "muted", text: "No requests in this step." })));
  }

  function netRow(i) {
    const h = state.net[i].data || {};
    const req = h.request || {};
    const res = h.response || {};
    const status = res.status || 0;
    const bad = status >= 400 || status === 0;
    const url = String(req.url || "");
    return FR.el("tr", {
      class: "net-row" + (bad ? " bad" : ""),
      tabindex: "0",
      "data-index": i,
      "data-status": status,
      "data-method": req.method || "",
    },
    FR.el("td", { class: "method", text: req.method || "" }),
    FR.el("td", { class: "url", title: url.length > 2000 ? url.slice(0, 2000) + "…" : url,
      text: url.length > 300 ? url.slice(0, 300) + "…" : url }),
    FR.el("td", { class: "status num", text: status ? String(status) : "failed" }),
    FR.el("td", { class: "num", text: ms(h.time) }));
  }

  function headersTable(list) {
    if (!list || !list.length) return empty("none");
    const tb = FR.el("tbody");
    for (const h of list.slice(0, 500)) {
      tb.append(FR.el("tr", {}, FR.el("th", { scope: "row", text: h.name }), FR.el("td", {}, preview(h.value, 500))));
    }
    return FR.el("table", { class: "grid compact headers" }, tb);
  }

  // A WebSocket's messages (the entry's _webSocketMessages): direction,
  // time, opcode and data, the first 500.
  function socketTable(msgs) {
    const tb = FR.el("tbody");
    for (const m of msgs.slice(0, 500)) {
      const when = typeof m.time === "number" ? new Date(m.time * 1000).toISOString().slice(11, 23) : "";
      tb.append(FR.el("tr", { class: "ws-" + (m.type === "send" ? "send" : "receive") },
        FR.el("td", { text: m.type === "send" ? "↑ sent" : "↓ received" }),
        FR.el("td", { text: when }),
        FR.el("td", { text: m.opcode === 1 ? "text" : m.opcode === 2 ? "binary" : String(m.opcode) }),
        FR.el("td", {}, preview(m.data, 500), m._truncated ? " (truncated)" : "")));
    }
    return FR.el("table", { class: "grid compact socket-messages" },
      FR.el("thead", {}, FR.el("tr", {}, ...["", "time", "opcode", "data"].map((t) => FR.el("th", { scope: "col", text: t })))), tb);
  }

  function showNetwork(i) {
    const ev = state.net[i];
    if (!ev) return;
    const h = ev.data || {};
    const req = h.request || {};
    const res = h.response || {};
    const content = res.content || {};
    for (const r of document.querySelectorAll("#network tr.open")) r.classList.remove("open");
    const row = document.querySelector('#network tr[data-index="' + i + '"]');
    if (row) row.classList.add("open");
    const box = $("#network-detail");
    const close = FR.el("button", { type: "button", class: "link close", text: "close" });
    close.addEventListener("click", () => {
      box.hidden = true;
      if (row) { row.classList.remove("open"); row.focus(); }
    });
    FR.put(box,
      FR.el("div", { class: "detail-head" },
        FR.el("strong", { text: (req.method || "") + " " }), preview(req.url, 300), " ", close),
      kv([
        ["status", (res.status || "failed") + (res.statusText ? " " + res.statusText : "")],
        ["started", h.startedDateTime],
        ["time", ms(h.time)],
        ["type", content.mimeType],
        ["size", content.size != null ? FR.bytes(content.size) : ""],
        ["note", h._truncated ? "the body was truncated when recorded" : ""],
      ]),
      FR.el("h4", { text: "Request headers" }), headersTable(req.headers),
      req.postData ? FR.el("h4", { text: "Request body" }) : null,
      req.postData ? FR.el("pre", { class: "body" }, preview(req.postData.text ||
        (req.postData.params || []).map((p) => p.name + "=" + p.value).join("&"))) : null,
      FR.el("h4", { text: "Response headers" }), headersTable(res.headers),
      FR.el("h4", { text: "Response body" + (content.encoding ? " (" + content.encoding + ")" : "") }),
      content.text ? FR.el("pre", { class: "body" }, preview(content.text)) : empty("not recorded"),
      h._webSocketMessages ? FR.el("h4", { text: "WebSocket messages (" + h._webSocketMessages.length + ")" }) : null,
      h._webSocketMessages ? socketTable(h._webSocketMessages) : null);
    box.hidden = false;
    box.dataset.index = String(i);
    if (hooks.netDetail) hooks.netDetail(box, ev);
  }

  // Console: long messages truncated, only the entries in view.
  function renderConsole(all) {
    const logs = hooks.filterLogs ? hooks.filterLogs(all) : all;
    state.logs = logs;
    const errors = logs.filter((l) => l.data && /^(error|assert|exception)$/.test(l.data.level)).length;
    $("#console-count").textContent = logs.length ? "(" + logs.length + (errors ? ", " + errors + " errors" : "") + ")" : "";
    logList.reset(logs.length, logEntry, empty("No console messages in this step."));
  }

  function stackList(frames) {
    return FR.el("ol", { class: "stack" }, ...frames.slice(0, 50).map((f) => FR.el("li", {
      text: (f.function || "(anonymous)") + " " + (f.url || "") + (f.line ? ":" + f.line + (f.column ? ":" + f.column : "") : ""),
    })));
  }

  function logEntry(i) {
    const c = state.logs[i].data || {};
    const lvl = c.level || "log";
    const bad = /^(error|assert|exception)$/.test(lvl);
    const where = c.url ? c.url + (c.line ? ":" + c.line + (c.column ? ":" + c.column : "") : "") : "";
    const entry = FR.el("div", { class: "entry level-" + lvl + (bad ? " bad" : ""), "data-level": lvl, "data-seq": state.logs[i].seq },
      FR.el("div", { class: "entry-head" },
        FR.badge(lvl, bad ? "fail" : lvl === "warn" || lvl === "warning" ? "warn" : "none"),
        " ", FR.el("span", { class: "msg" }, preview(c.text))),
      where ? FR.el("div", { class: "where muted small", text: where.length > 500 ? where.slice(0, 500) + "…" : where }) : null);
    const mapped = c.mapped_stack && c.mapped_stack.length;
    const stack = mapped ? c.mapped_stack : c.stack;
    if (stack && stack.length) {
      entry.append(FR.el("details", { class: "stack-box" },
        FR.el("summary", { text: mapped ? "stack (source-mapped)" : "stack" }), stackList(stack)));
      if (mapped) entry.querySelector("details").open = true;
    }
    return entry;
  }

  function renderSnapshots(snaps) {
    const box = $("#snapshots");
    box.replaceChildren();
    if (!snaps.length) { box.append(empty("No text snapshots in this step.")); return; }
    const order = { before: 0, "": 1, after: 2 };
    const sorted = snaps.slice(0, 100).sort((a, b) =>
      ((a.data.view || "") < (b.data.view || "") ? -1 : (a.data.view || "") > (b.data.view || "") ? 1 : 0) ||
      (order[a.data.when || ""] - order[b.data.when || ""]));
    for (const ev of sorted) {
      const s = ev.data || {};
      const view = s.view || "interactive"; // the recorder's interactive view omits the field
      const d = FR.el("details", { class: "snapshot", "data-view": view, "data-when": s.when || "" },
        FR.el("summary", {}, FR.el("strong", { text: view }), " · " + (s.when || "at") +
          (s.scope ? " · " + s.scope : "") + (s.truncated ? " · truncated" : "")));
      d.addEventListener("toggle", () => {
        if (d.open && !d.querySelector("pre")) d.append(FR.el("pre", { class: "snap" }, preview(s.text, 20000)));
      }, { once: false });
      box.append(d);
    }
  }

  function renderChecks(checks) {
    const box = $("#checks");
    box.replaceChildren();
    if (!checks.length) return;
    const tb = FR.el("tbody");
    for (const ev of checks.slice(0, 500)) {
      const c = ev.data || {};
      const j = (v) => v == null ? "" : preview(JSON.stringify(v), 300);
      tb.append(FR.el("tr", { class: "check" + (c.passed ? "" : " bad"), "data-passed": String(!!c.passed) },
        FR.el("td", {}, FR.badge(c.passed ? "passed" : "failed")),
        FR.el("td", { text: c.type || "" }),
        FR.el("td", {}, preview(c.target || "", 300)),
        FR.el("td", {}, j(c.expect)),
        FR.el("td", {}, j(c.actual))));
    }
    box.append(FR.el("table", { class: "grid compact checks" },
      FR.el("thead", {}, FR.el("tr", {}, ...["Check", "Type", "Target", "Expected", "Actual"].map((t) => FR.el("th", { text: t })))),
      tb));
  }

  // ---- events --------------------------------------------------------------------

  function wire() {
    document.addEventListener("keydown", (ev) => {
      if (ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const t = ev.target;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
      let delta = 0;
      if (ev.key === "j" || ev.key === "ArrowDown") delta = 1;
      else if (ev.key === "k" || ev.key === "ArrowUp") delta = -1;
      else return;
      if (t && t.tagName === "VIDEO") return; // the player's own keys
      if (state.cur == null) return;
      ev.preventDefault();
      const from = state.cur;
      neighbour(delta).then((n) => {
        if (n != null && n !== state.cur && state.cur === from) select(n);
      }, (e) => FR.showError(errBox, e));
    });
    for (const b of document.querySelectorAll("#dom-at button")) {
      b.addEventListener("click", () => {
        if (state.at === b.dataset.at) return;
        state.at = b.dataset.at;
        setDOM();
      });
    }
    const tb = $("#network tbody");
    const open = (ev) => {
      const row = ev.target.closest("tr.net-row");
      if (row) showNetwork(Number(row.dataset.index));
    };
    tb.addEventListener("click", open);
    tb.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(ev); }
    });
    $("#steps").addEventListener("click", (ev) => {
      const b = ev.target.closest("button.step");
      if (b) select(Number(b.dataset.step));
    });
    $("#frame-prev").addEventListener("click", () => { state.frameIdx--; renderFrames(); });
    $("#frame-next").addEventListener("click", () => { state.frameIdx++; renderFrames(); });
  }

  function ready(ok) {
    document.body.dataset.ready = ok ? "1" : "error";
    performance.mark("flightrec-ready");
  }

  async function main() {
    wire();
    if (!id) {
      FR.showError(errBox, new Error("no recording in the address: open /r/{id}"));
      ready(false);
      return;
    }
    let rec, tl;
    // A step the address names is fetched beside the timeline, not after.
    const want = parseInt(new URLSearchParams(location.search).get("step"), 10);
    if (want >= 0) loadStep(want);
    try {
      // The first page is around the step the address names, else around
      // the first failing step (the server knows it), else the start.
      const first = { limit: FIRST_PAGE };
      if (want >= 0) first.around = want;
      [rec, tl] = await Promise.all([FR.api(FR.rec(id)), FR.api(timelineURL(first))]);
    } catch (e) {
      FR.showError(errBox, e);
      ready(false);
      return;
    }
    state.rec = rec;
    addPage(tl);
    state.firstDOM = tl.first_dom == null ? null : tl.first_dom;
    renderTitle(rec);
    let first = null;
    if (state.steps.length) {
      // The failing step first, unless the address names one.
      first = state.byStep.has(want) ? want : (tl.failed && tl.failed.length ? tl.failed[0] : state.steps[tl.offset].step);
      const asked = hooks.initialStep ? hooks.initialStep() : null;
      if (asked != null && state.byStep.has(asked)) first = asked;
    }
    renderSteps(first);
    if (first != null) await select(first);
    ready(true);
    for (const f of hooks.onReady) f();
    // What the selected step does not need waits until it is shown.
    renderDownloads(rec);
    renderRetention(rec.retention);
    loadRedaction();
    if (state.steps.length) setupVideo();
    state.paging = true;
    loadRest();
  }

  // The player's surface for player-extras.js.
  window.FRPlayer = { id, state, hooks, select, loadStep, stepTimes, blobURL, video,
    rerender: () => { renderNetwork(state.allNet || []); renderConsole(state.allLogs || []); } };
  if (window.FRPlayerExtras) window.FRPlayerExtras(window.FRPlayer);

  main().catch((e) => {
    FR.showError(errBox, e);
    ready(false);
  });
})();
