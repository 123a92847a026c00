package app_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// TestSharedReindex: on an index two nodes share (one versitygw bucket,
// one ClickHouse), a rebuild never loses what another node indexed.
// Recording X is ingested and finished through node A (published); Y is
// open on node B with its first half indexed. flightrec reindex from a
// third data directory (node C's, empty: it holds neither) and then
// B's own rebuild (reindex --server B) leave X listed, searchable and
// indexed exactly as before, and Y's indexed events as they were (count,
// per step, cursor); once Y goes on and finishes, every event of it is
// indexed exactly once. (Before, both reset the shared index and
// projected the local recordings only: X vanished, and Y's first half was
// lost for good behind B's projector's cursor.) The row of Z, a finished
// recording removed everywhere, goes.
func TestSharedReindex(t *testing.T) {
	srv := testenv.S3(t)
	dsn := testenv.ClickHouse(t)
	keys := deployKeys(t)
	appA, baseA := node(t, srv, "deploy", dsn, keys)
	appB, baseB := node(t, srv, "deploy", dsn, keys)
	ctx := context.Background()

	xs := testgen.Recording(testgen.Options{Seed: 41, Steps: 4, EventsPerStep: 6, FrameBytes: 1500})
	x, _ := ingestFinished(t, baseA, xs, 50)
	waitIndexed(t, baseA, x, uint64(len(xs)))
	if err := appA.Proj.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	ys := testgen.Recording(testgen.Options{Seed: 42, Steps: 6, EventsPerStep: 6, FrameBytes: 1500})
	half := len(ys) / 2
	y := openRec(t, baseB)
	acked(t, appendBatch(t, baseB, y, ys[:half]))
	waitCursor(t, appB.Index, y, uint64(half))

	// Z: finished in the index, but removed everywhere (published
	// nowhere, held nowhere, in no data directory): its rows go.
	z := store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: store.NewRecordingID(time.Now()), Project: "shop"}, State: store.StateFinished}
	if err := appB.Index.PutRecording(ctx, z); err != nil {
		t.Fatal(err)
	}

	snapshot := func() string {
		found, err := appB.Index.Search(ctx, store.SearchQuery{Recordings: []string{x}, Limit: store.MaxSearchPage})
		if err != nil {
			t.Fatal(err)
		}
		listed, err := appB.Index.Recordings(ctx, store.RecordingFilter{})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, r := range listed {
			if r.ID != z.ID {
				ids = append(ids, r.ID)
			}
		}
		slices.Sort(ids)
		return snapshotIndex(t, appB.Index, x) + snapshotIndex(t, appB.Index, y) + mustJSON(found) + mustJSON(ids)
	}
	before := snapshot()
	if row, err := appB.Index.Recording(ctx, y); err != nil || row.Events != int64(half) || row.State != store.StateOpen {
		t.Fatalf("Y before the rebuilds: %+v %v", row, err)
	}

	// flightrec reindex --data C --blobs … --index …: a node whose data
	// directory holds none of them.
	cfg := sharedConfig(srv, "deploy", keys)
	cfg.Store.Index, cfg.Store.Data = dsn, t.TempDir()
	st, idx, err := cfg.Store.OpenForReindex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Reindex(ctx, idx, nil)
	idx.Close()
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if after := snapshot(); after != before {
		t.Fatalf("reindex from another node changed the shared index:\nbefore %s\nafter  %s", before, after)
	}
	if row, err := appB.Index.Recording(ctx, z.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the row of a recording removed everywhere after reindex: %+v %v", row, err)
	}

	// flightrec reindex --server B, while Y is open on B.
	var res app.RebuildResult
	r := do(t, "POST", baseB+wire.RouteIndexRebuild, nil)
	r.decode(t, &res)
	if r.status != http.StatusOK || res.Recordings < 2 {
		t.Fatalf("rebuild on B: %d %s", r.status, r.body)
	}
	if after := snapshot(); after != before {
		t.Fatalf("B's rebuild changed the shared index:\nbefore %s\nafter  %s", before, after)
	}

	// Y goes on and finishes on B: every event indexed exactly once.
	acked(t, appendBatch(t, baseB, y, ys[half:]))
	if r := do(t, "POST", baseB+"/v1/recordings/"+y+"/finish", []byte(`{"verdict":"pass"}`)); r.status != http.StatusOK {
		t.Fatalf("finish Y: %d %s", r.status, r.body)
	}
	row := waitIndexed(t, baseB, y, uint64(len(ys)))
	evs, err := appB.Index.Events(ctx, store.EventQuery{Recording: y, Limit: store.MaxEventsPage})
	if err != nil {
		t.Fatal(err)
	}
	perStep := map[int]int64{}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("Y's event %d has seq %d: events missing or indexed twice", i+1, e.Seq)
		}
		perStep[e.Step]++
	}
	if row.Events != int64(len(ys)) || len(evs) != len(ys) {
		t.Fatalf("Y: the index counts %d events and lists %d, want %d", row.Events, len(evs), len(ys))
	}
	tl, err := appB.Index.Timeline(ctx, y)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tl {
		if s.Events != perStep[s.Step] {
			t.Errorf("Y step %d: the timeline counts %d events, the index lists %d", s.Step, s.Events, perStep[s.Step])
		}
	}
}

// waitCursor waits until the index holds recording id through seq n.
func waitCursor(t *testing.T, idx store.Index, id string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // a guard, not a speed check
	for {
		row, err := idx.Recording(context.Background(), id)
		if err == nil && row.IndexedTo >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not indexed through %d: %+v %v", id, n, row, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
