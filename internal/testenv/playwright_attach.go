package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// AttachRun is what attach-checkout.js reports: the actions it made as
// [verb, target] pairs, in order, what each answered ("ok" or its error),
// and the text the page showed after paying.
type AttachRun struct {
	Actions [][2]string `json:"actions"`
	Results []string    `json:"results"`
	Shown   string      `json:"shown"`
	Popup   string      `json:"popup,omitempty"` // the Terms popup's title (with "terms")
	// Download is the receipt as Playwright saved it (with "receipt").
	Download AttachDownload `json:"download"`
}

// AttachDownload is a download as the driving client saw it: its name
// (the order id as {order}), its size, and whether the file is where
// Playwright said it saved it.
type AttachDownload struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Landed bool   `json:"landed"`
}

// PlaywrightAttachCheckout runs internal/testenv/playwright/attach-checkout.js:
// playwright-core connects over CDP to the running browser at endpoint
// and drives the demo storefront at base through the failing gift-card
// checkout on the browser's first page (then, with extra "terms", opens
// and closes the Terms popup; with "receipt", pays an order and downloads
// its receipt). It returns the report and how
// long the script ran (for benchmarks; tests assert no time).
// Skipped or failed as PlaywrightCheckout says without node or the package.
func PlaywrightAttachCheckout(t testing.TB, endpoint, base string, extra ...string) (AttachRun, time.Duration) {
	t.Helper()
	node, _ := requirePlaywright(t, "playwright-core")
	dir := PlaywrightDir()
	// A guard against a hung browser, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "attach-checkout.js"), endpoint, base}, extra...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("node attach-checkout.js: %v\n%s", err, strings.TrimSpace(stderr.String()))
	}
	took := time.Since(start)
	var run AttachRun
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &run); err != nil {
		t.Fatalf("node attach-checkout.js printed no report: %v: %s\n%s", err, stdout.String(), stderr.String())
	}
	return run, took
}
