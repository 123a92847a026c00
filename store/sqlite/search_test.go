package sqlite

import (
	"database/sql"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

// createVersion2 writes an index at path the way a binary of schema
// version 2 did (migrations never change a released step, so migrations[:2]
// is that binary's DDL) and fills it with rows through its own insert
// statement: recordings mig-a (failure signature "TimeoutError: waiting for
// #pay") and mig-b, n events each.
func createVersion2(t *testing.T, path string, n int) map[string][]store.EventRow {
	t.Helper()
	ctx := t.Context()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, step := range migrations[:2] {
		for _, stmt := range step {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ensureKindColumns(ctx, tx); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]store.EventRow{}
	for _, r := range []struct{ id, project, sig string }{
		{"mig-a", "alpha", "TimeoutError: waiting for #pay"},
		{"mig-b", "beta", ""},
	} {
		res, err := tx.ExecContext(ctx, `INSERT INTO recordings (id, project, failure_signature, state, events)
			VALUES (?, ?, ?, ?, ?)`, r.id, r.project, r.sig, store.StateFinished, n)
		if err != nil {
			t.Fatal(err)
		}
		rid, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		rows[r.id] = indextest.BenchRows(r.id, 1, n)
		for i := range rows[r.id] {
			e := &rows[r.id][i]
			if i%7 == 0 {
				e.URL, e.Text = "", "" // no text: such an event gets no doc
			}
			if _, err := tx.ExecContext(ctx, insertEventsSQL(1), appendEventArgs(nil, rid, e)...); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows["mig-b"][n/2].Text = `a rare "zebra-7781" AND NEAR(it)`
	if _, err := tx.ExecContext(ctx, `UPDATE events SET text = ? WHERE rec = 2 AND seq = ?`,
		rows["mig-b"][n/2].Text, rows["mig-b"][n/2].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `PRAGMA user_version = 2`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// migrationQueries cover the index path (rare and common strings, folded
// case, operators as text, the failure signature, URL), the scan (a short
// string) and their mix.
var migrationQueries = []store.SearchQuery{
	{Text: "zebra-7781"},
	{Text: "ZEBRA"},
	{Text: `"zebra-7781" AND NEAR(`},
	{Text: "timeouterror", Limit: 1000},
	{Text: "timeouterror", EventsOnly: true},
	{Text: "typeerror", EventsOnly: true, Limit: 50},
	{URL: "/orders/77/"},
	{URL: "/orders/77/", Text: "cannot READ"},
	{Project: "beta", Text: "(reading 'total')", Limit: 10},
	{Text: "ze"},
	{Text: "zebra\x00-7781"},
	{Text: "zebra-\xff7781"},
	{Status: 500, Limit: 20},
	// Longer than ftsMaxTerms trigrams: a spread of them narrows.
	{Text: "Cannot read properties of undefined (reading 'total') at pay (https://pv-4718.preview.example/static/app.1", EventsOnly: true, Limit: 30},
	{Text: strings.Repeat("0123456789abcdefghij", 50)},
}

// TestMigrateAddsTextIndex opens an index written by a version 2 binary:
// Open creates the text index and fills it from the events there, once,
// and Search answers as the scan did before the migration.
func TestMigrateAddsTextIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.sqlite")
	const n = 400
	createVersion2(t, path, n)

	// Read-only, an old index is searched by scanning: what today's
	// binary answers, the reference for after the migration.
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	if ro.fts {
		t.Fatal("OpenReadOnly of a version 2 index assumes a text index")
	}
	before := make([][]store.EventRow, len(migrationQueries))
	for i, q := range migrationQueries {
		if before[i], err = ro.Search(t.Context(), q); err != nil {
			t.Fatalf("read-only Search(%+v) of a version 2 index: %v", q, err)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if len(before[0]) != 1 || len(before[3]) != n {
		t.Fatalf("fixture: zebra finds %d rows, the signature %d; want 1 and %d", len(before[0]), len(before[3]), n)
	}

	var docs int
	for round := range 2 { // the second open must find nothing to do
		db, err := Open(path)
		if err != nil {
			t.Fatalf("open a version 2 index: %v", err)
		}
		var v int
		if err := db.r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
			t.Fatalf("user_version = %d, %v; want %d", v, err, schemaVersion)
		}
		assertTextIndexInStep(t, db)
		var d int
		if err := db.r.QueryRow(`SELECT count(*) FROM event_docs`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		if want := 2 * (n - (n+6)/7); d != want {
			t.Errorf("open %d: %d docs, want %d (the events with text)", round+1, d, want)
		}
		if round == 1 && d != docs {
			t.Errorf("second open changed the docs: %d, was %d", d, docs)
		}
		docs = d
		if got := ftsCount(t, db, "zebra-7781"); got != 1 {
			t.Errorf("the text index finds zebra-7781 in %d docs, want 1", got)
		}
		for i, q := range migrationQueries {
			got, err := db.Search(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, before[i]) {
				t.Errorf("open %d: Search(%+v) = %d rows, before the migration %d:\n got %v\nwant %v",
					round+1, q, len(got), len(before[i]), got, before[i])
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// ftsCount is the number of docs the text index matches to s's trigrams.
func ftsCount(t *testing.T, db *DB, s string) int {
	t.Helper()
	m, ok := ftsTerms(s)
	if !ok {
		t.Fatalf("%q is too short for the text index", s)
	}
	var n int
	if err := db.r.QueryRow(`SELECT count(*) FROM events_fts WHERE events_fts MATCH ?`, m).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// assertTextIndexInStep checks that the text index describes the events
// table exactly: one doc per event with text and none else; for probe
// strings, no index match without a doc (a delete that left the index
// behind: Search itself would not show it, the join to events drops it),
// and every event that LIKE finds among the index's matches.
func assertTextIndexInStep(t *testing.T, db *DB) {
	t.Helper()
	var withText, docs, joined int
	for _, c := range []struct {
		q   string
		dst *int
	}{
		{`SELECT count(*) FROM events WHERE ` + hasText, &withText},
		{`SELECT count(*) FROM event_docs`, &docs},
		{`SELECT count(*) FROM event_docs d JOIN events e ON e.rec = d.rec AND e.seq = d.seq WHERE ` + hasText, &joined},
	} {
		if err := db.r.QueryRow(c.q).Scan(c.dst); err != nil {
			t.Fatal(err)
		}
	}
	if docs != withText || joined != withText {
		t.Errorf("%d events with text, %d docs, %d of them an event with text", withText, docs, joined)
	}
	const like = `(e.url LIKE ?2 ESCAPE '\' OR e.text LIKE ?2 ESCAPE '\' OR e.error_code LIKE ?2 ESCAPE '\')`
	for _, s := range []string{"cannot read", "orders/7", "TYPEERROR", "zebra-7781", "=created_at"} {
		m, _ := ftsTerms(s)
		var orphans, all, found int
		for _, c := range []struct {
			q   string
			dst *int
		}{
			{`SELECT count(*) FROM events_fts WHERE events_fts MATCH ?1
				AND rowid NOT IN (SELECT doc FROM event_docs)`, &orphans},
			{`SELECT count(*) FROM events e WHERE ` + like, &all},
			{`SELECT count(*) FROM events_fts JOIN event_docs d ON d.doc = events_fts.rowid
				JOIN events e ON e.rec = d.rec AND e.seq = d.seq WHERE events_fts MATCH ?1 AND ` + like, &found},
		} {
			if err := db.r.QueryRow(c.q, m, containsPattern(s)).Scan(c.dst); err != nil {
				t.Fatalf("%s: %v", c.q, err)
			}
		}
		if orphans != 0 || found != all {
			t.Errorf("%q: the text index matches %d docs of no event, and %d of the %d events LIKE finds", s, orphans, found, all)
		}
	}
}

// TestTextIndexInStep drives every write path (batches that overlap and
// replay, events without text, delete, a recording taking a deleted one's
// rid, reset and indexing again) and checks the text index after each.
func TestTextIndexInStep(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	index := func(id string, from, to uint64) {
		t.Helper()
		rows := indextest.BenchRows(id, from, int(to-from+1))
		for i := range rows {
			if rows[i].Kind == event.KindDOM {
				rows[i].URL, rows[i].Text = "", ""
			}
		}
		if err := db.IndexEvents(ctx, id, rows, to); err != nil {
			t.Fatal(err)
		}
	}
	index("a", 1, 300)
	index("a", 200, 600) // overlaps: 200..300 are indexed already
	index("a", 1, 600)   // a replay
	index("a", 601, 1000)
	index("b", 1, 500)
	assertTextIndexInStep(t, db)
	if got := ftsCount(t, db, "orders/78/"); got != 2 {
		t.Fatalf("orders/78/ in %d docs, want 2 (seq 78 of a and b)", got)
	}

	for _, id := range []string{"a", "b"} {
		if err := db.DeleteRecording(ctx, id); err != nil {
			t.Fatal(err)
		}
		assertTextIndexInStep(t, db)
	}
	// b had the highest rid, which c now takes: no doc of b may speak for
	// c's events.
	index("c", 1, 100)
	assertTextIndexInStep(t, db)
	if got, err := db.Search(ctx, store.SearchQuery{URL: "/orders/78/"}); err != nil || len(got) != 1 || got[0].Recording != "c" {
		t.Errorf("Search after delete = %v, %v; want seq 78 of c", got, err)
	}

	if err := db.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	assertTextIndexInStep(t, db)
	if got := ftsCount(t, db, "cannot read"); got != 0 {
		t.Errorf("after Reset the text index matches %d docs", got)
	}
	index("a", 1, 200)
	assertTextIndexInStep(t, db)
}

// TestSearchCommonText searches for strings too common for the index path
// (more than ftsMaxCandidates candidates, by text or by failure
// signature): the scan answers, and the answer is the scan's, also where
// the index path is taken for the same recording.
func TestSearchCommonText(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	const n = ftsMaxCandidates + 500
	if err := db.PutRecording(ctx, store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: "many",
		FailureSignature: "Uncaught ReferenceError: pay is not defined"}, State: store.StateFinished}); err != nil {
		t.Fatal(err)
	}
	rows := indextest.BenchRows("many", 1, n)
	for i := 0; i < n; i += 5000 {
		batch := rows[i:min(i+5000, n)]
		if err := db.IndexEvents(ctx, "many", batch, batch[len(batch)-1].Seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []store.SearchQuery{
		{Text: "cannot read", Limit: 1000},                   // every event
		{Text: "referenceerror", Limit: 1000},                // every event, by the signature
		{Text: "(reading 'total') at pay", EventsOnly: true}, // every event
		{Text: "for order 10042", Limit: 1000},               // a few: the index path
	} {
		got, err := db.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := db.scanSearch(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("Search(%+v) = %d rows, the scan %d", q, len(got), len(want))
		}
	}
}

// TestSearchPlanUsesTextIndex checks with EXPLAIN QUERY PLAN that the index
// path reads events by key from the index's hits, never scanning them;
// only the failure signature arm reads recordings in full.
func TestSearchPlanUsesTextIndex(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	if err := db.IndexEvents(t.Context(), "r", indextest.BenchRows("r", 1, 500), 500); err != nil {
		t.Fatal(err)
	}
	for _, q := range []store.SearchQuery{
		{Text: "order 42"},
		{Text: "order 42", EventsOnly: true, Project: "p"},
		{URL: "/orders/42/", Text: "x"},
	} {
		p, ok := planFTS(q)
		if !ok {
			t.Fatalf("planFTS(%+v): no plan", q)
		}
		s, args := ftsSearchQuery(q, p)
		plan := explain(t, db, s, args)
		if !strings.Contains(plan, "events_fts VIRTUAL TABLE INDEX") {
			t.Errorf("%+v: the plan does not use the text index:\n%s", q, plan)
		}
		for _, line := range strings.Split(plan, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "SCAN" && (f[1] == "e" || f[1] == "events") {
				t.Errorf("%+v: the plan scans a table: %q\n%s", q, line, plan)
			}
		}
		if got, err := db.Search(t.Context(), q); err != nil {
			t.Fatal(err)
		} else if want, _ := db.scanSearch(t.Context(), q); !reflect.DeepEqual(got, want) {
			t.Errorf("Search(%+v) = %v, the scan %v", q, got, want)
		}
	}
}

// TestSearchChoosesPath checks which path answers: the index when its
// candidates are few, the scan for a short string, and the scan when the
// query narrows to fewer events (by recording or project) than the string
// has candidates in the whole store; the rows are the scan's either way.
func TestSearchChoosesPath(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	for _, r := range []struct {
		id, project string
		n           int
	}{{"big", "p1", 3000}, {"small", "p2", 50}} {
		if err := db.PutRecording(ctx, store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: r.id, Project: r.project},
			State: store.StateFinished}); err != nil {
			t.Fatal(err)
		}
		if err := db.IndexEvents(ctx, r.id, indextest.BenchRows(r.id, 1, r.n), uint64(r.n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		q       store.SearchQuery
		wantFTS bool
	}{
		{store.SearchQuery{Text: "cannot read", Limit: 1000}, true},                    // 3,050 candidates
		{store.SearchQuery{Text: "for order 42", Recordings: []string{"small"}}, true}, // a few
		{store.SearchQuery{Text: "cannot read", Recordings: []string{"small"}}, false}, // 3,050 > 50 events
		{store.SearchQuery{Text: "cannot read", Project: "p2"}, false},                 // the same by project
		{store.SearchQuery{Text: "cannot read", Project: "p1"}, false},                 // 3,050 > 3,000 events
		{store.SearchQuery{Text: "ca"}, false},
		{store.SearchQuery{Status: 500}, false},
	} {
		_, ok, err := db.useFTS(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.wantFTS {
			t.Errorf("Search(%+v) through the index: %v, want %v", c.q, ok, c.wantFTS)
		}
		got, err := db.Search(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := db.scanSearch(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("Search(%+v) = %d rows, the scan %d", c.q, len(got), len(want))
		}
	}
}
