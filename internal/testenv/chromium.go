// Package testenv holds the helpers of tests that need real components
// outside the Go toolchain: a headless Chromium, demo apps to drive it at.
// Nothing outside tests imports it.
package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/executor/recorder"
)

// ChromiumPath returns the browser to run (recorder.FindChromium: $CHROMIUM,
// else /usr/bin/chromium, else one on $PATH). ok is false when none exists.
func ChromiumPath() (path string, ok bool) { return recorder.FindChromium() }

// RequireChromium returns the browser to run. Without one the test is
// skipped on a developer's machine and fails in CI (CI set): a dependency
// missing in CI is a failure, not a skip.
func RequireChromium(t testing.TB) string {
	t.Helper()
	path, ok := ChromiumPath()
	if !ok {
		msg := "Chromium not found at " + path + " (set $CHROMIUM, or apt-get install chromium)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// Chromium starts a fresh headless Chromium with its own profile in a
// t.TempDir and returns a chromedp context for its first tab. The browser
// is already running when Chromium returns, so the context may be used
// with deadlines right away. It is stopped on t.Cleanup, before the
// profile directory is removed.
//
// Without a browser the test is skipped on a developer's machine and fails
// in CI (CI set): a dependency missing in CI is a failure, not a skip.
func Chromium(t testing.TB) context.Context {
	t.Helper()
	path := RequireChromium(t)
	opts := recorder.ChromiumOptions(path, t.TempDir())
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// Registered after t.TempDir, so it runs first: the allocator's cancel
	// waits for the browser to exit before the profile is removed.
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// Start the browser now, with no deadline on ctx (the first Run binds
	// the browser's life to its context), but give up if it hangs.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting %s: %v", path, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("starting %s: no answer after 60s", path)
	}
	return ctx
}
