package app_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
)

// flakyIndex fails every write while down is set: the fault of an index
// backend that is unreachable, which the embedded one cannot produce.
type flakyIndex struct {
	store.Index
	down   atomic.Bool
	failed atomic.Int64
}

var errDown = errors.New("index down")

func (f *flakyIndex) IndexEvents(ctx context.Context, id string, rows []store.EventRow, through uint64) error {
	if f.down.Load() {
		f.failed.Add(1)
		return errDown
	}
	return f.Index.IndexEvents(ctx, id, rows, through)
}

func (f *flakyIndex) PutRecording(ctx context.Context, r store.RecordingRow) error {
	if f.down.Load() {
		f.failed.Add(1)
		return errDown
	}
	return f.Index.PutRecording(ctx, r)
}

func (f *flakyIndex) Cursor(ctx context.Context, id string) (uint64, error) {
	if f.down.Load() {
		f.failed.Add(1)
		return 0, errDown
	}
	return f.Index.Cursor(ctx, id)
}

// TestIndexOutageNeverFailsAnAck: with the index down, opens, appends and
// finish are acknowledged; when it returns, the projection catches up and
// the reads equal what was sent.
func TestIndexOutageNeverFailsAnAck(t *testing.T) {
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	st, idx, err := cfg.Store.Open()
	if err != nil {
		t.Fatal(err)
	}
	flaky := &flakyIndex{Index: idx}
	flaky.down.Store(true)
	a, err := app.NewWith(cfg, slog.New(slog.DiscardHandler), st, flaky)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer func() { srv.Close(); a.Close() }()

	evs := testgen.Recording(testgen.Options{Seed: 11, Steps: 30, EventsPerStep: 8, FrameBytes: 2000})
	id := openRec(t, srv.URL)
	for from := 0; from < len(evs); from += 50 {
		acked(t, appendBatch(t, srv.URL, id, evs[from:min(from+50, len(evs))]))
	}
	if r := do(t, "POST", srv.URL+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 200 {
		t.Fatalf("finish with the index down: %d %s", r.status, r.body)
	}
	if flaky.failed.Load() == 0 {
		t.Fatal("the index was never tried while down")
	}
	if a.Proj.Lag() == 0 {
		t.Fatal("no lag reported while the index is down")
	}
	flaky.down.Store(false)
	waitIndexed(t, srv.URL, id, uint64(len(evs)))
	checkReads(t, srv.URL, id, evs)
}

// TestReindexRebuildsTheSameIndex: an index rebuilt from the logs and
// manifests answers exactly as the live one did, for a finished and an
// open recording.
func TestReindexRebuildsTheSameIndex(t *testing.T) {
	a, base := server(t, ingest.DefaultLimits)
	done := testgen.Recording(testgen.Options{Seed: 21, Steps: 25, EventsPerStep: 6, FrameBytes: 1000})
	open := testgen.Recording(testgen.Options{Seed: 22, Steps: 10, EventsPerStep: 4})
	id1, id2 := openRec(t, base), openRec(t, base)
	acked(t, appendBatch(t, base, id1, done))
	acked(t, appendBatch(t, base, id2, open))
	do(t, "POST", base+"/v1/recordings/"+id1+"/finish", []byte(`{"verdict":"fail"}`))
	waitIndexed(t, base, id1, uint64(len(done)))
	if err := a.Proj.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	before1, before2 := snapshotIndex(t, a.Index, id1), snapshotIndex(t, a.Index, id2)
	if err := a.Store.Reindex(context.Background(), a.Index, nil); err != nil {
		t.Fatal(err)
	}
	after1, after2 := snapshotIndex(t, a.Index, id1), snapshotIndex(t, a.Index, id2)
	if before1 != after1 || before2 != after2 {
		t.Fatalf("reindex changed the index:\n%s\n%s", before1, after1)
	}
	checkReads(t, base, id1, done)
	checkReads(t, base, id2, open)
}

// snapshotIndex renders what the index says of a recording.
func snapshotIndex(t *testing.T, idx store.Index, id string) string {
	t.Helper()
	ctx := context.Background()
	rec, err := idx.Recording(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := idx.Timeline(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := idx.Events(ctx, store.EventQuery{Recording: id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(rec) + mustJSON(tl) + mustJSON(evs)
}
