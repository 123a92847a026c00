package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/wire"
)

// TestExportValidate is the acceptance test of the exports on a real
// recording: the demo's failing checkout (gift-card bug on), recorded in
// Debian's Chromium into a server of the test. Its HAR export validates
// against the HAR 1.2 JSON schema (npm har-validator) and carries the
// failing payment; its rrweb export replays without an error or warning in
// rrweb's own Replayer (npm rrweb, the release of the vendored recorder)
// in Chromium, and ends at what the page showed at the end of the run.
func TestExportValidate(t *testing.T) {
	testenv.RequireChromium(t)
	_, base := server(t, ingest.DefaultLimits)
	shop, served := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	res := testenv.Record(t, base, shop, testenv.DemoFlow(t, "checkout-with-gift-card-fails"))
	waitIndexed(t, base, res.ID, res.Total)
	rec := base + "/v1/recordings/" + res.ID

	t.Run("har", func(t *testing.T) {
		r := do(t, "GET", rec+"/har", nil)
		if r.status != 200 {
			t.Fatalf("har: %d %s", r.status, r.body)
		}
		if err := testenv.ValidateHAR(t, r.body); err != nil {
			t.Fatalf("the HAR export of a real recording: %v", err)
		}
		var doc struct {
			Log struct {
				Entries []map[string]any `json:"entries"`
			} `json:"log"`
		}
		r.decode(t, &doc)
		// The storefront's own log says the payment failed; the export must
		// carry that entry, or a clean validation proves little.
		checkout := shop + "/api/checkout"
		failedOnShop := false
		for _, s := range served() {
			failedOnShop = failedOnShop || (s.Method == "POST" && s.URL == checkout && s.Status == 500)
		}
		if !failedOnShop {
			t.Fatalf("the storefront answered no POST %s with 500: the run did not hit the bug", checkout)
		}
		at := -1
		for i, e := range doc.Log.Entries {
			req, _ := e["request"].(map[string]any)
			resp, _ := e["response"].(map[string]any)
			if req["method"] == "POST" && req["url"] == checkout && resp["status"] == float64(500) {
				at = i
			}
		}
		if at < 0 {
			t.Fatalf("no POST %s 500 entry among the export's %d entries", checkout, len(doc.Log.Entries))
		}
		// The cart badge's WebSocket is exported with its messages (the
		// count the server pushed when the kettle went into the cart), and
		// the document above validated with them.
		pushed := false
		for _, e := range doc.Log.Entries {
			msgs, _ := e["_webSocketMessages"].([]any)
			for _, m := range msgs {
				mm, _ := m.(map[string]any)
				pushed = pushed || mm["type"] == "receive" && mm["data"] == `{"count":1,"type":"cart"}` && mm["opcode"] == float64(1)
			}
		}
		if !pushed {
			t.Error("no exported WebSocket entry has the cart count the server pushed")
		}
		// The validator is live: the same document with that entry's
		// response status removed is refused, at that place.
		delete(doc.Log.Entries[at]["response"].(map[string]any), "status")
		broken, err := json.Marshal(map[string]any{"log": mergeLog(t, r.body, doc.Log.Entries)})
		if err != nil {
			t.Fatal(err)
		}
		err = testenv.ValidateHAR(t, broken)
		var inv *testenv.HARInvalid
		if !errors.As(err, &inv) {
			t.Fatalf("a HAR entry without response.status validated: %v", err)
		}
		want := fmt.Sprintf(".log.entries[%d].response", at)
		found := false
		for _, e := range inv.Errors {
			found = found || (e.Path == want && e.Keyword == "required" && strings.Contains(e.Message, "status"))
		}
		if !found {
			t.Errorf("the broken document's errors do not name %s's missing status: %v", want, err)
		}
	})

	t.Run("rrweb", func(t *testing.T) {
		r := do(t, "GET", rec+"/rrweb", nil)
		if r.status != 200 {
			t.Fatalf("rrweb: %d %s", r.status, r.body)
		}
		var events []json.RawMessage
		r.decode(t, &events)
		ctx := testenv.Chromium(t)
		start := time.Now()
		rep, err := testenv.ReplayRRWeb(t, ctx, r.body)
		if err != nil {
			t.Fatalf("replaying the rrweb export: %v\nerrors: %q\nwarnings: %q", err, rep.Errors, rep.Warnings)
		}
		t.Logf("%s replayed %d events (%d documents, %v of recording) at %.1fx in %v",
			rep.Version, rep.Events, rep.Metas, rep.TotalTime.Round(time.Millisecond), rep.Speed, time.Since(start).Round(time.Millisecond))
		for _, d := range rep.Debug {
			t.Logf("replayer debug: %.300s", d)
		}
		for _, l := range rep.BrowserLog {
			t.Logf("browser log: %.300s", l)
		}
		if rep.Events != len(events) {
			t.Errorf("the replayer got %d events, the export has %d", rep.Events, len(events))
		}
		// Sign-in, product and checkout: three documents, each a Meta and a
		// FullSnapshot.
		if rep.Metas < 3 || rep.FullSnapshots < 3 {
			t.Errorf("%d Meta and %d FullSnapshot events: want one of each per document (3)", rep.Metas, rep.FullSnapshots)
		}
		if !strings.HasSuffix(rep.LastHref, "/checkout") {
			t.Errorf("the last document is %q, want the checkout page", rep.LastHref)
		}
		for _, e := range rep.Errors {
			t.Errorf("replay error: %s", e)
		}
		for _, w := range rep.Warnings {
			t.Errorf("replay warning: %.600s", w)
		}
		if !rep.Play.HasBody || !rep.Seek.HasBody {
			t.Fatalf("the replayed document has no body (play %v, seek %v)", rep.Play.HasBody, rep.Seek.HasBody)
		}

		got := squash(rep.Text)
		// What the checkout page showed after the failed payment (the
		// storefront's app.js writes it into #pay-error, which is hidden
		// until then, so innerText has it only if the replay unhid it).
		for _, want := range []string{"Checkout", "Gift card applied:", "Payment failed: GIFT_CARD_STATE", "Pay"} {
			if !strings.Contains(got, want) {
				t.Errorf("the replay ends without %q:\n%s", want, rep.Text)
			}
		}
		// And nothing of the pages before it: the sign-in form's password
		// field, the product page's quantity and add button.
		for _, gone := range []string{"Password", "Quantity", "Add to cart"} {
			if strings.Contains(got, gone) {
				t.Errorf("the replay ends with %q of an earlier page:\n%s", gone, rep.Text)
			}
		}
		// Jumping to the end gives the same page as playing to it.
		if seek := squash(rep.Seek.Text); seek != got {
			t.Errorf("replayed to the end by seeking:\n%s\nby playing:\n%s", seek, got)
		}
		// The recording's own view of the end: the recorder's last content
		// snapshot is the live page's body.innerText after the last step.
		if want := lastContentSnapshot(t, rec); want == "" {
			t.Error("the recording has no content snapshot after a step")
		} else if squash(want) != got {
			t.Errorf("the replay ends at\n%s\nthe recorder's last content snapshot is\n%s", got, squash(want))
		}
		// And the server's own materialized DOM ends at the same text.
		if want := finalDOMText(t, rec); noSpace(want) != noSpace(got) {
			t.Errorf("the replay ends at\n%s\nthe server's DOM after the last step is\n%s", got, squash(want))
		}

		// The checks above can fail: the same events without the mutation
		// that showed the payment error, and with one on a node that never
		// existed, end without the error and with the replayer's warning.
		t.Run("control", func(t *testing.T) {
			var kept []json.RawMessage
			dropped := 0
			var last int64
			for _, e := range events {
				var h struct {
					Type      int   `json:"type"`
					Timestamp int64 `json:"timestamp"`
					Data      struct {
						Source *int `json:"source"`
					} `json:"data"`
				}
				if err := json.Unmarshal(e, &h); err != nil {
					t.Fatalf("an rrweb event: %v: %.200s", err, e)
				}
				last = max(last, h.Timestamp)
				if h.Type == 3 && h.Data.Source != nil && *h.Data.Source == 0 && strings.Contains(string(e), "Payment failed") {
					dropped++
					continue
				}
				kept = append(kept, e)
			}
			if dropped == 0 {
				t.Fatal("no mutation event of the export shows the payment error")
			}
			kept = append(kept, json.RawMessage(fmt.Sprintf(
				`{"type":3,"data":{"source":0,"texts":[{"id":987654321,"value":"x"}],"attributes":[],"removes":[],"adds":[]},"timestamp":%d}`, last+1)))
			body, err := json.Marshal(kept)
			if err != nil {
				t.Fatal(err)
			}
			bad, err := testenv.ReplayRRWeb(t, ctx, body)
			if err != nil {
				t.Fatalf("replaying the altered events: %v", err)
			}
			if strings.Contains(bad.Text, "Payment failed") {
				t.Errorf("the replay shows the payment error without the mutation that showed it:\n%s", bad.Text)
			}
			warned := 0
			for _, w := range bad.Warnings {
				if strings.Contains(w, "Node with id '987654321' not found") {
					warned++
				}
			}
			if warned != 2 { // once in each mode
				t.Errorf("the mutation of a missing node gave %d warnings, want one per mode (2): %q", warned, bad.Warnings)
			}
		})
	})
}

