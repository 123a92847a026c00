package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

func openTemp(tb testing.TB) *DB {
	tb.Helper()
	db, err := Open(filepath.Join(tb.TempDir(), "index", "flightrec.sqlite"))
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

func TestConformance(t *testing.T) {
	indextest.Run(t, func(t *testing.T) store.Index { return openTemp(t) })
}

// TestReopen checks that the migration is idempotent and the data stays.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "i.sqlite")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := indextest.BenchRows("r1", 1, 10)
	if err := db.IndexEvents(t.Context(), "r1", rows, 10); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if c, err := db.Cursor(t.Context(), "r1"); err != nil || c != 10 {
		t.Fatalf("cursor after reopen = %d, %v; want 10", c, err)
	}
	var v int
	if err := db.r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, schemaVersion)
	}
}

// TestIndexEventsAtomic fails a batch after its events are inserted and
// checks that nothing of it remains: rows, steps, counters and cursor move
// together or not at all.
func TestIndexEventsAtomic(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	first := indextest.BenchRows("atomic", 1, 500) // steps 0..5
	if err := db.IndexEvents(ctx, "atomic", first, 500); err != nil {
		t.Fatal(err)
	}
	before, err := db.Recording(ctx, "atomic")
	if err != nil {
		t.Fatal(err)
	}
	tlBefore, err := db.Timeline(ctx, "atomic")
	if err != nil {
		t.Fatal(err)
	}

	// A TEMP trigger lives on the connection that creates it; the writer
	// pool has exactly one, which IndexEvents then uses.
	if _, err := db.w.ExecContext(ctx, `CREATE TEMP TRIGGER fail_step BEFORE INSERT ON steps
		WHEN NEW.step = 7 BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}
	second := indextest.BenchRows("atomic", 501, 300) // steps 5..8: step 5 is updated, 6 inserted, 7 fails
	if err := db.IndexEvents(ctx, "atomic", second, 800); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("IndexEvents error = %v, want the injected failure", err)
	}
	after, err := db.Recording(ctx, "atomic")
	if err != nil {
		t.Fatal(err)
	}
	if after.Events != before.Events || after.Bytes != before.Bytes || after.Steps != before.Steps || after.IndexedTo != before.IndexedTo {
		t.Errorf("failed batch changed counters or cursor: %+v, was %+v", after, before)
	}
	if rows, err := db.Events(ctx, store.EventQuery{Recording: "atomic", AfterSeq: 500}); err != nil || len(rows) != 0 {
		t.Errorf("failed batch left %d events (err %v)", len(rows), err)
	}
	tlAfter, err := db.Timeline(ctx, "atomic")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tlAfter, tlBefore) {
		t.Errorf("failed batch changed the timeline:\n got %+v\nwant %+v", tlAfter, tlBefore)
	}
	assertTextIndexInStep(t, db) // its text went in before the failure

	// Once the cause is gone the same batch goes in whole.
	if _, err := db.w.ExecContext(ctx, `DROP TRIGGER temp.fail_step`); err != nil {
		t.Fatal(err)
	}
	if err := db.IndexEvents(ctx, "atomic", second, 800); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Recording(ctx, "atomic"); err != nil || got.Events != 800 || got.IndexedTo != 800 || got.Steps != 9 {
		t.Errorf("after retry: %+v, %v; want 800 events, cursor 800, 9 steps", got, err)
	}
}

// TestRejectsBadBatches checks that a batch the schema cannot hold
// faithfully is refused whole.
func TestRejectsBadBatches(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	good := indextest.BenchRows("r", 1, 3)
	for name, mutate := range map[string]func([]store.EventRow){
		"other recording": func(rows []store.EventRow) { rows[1].Recording = "s" },
		"unknown kind":    func(rows []store.EventRow) { rows[2].Kind = "telepathy" },
		"seq zero":        func(rows []store.EventRow) { rows[0].Seq = 0 },
		"seq too large":   func(rows []store.EventRow) { rows[2].Seq = 1 << 63 },
	} {
		rows := slices.Clone(good)
		mutate(rows)
		if err := db.IndexEvents(ctx, "r", rows, 3); err == nil {
			t.Errorf("%s: IndexEvents accepted the batch", name)
		}
	}
	if err := db.IndexEvents(ctx, "r", good, 1<<63); err == nil {
		t.Error("IndexEvents accepted a cursor beyond int64")
	}
	if c, err := db.Cursor(ctx, "r"); c != 0 || err != nil {
		t.Errorf("Cursor after refused batches = %d, %v; want 0, nil", c, err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "a?b.sqlite")); err == nil {
		t.Error("Open accepted a path with '?'")
	}
}

// TestCheckpointer checks that the WAL reaches the database file while
// the index stays open: automatic checkpoints are off, so only the
// background checkpointer moves it.
func TestCheckpointer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.sqlite")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 10 {
		rows := indextest.BenchRows("ck", uint64(i*1000+1), 1000)
		if err := db.IndexEvents(t.Context(), "ck", rows, uint64(i*1000+1000)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 2<<20 { // 10,000 rows of ~400 bytes, plus indexes
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file is %d bytes after 10s; the WAL was not checkpointed", fi.Size())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStepQueriesUseIndex indexes a 2,000-step recording and checks with
// EXPLAIN QUERY PLAN that a step's events and the timeline are found by
// index search, never by scanning events.
func TestStepQueriesUseIndex(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	const steps, perStep = 2000, 6
	var rows []store.EventRow
	seq := uint64(0)
	for s := 1; s <= steps; s++ {
		for range perStep {
			seq++
			rows = append(rows, indextest.BenchRow("big", seq, s))
		}
	}
	// A second recording, so a plan that ignored the recording would show.
	if err := db.IndexEvents(ctx, "other", indextest.BenchRows("other", 1, 500), 500); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(rows); i += 1000 {
		batch := rows[i:min(i+1000, len(rows))]
		if err := db.IndexEvents(ctx, "big", batch, batch[len(batch)-1].Seq); err != nil {
			t.Fatal(err)
		}
	}

	for _, step := range []int{1, steps} {
		got, err := db.Events(ctx, store.EventQuery{Recording: "big", Step: &step})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != perStep {
			t.Fatalf("step %d: %d events, want %d", step, len(got), perStep)
		}
		for _, e := range got {
			if e.Step != step {
				t.Fatalf("step %d query returned an event of step %d", step, e.Step)
			}
		}
		q, args := eventsQuery(store.EventQuery{Recording: "big", Step: &step})
		plan := explain(t, db, q, args)
		assertNoScan(t, plan)
		if !strings.Contains(plan, "USING INDEX events_step") {
			t.Errorf("step %d query does not use events_step:\n%s", step, plan)
		}
		if strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("step %d query sorts instead of reading in index order:\n%s", step, plan)
		}
	}

	tl, err := db.Timeline(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(tl) != steps {
		t.Fatalf("timeline has %d steps, want %d", len(tl), steps)
	}
	plan := explain(t, db, timelineSQL, []any{"big"})
	assertNoScan(t, plan)
	if strings.Contains(plan, "events") {
		t.Errorf("timeline touches events:\n%s", plan)
	}
	if strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("timeline sorts instead of reading in key order:\n%s", plan)
	}
}

// TestHasBlobUsesIndex checks with EXPLAIN QUERY PLAN that HasBlob finds
// a recording's blob through the partial index events_cid, never by
// walking the recording's events, and that it answers right on a
// recording of many events of which few carry blobs.
func TestHasBlobUsesIndex(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	// BenchRows: one event in five is a frame, all with the same CID.
	big := indextest.BenchRows("big", 1, 5000)
	other := indextest.BenchRows("other", 1, 500)
	const mine = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	big[4000].CID = mine
	for i := 0; i < len(big); i += 1000 {
		if err := db.IndexEvents(ctx, "big", big[i:i+1000], big[i+999].Seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.IndexEvents(ctx, "other", other, 500); err != nil {
		t.Fatal(err)
	}
	shared := other[2].CID // seq 3, a frame
	if shared == "" || big[2].CID != shared {
		t.Fatalf("fixture: BenchRows' frames do not share a CID")
	}
	for _, c := range []struct {
		rec, cid string
		want     bool
	}{
		{"big", mine, true},
		{"big", shared, true},
		{"other", shared, true},
		{"other", mine, false},
		{"big", "", false},
		{"nope", mine, false},
	} {
		if got, err := db.HasBlob(ctx, c.rec, c.cid); err != nil || got != c.want {
			t.Errorf("HasBlob(%s, %q) = %v, %v; want %v", c.rec, c.cid, got, err, c.want)
		}
	}
	plan := explain(t, db, hasBlobSQL, []any{"big", mine})
	assertNoScan(t, plan)
	if !strings.Contains(plan, "INDEX events_cid") {
		t.Errorf("HasBlob does not use events_cid:\n%s", plan)
	}
}

// TestMigrateAddsBlobIndex opens a database of schema version 1 (version
// 2's tables without events_cid) holding events: Open must migrate it to
// the current version, building the index over the rows already there.
func TestMigrateAddsBlobIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.sqlite")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := indextest.BenchRows("old", 1, 100)
	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	rows[41].CID = cid
	if err := db.IndexEvents(t.Context(), "old", rows, 100); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE events_fts`, `DROP TABLE event_docs`,
		`DROP INDEX events_cid`, `PRAGMA user_version = 1`} {
		if _, err := db.w.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(path)
	if err != nil {
		t.Fatalf("open a version 1 database: %v", err)
	}
	defer db.Close()
	var v int
	if err := db.r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, schemaVersion)
	}
	var n int
	if err := db.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'events_cid'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("events_cid after migration: %d, %v", n, err)
	}
	if ok, err := db.HasBlob(t.Context(), "old", cid); err != nil || !ok {
		t.Errorf("HasBlob of a row indexed before the migration = %v, %v; want true", ok, err)
	}
	if c, err := db.Cursor(t.Context(), "old"); err != nil || c != 100 {
		t.Errorf("cursor after migration = %d, %v; want 100", c, err)
	}
}

