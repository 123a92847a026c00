package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
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
	rows := benchRows("r1", 1, 10)
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
			rows = append(rows, benchRow("big", seq, s))
		}
	}
	// A second recording, so a plan that ignored the recording would show.
	if err := db.IndexEvents(ctx, "other", benchRows("other", 1, 500), 500); err != nil {
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

// benchRow is an event with a summary of about 300 bytes, like a HAR entry
// or console message of a real recording.
func benchRow(rec string, seq uint64, step int) store.EventRow {
	kinds := []event.Kind{event.KindHAR, event.KindConsole, event.KindDOM, event.KindFrame, event.KindSnapshot}
	k := kinds[seq%uint64(len(kinds))]
	if seq%50 == 0 {
		k = event.KindReceipt
	}
	r := store.EventRow{
		Recording: rec, Seq: seq, Step: step, Kind: k,
		TS:   1764483600000000000 + int64(seq)*1_000_000,
		Size: 400,
		Loc:  store.Locator{Segment: 1 + int(seq/10000), Offset: int64(seq%10000) * 400, Length: 400},
		Summary: event.Summary{
			URL:    fmt.Sprintf("https://pv-4718.preview.example/api/orders/%d/items?page=%d&sort=created_at", seq, seq%7),
			Method: "GET", Status: 200, Level: "info",
			Text: fmt.Sprintf("Uncaught TypeError: Cannot read properties of undefined (reading 'total') at pay (https://pv-4718.preview.example/static/app.%d.js:10:4) while rendering the checkout summary for order %d", seq%13, seq),
		},
	}
	if k == event.KindFrame {
		r.CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	}
	if k == event.KindReceipt {
		r.Action, r.Outcome = "click", event.OutcomeDone
	}
	return r
}

func benchRows(rec string, from uint64, n int) []store.EventRow {
	rows := make([]store.EventRow, n)
	for i := range rows {
		seq := from + uint64(i)
		rows[i] = benchRow(rec, seq, int(seq/100))
	}
	return rows
}

// BenchmarkIndexEvents measures IndexEvents in 1,000-row batches, the unit
// the projector writes, on a growing recording in a file on disk.
func BenchmarkIndexEvents(b *testing.B) {
	db := openTemp(b)
	defer db.Close()
	ctx := b.Context()
	const batch = 1000
	rows := benchRows("bench", 1, batch)
	next := uint64(1)
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
	b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "rows/s")
}
