package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The exports' validators: a HAR document against the HAR 1.2 JSON schema
// (npm har-validator), and an rrweb event array in rrweb's own Replayer
// (npm rrweb, the release of the vendored @rrweb/record) inside Chromium.
// Both come from internal/testenv/playwright's package.json: without them
// (npm ci --prefix internal/testenv/playwright) or node, a test is skipped
// on a developer's machine and fails in CI (CI set), as PlaywrightCheckout.

// npmMissing skips the test, or fails it in CI.
func npmMissing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// npmPackage returns the directory of an npm package installed in
// internal/testenv/playwright, skipping or failing the test without it.
func npmPackage(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(PlaywrightDir(), "node_modules", name)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		npmMissing(t, fmt.Sprintf("%s is not installed: run npm ci --prefix internal/testenv/playwright (with Node.js %d or newer and npm)", name, MinNodeMajor))
	}
	return dir
}

// HARSchemaError is one way a HAR document breaks the HAR 1.2 schema, as
// validate-har.js reports it.
type HARSchemaError struct {
	// Source is "har-schema" for the JSON schema's errors (har-validator),
	// "har-1.2" for the spec's rules the schema cannot say (unique page
	// ids, pagerefs naming a page), "json" when the document is not JSON.
	Source string `json:"source"`
	// Path is where in the document, as ".log.entries[3].request" ("" for
	// the document).
	Path    string          `json:"path"`
	Keyword string          `json:"keyword"`
	Message string          `json:"message"`
	Params  json.RawMessage `json:"params"`
}

func (e HARSchemaError) String() string {
	p := e.Path
	if p == "" {
		p = "(document)"
	}
	return fmt.Sprintf("%s: %s %s (%s %s)", e.Source, p, e.Message, e.Keyword, e.Params)
}

// HARInvalid is ValidateHAR's error: the schema errors of a document.
type HARInvalid struct {
	Validator string // "har-validator@5.1.5"
	Errors    []HARSchemaError
}

func (e *HARInvalid) Error() string {
	lines := make([]string, len(e.Errors))
	for i, se := range e.Errors {
		lines[i] = "  " + se.String()
	}
	return fmt.Sprintf("HAR document invalid (%s), %d errors:\n%s", e.Validator, len(e.Errors), strings.Join(lines, "\n"))
}

