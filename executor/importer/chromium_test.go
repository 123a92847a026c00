package importer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
	"github.com/flightrec/flightrec/executor/importer"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
)

const failedPay = "Payment failed: GIFT_CARD_STATE"

// TestHARFromRealChromium: a HAR made in the test from a real Chromium
// session (a cdphar.Recorder's entries of the storefront's gift-card
// checkout, wrapped in a HAR 1.2 document with one page per document
// load, as DevTools exports it) imports over loopback with the same
// entries, statuses and pages.
func TestHARFromRealChromium(t *testing.T) {
	start := time.Now()
	ctx := testenv.Chromium(t)
	base, _ := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	rec, err := cdphar.Start(ctx, cdphar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.ShopCheckout(t, ctx, base, true); got != failedPay {
		t.Fatalf("the page says %q", got)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rec.WaitIdle(wctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rec.Stop()
	entries := rec.Entries()
	ver, err := chromedp.CallBrowser(ctx, browser.GetVersion, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	// The HAR document: a page per document request, as DevTools does.
	type pageDoc struct {
		ID              string         `json:"id"`
		Title           string         `json:"title"`
		StartedDateTime string         `json:"startedDateTime"`
		PageTimings     map[string]int `json:"pageTimings"`
	}
	var pages []pageDoc
	var wrapped []map[string]any
	var want []string // step status method path, in capture order
	for _, raw := range entries {
		var e map[string]any
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		u, _ := e["request"].(map[string]any)["url"].(string)
		// The payment provider's card frame loads a document too, but a
		// frame's document is no page (DevTools' pages are the tab's).
		if frame := strings.Contains(u, "/pay/card"); e["_resourceType"] == "Document" && !frame || len(pages) == 0 {
			pages = append(pages, pageDoc{ID: fmt.Sprintf("page_%d", len(pages)+1), Title: u,
				StartedDateTime: e["startedDateTime"].(string), PageTimings: map[string]int{"onContentLoad": -1, "onLoad": -1}})
		}
		e["pageref"] = pages[len(pages)-1].ID
		wrapped = append(wrapped, e)
		want = append(want, fmt.Sprintf("%d %s", len(pages), describeEntry(t, raw)))
	}
	if len(pages) != 3 {
		t.Fatalf("%d document loads in the capture, want 3 (signin, product, checkout): %v", len(pages), want)
	}
	har, _ := json.Marshal(map[string]any{"log": map[string]any{
		"version": "1.2",
		"creator": map[string]string{"name": "WebInspector", "version": "537.36"},
		"browser": map[string]string{"name": "Chromium", "version": strings.TrimPrefix(ver.Product, "HeadlessChrome/")},
		"pages":   pages,
		"entries": wrapped,
	}})

	evs, err := importer.HAR(bytes.NewReader(har))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t)
	res, _ := s.imported(evs, "checkout-with-gift-card-fails")
	var harPageEvents struct {
		Events []event.Envelope `json:"events"`
	}
	s.get("/v1/recordings/"+res.ID+"/events?kind=har&limit=10000", &harPageEvents)
	var got []string
	for _, e := range harPageEvents.Events {
		got = append(got, fmt.Sprintf("%d %s", e.Step, describeEntry(t, e.Data)))
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("served entries differ from the capture:\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Steps != 3 {
		t.Errorf("%d steps", res.Steps)
	}
	// The failing checkout is in the checkout page's step, body and all.
	var pay []event.Envelope
	for _, e := range harPageEvents.Events {
		if h := entryOf(t, e); h.Request.Method == "POST" && strings.HasSuffix(h.Request.URL, "/api/checkout") {
			pay = append(pay, e)
		}
	}
	if len(pay) != 1 || pay[0].Step != 3 || !strings.Contains(entryOf(t, pay[0]).Response.Content.Text, "GIFT_CARD_STATE") {
		t.Fatalf("the checkout request: %v", pay)
	}
	var meta struct {
		Events []event.Envelope `json:"events"`
	}
	s.get("/v1/recordings/"+res.ID+"/events?kind=meta&step=0", &meta)
	if len(meta.Events) != 1 || !bytes.Contains(meta.Events[0].Data, []byte(`"engine":"Chromium `)) {
		t.Errorf("meta: %v", meta.Events)
	}
	// What the browser sent carried the password and the card number;
	// what the server serves of the import does not (redaction applies
	// to imports as to live recordings).
	var all struct {
		Events []event.Envelope `json:"events"`
	}
	s.get("/v1/recordings/"+res.ID+"/events?limit=10000", &all)
	servedJSON, _ := json.Marshal(all.Events)
	for _, secret := range []string{demoapp.Password, demoapp.Card, strings.ReplaceAll(demoapp.Card, " ", "")} {
		if !bytes.Contains(har, []byte(secret)) && secret != strings.ReplaceAll(demoapp.Card, " ", "") {
			t.Fatalf("the capture does not hold a typed secret: it proves nothing")
		}
		if bytes.Contains(servedJSON, []byte(secret)) {
			t.Errorf("a typed secret is served back from the import")
		}
	}
	t.Logf("%d entries in %d pages, %s", len(entries), len(pages), time.Since(start).Round(time.Millisecond))
}

// describeEntry is "STATUS METHOD PATH?QUERY" of a HAR entry.
func describeEntry(t testing.TB, raw []byte) string {
	t.Helper()
	var e harEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.Request.URL)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d %s %s", e.Response.Status, e.Request.Method, u.RequestURI())
}

// methodOf names the protocol events the CDP test records.
func methodOf(ev any) string {
	switch ev.(type) {
	case *network.EventRequestWillBeSent:
		return network.RequestWillBeSent.Method
	case *network.EventRequestWillBeSentExtraInfo:
		return network.RequestWillBeSentExtraInfo.Method
	case *network.EventResponseReceived:
		return network.ResponseReceived.Method
	case *network.EventResponseReceivedExtraInfo:
		return network.ResponseReceivedExtraInfo.Method
	case *network.EventLoadingFinished:
		return network.LoadingFinished.Method
	case *network.EventLoadingFailed:
		return network.LoadingFailed.Method
	case *runtime.EventConsoleAPICalled:
		return runtime.ConsoleAPICalled.Method
	case *runtime.EventExceptionThrown:
		return runtime.ExceptionThrown.Method
	case *cdplog.EventEntryAdded:
		return cdplog.EntryAdded.Method
	case *page.EventFrameNavigated:
		return page.FrameNavigated.Method
	case *page.EventScreencastFrame:
		return page.ScreencastFrame.Method
	}
	return ""
}

// TestCDPLogFromRealChromium: a DevTools protocol log captured in the test
// (every Network, Runtime, Log and Page event of the storefront's
// gift-card checkout, screencast on, written as a JSON array of {method,
// params}) imports into HAR entries whose URLs and statuses are exactly
// what the storefront served, a step per page, the console error the page
// logged in the checkout step, and frames. The same log in ChromeDriver's
// performance-log form imports the same.
func TestCDPLogFromRealChromium(t *testing.T) {
	start := time.Now()
	ctx := testenv.Chromium(t)
	base, served := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	var (
		mu  sync.Mutex
		log []map[string]any
	)
	acks := make(chan int64, 64)
	err := chromedp.Listen(ctx, func(ev any) {
		m := methodOf(ev)
		if m == "" {
			return
		}
		params, err := jsonv2.Marshal(ev)
		if err != nil {
			t.Errorf("%s: %v", m, err)
			return
		}
		mu.Lock()
		log = append(log, map[string]any{"method": m, "params": json.RawMessage(params)})
		mu.Unlock()
		if f, ok := ev.(*page.EventScreencastFrame); ok {
			select {
			case acks <- f.SessionID:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for id := range acks {
			_, _ = chromedp.Call(ctx, page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: id})
		}
	}()
	quality := int64(40)
	if _, err := chromedp.Call(ctx, page.StartScreencast, page.StartScreencastParams{Format: page.StartScreencastFormatJpeg,
		Quality: &quality, EveryNthFrame: 1}); err != nil {
		t.Fatal(err)
	}
	// A Recorder only to know when the network is quiet.
	quiet, err := cdphar.Start(ctx, cdphar.Options{MaxBody: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.ShopCheckout(t, ctx, base, true); got != failedPay {
		t.Fatalf("the page says %q", got)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := quiet.WaitIdle(wctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	_, _ = chromedp.Call(ctx, page.StopScreencast, cdp.Empty{})
	mu.Lock()
	captured, _ := json.Marshal(log)
	perf := make([]map[string]any, len(log))
	for i, el := range log {
		inner, _ := json.Marshal(map[string]any{"message": el, "webview": "T1"})
		perf[i] = map[string]any{"level": "INFO", "message": string(inner), "timestamp": 1}
	}
	mu.Unlock()
	wrapped, _ := json.Marshal(perf)

	evs, err := importer.CDP(bytes.NewReader(captured))
	if err != nil {
		t.Fatal(err)
	}
	evs2, err := importer.CDP(bytes.NewReader(wrapped))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprint(evs), fmt.Sprint(evs2); a != b {
		t.Fatal("the performance-log form imports differently")
	}

	// HAR entries: exactly what the server answered.
	var got, want []string
	for _, e := range kinds(evs, event.KindHAR) {
		h := entryOf(t, e)
		got = append(got, fmt.Sprintf("%s %s %d", h.Request.Method, h.Request.URL, h.Response.Status))
	}
	for _, r := range served() {
		if strings.HasSuffix(r.URL, "/ws/cart") {
			// The cart badge's WebSocket: its events are not in this log
			// (methodOf), and the storefront logs a socket only once it closed.
			continue
		}
		want = append(want, fmt.Sprintf("%s %s %d", r.Method, r.URL, r.Status))
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("entries differ from what the storefront served:\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Steps: sign-in, product, checkout; the 500 and the console error in
	// the checkout's.
	step := map[string]int{}
	for _, e := range kinds(evs, event.KindHAR) {
		h := entryOf(t, e)
		step[h.Request.Method+" "+strings.TrimPrefix(h.Request.URL, base)] = e.Step
	}
	// A screencast frame of about:blank may come before the first
	// navigation: then it is step 1, a step of its own.
	s1 := step["GET /signin"]
	for _, e := range evs {
		if e.Step > 0 && e.Step < s1 && e.Kind != event.KindFrame {
			t.Fatalf("a %s event before the first page's step", e.Kind)
		}
	}
	if s1 < 1 || s1 > 2 || step["POST /api/signin"] != s1 || step["GET /product"] != s1+1 || step["POST /api/cart"] != s1+1 ||
		step["GET /checkout"] != s1+2 || step["POST /api/gift"] != s1+2 || step["POST /api/checkout"] != s1+2 {
		t.Fatalf("steps: %v", step)
	}
	var consoleErr, netErr bool
	for _, e := range kinds(evs, event.KindConsole) {
		var c event.Console
		_ = json.Unmarshal(e.Data, &c)
		if c.Text == "checkout failed: GIFT_CARD_STATE" && c.Level == "error" && e.Step == s1+2 &&
			c.URL == base+"/static/app.min.js" && c.Line > 0 && len(c.Stack) > 0 {
			consoleErr = true
		}
		if c.Level == "error" && strings.Contains(c.Text, "500") && e.Step == s1+2 {
			netErr = true
		}
	}
	if !consoleErr || !netErr {
		t.Errorf("console: the page's error %v, the browser's 500 entry %v: %v", consoleErr, netErr, kinds(evs, event.KindConsole))
	}
	frames := kinds(evs, event.KindFrame)
	if len(frames) == 0 {
		t.Fatal("no screencast frame imported")
	}

	// Stored as imported.
	s := startServer(t)
	res, stored := s.imported(evs, "checkout-with-gift-card-fails")
	if len(stored) != len(evs) || len(kinds(stored, event.KindHAR)) != len(want) || len(kinds(stored, event.KindFrame)) != len(frames) {
		t.Fatalf("stored %d events (%d har, %d frames) of %d", len(stored), len(kinds(stored, event.KindHAR)),
			len(kinds(stored, event.KindFrame)), len(evs))
	}
	t.Logf("%d protocol events → %d events (%d har, %d console, %d frames) in %d steps, %s", len(log), len(evs),
		len(want), len(kinds(evs, event.KindConsole)), len(frames), res.Steps, time.Since(start).Round(time.Millisecond))
}
