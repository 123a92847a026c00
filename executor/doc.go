// Package executor is the executor wing: everything that drives a browser
// or converts traces into flightrec events, and the client that sends them.
//
//	client/      the resuming write-API client (open, append in batches, finish)
//	recorder/    the reference executor: Chromium along a flow file, over CDP
//	flow/        flow files: parsing, checking, parameters
//	flowexport/  a recording as a flow file or a Playwright Test spec
//	sourcemap/   Source Map v3, for the recorder's mapped stacks
//	cdphar/      HAR entries from DevTools network events
//	importer/    HAR, DevTools-log and Playwright-trace importers
//
// The wing compiles against the contract only: its packages import event,
// wire, each other, the standard library and browser and trace libraries,
// never the server (ingest, store, redact, policy and OPA, playback, …).
// A third-party executor needs exactly what these packages need, and the
// server's dependencies never reach an executor's binary. imports_test.go
// holds the rule. This package has no code of its own.
package executor
