// Drives the demo storefront's failing gift-card checkout in a browser
// that is already running, over the DevTools protocol
// (chromium.connectOverCDP), as an agent or a test suite would while
// flightrec record --attach records it (internal/testenv's
// PlaywrightAttachCheckout runs it).
//
//   node attach-checkout.js CDP_URL BASE_URL [terms] [receipt]
//
// With "terms" it then opens the Terms page in a popup from a script (no
// input, so no inferred step), waits for it to load, reports its title as
// "popup" and closes it. With "receipt" it then pays an order that passes
// (a new session, its cart and payment set up by the page's own fetches:
// no input, so no step), opens its confirmation (a goto step), clicks
// "Download receipt" (a click step) and reports the download as
// Playwright saved it: "download" {name (the order id as {order}), size,
// landed: the file is where Playwright says it put it}.
//
// It uses the browser's first page, runs the same actions as the flow
// checkout-with-gift-card-fails, and prints one JSON object on stdout: the
// actions it made, in order, as [verb, target] (what the recording's
// inferred steps should be), what each answered ("ok" or the error's first
// line), and the text the page showed after paying. It leaves the browser
// running.
"use strict";

const fs = require("fs");
const { chromium } = require("playwright-core");

const { EMAIL, PASSWORD, CARD, GIFT } = require("./demo-shop");

async function main() {
  const [cdp, base, ...extras] = process.argv.slice(2);
  if (!cdp || !base) {
    process.stderr.write("usage: node attach-checkout.js CDP_URL BASE_URL\n");
    process.exit(2);
  }
  const browser = await chromium.connectOverCDP(cdp);
  const context = browser.contexts()[0];
  const page = context.pages()[0] || (await context.newPage());
  const actions = [];
  const results = [];
  const act = async (verb, target, fn) => {
    actions.push([verb, target]);
    try {
      await fn();
      results.push("ok");
    } catch (err) {
      results.push(String((err && err.message) || err).split("\n")[0]);
    }
  };
  await act("goto", "url /signin", () => page.goto(base + "/signin"));
  await act("fill", 'textbox "Email"', () => page.getByLabel("Email").fill(EMAIL));
  await act("fill", 'textbox "Password"', () => page.locator("#password").fill(PASSWORD));
  await act("click", 'button "Sign in"', () => page.getByRole("button", { name: "Sign in" }).click());
  await page.waitForURL("**/product");
  await act("click", 'button "Add to cart"', () => page.getByRole("button", { name: "Add to cart" }).click());
  await page.getByText("Added to cart").waitFor();
  await act("click", 'link "Checkout"', () => page.getByRole("link", { name: "Checkout" }).click());
  await page.waitForURL("**/checkout");
  await act("fill", 'textbox "Email"', () => page.getByLabel("Email").fill(EMAIL));
  await act("fill", 'textbox "Card number"', () => page.frameLocator("#card-frame").getByLabel("Card number").fill(CARD));
  await act("fill", 'textbox "Gift card code"', () => page.locator("#gift-code").fill(GIFT));
  await act("click", 'button "Apply"', () => page.getByRole("button", { name: "Apply" }).click());
  await page.getByText("Gift card applied").waitFor();
  await act("click", 'button "Pay"', () => page.getByRole("button", { name: "Pay" }).click());
  await page.getByText("Payment failed").waitFor();
  const shown = (await page.locator("#pay-error").textContent()) || "";
  let popup;
  if (extras.includes("terms")) {
    const [p] = await Promise.all([
      page.waitForEvent("popup"),
      page.evaluate(() => { window.open("/terms", "terms"); }),
    ]);
    await p.waitForLoadState("load");
    popup = await p.title();
    await p.close();
  }
  let download;
  if (extras.includes("receipt")) {
    const next = await page.evaluate(async ({ email, password, card }) => {
      const post = (path, body) => fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) }).then((r) => r.json());
      await post("/api/signin", { email, password });
      await post("/api/cart", { sku: "KETTLE-1", qty: 1 });
      return (await post("/api/checkout", { email, card })).next;
    }, { email: EMAIL, password: PASSWORD, card: CARD });
    const order = next.split("/").pop();
    await act("goto", "url /orders/{order}", () => page.goto(base + next));
    let saved;
    await act("click", 'link "Download receipt"', async () => {
      const [d] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Download receipt" }).click()]);
      saved = { name: d.suggestedFilename(), path: await d.path() };
    });
    if (saved) {
      const landed = fs.existsSync(saved.path);
      download = { name: saved.name.replace(order, "{order}"), size: landed ? fs.statSync(saved.path).size : 0, landed };
    }
  }
  process.stdout.write(JSON.stringify({ actions, results, shown: shown.trim(), popup, download }) + "\n");
  // Leave the browser as found: only this client's connection closes.
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + "\n");
  process.exit(1);
});
