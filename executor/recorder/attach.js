// flightrec's input observer for record --attach. It runs in the recorder's
// isolated world (the page's own scripts cannot see or change it), listens
// in the capture phase of the window, before the page's listeners, and
// reports each user input the browser marks trusted to the recorder through
// a CDP binding. It never prevents, stops or changes an event.
(function () {
  "use strict";
  if (window.__flightrecAttach) return;
  const send = (o) => {
    try {
      window.__flightrecInput(JSON.stringify(o));
    } catch (e) {}
  };
  // held keeps the last elements reported, so the recorder can resolve one
  // to its accessibility node by id while the page moves on; an element
  // keeps its id, so a fill's input events are known as one field's.
  const held = new Map();
  const ids = new WeakMap();
  let next = 0;
  function hold(el) {
    let id = ids.get(el);
    if (!id) {
      id = ++next;
      ids.set(el, id);
    }
    held.delete(id);
    held.set(id, el);
    if (held.size > 64) held.delete(held.keys().next().value);
    return id;
  }
  // A submit in the same task as a click or key press is that action's
  // effect, not a step of its own.
  let acted = false;
  function mark() {
    acted = true;
    setTimeout(() => {
      acted = false;
    }, 0);
  }
  const actionable =
    "button,a[href],input,select,textarea,label,summary,option,[role],[contenteditable=''],[contenteditable=true],[tabindex]";
  function target(el) {
    if (!el || el.nodeType !== 1) el = el && el.parentElement;
    return (el && el.closest && el.closest(actionable)) || el;
  }
  function editable(el) {
    if (!el) return false;
    if (el.isContentEditable) return true;
    if (el.localName === "textarea") return true;
    if (el.localName !== "input") return false;
    return !/^(button|submit|reset|checkbox|radio|file|image|color|range)$/i.test(el.type || "");
  }
  function checkable(el) {
    if (!el) return false;
    if (el.localName === "input" && /^(checkbox|radio)$/i.test(el.type || "")) return true;
    const r = el.getAttribute && el.getAttribute("role");
    return r === "checkbox" || r === "radio" || r === "switch" || r === "menuitemcheckbox" || r === "menuitemradio";
  }
  // What the element is when the accessibility tree cannot be asked (it
  // left the page already): an ARIA role or the tag's implicit one, and a
  // label. The recorder prefers the tree's answer.
  function describe(el) {
    if (!el || !el.getAttribute) return {};
    let role = el.getAttribute("role") || "";
    const tag = el.localName;
    if (!role) {
      if (tag === "button" || (tag === "input" && /^(button|submit|reset|image)$/i.test(el.type || ""))) role = "button";
      else if (tag === "a" && el.hasAttribute("href")) role = "link";
      else if (tag === "select") role = el.multiple ? "listbox" : "combobox";
      else if (checkable(el)) role = el.type === "radio" ? "radio" : "checkbox";
      else if (editable(el)) role = "textbox";
    }
    let name = el.getAttribute("aria-label") || "";
    if (!name && el.labels && el.labels.length) name = el.labels[0].textContent;
    if (!name && (role === "button" || role === "link")) name = el.innerText || el.value || "";
    if (!name) name = el.getAttribute("placeholder") || el.getAttribute("title") || "";
    return { role, name: (name || "").replace(/\s+/g, " ").trim().slice(0, 200) };
  }
  function masked(el) {
    return !window.__flightrec || window.__flightrec.isMasked(el);
  }
  function report(type, el, extra) {
    const o = Object.assign({ type, id: hold(el), top: window.top === window, ts: Date.now() }, describe(el), extra || {});
    send(o);
  }
  const opts = { capture: true, passive: true };
  window.addEventListener(
    "click",
    (e) => {
      if (!e.isTrusted) return;
      mark();
      const el = target(e.target);
      report(checkable(el) ? "check" : "click", el, { x: e.clientX, y: e.clientY });
    },
    opts
  );
  window.addEventListener(
    "keydown",
    (e) => {
      if (!e.isTrusted || e.isComposing) return;
      const plain = e.key.length === 1 && !e.ctrlKey && !e.metaKey && !e.altKey;
      // Typing into a field is its fill (the input events), not presses.
      if (plain && editable(e.target)) return;
      if (e.key === "Shift" || e.key === "Control" || e.key === "Alt" || e.key === "Meta") return;
      mark();
      let key = e.key === " " ? "Space" : e.key;
      if (!plain && e.key.length === 1) key = (e.ctrlKey ? "Control+" : "") + (e.metaKey ? "Meta+" : "") + (e.altKey ? "Alt+" : "") + key;
      report("press", target(e.target), { key });
    },
    opts
  );
  window.addEventListener(
    "input",
    (e) => {
      if (!e.isTrusted) return;
      const el = e.target;
      if (!editable(el)) return; // a select's or checkbox's change is reported as its own
      const value = el.isContentEditable ? el.innerText : el.value;
      report("fill", el, { value: String(value), masked: masked(el) });
    },
    opts
  );
  // A select's choice. Automation clients (Playwright's selectOption, the
  // reference recorder's select) set it and dispatch change themselves, so
  // the event is untrusted: a select's change counts either way.
  window.addEventListener(
    "change",
    (e) => {
      const el = e.target;
      if (!el || el.localName !== "select") return;
      const opt = el.selectedOptions && el.selectedOptions[0];
      report("select", el, { value: opt ? opt.value : el.value, masked: masked(el) });
    },
    opts
  );
  window.addEventListener(
    "submit",
    (e) => {
      if (!e.isTrusted || acted) return;
      report("submit", e.target);
    },
    opts
  );
  window.__flightrecAttach = {
    el: (id) => held.get(id) || null,
  };
})();
