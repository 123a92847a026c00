package recorder_test

import (
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

func getJSON(t testing.TB, url string, v any) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return b
}

// recordFlow records one shipped demo flow against the storefront.
func recordFlow(t testing.TB, base, shopURL, name string) recorder.Result {
	t.Helper()
	return testenv.Record(t, base, shopURL, testenv.DemoFlow(t, name))
}

// indexed waits until the recording is finished and indexed through n.
func indexed(t testing.TB, base, id string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rec store.RecordingRow
		getJSON(t, base+"/v1/recordings/"+id, &rec)
		if rec.State == store.StateFinished && rec.IndexedTo >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("recording %s not indexed: %+v", id, rec)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// allEvents reads every event of a recording through the paged API.
func allEvents(t testing.TB, base, id string) []event.Envelope {
	t.Helper()
	var out []event.Envelope
	for after := uint64(0); ; {
		var page wire.EventPage
		getJSON(t, fmt.Sprintf("%s/v1/recordings/%s/events?limit=1000&after_seq=%d", base, id, after), &page)
		out = append(out, page.Events...)
		if page.NextAfterSeq == 0 {
			return out
		}
		after = page.NextAfterSeq
	}
}

// writtenBytes is every byte the server wrote: its data directory while
// running and after it closed (which it does), its SQLite index and its log.
func writtenBytes(t testing.TB, srv *appserver.Server) testenv.Corpus {
	t.Helper()
	dir := srv.App.Store.Dir()
	c := testenv.Corpus{}
	c.AddFiles(t, dir, "running")
	srv.Close()
	c.AddFiles(t, dir, "closed")
	c.AddSQLite(t, filepath.Join(dir, "index.sqlite"))
	c["server log"] = srv.Log.Bytes()
	return c
}

func decode[T any](t testing.TB, e event.Envelope) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		t.Fatalf("event %d (%s): %v", e.Seq, e.Kind, err)
	}
	return v
}

// TestDemoFlowsOnRealChromium is the recorder's acceptance test: both
// shipped flows run in real Chromium against the storefront with its
// gift-card bug on, through the real server, and then every channel is
// checked as a reviewer would read it, the mask pixels of every masked
// frame are checked, and every byte the server wrote is searched for the
// card number and the password typed during the flows.
//
// The payment provider is another site (localhost against the shop's
// 127.0.0.1), so its card frame is out of process, as a real provider's
// is: the frame checks prove the recorder reaches it through the frame's
// own session.
func TestDemoFlowsOnRealChromium(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	shop, err := demoapp.Start(demoapp.Options{GiftCardBug: true, CrossSitePayment: true})
	if err != nil {
		t.Fatal(err)
	}
	defer shop.Close()

	pass := recordFlow(t, srv.Base, shop.URL(), "checkout-passes")
	fail := recordFlow(t, srv.Base, shop.URL(), "checkout-with-gift-card-fails")
	if pass.Verdict != "pass" || len(pass.Failed) != 0 {
		t.Errorf("checkout-passes: verdict %s, failed steps %+v", pass.Verdict, pass.Failed)
	}
	if fail.Verdict != "fail" {
		t.Errorf("checkout-with-gift-card-fails: verdict %s, want fail", fail.Verdict)
	}

	maskedFrames := 0
	for _, res := range []recorder.Result{pass, fail} {
		indexed(t, srv.Base, res.ID, res.Total)
		var tl wire.Timeline
		getJSON(t, srv.Base+"/v1/recordings/"+res.ID+"/steps", &tl)
		evs := allEvents(t, srv.Base, res.ID)
		if uint64(len(evs)) != res.Total {
			t.Fatalf("%s: the server serves %d events, the recorder sent %d", res.Flow, len(evs), res.Total)
		}
		checkChannels(t, res, tl, evs)
		maskedFrames += checkMasks(t, srv.Base, res, evs)
	}
	if maskedFrames == 0 {
		t.Fatal("no frame has a mask rectangle: the password and card fields were on screen, so masks must be there")
	}

	// Pay failed in the failing flow, with the 500 in that step.
	checkPayStep(t, srv.Base, fail, true)
	checkPayStep(t, srv.Base, pass, false)
	failEvs := allEvents(t, srv.Base, fail.ID)
	checkCardFrame(t, srv.Base, shop, true, fail, failEvs)
	checkSnapshotViews(t, shop.PaymentURL(), fail, failEvs)

	// No byte the server wrote holds the card number or the password.
	c := writtenBytes(t, srv)
	secrets := []string{demoapp.Card, strings.ReplaceAll(demoapp.Card, " ", ""), demoapp.Password}
	labels := []string{"card number", "card number (digits)", "password"}
	if hits := c.Hits(secrets, labels); len(hits) > 0 {
		t.Errorf("typed secrets reached the data directory (%d places):\n  %s", len(hits), strings.Join(hits, "\n  "))
	}
	// The control: the email, typed the same way and not a secret, is
	// there, so the search does look where the typing went.
	if len(c.Hits([]string{demoapp.Email}, []string{"email"})) == 0 {
		t.Error("the typed email is nowhere in the data directory: the search proves nothing")
	}
	t.Logf("searched %d bytes in %d places; %d masked frames", c.Size(), len(c), maskedFrames)
}

