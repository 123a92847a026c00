package retention_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

type harness struct {
	t    testing.TB
	app  *app.App
	base string
	mu   sync.Mutex
	now  time.Time
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(func() { hs.Close(); a.Close() })
	h := &harness{t: t, app: a, base: hs.URL, now: time.Now()}
	a.Sweeper.Now = func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }
	return h
}

func (h *harness) setDay(start time.Time, d int) {
	h.mu.Lock()
	h.now = start.Add(time.Duration(d)*retention.Day + time.Hour)
	h.mu.Unlock()
}

func (h *harness) do(method, path string, body []byte) (int, []byte) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.base+path, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// jpegOf is a small solid JPEG of colour c.
func jpegOf(c color.RGBA) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 16; x++ {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	_ = jpeg.Encode(&buf, img, nil)
	return buf.Bytes()
}

// record stores a finished recording with the given verdict and frames
// and returns its id and the CIDs of its frames.
func (h *harness) record(verdict string, frames ...[]byte) (string, []string) {
	h.t.Helper()
	c := client.New(h.base)
	ctx := context.Background()
	rep, err := c.Open(ctx, wire.OpenRequest{Project: "shop", Flow: "checkout"})
	if err != nil {
		h.t.Fatal(err)
	}
	evs := testgen.Recording(testgen.Options{Steps: 2, EventsPerStep: 3, Seed: uint64(len(verdict))})
	for _, f := range frames {
		data, _ := json.Marshal(event.Frame{Mime: "image/jpeg", Image: f, Width: 16, Height: 16})
		evs = append(evs, event.Envelope{Seq: uint64(len(evs) + 1), TS: evs[len(evs)-1].TS + 1, Step: 2, Kind: event.KindFrame, Data: data})
	}
	if _, err := c.Append(ctx, rep.ID, testgen.NDJSON(evs)); err != nil {
		h.t.Fatal(err)
	}
	if _, err := c.Finish(ctx, rep.ID, verdict); err != nil {
		h.t.Fatal(err)
	}
	if err := h.app.Proj.Flush(ctx); err != nil {
		h.t.Fatal(err)
	}
	var cids []string
	for _, f := range frames {
		cids = append(cids, store.SumString(f))
	}
	return rep.ID, cids
}

