package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// serveWith starts the app on a data directory with a user policy dir.
func serveWith(t *testing.T, data, policyDir string) (*app.App, string, func()) {
	t.Helper()
	var cfg app.Config
	cfg.Store.Data = data
	cfg.Policy = policyDir
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	return a, srv.URL, func() { srv.Close(); a.Close() }
}

func policyDir(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "user.rego"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func envs(data ...string) []event.Envelope {
	out := make([]event.Envelope, len(data))
	for i, d := range data {
		var probe struct {
			Kind event.Kind `json:"kind"`
		}
		json.Unmarshal([]byte(d), &probe)
		out[i] = event.Envelope{Seq: uint64(i + 1), TS: int64(1764483600000000000 + i), Step: 1, Kind: probe.Kind}
		var whole struct {
			Data json.RawMessage `json:"data"`
		}
		json.Unmarshal([]byte(d), &whole)
		out[i].Data = whole.Data
	}
	return out
}

// TestPolicyErrorRefusesTheRecording: a policy that fails at evaluation
// for one project refuses that project's recordings (fail closed) and no
// other's.
func TestPolicyErrorRefusesTheRecording(t *testing.T) {
	dir := policyDir(t, `package flightrec.redact
entropy_threshold := 1 / count([]) if input.recording.project == "broken"
`)
	_, base, stop := serveWith(t, t.TempDir(), dir)
	defer stop()
	r := do(t, "POST", base+"/v1/recordings", []byte(`{"project":"broken"}`))
	if r.status != 422 || r.errCode(t) != "POLICY_ERROR" {
		t.Fatalf("open under a failing policy: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", base+"/v1/recordings", []byte(`{"project":"fine"}`)); r.status != 201 {
		t.Fatalf("open of another project: %d %s", r.status, r.body)
	}
}

// TestPseudonymsCorrelate: with a pseudonymizing plan, the same secret gets
// the same pseudonym in different events and channels, another secret
// another one, and neither value is stored.
func TestPseudonymsCorrelate(t *testing.T) {
	dir := policyDir(t, `package flightrec.redact
pseudonymize := true
`)
	a, base, stop := serveWith(t, t.TempDir(), dir)
	defer stop()
	id := openRec(t, base)
	const tokA, tokB = "ghp_AAAAbbbbCCCCddddEEEEffffGGGGhhhh0123", "ghp_ZZZZyyyyXXXXwwwwVVVVuuuuTTTTssss9876"
	evs := envs(
		`{"kind":"console","data":{"level":"error","text":"token `+tokA+` rejected"}}`,
		`{"kind":"console","data":{"level":"log","text":"retry with `+tokA+`"}}`,
		`{"kind":"console","data":{"level":"log","text":"other `+tokB+`"}}`,
	)
	acked(t, appendBatch(t, base, id, evs))
	if err := a.Proj.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var page wire.EventPage
	do(t, "GET", base+"/v1/recordings/"+id+"/events", nil).decode(t, &page)
	pseudo := regexp.MustCompile(`\[redacted:[0-9a-f]{16}\]`)
	var got []string
	for _, e := range page.Events {
		if strings.Contains(string(e.Data), "ghp_") {
			t.Fatalf("a token survived: %s", e.Data)
		}
		got = append(got, pseudo.FindString(string(e.Data)))
	}
	if len(got) != 3 || got[0] == "" || got[0] != got[1] || got[2] == got[0] || got[2] == "" {
		t.Fatalf("pseudonyms %q: want the first two equal and the third different", got)
	}
}

// TestRedactionStateSurvivesRestart: a password input seen before a
// restart is still masked when a mutation sets its value after it.
func TestRedactionStateSurvivesRestart(t *testing.T) {
	data := t.TempDir()
	_, base, stop := serveWith(t, data, "")
	id := openRec(t, base)
	snapshot := `{"kind":"dom","data":{"type":2,"timestamp":1764483600000,"data":{"initialOffset":{"top":0,"left":0},"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":"html","attributes":{},"childNodes":[{"type":2,"id":3,"tagName":"body","attributes":{},"childNodes":[{"type":2,"id":4,"tagName":"input","attributes":{"type":"password","name":"pw"},"childNodes":[]},{"type":2,"id":5,"tagName":"input","attributes":{"type":"text","name":"q"},"childNodes":[]}]}]}]}}}}`
	acked(t, appendBatch(t, base, id, envs(snapshot)))
	stop() // the server goes away with the recording open

	a2, base, stop := serveWith(t, data, "")
	defer stop()
	const secret = "S3cr3t-after-restart-42"
	mut := envs(snapshot,
		`{"kind":"dom","data":{"type":3,"timestamp":1764483600001,"data":{"source":0,"adds":[],"removes":[],"texts":[],"attributes":[{"id":4,"attributes":{"value":"`+secret+`"}},{"id":5,"attributes":{"value":"visible-query"}}]}}}`,
		`{"kind":"dom","data":{"type":3,"timestamp":1764483600002,"data":{"source":5,"id":4,"text":"`+secret+`x","isChecked":false}}}`,
	)
	a := acked(t, appendBatch(t, base, id, mut))
	if a.Stored != 2 || a.Duplicates != 1 {
		t.Fatalf("after restart: %+v", a)
	}
	if err := a2.Proj.Flush(context.Background()); err != nil { // reads come from the index
		t.Fatal(err)
	}
	var page wire.EventPage
	r := do(t, "GET", base+"/v1/recordings/"+id+"/events", nil)
	r.decode(t, &page)
	if strings.Contains(string(r.body), "S3cr3t") {
		t.Fatalf("the password set after a restart was stored: %s", r.body)
	}
	if !strings.Contains(string(r.body), "visible-query") {
		t.Fatalf("an unmasked field was masked too: %s", r.body)
	}
}

// TestFramesArePaintedBeforeStorage: a JPEG frame with a mask rectangle is
// stored with the rectangle painted, and only that.
func TestFramesArePaintedBeforeStorage(t *testing.T) {
	a, base, stop := serveWith(t, t.TempDir(), "")
	defer stop()
	img := image.NewRGBA(image.Rect(0, 0, 320, 200))
	for y := 0; y < 200; y++ {
		for x := 0; x < 320; x++ {
			img.Set(x, y, color.RGBA{R: uint8(x), G: 200, B: uint8(y), A: 255}) // no black anywhere
		}
	}
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	mask := event.Rect{X: 64, Y: 48, W: 96, H: 64}
	frame, _ := json.Marshal(map[string]any{"mime": "image/jpeg", "image": jb.Bytes(), "width": 320, "height": 200,
		"masks": []event.Rect{mask}})
	id := openRec(t, base)
	acked(t, appendBatch(t, base, id, []event.Envelope{{Seq: 1, TS: 1764483600000000000, Step: 1, Kind: event.KindFrame, Data: frame}}))
	if err := a.Proj.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var page wire.EventPage
	do(t, "GET", base+"/v1/recordings/"+id+"/events", nil).decode(t, &page)
	var f event.Frame
	json.Unmarshal(page.Events[0].Data, &f)
	if f.ImageCID == "" || f.ImageCID == store.SumString(jb.Bytes()) {
		t.Fatalf("the stored frame is the unpainted original (%q)", f.ImageCID)
	}
	r := do(t, "GET", base+"/v1/blobs/"+f.ImageCID, nil)
	got, err := jpeg.Decode(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	near := func(c color.Color, want color.RGBA, tol int) bool {
		r, g, b, _ := c.RGBA()
		d := func(a uint32, b uint8) int { return int(a>>8) - int(b) }
		return abs(d(r, want.R)) <= tol && abs(d(g, want.G)) <= tol && abs(d(b, want.B)) <= tol
	}
	mc := redact.MaskColor
	for y := mask.Y; y < mask.Y+mask.H; y += 4 {
		for x := mask.X; x < mask.X+mask.W; x += 4 {
			if !near(got.At(x, y), mc, 8) {
				t.Fatalf("pixel (%d,%d) inside the mask is %v", x, y, got.At(x, y))
			}
		}
	}
	for _, p := range []image.Point{{10, 10}, {300, 180}, {200, 20}} {
		if !near(got.At(p.X, p.Y), img.RGBAAt(p.X, p.Y), 24) {
			t.Fatalf("pixel %v outside the mask changed: %v", p, got.At(p.X, p.Y))
		}
	}
	var rep store.RedactionReport
	do(t, "GET", base+"/v1/recordings/"+id+"/redaction", nil).decode(t, &rep)
	if len(rep.Rules) != 1 || rep.Rules[0].Rule != "frame:mask" || rep.Rules[0].Count != 1 {
		t.Fatalf("report: %+v", rep.Rules)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestRefusedBatchDoesNotAdvanceRedaction: a batch refused after it was
// redacted (here: over the recording size limit) leaves the redaction
// state as the log has it, so the retry redacts the same way.
func TestRefusedBatchDoesNotAdvanceRedaction(t *testing.T) {
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	cfg.Ingest.MaxRecordingBytes = 3000
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer func() { srv.Close(); a.Close() }()
	base := srv.URL
	id := openRec(t, base)
	snapshot := `{"kind":"dom","data":{"type":2,"timestamp":1764483600000,"data":{"initialOffset":{"top":0,"left":0},"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":"input","attributes":{"type":"password"},"childNodes":[]}]}}}}`
	big := `{"kind":"dom","data":{"type":2,"timestamp":1764483600001,"data":{"initialOffset":{"top":0,"left":0},"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":"input","attributes":{"type":"text","title":"` + strings.Repeat("x", 4000) + `"},"childNodes":[]}]}}}}`
	acked(t, appendBatch(t, base, id, envs(snapshot)))
	// Too large: refused after redaction saw a full snapshot where node 2
	// is a plain text input.
	evs := envs(snapshot, big)
	if r := appendBatch(t, base, id, evs[1:]); r.status != 413 {
		t.Fatalf("oversized batch: %d %s", r.status, r.body)
	}
	// The retry that fits: node 2 is still the password input the log has.
	mut := envs(snapshot, `{"kind":"dom","data":{"type":3,"timestamp":1764483600002,"data":{"source":5,"id":2,"text":"Hunter2-secret","isChecked":false}}}`)
	acked(t, appendBatch(t, base, id, mut[1:]))
	if err := a.Proj.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := do(t, "GET", base+"/v1/recordings/"+id+"/events", nil); strings.Contains(string(r.body), "Hunter2") {
		t.Fatalf("a refused batch changed redaction: %s", r.body)
	}
}