// TestExportValidateSyntheticHAR: the HAR export of a recording of
// TestExports' shape (hand-made entries, two steps, a failing checkout)
// validates against the HAR 1.2 JSON schema too. No browser needed.
func TestExportValidateSyntheticHAR(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	id := openRec(t, base)
	now := time.Now().UnixNano()
	entry := func(step int, method, url string, status int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"startedDateTime":"2026-11-30T10:00:0%d.000Z","time":12.5,`+
			`"request":{"method":%q,"url":%q,"httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0},`+
			`"response":{"status":%d,"statusText":"","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{"size":2,"mimeType":"application/json","text":"{}"},"redirectURL":"","headersSize":-1,"bodySize":2},`+
			`"cache":{},"timings":{"send":1,"wait":10,"receive":1.5}}`, step, method, url, status))
	}
	evs := []event.Envelope{
		{Seq: 1, TS: now, Step: 1, Kind: event.KindHAR, Data: entry(1, "GET", "http://shop.test/", 200)},
		{Seq: 2, TS: now + 1, Step: 1, Kind: event.KindHAR, Data: entry(1, "GET", "http://shop.test/app.js", 200)},
		{Seq: 3, TS: now + 2, Step: 2, Kind: event.KindHAR, Data: entry(2, "POST", "http://shop.test/api/checkout", 500)},
	}
	if a := acked(t, appendBatch(t, base, id, evs)); a.AckedThrough != 3 {
		t.Fatalf("append: %+v", a)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, id, 3)
	r := do(t, "GET", base+"/v1/recordings/"+id+"/har", nil)
	if r.status != 200 {
		t.Fatalf("har: %d %s", r.status, r.body)
	}
	if err := testenv.ValidateHAR(t, r.body); err != nil {
		t.Errorf("the HAR export: %v\n%s", err, r.body)
	}
}