// diskBytes is what retention removes or rewrites: the recordings' files
// and the blob store (packs counted to their logical end), not the index,
// the audit log or the tokens.
func (h *harness) diskBytes() int64 {
	var n int64
	_ = filepath.WalkDir(filepath.Join(h.app.Store.Dir(), "recordings"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	b, err := h.app.Store.Blobs.StoredBytes()
	if err != nil {
		h.t.Fatal(err)
	}
	return n + b
}

func (h *harness) blobExists(c string) bool {
	id, err := store.ParseCID(c)
	if err != nil {
		h.t.Fatal(err)
	}
	_, err = h.app.Store.Blobs.Stat(id)
	return err == nil
}

// TestHundredDays simulates 100 days of sweeps: passing runs go on day 14,
// failing ones on day 90, pinned ones when their last pin ends; a blob a
// kept recording shares with a deleted one stays; every sweep's freed
// bytes in the audit log match what left the disk; and in the end nothing
// in the data directory or the index refers to a deleted recording.
func TestHundredDays(t *testing.T) {
	h := newHarness(t)
	start := h.now
	shared := jpegOf(color.RGBA{200, 20, 20, 255})
	pass1, p1 := h.record("pass", shared, jpegOf(color.RGBA{20, 200, 20, 255}))
	fail1, _ := h.record("fail", shared, jpegOf(color.RGBA{20, 20, 200, 255}))
	pass2, _ := h.record("pass", jpegOf(color.RGBA{120, 120, 20, 255}))
	pass3, _ := h.record("pass", jpegOf(color.RGBA{20, 120, 120, 255}))
	fail2, _ := h.record("fail")
	until30 := start.Add(30 * retention.Day).Format(time.RFC3339)
	if s, b := h.do("POST", "/v1/recordings/"+pass2+"/pins", []byte(`{"reason":"evidence","ref":"acme/shop#4711","until":"`+until30+`"}`)); s != 201 {
		t.Fatalf("pin: %d %s", s, b)
	}
	s, b := h.do("POST", "/v1/recordings/"+pass3+"/pins", []byte(`{"reason":"legal_hold","ref":"case 7"}`))
	if s != 201 {
		t.Fatalf("pin: %d %s", s, b)
	}
	var hold retention.Pin
	_ = json.Unmarshal(b, &hold)
	until120 := start.Add(120 * retention.Day).Format(time.RFC3339)
	if s, b := h.do("POST", "/v1/recordings/"+fail2+"/pins", []byte(`{"reason":"evidence","until":"`+until120+`"}`)); s != 201 {
		t.Fatalf("pin: %d %s", s, b)
	}
	// The class and expiry are in the recording's metadata.
	var meta struct {
		Retention retention.Status `json:"retention"`
	}
	_, b = h.do("GET", "/v1/recordings/"+fail1, nil)
	if err := json.Unmarshal(b, &meta); err != nil || meta.Retention.Class != "failing" || meta.Retention.Days != 90 || meta.Retention.ExpiresAt == 0 {
		t.Fatalf("metadata retention: %s", b)
	}

	want := map[string]int{pass1: 14, pass2: 30, pass3: 50, fail1: 90}
	gone := map[string]int{}
	dir := h.app.Store.Dir()
	for d := 0; d <= 100; d++ {
		h.setDay(start, d)
		if d == 50 {
			if s, b := h.do("DELETE", "/v1/recordings/"+pass3+"/pins/"+hold.ID, nil); s != 200 {
				t.Fatalf("unpin: %d %s", s, b)
			}
		}
		before := h.diskBytes()
		rep, err := h.app.Sweeper.Sweep(context.Background(), false, nil)
		if err != nil {
			t.Fatalf("day %d: %v", d, err)
		}
		after := h.diskBytes()
		if len(rep.Errors) > 0 {
			t.Fatalf("day %d: %v", d, rep.Errors)
		}
		if got := before - after; got != rep.Freed() {
			t.Errorf("day %d: %d bytes left the disk, the sweep says %d", d, got, rep.Freed())
		}
		for _, st := range rep.Deleted {
			gone[st.ID] = d
		}
		if d >= 14 && h.blobExists(p1[1]) {
			t.Errorf("day %d: pass1's own frame outlived it", d)
		}
		if d < 90 && !h.blobExists(p1[0]) {
			t.Errorf("day %d: the frame fail1 shares with pass1 is gone while fail1 is kept", d)
		}
	}
	for id, day := range want {
		if gone[id] != day {
			t.Errorf("%s went on day %d, want %d", id, gone[id], day)
		}
	}
	if _, ok := gone[fail2]; ok {
		t.Errorf("fail2, pinned until day 120, went on day %d", gone[fail2])
	}
	if h.blobExists(p1[0]) {
		t.Error("the shared frame outlived both recordings")
	}

	// The audit log: one delete per recording, freed bytes adding up,
	// pins and unpins, a plan per recording, and the chain intact.
	entries, err := h.app.Audit.Entries(0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range entries {
		kinds[e.Kind]++
	}
	if kinds["delete"] != 4 || kinds["pin"] != 3 || kinds["unpin"] != 1 || kinds["plan"] != 5 || kinds["sweep"] != 101 {
		t.Errorf("audit kinds %v", kinds)
	}
	f, err := os.Open(filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	vr, err := audit.Verify(f)
	f.Close()
	if err != nil || !vr.OK {
		t.Errorf("audit chain: %+v %v", vr, err)
	}

	// Nothing but the audit log names a deleted recording.
	ctx := context.Background()
	for id := range want {
		if _, err := h.app.Index.Recording(ctx, id); err == nil {
			t.Errorf("the index still has %s", id)
		}
	}
	h.app.Close()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || filepath.Base(p) == audit.FileName {
			return nil
		}
		b, _ := os.ReadFile(p)
		for id := range want {
			if bytes.Contains(b, []byte(id)) {
				rel, _ := filepath.Rel(dir, p)
				t.Errorf("%s names deleted recording %s", rel, id)
			}
		}
		return nil
	})
}

// TestSweepRacesIngest: sweeps run while 8 clients ingest recordings whose
// frames repeat blobs of recordings being deleted; no blob a finished
// recording references is ever lost, and the store verifies after.
func TestSweepRacesIngest(t *testing.T) {
	h := newHarness(t)
	start := h.now
	frames := make([][]byte, 6)
	for i := range frames {
		frames[i] = jpegOf(color.RGBA{uint8(40 * i), 90, 160, 255})
	}
	// Old passing recordings that will expire, holding every frame.
	for i := 0; i < 4; i++ {
		h.record("pass", frames...)
	}
	h.setDay(start, 20)
	var wg sync.WaitGroup
	finished := make(chan []string, 64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				_, cids := h.record("fail", frames[(w+i)%len(frames)], frames[(w+i+1)%len(frames)])
				finished <- cids
			}
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(finished); close(done) }()
	sweeps := 0
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
		}
		if _, err := h.app.Sweeper.Sweep(context.Background(), false, nil); err != nil {
			t.Fatal(err)
		}
		sweeps++
	}
	if _, err := h.app.Sweeper.Sweep(context.Background(), false, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for cids := range finished {
		for _, c := range cids {
			n++
			if !h.blobExists(c) {
				t.Errorf("a blob a finished recording references is gone")
			}
		}
	}
	if n != 48 {
		t.Fatalf("%d frames checked, want 48", n)
	}
	rep, err := h.app.Store.Verify(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("verify after the sweeps: %+v", rep)
	}
	t.Logf("%d sweeps raced 24 ingests", sweeps)
}

