package diffrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/jpeg"
	"io"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/sqlite"
)

// recWriter appends events to a recording's log as ingest stores them.
type recWriter struct {
	t    *testing.T
	st   *store.Store
	log  *store.Log
	id   string
	seq  uint64
	ts   int64
	base string
}

func (w *recWriter) emit(step int, kind event.Kind, payload any) {
	w.t.Helper()
	data, err := json.Marshal(payload)
	if err != nil {
		w.t.Fatal(err)
	}
	w.seq++
	w.ts += 1e7
	rec := store.Record{Seq: w.seq, TS: w.ts, Step: step, Kind: kind, Data: data}
	if kind == event.KindFrame || kind == event.KindScreenshot {
		// Stored frames carry their blob's CID instead of the bytes.
		img := image.NewRGBA(image.Rect(0, 0, 64, 40))
		for i := range img.Pix {
			img.Pix[i] = byte(w.seq * 37)
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, nil); err != nil {
			w.t.Fatal(err)
		}
		c, _, err := w.st.Blobs.Put(b.Bytes())
		if err != nil {
			w.t.Fatal(err)
		}
		rec.CID, rec.BlobSize = c.String(), int64(b.Len())
		rec.Data, _ = json.Marshal(map[string]any{"mime": "image/jpeg", "image_cid": rec.CID, "width": 64, "height": 40})
	} else {
		d, err := event.Decode(event.Envelope{Seq: rec.Seq, TS: rec.TS, Step: step, Kind: kind, Data: data}, event.DefaultLimits)
		if err != nil {
			w.t.Fatalf("event %d: %v", w.seq, err)
		}
		rec.Summary = event.Summarize(d)
	}
	if _, err := w.log.Append([]store.Record{rec}); err != nil {
		w.t.Fatal(err)
	}
}

func harOf(method, url string, status int, typ, body string) map[string]any {
	return map[string]any{
		"startedDateTime": "2026-01-01T00:00:00Z", "time": 12.5,
		"request": map[string]any{"method": method, "url": url, "httpVersion": "HTTP/1.1",
			"cookies": []any{}, "headers": []any{}, "queryString": []any{}, "headersSize": -1, "bodySize": 0},
		"response": map[string]any{"status": status, "statusText": "", "httpVersion": "HTTP/1.1",
			"cookies": []any{}, "headers": []any{}, "redirectURL": "", "headersSize": -1, "bodySize": len(body),
			"content": map[string]any{"size": len(body), "mimeType": "application/json", "text": body}},
		"_resourceType": typ,
	}
}

func receiptOf(step int, verb string, target *event.Target, args string, outcome string, e *event.StepError, eff *event.Effects) event.Receipt {
	r := event.Receipt{Step: step, Action: event.Action{Verb: verb, Target: target}, Outcome: outcome, Error: e,
		Effects: eff, StartedAt: 1_767_225_600e9 + int64(step)*1e9, EndedAt: 1_767_225_600e9 + int64(step)*1e9 + 3e8}
	if args != "" {
		r.Action.Args = json.RawMessage(args)
	}
	return r
}

