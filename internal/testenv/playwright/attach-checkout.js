// Drives the demo storefront's failing gift-card checkout in a browser
// that is already running, over the DevTools protocol
// (chromium.connectOverCDP), as an agent or a test suite would while
// flightrec record --attach records it (internal/testenv's
// PlaywrightAttachCheckout runs it).
//
//   node attach-checkout.js CDP_URL BASE_URL [terms]
//
// With "terms" it then opens the Terms page in a popup from a script (no
// input, so no inferred step), waits for it to load, reports its title as
// "popup" and closes it.
//
// It uses the browser's first page, runs the same actions as the flow
// checkout-with-gift-card-fails, and prints one JSON object on stdout: the
// actions it made, in order, as [verb, target] (what the recording's
// inferred steps should be), what each answered ("ok" or the error's first
// line), and the text the page showed after paying. It leaves the browser
// running.
"use strict";

const { chromium } = require("playwright-core");

const { EMAIL, PASSWORD, CARD, GIFT } = require("./demo-shop");

async function main() {
  const [cdp, base, extra] = process.argv.slice(2);
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
  if (extra === "terms") {
    const [p] = await Promise.all([
      page.waitForEvent("popup"),
      page.evaluate(() => { window.open("/terms", "terms"); }),
    ]);
    await p.waitForLoadState("load");
    popup = await p.title();
    await p.close();
  }
  process.stdout.write(JSON.stringify({ actions, results, shown: shown.trim(), popup }) + "\n");
  // Leave the browser as found: only this client's connection closes.
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + "\n");
  process.exit(1);
});