// TestDryRunAsOf: a dry run at a future date lists what would go then and
// removes nothing.
func TestDryRunAsOf(t *testing.T) {
	h := newHarness(t)
	id, _ := h.record("pass")
	at := h.now.Add(15 * retention.Day).UTC().Format(time.RFC3339)
	s, b := h.do("POST", "/v1/retention/sweep?dry_run=true&now="+at, nil)
	if s != 200 || !strings.Contains(string(b), id) {
		t.Fatalf("dry run as of day 15: %d %s", s, b)
	}
	if s, b := h.do("GET", "/v1/recordings/"+id, nil); s != 200 {
		t.Fatalf("a dry run removed the recording: %d %s", s, b)
	}
	if s, _ := h.do("POST", "/v1/retention/sweep?now="+at, nil); s != 400 {
		t.Errorf("now without dry_run: %d, want 400", s)
	}
}

// purgeCounter is the harness's real index, counting the sweep's purges.
type purgeCounter struct {
	store.Index
	purges atomic.Int32 // the sweep runs in the server's goroutine
}

func (p *purgeCounter) PurgeDeleted(ctx context.Context) error {
	p.purges.Add(1)
	return p.Index.(store.Purger).PurgeDeleted(ctx)
}

// TestSweepPurgesIndex: a sweep that deletes recordings asks the index to
// purge what the deletes left (once, after them all: the purge rewrites
// the whole text index); a sweep that deletes nothing does not.
func TestSweepPurgesIndex(t *testing.T) {
	h := newHarness(t)
	if _, ok := h.app.Sweeper.Index.(store.Purger); !ok {
		t.Fatal("the embedded index is no store.Purger")
	}
	pc := &purgeCounter{Index: h.app.Sweeper.Index}
	h.app.Sweeper.Index = pc
	start := h.now
	a, _ := h.record("pass")
	b, _ := h.record("pass")
	h.record("fail")
	h.setDay(start, 1)
	if s, b := h.do("POST", "/v1/retention/sweep", nil); s != 200 || pc.purges.Load() != 0 {
		t.Fatalf("a sweep deleting nothing: %d %s, %d purges", s, b, pc.purges.Load())
	}
	h.setDay(start, 15)
	if s, body := h.do("POST", "/v1/retention/sweep", nil); s != 200 || pc.purges.Load() != 1 {
		t.Fatalf("a sweep deleting two passing runs: %d %s, %d purges, want 1", s, body, pc.purges.Load())
	}
	for _, id := range []string{a, b} {
		if s, _ := h.do("GET", "/v1/recordings/"+id, nil); s != 404 {
			t.Errorf("passing run %s after the day-15 sweep: %d, want 404", id, s)
		}
	}
}