// anyRef is a ref of any page and frame: @e3, @f1e2, @p2e1, @p2f1e1.
var anyRef = regexp.MustCompile(`@(p\d+)?(f\d+)?e\d+\b`)

// checkChannels checks what every recording must hold: meta, a receipt and
// a frame for every step, snapshots before and after, rrweb's full
// snapshot, HAR entries with bodies.
func checkChannels(t *testing.T, res recorder.Result, tl wire.Timeline, evs []event.Envelope) {
	t.Helper()
	if res.Steps < 10 {
		t.Fatalf("%s: %d steps ran", res.Flow, res.Steps)
	}
	frames := map[int]int{}
	receipts := map[int]event.Receipt{}
	snaps := map[string]int{}
	rrwebTypes := map[int]int{}
	var meta *event.Meta
	for _, e := range evs {
		switch e.Kind {
		case event.KindFrame:
			frames[e.Step]++
		case event.KindReceipt:
			receipts[e.Step] = decode[event.Receipt](t, e)
		case event.KindSnapshot:
			s := decode[event.Snapshot](t, e)
			snaps[s.View+"/"+s.When]++
			if s.View == "interactive" && s.Text != "" && !anyRef.MatchString(s.Text) {
				t.Errorf("%s step %d: interactive snapshot without refs: %q", res.Flow, e.Step, s.Text)
			}
		case event.KindDOM:
			d := decode[event.DOM](t, e)
			rrwebTypes[*d.Type]++
		case event.KindMeta:
			m := decode[event.Meta](t, e)
			meta = &m
		}
	}
	for n := 1; n <= res.Steps; n++ {
		if frames[n] == 0 {
			t.Errorf("%s: step %d has no frame", res.Flow, n)
		}
		if _, ok := receipts[n]; !ok {
			t.Errorf("%s: step %d has no receipt", res.Flow, n)
		}
	}
	for _, k := range []string{"interactive/before", "interactive/after", "content/before", "content/after"} {
		if snaps[k] < res.Steps {
			t.Errorf("%s: %d %s snapshots for %d steps", res.Flow, snaps[k], k, res.Steps)
		}
	}
	// rrweb: meta (4) and full snapshot (2) per page load, incremental (3).
	if rrwebTypes[4] < 3 || rrwebTypes[2] < 3 || rrwebTypes[3] == 0 {
		t.Errorf("%s: rrweb event types %v: want meta and full snapshot for each of the 3 pages, and incrementals", res.Flow, rrwebTypes)
	}
	if meta == nil || !strings.Contains(meta.Versions["engine"], "Chrome") || meta.Viewport == nil || meta.Viewport.Width != 1280 ||
		meta.Versions["flow_revision"] != "r1" {
		t.Errorf("%s: meta %+v", res.Flow, meta)
	}
	if len(tl.Steps) < res.Steps {
		t.Errorf("%s: the timeline has %d steps, %d ran", res.Flow, len(tl.Steps), res.Steps)
	}
	// The receipts of the sign-in click name the ref the snapshot showed.
	for n, rc := range receipts {
		if rc.Action.Verb == "click" && rc.Resolved != nil && rc.Resolved.Ref == "" {
			t.Errorf("%s step %d: a click's resolved target has no ref", res.Flow, n)
		}
	}
}

