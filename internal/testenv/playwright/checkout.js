// Records a Playwright trace of the demo storefront's gift-card checkout,
// for the Playwright importer's round-trip test (internal/testenv's
// PlaywrightCheckout runs it).
//
//   node checkout.js BASE_URL TRACE_ZIP
//
// It launches Debian's Chromium ($CHROMIUM, else /usr/bin/chromium; no
// browser download), opens a context with tracing on (screenshots and
// snapshots) whose every request carries a bearer token in its
// Authorization header, signs in, adds the product to the cart, checks out
// with the gift card applied and pays, then stops tracing into TRACE_ZIP.
// On stdout it prints one JSON object: the API calls it made while tracing
// that are actions ("actions", in order: what the trace's steps should
// be), the text the page showed after paying, the browser's version and
// playwright-core's, and the secrets the trace holds beyond the typed
// password and card number: the bearer token (random per run) and the
// session cookie the storefront set.
"use strict";

const crypto = require("crypto");
const { chromium } = require("playwright-core");

const { EMAIL, PASSWORD, CARD, GIFT } = require("./demo-shop");

async function main() {
  const [base, out] = process.argv.slice(2);
  if (!base || !out) {
    process.stderr.write("usage: node checkout.js BASE_URL TRACE_ZIP\n");
    process.exit(2);
  }
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const actions = [];
  // act runs one API call and notes its API name, so that the test knows
  // how many steps the import must have and which one the payment is.
  const act = async (name, fn) => {
    actions.push(name);
    return fn();
  };
  let shown = "";
  let cookie = "";
  const bearer = "fr-bearer-" + crypto.randomBytes(16).toString("hex");
  try {
    const context = await browser.newContext({
      viewport: { width: 1280, height: 800 },
      extraHTTPHeaders: { Authorization: "Bearer " + bearer },
    });
    await context.tracing.start({ screenshots: true, snapshots: true });
    const page = await act("browserContext.newPage", () => context.newPage());
    await act("page.goto", () => page.goto(base + "/signin"));
    await act("locator.fill", () => page.getByLabel("Email").fill(EMAIL));
    await act("locator.fill", () => page.locator("#password").fill(PASSWORD));
    await act("locator.click", () => page.getByRole("button", { name: "Sign in" }).click());
    await act("page.waitForURL", () => page.waitForURL("**/product"));
    await act("locator.click", () => page.getByRole("button", { name: "Add to cart" }).click());
    await act("locator.waitFor", () => page.getByText("Added to cart").waitFor());
    await act("locator.click", () => page.getByRole("link", { name: "Checkout" }).click());
    await act("page.waitForURL", () => page.waitForURL("**/checkout"));
    await act("locator.fill", () => page.getByLabel("Email").fill(EMAIL));
    await act("locator.fill", () => page.frameLocator("#card-frame").getByLabel("Card number").fill(CARD));
    await act("locator.fill", () => page.locator("#gift-code").fill(GIFT));
    await act("locator.click", () => page.getByRole("button", { name: "Apply" }).click());
    await act("locator.waitFor", () => page.getByText("Gift card applied").waitFor());
    await act("locator.click", () => page.getByRole("button", { name: "Pay" }).click());
    await act("locator.waitFor", () => page.getByText("Payment failed").waitFor());
    // An action that fails: there is no such button. Its receipt must say
    // failed, TIMEOUT.
    await act("locator.click", () => page.getByRole("button", { name: "Track my order" }).click({ timeout: 500 }))
      .then(() => { throw new Error("clicked a button the page does not have"); }, () => {});
    // A getter: Playwright's trace viewer hides it, and the import makes
    // no step of it, so it is not an action here.
    shown = await page.locator("#pay-error").textContent();
    await context.tracing.stop({ path: out });
    // After tracing: not a call the trace records.
    cookie = ((await context.cookies()).find((c) => c.name === "shop_session") || {}).value || "";
    await context.close();
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify({
    actions,
    shown,
    browser: browser.version(),
    playwright: require("playwright-core/package.json").version,
    bearer,
    cookie,
  }) + "\n");
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack || err) + "\n");
  process.exit(1);
});
