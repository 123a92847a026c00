// Validates a HAR document against the HAR 1.2 JSON schema with
// har-validator (its full "har" validation: the document, its log, every
// page and entry), for internal/testenv's ValidateHAR.
//
//   node validate-har.js < export.har
//
// It reads the document from stdin and prints one JSON object on stdout:
// {"validator": "har-validator@VERSION", "errors": [...]}, an error being
// {"source", "path", "keyword", "message", "params"}. Errors with source
// "har-schema" are the schema's; those with source "har-1.2" are two rules
// of the HAR 1.2 spec the schema cannot say: page ids are unique, and an
// entry's pageref names one of the pages. An empty list means valid. It
// exits 0 whenever it could validate (valid or not), non-zero when it
// could not run.
"use strict";

const validator = require("har-validator");
const { version } = require("har-validator/package.json");

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on("data", (c) => chunks.push(c));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

// references checks what the schema leaves out: unique page ids, and
// pagerefs that name a page.
function references(doc) {
  const errors = [];
  const log = doc && typeof doc === "object" ? doc.log : undefined;
  if (!log || typeof log !== "object") return errors;
  const ids = new Set();
  (Array.isArray(log.pages) ? log.pages : []).forEach((p, i) => {
    if (!p || typeof p.id !== "string") return;
    if (ids.has(p.id)) {
      errors.push({ source: "har-1.2", path: `.log.pages[${i}].id`, keyword: "unique",
        message: `page id ${JSON.stringify(p.id)} is not unique`, params: { id: p.id } });
    }
    ids.add(p.id);
  });
  (Array.isArray(log.entries) ? log.entries : []).forEach((e, i) => {
    if (!e || e.pageref === undefined) return;
    if (!ids.has(e.pageref)) {
      errors.push({ source: "har-1.2", path: `.log.entries[${i}].pageref`, keyword: "pageref",
        message: `pageref ${JSON.stringify(e.pageref)} names no page of log.pages`, params: { pageref: e.pageref } });
    }
  });
  return errors;
}

async function main() {
  const text = await readStdin();
  const report = { validator: `har-validator@${version}`, errors: [] };
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    report.errors.push({ source: "json", path: "", keyword: "parse", message: String(err.message), params: {} });
    process.stdout.write(JSON.stringify(report) + "\n");
    return;
  }
  try {
    await validator.har(doc);
  } catch (err) {
    if (!err || !Array.isArray(err.errors)) throw err;
    for (const e of err.errors) {
      report.errors.push({ source: "har-schema", path: e.dataPath || "", keyword: e.keyword,
        message: e.message || "", params: e.params || {} });
    }
  }
  report.errors.push(...references(doc));
  process.stdout.write(JSON.stringify(report) + "\n");
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(1);
});
