// The player's features beyond following a step, kept apart from
// player.js and joined to it through window.FRPlayer's hooks: a deep link
// to a moment (?t=), playback speed and skipping idle stretches, a
// filmstrip of the step's frames and a timeline with hover previews,
// network and console filters, "copy as cURL", comments on steps, and
// share links. Like player.js it puts nothing recorded into the page as
// HTML.
//
// It is loaded before player.js, which calls FRPlayerExtras with its
// surface before it fetches anything: so the hooks are in place whatever
// order the scripts' bytes arrive in.
"use strict";

window.FRPlayerExtras = (P) => {
  const $ = (s) => document.querySelector(s);
  const video = P.video;
  const state = P.state;

  // ---- a moment in the address ----------------------------------------------

  // loaded is the steps the page holds, in order: a long recording's
  // timeline arrives in pages (player.js), so state.steps has holes until
  // every page is there.
  function loaded() {
    return state.steps.filter(Boolean);
  }

  // firstTS is the recording's start, the origin of ?t= and of the video.
  function firstTS() {
    return state.rec.first_ts || (state.steps[0] && state.steps[0].start_ts) || 0;
  }

  // momentNS reads ?t=: seconds from the recording's start ("83.5") or an
  // RFC 3339 instant; NaN when absent or unreadable.
  function momentNS(v) {
    if (v == null || v === "") return NaN;
    if (/^\d+(\.\d+)?$/.test(v)) return firstTS() + Number(v) * 1e9;
    const m = v.match(/^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
    if (!m) return NaN;
    const ms = Date.parse(m[1] + m[3]);
    if (isNaN(ms)) return NaN;
    const frac = m[2] ? Number("0" + m[2]) : 0;
    return ms * 1e6 + Math.round(frac * 1e9);
  }

  // stepAt is the step holding instant t (ns): the one whose span holds
  // it, else the last one started before it.
  function stepAt(t) {
    let pick = null;
    const steps = loaded();
    for (const s of steps) {
      if (s.start_ts <= t && t <= s.end_ts) return s.step;
      if (s.start_ts <= t) pick = s.step;
    }
    return pick == null && steps.length ? steps[0].step : pick;
  }

  P.hooks.initialStep = () => {
    const t = momentNS(new URLSearchParams(location.search).get("t"));
    if (isNaN(t)) return null;
    state.pendingT = Math.max(0, (t - firstTS()) / 1e9);
    document.body.dataset.moment = String(state.pendingT);
    return stepAt(t);
  };

  // ---- speed, idle stretches, moment links -------------------------------------

  const SPEEDS = [0.5, 1, 1.5, 2, 4];
  // IDLE is the shortest stretch between steps that is skipped.
  const IDLE = 1;

  function controls() {
    const speed = FR.el("select", { id: "speed", "aria-label": "playback speed" },
      ...SPEEDS.map((s) => FR.el("option", { value: String(s), selected: s === 1, text: s + "×" })));
    speed.addEventListener("change", () => {
      video.playbackRate = Number(speed.value);
      video.defaultPlaybackRate = video.playbackRate;
    });
    const idle = FR.el("input", { type: "checkbox", id: "skip-idle" });
    const moment = FR.el("button", { type: "button", id: "copy-moment", class: "link", text: "copy link to this moment" });
    moment.addEventListener("click", () => {
      const u = location.origin + "/r/" + encodeURIComponent(P.id) + "?t=" + video.currentTime.toFixed(1);
      copy(u, moment);
    });
    const bar = FR.el("div", { class: "player-controls" },
      FR.el("label", {}, "speed ", speed),
      FR.el("label", {}, idle, " skip idle stretches"),
      moment);
    $(".media").append(bar, FR.el("div", { id: "timeline", class: "timeline", "aria-label": "steps on the timeline" }),
      FR.el("div", { id: "timeline-tip", class: "timeline-tip", hidden: true }),
      FR.el("div", { id: "filmstrip", class: "filmstrip", "aria-label": "the step's frames" }));
    video.addEventListener("timeupdate", () => {
      if (!idle.checked || video.paused || video.seeking) return;
      const next = idleEnd(firstTS() + video.currentTime * 1e9);
      if (next != null) video.currentTime = next;
    });
    // The element resets its rate when a new source loads.
    video.addEventListener("loadedmetadata", () => { video.playbackRate = Number(speed.value); });
  }

  // idleEnd is where the video goes from instant t (ns) when t is in a
  // stretch of at least IDLE seconds with no step: the next step's start
  // (seconds into the video), else null.
  function idleEnd(t) {
    const steps = loaded();
    for (let i = 0; i + 1 < steps.length; i++) {
      const a = steps[i], b = steps[i + 1];
      if (t > a.end_ts && t < b.start_ts && (b.start_ts - a.end_ts) / 1e9 >= IDLE) {
        return (b.start_ts - firstTS()) / 1e9;
      }
    }
    return null;
  }

  // ---- timeline with hover previews, filmstrip ----------------------------------

  const thumbs = new Map(); // step → Promise of its first frame's URL ("" if none)

  function framesOf(view) {
    return ((view && view.events) || []).filter((e) => e.kind === "frame" && e.data && e.data.image_cid);
  }

  function thumbOf(n) {
    if (!thumbs.has(n)) {
      thumbs.set(n, P.loadStep(n).then((v) => {
        const f = framesOf(v)[0];
        return f ? FR.mediaURL(P.blobURL(f.data.image_cid)) : "";
      }).catch(() => ""));
    }
    return thumbs.get(n);
  }

  // SEGMENTS bounds the timeline's elements: a longer recording's steps
  // share segments (a run of steps each), so 10,000 steps cost what 400 do.
  const SEGMENTS = 400;

  function renderTimeline() {
    const box = $("#timeline");
    const t0 = firstTS();
    const steps = loaded();
    const last = steps.length ? steps[steps.length - 1].end_ts : t0;
    const span = Math.max(1, last - t0);
    const per = Math.max(1, Math.ceil(steps.length / SEGMENTS));
    const segs = [];
    for (let i = 0; i < steps.length; i += per) {
      const run = steps.slice(i, i + per);
      const s = run[0];
      const e = run[run.length - 1];
      const seg = FR.el("button", { type: "button", class: "seg-step" + (run.some((x) => x.outcome === "failed") ? " failed" : ""),
        "data-step": s.step, "data-last": e.step,
        "aria-label": run.length > 1 ? "steps " + s.step + "–" + e.step : "step " + s.step + (s.action ? " " + s.action : "") });
      seg.style.left = ((s.start_ts - t0) / span * 100) + "%";
      seg.style.width = Math.max(0.2, (e.end_ts - s.start_ts) / span * 100) + "%";
      seg.addEventListener("click", () => P.select((run.find((x) => x.outcome === "failed") || s).step));
      seg.addEventListener("mouseenter", () => preview(seg, s));
      seg.addEventListener("focus", () => preview(seg, s));
      seg.addEventListener("mouseleave", () => { $("#timeline-tip").hidden = true; });
      seg.addEventListener("blur", () => { $("#timeline-tip").hidden = true; });
      segs.push(seg);
    }
    box.replaceChildren(...segs);
    markTimeline(state.cur);
  }

  // preview shows a step's first frame and what it did over the timeline.
  function preview(seg, s) {
    const tip = $("#timeline-tip");
    const img = FR.el("img", { alt: "first frame of step " + s.step, hidden: true });
    FR.put(tip, img, FR.el("div", { class: "small", text: "step " + s.step + " · " + (s.action || "setup") +
      (s.target ? " " + s.target : "") + (s.outcome ? " · " + s.outcome : "") }));
    tip.dataset.step = String(s.step);
    // Within the media column: a tip past its edge would be cut off.
    tip.style.left = Math.max(0, Math.min(seg.offsetLeft, $(".media").clientWidth - 230)) + "px";
    tip.hidden = false;
    thumbOf(s.step).then((u) => {
      if (u && tip.dataset.step === String(s.step)) { img.src = u; img.hidden = false; }
    });
  }

  // markTimeline marks the segment holding step n, and unmarks the one
  // marked before: a step change touches two segments, not all of them.
  // Segments are in step order, so the one holding n is found by halves.
  function markTimeline(n) {
    const segs = $("#timeline").children;
    for (const b of document.querySelectorAll("#timeline .seg-step.current")) b.classList.remove("current");
    let lo = 0;
    let hi = segs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const b = segs[mid];
      if (n < Number(b.dataset.step)) hi = mid - 1;
      else if (n > Number(b.dataset.last)) lo = mid + 1;
      else { b.classList.add("current"); return; }
    }
  }

  function renderFilmstrip(n, view) {
    const box = $("#filmstrip");
    const fs = framesOf(view).slice(0, 60);
    box.replaceChildren();
    box.dataset.step = String(n);
    for (const f of fs) {
      const img = FR.el("img", { alt: "frame at " + FR.when(f.ts), title: FR.when(f.ts) });
      const btn = FR.el("button", { type: "button", class: "film", "data-ts": f.ts }, img);
      btn.addEventListener("click", () => {
        if (state.videoOK) video.currentTime = Math.max(0, (f.ts - firstTS()) / 1e9);
      });
      box.append(btn);
      FR.mediaURL(P.blobURL(f.data.image_cid)).then((u) => { if (box.dataset.step === String(n)) img.src = u; }, () => btn.remove());
    }
  }

  // ---- network filter and cURL ---------------------------------------------------

  const net = { method: "", status: "", text: "" };

  function statusMatch(status, want) {
    switch (want) {
      case "": return true;
      case "failed": return !status;
      case "errors": return !status || status >= 400;
      default: return status >= Number(want[0]) * 100 && status < Number(want[0]) * 100 + 100;
    }
  }

  P.hooks.filterNet = (all) => all.filter((e) => {
    const h = e.data || {};
    const req = h.request || {};
    const status = (h.response || {}).status || 0;
    return (!net.method || req.method === net.method) && statusMatch(status, net.status) &&
      (!net.text || String(req.url || "").toLowerCase().includes(net.text));
  });

  function networkFilter() {
    const method = FR.el("select", { name: "method", "aria-label": "method" }, FR.el("option", { value: "", text: "any method" }),
      ...["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"].map((m) => FR.el("option", { value: m, text: m })));
    const status = FR.el("select", { name: "status", "aria-label": "status" },
      ...[["", "any status"], ["2xx", "2xx"], ["3xx", "3xx"], ["4xx", "4xx"], ["5xx", "5xx"], ["errors", "errors (≥400, failed)"],
        ["failed", "failed"]].map(([v, t]) => FR.el("option", { value: v, text: t })));
    const text = FR.el("input", { type: "search", name: "text", placeholder: "filter URLs", "aria-label": "URL contains" });
    const apply = () => {
      Object.assign(net, { method: method.value, status: status.value, text: text.value.trim().toLowerCase() });
      P.rerender();
    };
    method.addEventListener("change", apply);
    status.addEventListener("change", apply);
    text.addEventListener("input", apply);
    $("#network").prepend(FR.el("div", { id: "network-filter", class: "filter-row" }, method, status, text));
  }

  // shellQuote quotes s for a POSIX shell.
  function shellQuote(s) {
    return "'" + String(s).replace(/'/g, "'\\''") + "'";
  }

  // curlOf is a request as a curl command, with the values as stored:
  // what redaction masked stays masked.
  function curlOf(h) {
    const req = h.request || {};
    const parts = ["curl", "-X", req.method || "GET", shellQuote(req.url || "")];
    for (const x of req.headers || []) {
      const name = String(x.name || "");
      if (!name || name.startsWith(":") || /^content-length$/i.test(name)) continue;
      parts.push("-H", shellQuote(name + ": " + (x.value == null ? "" : x.value)));
    }
    const pd = req.postData;
    if (pd) {
      const body = pd.text != null ? pd.text : (pd.params || []).map((p) => p.name + "=" + p.value).join("&");
      parts.push("--data-raw", shellQuote(body));
    }
    return parts.join(" ");
  }

  P.hooks.netDetail = (box, ev) => {
    const btn = FR.el("button", { type: "button", id: "copy-curl", class: "link", text: "copy as cURL" });
    btn.addEventListener("click", () => copy(curlOf(ev.data || {}), btn));
    box.querySelector(".detail-head").append(" ", btn);
  };

  // copy puts text on the clipboard and says so on the button; what was
  // copied last is kept for the page's tests (P.copied).
  function copy(text, btn) {
    P.copied = text;
    const done = (ok) => {
      const was = btn.dataset.label || btn.textContent;
      btn.dataset.label = was;
      btn.textContent = ok ? "copied" : "copy failed: select and copy by hand";
      setTimeout(() => { btn.textContent = was; }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(() => done(true), () => done(false));
    } else {
      done(false);
    }
  }

  // ---- console filter --------------------------------------------------------------

  const LEVELS = ["error", "warn", "info", "log", "debug"];
  const logs = { levels: new Set(LEVELS), text: "" };

  function levelOf(l) {
    const lvl = (l.data && l.data.level) || "log";
    if (/^(error|assert|exception)$/.test(lvl)) return "error";
    if (lvl === "warning") return "warn";
    return LEVELS.includes(lvl) ? lvl : "log";
  }

  P.hooks.filterLogs = (all) => all.filter((l) => logs.levels.has(levelOf(l)) &&
    (!logs.text || String((l.data && l.data.text) || "").toLowerCase().includes(logs.text)));

  function consoleFilter() {
    const boxes = LEVELS.map((lvl) => {
      const cb = FR.el("input", { type: "checkbox", name: "level", value: lvl, checked: true });
      cb.addEventListener("change", () => {
        if (cb.checked) logs.levels.add(lvl); else logs.levels.delete(lvl);
        P.rerender();
      });
      return FR.el("label", {}, cb, " " + lvl);
    });
    const text = FR.el("input", { type: "search", name: "text", placeholder: "filter messages", "aria-label": "message contains" });
    text.addEventListener("input", () => { logs.text = text.value.trim().toLowerCase(); P.rerender(); });
    $("#console").before(FR.el("div", { id: "console-filter", class: "filter-row", role: "group", "aria-label": "console levels" },
      ...boxes, text));
  }

  // ---- comments ------------------------------------------------------------------------

  let comments = [];

  async function loadComments() {
    try {
      comments = (await FR.api(FR.rec(P.id, "/comments"))).comments || [];
    } catch (_) {
      comments = []; // a token without read on comments sees none
    }
    renderComments(state.cur);
  }

  function commentsCard() {
    const card = FR.el("section", { class: "card", id: "comments-card", "aria-labelledby": "comments-h" },
      FR.el("h2", { id: "comments-h" }, "Comments ", FR.el("span", { id: "comments-count", class: "count" })),
      FR.el("div", { id: "comments" }));
    if (!FR.shared()) {
      const text = FR.el("textarea", { id: "comment-text", rows: "2", maxlength: "8192", "aria-label": "comment on this step",
        placeholder: "comment on this step (redacted like the recording)" });
      const post = FR.el("button", { type: "submit", text: "comment" });
      const form = FR.el("form", { id: "comment-form" }, text, post);
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const body = { step: state.cur, text: text.value };
        if (state.videoOK) body.t = Number(video.currentTime.toFixed(3));
        try {
          await FR.fetchOK(FR.rec(P.id, "/comments"), { method: "POST", body: JSON.stringify(body),
            headers: { "Content-Type": "application/json" } });
          text.value = "";
          await loadComments();
        } catch (e) {
          FR.showError($("#error"), e);
        }
      });
      card.append(form);
    }
    $("#side .card").after(card); // under the receipt
  }

  function renderComments(n) {
    const mine = comments.filter((c) => c.step === n);
    $("#comments-count").textContent = comments.length ? "(" + mine.length + " here, " + comments.length + " in all)" : "";
    const box = $("#comments");
    if (!mine.length) { box.replaceChildren(FR.el("p", { class: "muted empty", text: "No comments on this step." })); return; }
    box.replaceChildren(...mine.map((c) => FR.el("div", { class: "comment", "data-id": c.id },
      FR.el("div", { class: "muted small", text: c.author + " · " + FR.when(c.created_at) + (c.t ? " · at " + c.t.toFixed(1) + " s" : "") +
        (c.edited_at ? " · edited" : "") }),
      FR.el("div", { class: "comment-text", text: c.text }))));
  }

  // ---- share links ---------------------------------------------------------------------

  function shareBox() {
    if (FR.shared()) {
      document.body.dataset.shared = "1";
      $("#downloads").hidden = true; // exports are not a share link's
      $("#rec-title").after(FR.el("span", { class: "badge badge-warn", id: "shared-badge", text: "shared link · read-only" }));
      return;
    }
    const out = FR.el("input", { type: "text", id: "share-url", readonly: true, "aria-label": "share link", hidden: true });
    const btn = FR.el("button", { type: "button", id: "make-share", text: "make a share link (7 days)" });
    btn.addEventListener("click", async () => {
      try {
        const r = await (await FR.fetchOK(FR.rec(P.id, "/shares"), { method: "POST",
          body: JSON.stringify({ expires_in: "7d", what: "player" }), headers: { "Content-Type": "application/json" } })).json();
        out.value = r.url;
        out.hidden = false;
        out.select();
      } catch (e) {
        FR.showError($("#error"), e);
      }
    });
    $("#downloads").after(FR.el("div", { id: "share" }, FR.el("h3", { text: "Share" }), btn, " ", out));
  }

  // ---- joining the player -------------------------------------------------------------

  controls();
  networkFilter();
  consoleFilter();
  commentsCard();
  P.hooks.onReady.push(() => {
    renderTimeline();
    shareBox();
    loadComments();
  });
  // Opened, the timeline shows the steps loaded then; once they all are,
  // all of them.
  P.hooks.onTimeline.push(renderTimeline);
  P.hooks.onStep.push((n, view) => {
    markTimeline(n);
    renderFilmstrip(n, view);
    renderComments(n);
  });
};