// writeDemo writes the gift-card checkout's last steps as the recorder
// would: step 0's page load, a fill, the failing Pay, a wait and a failed
// expectation (its receipt not yet sent: the recording is open).
func writeDemo(t *testing.T, w *recWriter) {
	b := w.base
	w.emit(0, event.KindMeta, event.Meta{Versions: map[string]string{"engine": "chromium"}, Labels: map[string]string{"flow": "checkout"}})
	w.emit(0, event.KindHAR, harOf("GET", b+"/checkout", 200, "Document", ""))
	w.emit(0, event.KindSnapshot, event.Snapshot{View: "interactive", When: "after", Origin: b, Nonce: "1a2b3c4d",
		Text: "main\n textbox \"Email\" @e1\n button \"Pay\" @e2"})
	w.emit(0, event.KindConsole, event.Console{Level: "error", Text: "before any step"})

	// Step 1: fill the email.
	w.emit(1, event.KindSnapshot, event.Snapshot{View: "interactive", When: "before", Origin: b, Text: "main\n textbox \"Email\" @e1\n button \"Pay\" @e2"})
	w.emit(1, event.KindFrame, nil)
	w.emit(1, event.KindSnapshot, event.Snapshot{View: "interactive", When: "after", Origin: b,
		Text: "main\n textbox \"Email\" value=\"[redacted:0011223344556677]\" @e1\n button \"Pay\" @e2"})
	w.emit(1, event.KindSnapshot, event.Snapshot{View: "content", When: "after", Origin: b, Text: "Checkout\nEmail"})
	w.emit(1, event.KindReceipt, receiptOf(1, "fill", &event.Target{Role: "textbox", Name: "Email"}, `{"value":"[redacted]"}`, "done", nil, nil))

	// Step 2: Pay answers 500 GIFT_CARD_STATE.
	w.emit(2, event.KindSnapshot, event.Snapshot{View: "interactive", When: "before", Origin: b, Text: "main\n button \"Pay\" @e2"})
	w.emit(2, event.KindHAR, harOf("POST", b+"/api/checkout", 500, "Fetch", `{"error":"GIFT_CARD_STATE"}`))
	w.emit(2, event.KindHAR, harOf("GET", b+"/static/logo.png?v=7", 200, "Image", ""))
	w.emit(2, event.KindConsole, event.Console{Level: "error", Text: "checkout failed: GIFT_CARD_STATE"})
	w.emit(2, event.KindConsole, event.Console{Level: "log", Text: "not compared"})
	w.emit(2, event.KindConsole, event.Console{Level: "warning", Text: "slow network"})
	w.emit(2, event.KindFrame, nil)
	w.emit(2, event.KindSnapshot, event.Snapshot{View: "interactive", When: "after", Origin: b,
		Text: "main\n button \"Pay\" @e2\n alert \"Payment failed: GIFT_CARD_STATE\""})
	w.emit(2, event.KindReceipt, receiptOf(2, "click", &event.Target{Role: "button", Name: "Pay"}, "", "failed",
		&event.StepError{Code: "APP_ERROR", Message: "POST " + b + "/api/checkout answered 500"},
		&event.Effects{Requests: []event.RequestEffect{{Method: "POST", URL: b + "/api/checkout", Status: 500}}, ConsoleErrors: 1}))
	w.emit(2, event.KindScreenshot, map[string]any{"reason": "failure"})

	// Step 3: a wait, by a CSS target resolved to a role and name, that
	// navigates.
	w.emit(3, event.KindReceipt, receiptOf(3, "click", &event.Target{Selector: "#continue-48213"}, "", "done", nil,
		&event.Effects{Navigation: &event.Navigation{From: b + "/checkout", To: b + "/orders/48213?t=1767225600"}}))
	// Step 4: an expectation; its receipt has not come yet.
	w.emit(4, event.KindCheck, event.Check{Type: "ui", Target: "page text", Expect: json.RawMessage(`{"text":"is confirmed"}`), Passed: false})
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenStore(filepath.Join(dir, "data"), store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	idx, err := sqlite.Open(filepath.Join(dir, "index.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()

	id := store.NewRecordingID(time.Now())
	meta := store.RecordingMeta{ID: id, Project: "shop", Flow: "checkout-with-gift-card-fails", CreatedAt: time.Now().UnixNano()}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	if r, err := Load(ctx, st, idx, id); err != nil || r.State != "open" || len(r.Steps) != 0 || r.Flow != meta.Flow {
		t.Fatalf("a recording the index has not seen yet: %+v %v", r, err)
	}
	lg, err := st.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	w := &recWriter{t: t, st: st, log: lg, id: id, ts: 1_767_225_600e9, base: "http://127.0.0.1:41234"}
	writeDemo(t, w)
	indexed := w.seq
	if err := st.Reindex(ctx, idx, nil); err != nil {
		t.Fatal(err)
	}
	// Acknowledged but not indexed yet: Load stops at the cursor.
	w.emit(4, event.KindReceipt, receiptOf(4, "expect", nil, `{"expect":{"text":"is confirmed"}}`, "failed",
		&event.StepError{Code: "EXPECT_FAILED", Message: `text "is confirmed" is not on the page`}, nil))

	run, err := Load(ctx, st, idx, id)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != "open" || run.Acked != indexed || run.Flow != meta.Flow || run.Project != "shop" || run.Origin != "http://127.0.0.1:{port}" {
		t.Fatalf("run = %+v", run)
	}
	if len(run.Steps) != 3 {
		t.Fatalf("%d steps (the open step 4 has no receipt yet and is left out): %+v", len(run.Steps), run.Steps)
	}
	s1, s2, s3 := run.Steps[0], run.Steps[1], run.Steps[2]
	if s1.N != 1 || s1.Verb != "fill" || s1.Target != `textbox "Email"` || s1.Path != "/checkout" || s1.Outcome != "done" ||
		s1.Interactive != "main\n textbox \"Email\" value=\"[redacted:0011223344556677]\" @e1\n button \"Pay\" @e2" ||
		s1.FrameCID == "" || len(s1.Console) != 0 || s1.StartTS != 1_767_225_601e9 || s1.EndTS != 1_767_225_601e9+3e8 {
		t.Errorf("step 1 = %+v", s1)
	}
	wantReq := []Request{
		{Method: "POST", URL: w.base + "/api/checkout", Template: "http://127.0.0.1:{port}/api/checkout", Status: 500, ErrorCode: "GIFT_CARD_STATE", Type: "Fetch"},
		{Method: "GET", URL: w.base + "/static/logo.png?v=7", Template: "http://127.0.0.1:{port}/static/logo.png", Status: 200, Type: "Image"},
	}
	if !reflect.DeepEqual(s2.Requests, wantReq) {
		t.Errorf("step 2 requests = %+v", s2.Requests)
	}
	wantConsole := []ConsoleLine{
		{Level: "error", Text: "checkout failed: GIFT_CARD_STATE", Normalized: "checkout failed: GIFT_CARD_STATE"},
		{Level: "warn", Text: "slow network", Normalized: "slow network"},
	}
	if !reflect.DeepEqual(s2.Console, wantConsole) {
		t.Errorf("step 2 console = %+v", s2.Console)
	}
	if s2.Outcome != "failed" || s2.ErrorCode != "APP_ERROR" || s2.Target != `button "Pay"` || s2.Path != "/checkout" ||
		s2.Interactive != "main\n button \"Pay\" @e2\n alert \"Payment failed: GIFT_CARD_STATE\"" {
		t.Errorf("step 2 = %+v", s2)
	}
	// The failure screenshot comes after the frame: it is the last image.
	rows, err := idx.Events(ctx, store.EventQuery{Recording: id, Kind: event.KindScreenshot})
	if err != nil || len(rows) != 1 || s2.FrameCID != rows[0].CID {
		t.Errorf("step 2 frame %s, screenshot rows %+v %v", s2.FrameCID, rows, err)
	}
	if s3.Target != `css "#continue-{n}"` || s3.Path != "/checkout" || s3.Navigation != "/orders/{id}" {
		t.Errorf("step 3 = %+v", s3)
	}
	if sig := Signature(run); sig != "POST /api/checkout 500 GIFT_CARD_STATE" {
		t.Errorf("signature %q", sig)
	}

	// Finished and fully indexed: step 4 has its receipt and its check.
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	meta.Verdict, meta.FinishedAt = "fail", time.Now().UnixNano()
	if _, err := st.Seal(meta); err != nil {
		t.Fatal(err)
	}
	// Finished, the index still behind: compared as open.
	if err := idx.PutRecording(ctx, store.RecordingRow{RecordingMeta: meta, State: store.StateFinished}); err != nil {
		t.Fatal(err)
	}
	if run, err = Load(ctx, st, idx, id); err != nil || run.State != "open" || run.Verdict != "fail" || run.Acked != indexed {
		t.Fatalf("finished, index behind: %+v %v", run, err)
	}
	if err := st.Reindex(ctx, idx, nil); err != nil {
		t.Fatal(err)
	}
	run, err = Load(ctx, st, idx, id)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != "finished" || run.Verdict != "fail" || run.Acked != w.seq || len(run.Steps) != 4 {
		t.Fatalf("finished run = %+v", run)
	}
	s4 := run.Steps[3]
	if s4.Verb != "expect" || s4.Target != `text "is confirmed"` || s4.Path != "/orders/{id}" || s4.ErrorCode != "EXPECT_FAILED" ||
		!reflect.DeepEqual(s4.Checks, []Check{{Type: "ui", Target: "page text"}}) {
		t.Errorf("step 4 = %+v", s4)
	}

	// The pixel channel reads frames from the blob store.
	frame := func(c string) ([]byte, error) {
		cc, err := store.ParseCID(c)
		if err != nil {
			return nil, err
		}
		r, err := st.Blobs.Open(cc)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	rep := Diff(run, run, Options{Frame: frame})
	if rep.FirstDivergence != nil || len(materialPairs(rep)) != 0 || len(rep.Notes) != 0 {
		t.Fatalf("a run against itself: %+v\n%s", rep.FirstDivergence, rep.Table())
	}
	other := *run
	other.Steps = append([]Step(nil), run.Steps...)
	other.Steps[0].FrameCID = run.Steps[1].FrameCID
	rep = Diff(run, &other, Options{Frame: frame})
	if d := rep.Pairs[0].Differences; len(d) != 1 || d[0].Channel != ChannelPixels {
		t.Fatalf("pixels: %+v %q", d, rep.Notes)
	}

	if _, err := Load(ctx, st, idx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := Load(ctx, st, idx, store.NewRecordingID(time.Now())); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}
