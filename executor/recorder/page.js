// flightrec's page helper, installed into every document before the page's
// own scripts run. The recorder calls it over CDP; it changes nothing in the
// page. The recorder puts the redaction plan's masking rules in place of the
// placeholder below.
(function () {
  "use strict";
  if (window.__flightrec) return;
  const rules = __RULES__;
  const formControl = new Set(["input", "textarea", "select"]);
  const types = new Set((rules.input_types || []).map((t) => t.toLowerCase()));
  const autoExact = new Set();
  const autoPrefix = [];
  for (const a of rules.autocomplete || []) {
    const t = a.toLowerCase().trim();
    if (t.endsWith("*")) autoPrefix.push(t.slice(0, -1));
    else if (t) autoExact.add(t);
  }
  // An RE2 pattern that is not valid JavaScript fails closed: every form
  // control counts as masked.
  let names = [];
  let namesBroken = false;
  for (const p of rules.name_patterns || []) {
    try {
      names.push(new RegExp(p, "i"));
    } catch (e) {
      namesBroken = true;
    }
  }
  function selectorMatches(el, list) {
    for (const s of list || []) {
      try {
        if (el.matches(s) || el.closest(s)) return true;
      } catch (e) {
        return true; // a selector the browser cannot parse: fail closed
      }
    }
    return false;
  }
  // ownRule mirrors the server's rules for a form control (redact/dom.go).
  function ownRule(el) {
    const tag = el.localName;
    if (!formControl.has(tag)) return false;
    if (tag === "input" && types.has((el.getAttribute("type") || "").toLowerCase().trim())) return true;
    const ac = (el.getAttribute("autocomplete") || "").toLowerCase();
    for (const tok of ac.split(/\s+/)) {
      if (!tok) continue;
      if (autoExact.has(tok)) return true;
      for (const p of autoPrefix) if (tok.startsWith(p)) return true;
    }
    if (namesBroken) return true;
    const name = el.getAttribute("name") || "";
    const id = el.getAttribute("id") || "";
    for (const re of names) if ((name && re.test(name)) || (id && re.test(id))) return true;
    return false;
  }
  function masked(el) {
    return ownRule(el) || selectorMatches(el, rules.selectors) || selectorMatches(el, rules.text_selectors);
  }
  function visible(el) {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return null;
    const st = getComputedStyle(el);
    if (st.visibility === "hidden" || st.display === "none") return null;
    return r;
  }
  // maskedElements lists the masked elements of the document and its
  // same-origin frames, outermost first.
  function maskedElements(doc, out) {
    for (const el of doc.querySelectorAll("*")) {
      if (masked(el) && !(el.parentElement && masked(el.parentElement))) out.push(el);
      if (el.localName === "iframe") {
        try {
          if (el.contentDocument) maskedElements(el.contentDocument, out);
        } catch (e) {}
      }
    }
    return out;
  }
  let mutations = 0;
  const api = {
    // maskRects returns the viewport rectangles (CSS px, rounded out, 2px
    // of margin) of every visible masked element.
    maskRects() {
      const out = [];
      for (const el of maskedElements(document, [])) {
        const r = visible(el);
        if (!r) continue;
        let dx = 0, dy = 0;
        for (let w = el.ownerDocument.defaultView; w && w !== window && w.frameElement; w = w.parent) {
          const fr = w.frameElement.getBoundingClientRect();
          dx += fr.left;
          dy += fr.top;
        }
        const x = Math.floor(r.left + dx) - 2, y = Math.floor(r.top + dy) - 2;
        const w = Math.ceil(r.right + dx) + 2 - x, h = Math.ceil(r.bottom + dy) + 2 - y;
        if (x + w <= 0 || y + h <= 0 || x >= innerWidth || y >= innerHeight) continue;
        out.push({x: x, y: y, w: w, h: h});
      }
      return out;
    },
    isMasked(el) {
      for (let e = el; e; e = e.parentElement) if (masked(e)) return true;
      return false;
    },
    maskedElements() {
      return maskedElements(document, []);
    },
    mutations() {
      return mutations;
    },
    // state says whether el can take a pointer action now: ok (with its
    // centre), or why not.
    state(el, needEditable) {
      if (!el.isConnected) return {state: "detached"};
      if (el.scrollIntoViewIfNeeded) el.scrollIntoViewIfNeeded(true);
      else el.scrollIntoView({block: "center", inline: "center"});
      const r = visible(el);
      if (!r) return {state: "hidden"};
      if (el.disabled || el.getAttribute("aria-disabled") === "true" || el.closest("fieldset:disabled")) {
        return {state: "disabled"};
      }
      if (needEditable && (el.readOnly || el.getAttribute("aria-readonly") === "true")) return {state: "readonly"};
      const x = r.left + r.width / 2, y = r.top + r.height / 2;
      const hit = document.elementFromPoint(x, y);
      if (hit && hit !== el && !el.contains(hit) && !(hit.control && hit.control === el) &&
          !(el.labels && Array.from(el.labels).some((l) => l.contains(hit)))) {
        let what = hit.localName;
        if (hit.id) what += "#" + hit.id;
        else if (hit.getAttribute("role")) what += "[role=" + hit.getAttribute("role") + "]";
        return {state: "covered", by: what};
      }
      return {state: "ok", x: x, y: y, w: r.width, h: r.height};
    },
    text() {
      return document.body ? document.body.innerText : "";
    },
  };
  Object.defineProperty(window, "__flightrec", {value: api, enumerable: false});
  const watch = () => {
    new MutationObserver((ms) => { mutations += ms.length; })
      .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  };
  watch();
})();
