package testenv

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/executor/cdphar"
)

// Capture is what a real browser's visit to the cookie app produced.
type Capture struct {
	BaseURL string
	// Entries are the HAR entries the cdphar.Recorder built, in start order.
	Entries []json.RawMessage
	// Secrets are every value the app handed out or received.
	Secrets []string
}

// CaptureCookieApp drives a fresh headless Chromium (see Chromium, which
// skips or fails the test when there is none) to the cookie app, waits for
// the page's fetches and for the network to go quiet, and returns the HAR
// entries a cdphar.Recorder made of the visit. It takes a few seconds.
func CaptureCookieApp(t testing.TB) Capture {
	t.Helper()
	ctx := Chromium(t)
	base, issued := CookieApp(t)
	rec, err := cdphar.Start(ctx, cdphar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("navigating to the cookie app: %v", err)
	}
	title, err := chromedp.Run(tctx, chromedp.Poll[string](
		`document.title.startsWith("cookieapp: ") ? document.title : ""`,
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		t.Fatalf("waiting for the cookie app's page: %v", err)
	}
	if title != CookieAppDoneTitle {
		t.Fatalf("the cookie app's page says %q", title)
	}
	if err := rec.WaitIdle(tctx, 300*time.Millisecond); err != nil {
		t.Fatalf("waiting for the network to go quiet: %v", err)
	}
	rec.Stop()
	return Capture{BaseURL: base, Entries: rec.Entries(), Secrets: issued()}
}