// mergeLog is the log object of the HAR document doc with its entries
// replaced by entries.
func mergeLog(t *testing.T, doc []byte, entries []map[string]any) map[string]any {
	t.Helper()
	var d struct {
		Log map[string]any `json:"log"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	d.Log["entries"] = entries
	return d.Log
}

// squash collapses every run of whitespace into one space: innerText's line
// breaks and blank lines depend on layout, not on what the page says.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// lastContentSnapshot is the text of the recording's last content snapshot
// taken after a step: the recorder's body.innerText of the live page.
func lastContentSnapshot(t *testing.T, rec string) string {
	t.Helper()
	text := ""
	for after := uint64(0); ; {
		var page wire.EventPage
		r := do(t, "GET", fmt.Sprintf("%s/events?kind=snapshot&limit=1000&after_seq=%d", rec, after), nil)
		if r.status != 200 {
			t.Fatalf("snapshot events: %d %s", r.status, r.body)
		}
		r.decode(t, &page)
		for _, e := range page.Events {
			var s event.Snapshot
			if err := json.Unmarshal(e.Data, &s); err != nil {
				t.Fatalf("snapshot event %d: %v", e.Seq, err)
			}
			if s.View == "content" && s.When == "after" {
				text = s.Text
			}
		}
		if page.NextAfterSeq == 0 {
			return text
		}
		after = page.NextAfterSeq
	}
}

// finalDOMText is the text of the server's materialized DOM after the
// recording's last step (GET …/steps/{last}/dom?at=after): the text nodes
// of <body>, leaving out what a browser would not show — elements with
// the hidden attribute, styles, templates. It cannot know CSS, so a test
// compares it to innerText with whitespace removed (noSpace).
func finalDOMText(t *testing.T, rec string) string {
	t.Helper()
	var tl wire.Timeline
	do(t, "GET", rec+"/steps", nil).decode(t, &tl)
	if len(tl.Steps) == 0 {
		t.Fatal("no steps")
	}
	r := do(t, "GET", fmt.Sprintf("%s/steps/%d/dom?at=after", rec, tl.Steps[len(tl.Steps)-1].Step), nil)
	if r.status != 200 {
		t.Fatalf("the DOM after the last step: %d %s", r.status, r.body)
	}
	doc, err := html.Parse(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	body := findElement(doc, func(n *html.Node) bool { return n.Data == "body" })
	if body == nil {
		t.Fatalf("no body in %s", r.body)
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			b.WriteString(n.Data)
			b.WriteByte(' ')
			return
		case n.Type == html.ElementNode && (n.Data == "style" || n.Data == "template" || hasAttr(n, "hidden")):
			return
		case n.Type == html.ElementNode && hasAttr(n, "data-flightrec-frame"):
			// A frame's document, shown in place: the replay's innerText,
			// like any page's, does not reach into frames.
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(body)
	return b.String()
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// noSpace drops every white space: innerText and a DOM's text nodes
// break lines in different places.
func noSpace(s string) string { return strings.Join(strings.Fields(s), "") }