// checkMasks fetches every frame and screenshot that has mask rectangles
// and checks every pixel inside each rectangle is the mask colour; it
// returns how many frames it checked.
func checkMasks(t *testing.T, base string, res recorder.Result, evs []event.Envelope) int {
	t.Helper()
	n := 0
	for _, e := range evs {
		if e.Kind != event.KindFrame && e.Kind != event.KindScreenshot {
			continue
		}
		f := decode[event.Frame](t, e)
		if len(f.Masks) == 0 {
			continue
		}
		resp, err := http.Get(base + "/v1/blobs/" + f.ImageCID)
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := image.Decode(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s frame %d: %v", res.Flow, e.Seq, err)
		}
		b := img.Bounds()
		sx, sy := float64(b.Dx())/float64(f.Width), float64(b.Dy())/float64(f.Height)
		bright := 0
		for _, m := range f.Masks {
			x0, y0 := max(int(float64(m.X)*sx)+1, 0), max(int(float64(m.Y)*sy)+1, 0)
			x1, y1 := min(int(float64(m.X+m.W)*sx)-1, b.Dx()), min(int(float64(m.Y+m.H)*sy)-1, b.Dy())
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
					if r>>8 > 12 || g>>8 > 12 || bl>>8 > 12 {
						bright++
					}
				}
			}
		}
		if bright > 0 {
			t.Errorf("%s %s %d (step %d): %d pixels inside mask rectangles %v are not the mask colour",
				res.Flow, e.Kind, e.Seq, e.Step, bright, f.Masks)
		}
		// The image is a real page, not a black frame.
		if r, g, bl, _ := img.At(b.Min.X+b.Dx()-3, b.Min.Y+b.Dy()/2).RGBA(); r>>8 < 100 && g>>8 < 100 && bl>>8 < 100 {
			t.Errorf("%s frame %d: the page's right edge is dark: the frame is not the page", res.Flow, e.Seq)
		}
		n++
	}
	return n
}

// checkPayStep finds the step that clicked Pay and checks its receipt and
// HAR entries: failed with the 500 GIFT_CARD_STATE when failing, done
// with a 200 otherwise.
func checkPayStep(t *testing.T, base string, res recorder.Result, failing bool) {
	t.Helper()
	var tl wire.Timeline
	getJSON(t, base+"/v1/recordings/"+res.ID+"/steps", &tl)
	pay := -1
	for _, s := range tl.Steps {
		if s.Action == "click" && strings.Contains(s.Target, "Pay") {
			pay = s.Step
		}
		if !failing && s.Outcome == event.OutcomeFailed {
			t.Errorf("%s: step %d failed (%s)", res.Flow, s.Step, s.ErrorCode)
		}
	}
	if pay < 0 {
		t.Fatalf("%s: no step clicked Pay: %+v", res.Flow, tl.Steps)
	}
	var view wire.StepView
	getJSON(t, fmt.Sprintf("%s/v1/recordings/%s/steps/%d", base, res.ID, pay), &view)
	var rc *event.Receipt
	checkout := 0
	for _, e := range view.Events {
		switch e.Kind {
		case event.KindReceipt:
			r := decode[event.Receipt](t, e)
			rc = &r
		case event.KindHAR:
			h := decode[event.HAR](t, e)
			if !strings.HasSuffix(h.Request.URL, "/api/checkout") {
				continue
			}
			checkout++
			if failing && (h.Response.Status != 500 || !strings.Contains(h.Response.Content.Text, "GIFT_CARD_STATE")) {
				t.Errorf("%s: checkout entry %d %q, want 500 GIFT_CARD_STATE", res.Flow, h.Response.Status, h.Response.Content.Text)
			}
			if !failing && h.Response.Status != 200 {
				t.Errorf("%s: checkout answered %d", res.Flow, h.Response.Status)
			}
		}
	}
	if checkout != 1 {
		t.Errorf("%s: %d POST /api/checkout entries in the Pay step (%d), want 1", res.Flow, checkout, pay)
	}
	switch {
	case rc == nil:
		t.Fatalf("%s: the Pay step has no receipt", res.Flow)
	case failing && (rc.Outcome != event.OutcomeFailed || rc.Error == nil || rc.Error.Code != recorder.CodeAppError ||
		!strings.Contains(rc.Error.Message, "500") || rc.Error.Next == ""):
		t.Errorf("%s: Pay receipt %+v %+v, want failed APP_ERROR naming the 500", res.Flow, rc.Outcome, rc.Error)
	case !failing && rc.Outcome != event.OutcomeDone:
		t.Errorf("%s: Pay receipt %s %+v", res.Flow, rc.Outcome, rc.Error)
	}
	if failing {
		// The console error the page logs is in that step, with its stack
		// mapped back to the storefront's source.
		mapped := false
		for _, e := range view.Events {
			if e.Kind == event.KindConsole {
				c := decode[event.Console](t, e)
				for _, f := range c.MappedStack {
					mapped = mapped || (strings.HasSuffix(f.URL, "/static/src/app.js") && f.Function == "checkoutFailed")
				}
			}
		}
		if !mapped {
			t.Errorf("%s: no console event in the Pay step has a source-mapped frame in src/app.js", res.Flow)
		}
	}
}
