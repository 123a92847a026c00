// The browser side of internal/testenv's ReplayRRWeb: it replays an rrweb
// event array in rrweb's own Replayer (the npm rrweb package's browser
// bundle, which the page loads after this file) and reports how it went.
//
// Loaded first, it records every problem the page has from then on:
// uncaught errors and unhandled rejections, console.error and console.warn
// calls, and what the replayers log through their logger (rrweb's
// showWarning and showDebug output, such as "Node with id X not found").
// window.flightrecReplay(eventsURL) then fetches the events, checks
// nothing in the page changed them (it hashes the bytes it got), and
// replays them twice, each into its own container:
//
//   - "play": played from the start with the replayer's timer (sped up so
//     that the whole recording takes about a second and a half, never
//     slowed down) until the replayer's finish event;
//   - "seek": the replayer jumped straight to the end (pause at the last
//     event's offset + 1 ms), which applies every event synchronously.
//
// It resolves to a report: the events' count, SHA-256 and time span, and
// for each mode the replayed document's body.innerText and textContent,
// its HTML, and what was logged. It is browser code: no require.
"use strict";

(function () {
  const problems = { errors: [], warnings: [] };

  function show(v) {
    if (v instanceof Error) return v.stack || String(v);
    if (typeof v === "string") return v;
    try {
      const s = JSON.stringify(v);
      if (s === undefined) return String(v);
      return s.length > 600 ? s.slice(0, 600) + "…" : s;
    } catch (e) {
      return String(v);
    }
  }
  const join = (args) => Array.prototype.map.call(args, show).join(" ");

  window.addEventListener("error", (ev) => {
    const where = ev.filename ? ` (${ev.filename}:${ev.lineno}:${ev.colno})` : "";
    problems.errors.push(`uncaught: ${ev.error ? show(ev.error) : ev.message}${where}`);
  });
  window.addEventListener("unhandledrejection", (ev) => {
    problems.errors.push(`unhandled rejection: ${show(ev.reason)}`);
  });
  const consoleError = console.error.bind(console);
  const consoleWarn = console.warn.bind(console);
  console.error = function () {
    problems.errors.push(`console.error: ${join(arguments)}`);
    consoleError.apply(null, arguments);
  };
  console.warn = function () {
    problems.warnings.push(`console.warn: ${join(arguments)}`);
    consoleWarn.apply(null, arguments);
  };

  const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
  const settle = async () => {
    await frame();
    await frame();
  };

  async function sha256(buf) {
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", buf));
    return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // replay runs one replayer over its own copy of the events (the
  // replayer annotates the event objects it gets) into a new container.
  async function replay(mode, text, total, speed, timeoutMs) {
    const out = { mode, warnings: [], debug: [], errors: [] };
    const logger = {
      warn: function () { out.warnings.push(join(arguments)); },
      log: function () { out.debug.push(join(arguments)); },
    };
    const root = document.createElement("div");
    root.className = "flightrec-replay";
    root.dataset.mode = mode;
    document.body.appendChild(root);
    const events = JSON.parse(text);
    const errorsBefore = problems.errors.length;
    const warningsBefore = problems.warnings.length;
    const replayer = new window.rrweb.Replayer(events, {
      root,
      speed,
      skipInactive: false,
      showWarning: true,
      showDebug: true,
      logger,
      mouseTail: false,
      UNSAFE_replayCanvas: false,
      triggerFocus: false,
      pauseAnimation: true,
    });
    if (mode === "play") {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`play: no finish event after ${timeoutMs} ms (at ${replayer.getCurrentTime()} of ${total} ms)`));
        }, timeoutMs);
        replayer.on("finish", () => {
          clearTimeout(timer);
          resolve();
        });
        replayer.play();
      });
    } else {
      // Past the last event: pause(t) applies the events before t.
      replayer.pause(total + 1);
    }
    await settle();
    const doc = replayer.iframe && replayer.iframe.contentDocument;
    out.currentTime = replayer.getCurrentTime();
    out.text = doc && doc.body ? doc.body.innerText : "";
    out.textContent = doc && doc.body ? doc.body.textContent : "";
    out.html = doc && doc.documentElement ? doc.documentElement.outerHTML : "";
    out.hasBody = !!(doc && doc.body);
    // What the page logged while this replayer ran.
    out.errors = problems.errors.slice(errorsBefore);
    out.pageWarnings = problems.warnings.slice(warningsBefore);
    replayer.pause();
    return out;
  }

  window.flightrecReplay = async function (eventsURL) {
    const res = await fetch(eventsURL, { cache: "no-store" });
    if (!res.ok) throw new Error(`GET ${eventsURL}: ${res.status}`);
    const buf = await res.arrayBuffer();
    const report = { bytes: buf.byteLength, sha256: await sha256(buf) };
    const text = new TextDecoder("utf-8", { fatal: true }).decode(buf);
    const events = JSON.parse(text);
    if (!Array.isArray(events)) throw new Error("the events are not a JSON array");
    if (!window.rrweb || typeof window.rrweb.Replayer !== "function") {
      throw new Error("rrweb's browser bundle did not load (no window.rrweb.Replayer)");
    }
    report.events = events.length;
    let first = Infinity;
    let last = -Infinity;
    for (const e of events) {
      if (typeof e.timestamp === "number") {
        first = Math.min(first, e.timestamp);
        last = Math.max(last, e.timestamp);
      }
    }
    report.totalTime = events.length ? last - first : 0;
    const metas = events.filter((e) => e.type === 4);
    report.metas = metas.length;
    report.fullSnapshots = events.filter((e) => e.type === 2).length;
    report.lastHref = metas.length ? String(metas[metas.length - 1].data && metas[metas.length - 1].data.href) : "";
    // About a second and a half of playing, whatever the recording's
    // length (a short one plays at its own pace).
    const speed = Math.max(1, report.totalTime / 1500);
    report.speed = speed;
    const timeoutMs = report.totalTime / speed + 30000;
    report.play = await replay("play", text, report.totalTime, speed, timeoutMs);
    report.seek = await replay("seek", text, report.totalTime, speed, timeoutMs);
    report.errors = problems.errors.slice();
    report.warnings = problems.warnings.slice();
    return report;
  };
})();
