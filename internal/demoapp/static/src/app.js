// The demo storefront's script: every form talks to the JSON API with
// fetch and shows the outcome in a status or alert region.
//
// This is the readable source. The pages load static/app.min.js, built
// from it with esbuild (see the go:generate line in demoapp.go), whose
// source map points back here.
"use strict";

async function api(method, path, body) {
  const init = {method, credentials: "same-origin", headers: {"Accept": "application/json"}};
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let data = {};
  try {
    data = await res.json();
  } catch (e) {
    data = {};
  }
  return {ok: res.ok, status: res.status, data};
}

function say(id, text) {
  const el = document.getElementById(id);
  if (!el) return;
  el.textContent = text;
  if (el.getAttribute("role") === "alert") el.hidden = !text;
}

function money(cents) {
  return "$" + Math.floor(cents / 100) + "." + String(cents % 100).padStart(2, "0");
}

function signin(form) {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    say("signin-error", "");
    const r = await api("POST", "/api/signin", {email: form.email.value, password: form.password.value});
    if (r.ok) {
      location.assign(r.data.next || "/product");
      return;
    }
    say("signin-error", "Sign-in failed: " + (r.data.error || r.status));
  });
}

function product(button) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    say("cart-error", "");
    const qty = parseInt(document.getElementById("qty").value, 10) || 1;
    const sku = button.closest("[data-sku]").dataset.sku;
    const r = await api("POST", "/api/cart", {sku, qty});
    button.disabled = false;
    if (r.ok) {
      say("cart-status", "Added to cart (" + r.data.count + (r.data.count === 1 ? " item)" : " items)"));
      return;
    }
    say("cart-error", "Could not add to cart: " + (r.data.error || r.status));
  });
}

function checkout(form) {
  const apply = document.getElementById("apply-gift");
  const pay = document.getElementById("pay");
  apply.addEventListener("click", async () => {
    apply.disabled = true;
    const r = await api("POST", "/api/gift", {code: form.gift.value});
    apply.disabled = false;
    if (r.ok) {
      say("gift-status", "Gift card applied: " + money(r.data.discount_cents) + " off");
      say("total", money(r.data.total_cents));
      return;
    }
    say("gift-status", "Gift card not accepted: " + (r.data.error || r.status));
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    pay.disabled = true;
    pay.setAttribute("aria-busy", "true");
    say("pay-error", "");
    let token;
    try {
      token = await cardToken(document.getElementById("card-frame"));
    } catch (e) {
      pay.disabled = false;
      pay.removeAttribute("aria-busy");
      checkoutFailed(e.message);
      return;
    }
    const r = await api("POST", "/api/checkout", {email: form.email.value, token});
    pay.disabled = false;
    pay.removeAttribute("aria-busy");
    if (r.ok) {
      location.assign(r.data.next);
      return;
    }
    checkoutFailed(r.data.error || ("HTTP_" + r.status));
  });
}

// cardToken asks the payment provider's card frame (another origin) for a
// token standing for the card typed there: the page never sees the number.
function cardToken(frame) {
  const origin = new URL(frame.src).origin;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(null, "PROVIDER_TIMEOUT"), 10000);
    function done(token, err) {
      clearTimeout(timer);
      window.removeEventListener("message", onMessage);
      if (token) resolve(token);
      else reject(new Error(err));
    }
    function onMessage(m) {
      if (m.origin !== origin || m.source !== frame.contentWindow || !m.data) return;
      if (m.data.type === "token") done(m.data.token);
      else if (m.data.type === "error") done(null, m.data.error);
    }
    window.addEventListener("message", onMessage);
    frame.contentWindow.postMessage({type: "tokenize"}, origin);
  });
}

// checkoutFailed shows why a payment failed and logs it. It is a named
// top-level function so that the console error's stack names it, in the
// minified bundle (which keeps top-level names) and once source-mapped.
function checkoutFailed(code) {
  say("pay-error", "Payment failed: " + code);
  console.error("checkout failed: " + code);
}

document.addEventListener("DOMContentLoaded", () => {
  const f = document.getElementById("signin-form");
  if (f) signin(f);
  const add = document.getElementById("add-to-cart");
  if (add) product(add);
  const c = document.getElementById("checkout-form");
  if (c) checkout(c);
  const out = document.getElementById("signout");
  if (out) {
    out.addEventListener("click", async () => {
      await api("POST", "/api/signout");
      location.assign("/signin");
    });
  }
});