// ValidateHAR validates a HAR document against the HAR 1.2 JSON schema with
// npm har-validator's full "har" validation (internal/testenv/playwright's
// validate-har.js, run with node), plus the two rules of the spec the schema
// leaves out: page ids are unique and every entry's pageref names a page.
// It returns nil for a valid document, else a *HARInvalid listing every
// error. A validator that cannot run fails the test; without node or
// har-validator the test is skipped, or failed in CI.
func ValidateHAR(t testing.TB, har []byte) error {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		npmMissing(t, fmt.Sprintf("node not found on $PATH (install Node.js %d or newer and npm, then npm ci --prefix internal/testenv/playwright)", MinNodeMajor))
	}
	npmPackage(t, "har-validator")
	dir := PlaywrightDir()
	// A guard against a hung node, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "validate-har.js"))
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(har)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node validate-har.js: %v\n%s", err, strings.TrimSpace(stderr.String()))
	}
	var rep struct {
		Validator string           `json:"validator"`
		Errors    []HARSchemaError `json:"errors"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &rep); err != nil || rep.Validator == "" {
		t.Fatalf("node validate-har.js printed no report: %v: %s\n%s", err, stdout.String(), stderr.String())
	}
	if len(rep.Errors) > 0 {
		return &HARInvalid{Validator: rep.Validator, Errors: rep.Errors}
	}
	return nil
}

// RRWebReplay is how rrweb's Replayer played an event array (see
// ReplayRRWeb).
type RRWebReplay struct {
	// Version is the rrweb package that replayed ("rrweb@2.1.6").
	Version string
	// Events is how many events the replayer got; Metas and FullSnapshots
	// how many of them are Meta (type 4) and FullSnapshot (type 2) events,
	// one each per document the recording saw. TotalTime is the span from
	// the first event to the last; LastHref the last Meta event's href.
	Events, Metas, FullSnapshots int
	TotalTime                    time.Duration
	LastHref                     string
	// Speed is the speed the "play" replay ran at.
	Speed float64
	// Text and TextContent are the replayed document's body.innerText and
	// body.textContent once the replayer played to its finish event; HTML
	// is its documentElement.outerHTML.
	Text, TextContent, HTML string
	// Play is that replay in full; Seek is the same events with the
	// replayer jumped to the end instead (pause at the last event's offset
	// + 1 ms: every event applied synchronously, through rrweb's virtual
	// DOM).
	Play, Seek RRWebReplayMode
	// Errors are the errors of both replays: uncaught exceptions and
	// unhandled rejections in the page, console.error calls, exceptions
	// the browser reported. Warnings are rrweb's warnings (its showWarning
	// output, such as "Node with id 'X' not found", each a change the
	// replayer could not apply) and console.warn calls, prefixed with their
	// mode. Any of them means the export did not replay cleanly.
	Errors, Warnings []string
	// Debug is rrweb's showDebug output, prefixed with the mode: events it
	// skipped as harmless (a mouse or scroll event on a node that is gone).
	Debug []string
	// BrowserLog is the browser's own log while replaying (a resource the
	// replayed document could not load, say): not the replayer's fault.
	BrowserLog []string
}

// RRWebReplayMode is one replay of the events (see RRWebReplay).
type RRWebReplayMode struct {
	Mode string `json:"mode"`
	// CurrentTime is the replayer's time offset at the end, in ms.
	CurrentTime float64 `json:"currentTime"`
	HasBody     bool    `json:"hasBody"`
	Text        string  `json:"text"`
	TextContent string  `json:"textContent"`
	HTML        string  `json:"html"`
	// Errors and PageWarnings are what the page logged while this replayer
	// ran; Warnings and Debug what the replayer logged.
	Errors       []string `json:"errors"`
	PageWarnings []string `json:"pageWarnings"`
	Warnings     []string `json:"warnings"`
	Debug        []string `json:"debug"`
}

// replayHTML is the player page: the harness first, so that it sees
// everything rrweb's bundle does from its first line.
const replayHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>flightrec: rrweb replay</title>
<link rel="stylesheet" href="/rrweb/style.css">
<script src="/replay-rrweb.js"></script>
<script src="/rrweb/rrweb.umd.cjs"></script>
</head>
<body></body>
</html>
`

// ReplayRRWeb replays events, an rrweb event array as the rrweb export
// serves it, in rrweb's own Replayer (npm rrweb's browser bundle, served
// from internal/testenv/playwright/node_modules) in the browser of ctx (see
// Chromium). A loopback httptest server serves the player page, the bundle
// and the events, byte for byte (the page hashes what it got and the hash
// is checked). The page (replay-rrweb.js) plays the events to the
// replayer's finish event, then replays them again jumping to the end, and
// reports the replayed document's text and every error and warning.
//
// The error is for a replay that could not run or end (the constructor
// threw, no finish event, the events changed on the way); what went wrong
// during a replay that ended is in the result's Errors and Warnings.
// Without rrweb installed the test is skipped, or failed in CI.
func ReplayRRWeb(t testing.TB, ctx context.Context, events []byte) (RRWebReplay, error) {
	t.Helper()
	pkg := npmPackage(t, "rrweb")
	var meta struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(pkg, "package.json")); err != nil || json.Unmarshal(b, &meta) != nil {
		t.Fatalf("reading %s/package.json: %v", pkg, err)
	}
	files := map[string]string{
		"/replay-rrweb.js":         filepath.Join(PlaywrightDir(), "replay-rrweb.js"),
		"/rrweb/rrweb.umd.cjs":     filepath.Join(pkg, "dist", "rrweb.umd.cjs"),
		"/rrweb/style.css":         filepath.Join(pkg, "dist", "style.css"),
		"/rrweb/rrweb.umd.cjs.map": filepath.Join(pkg, "dist", "rrweb.umd.cjs.map"),
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil && !strings.HasSuffix(f, ".map") {
			t.Fatalf("the replay needs %s: %v", f, err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(replayHTML))
	})
	for path, file := range files {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-store")
			http.ServeFile(w, r, file)
		})
	}
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /events.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(events)
	})
	srv := httptest.NewServer(mux) // 127.0.0.1
	defer srv.Close()

	rep := RRWebReplay{Version: "rrweb@" + meta.Version}
	// A guard against a hung browser, not a timed assertion: the page
	// bounds the play itself by the recording's length.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	// The browser's own view: exceptions (also those the page could not
	// catch) and its log. The page reports console calls itself. A marker
	// message ends the reading, so that none is lost.
	var (
		mu       sync.Mutex
		excs     []string
		browser  []string
		markerOK = make(chan struct{})
	)
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	marker := "flightrec-replay-end-" + hex.EncodeToString(nb[:])
	cctx, stopConsole := context.WithCancel(ctx)
	defer stopConsole()
	msgs := chromedp.Console(cctx)
	go func() {
		defer close(markerOK)
		for m, err := range msgs {
			if err != nil {
				return
			}
			mu.Lock()
			switch {
			case m.IsException():
				excs = append(excs, "exception: "+m.String())
			case m.Source != "":
				browser = append(browser, fmt.Sprintf("%s %s: %s (%s)", m.Source, m.Type, m.Text, m.URL))
			case strings.Contains(m.Text, marker):
				mu.Unlock()
				return
			}
			mu.Unlock()
		}
	}()

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		return rep, fmt.Errorf("opening the player page: %w", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`window.flightrecReplay
		? window.flightrecReplay("/events.json")
		: Promise.reject(new Error("the replay harness did not load"))`, chromedp.EvalAwaitPromise))
	// The marker, whatever happened, then the rest of the browser's view.
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`console.debug(`+jsString(marker)+`)`))
	select {
	case <-markerOK:
	case <-time.After(5 * time.Second):
	}
	stopConsole()
	mu.Lock()
	rep.Errors = append(rep.Errors, excs...)
	rep.BrowserLog = append(rep.BrowserLog, browser...)
	mu.Unlock()
	if err != nil {
		return rep, fmt.Errorf("replaying in rrweb's Replayer: %w", err)
	}

	var page struct {
		Bytes         int             `json:"bytes"`
		SHA256        string          `json:"sha256"`
		Events        int             `json:"events"`
		TotalTime     float64         `json:"totalTime"`
		Metas         int             `json:"metas"`
		FullSnapshots int             `json:"fullSnapshots"`
		LastHref      string          `json:"lastHref"`
		Speed         float64         `json:"speed"`
		Play          RRWebReplayMode `json:"play"`
		Seek          RRWebReplayMode `json:"seek"`
		Errors        []string        `json:"errors"`
		Warnings      []string        `json:"warnings"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return rep, fmt.Errorf("the player page's report: %w: %.300s", err, raw)
	}
	sum := sha256.Sum256(events)
	if page.Bytes != len(events) || page.SHA256 != hex.EncodeToString(sum[:]) {
		return rep, fmt.Errorf("the player page got %d bytes (sha256 %s), not the %d bytes of the events (sha256 %x)",
			page.Bytes, page.SHA256, len(events), sum)
	}
	rep.Events, rep.Metas, rep.FullSnapshots = page.Events, page.Metas, page.FullSnapshots
	rep.TotalTime = time.Duration(page.TotalTime * float64(time.Millisecond))
	rep.LastHref, rep.Speed = page.LastHref, page.Speed
	rep.Play, rep.Seek = page.Play, page.Seek
	rep.Text, rep.TextContent, rep.HTML = page.Play.Text, page.Play.TextContent, page.Play.HTML
	rep.Errors = append(rep.Errors, page.Errors...)
	for _, m := range []RRWebReplayMode{page.Play, page.Seek} {
		for _, w := range m.Warnings {
			rep.Warnings = append(rep.Warnings, m.Mode+": "+w)
		}
		for _, w := range m.PageWarnings {
			rep.Warnings = append(rep.Warnings, m.Mode+": "+w)
		}
		for _, d := range m.Debug {
			rep.Debug = append(rep.Debug, m.Mode+": "+d)
		}
	}
	return rep, nil
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