func explain(t *testing.T, db *DB, q string, args []any) string {
	t.Helper()
	rows, err := db.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// assertNoScan fails on any full scan: every table must be reached by a
// SEARCH on a key or index.
func assertNoScan(t *testing.T, plan string) {
	t.Helper()
	for _, line := range strings.Split(plan, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "SCAN ") {
			t.Errorf("plan scans a table: %q\nplan:\n%s", line, plan)
		}
	}
}

// BenchmarkIndexEvents measures IndexEvents in 1,000-row batches, the unit
// the projector writes, on a growing recording in a file on disk.
func BenchmarkIndexEvents(b *testing.B) {
	db := openTemp(b)
	defer db.Close()
	ctx := b.Context()
	const batch = 1000
	rows := indextest.BenchRows("bench", 1, batch)
	next := uint64(1)
	cpu0 := cpuTime(b)
	for b.Loop() {
		for i := range rows {
			rows[i].Seq = next + uint64(i)
			rows[i].Step = int(rows[i].Seq / 100)
		}
		next += batch
		if err := db.IndexEvents(ctx, "bench", rows, next-1); err != nil {
			b.Fatal(err)
		}
	}
	rows64 := float64(next - 1)
	b.ReportMetric(rows64/b.Elapsed().Seconds(), "rows/s")
	// The machine may be shared; rows per CPU second of this process is
	// the figure that does not move with other load.
	b.ReportMetric(rows64/(cpuTime(b)-cpu0).Seconds(), "rows/cpu-s")
}

// cpuTime is the user plus system CPU time this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
