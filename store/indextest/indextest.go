// Package indextest is the conformance suite of store.Index. Every backend's
// tests call Run, so the embedded and the fleet index answer alike.
//
// The suite speaks only store.Index. Its expectations come from a reference
// model (model.go) applied to the rows each test generates, never from
// constants copied from an implementation, so every assertion fails when a
// backend answers differently.
package indextest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// Run runs the suite. open must return an empty index each time it is
// called (a fresh database, or a reset one); Run closes it when the subtest
// that opened it ends.
func Run(t *testing.T, open func(t *testing.T) store.Index) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Index)
	}{
		{"RecordingRoundTrip", testRecordingRoundTrip},
		{"UnknownRecording", testUnknownRecording},
		{"PutKeepsCounters", testPutKeepsCounters},
		{"EventsBeforePut", testEventsBeforePut},
		{"RecordingsFilter", testRecordingsFilter},
		{"RecordingsPages", testRecordingsPages},
		{"RecordingsDefaultLimit", testRecordingsDefaultLimit},
		{"Events", testEvents},
		{"EventsLimits", testEventsLimits},
		{"Replay", testReplay},
		{"Cursor", testCursor},
		{"Timeline", testTimeline},
		{"Search", testSearch},
		{"SearchLiteral", testSearchLiteral},
		{"Expired", testExpired},
		{"HasBlob", testHasBlob},
		{"Delete", testDelete},
		{"Reset", testReset},
		{"ConcurrentReads", testConcurrentReads},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := open(t)
			t.Cleanup(func() {
				if err := idx.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, idx)
		})
	}
}

// must fails the test now on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, idx store.Index, recs ...store.RecordingRow) {
	t.Helper()
	for _, r := range recs {
		must(t, idx.PutRecording(t.Context(), r))
	}
}

// index sends rows in batches of the given sizes (the last one repeating),
// each batch's through being its last seq.
func index(t *testing.T, idx store.Index, rec string, rows []store.EventRow, sizes ...int) {
	t.Helper()
	for i, k := 0, 0; i < len(rows); k++ {
		n := sizes[min(k, len(sizes)-1)]
		b := rows[i:min(i+n, len(rows))]
		must(t, idx.IndexEvents(t.Context(), rec, b, b[len(b)-1].Seq))
		i += len(b)
	}
}

func events(t *testing.T, idx store.Index, q store.EventQuery) []store.EventRow {
	t.Helper()
	rows, err := idx.Events(t.Context(), q)
	must(t, err)
	return rows
}

func recording(t *testing.T, idx store.Index, id string) store.RecordingRow {
	t.Helper()
	r, err := idx.Recording(t.Context(), id)
	must(t, err)
	return r
}

func timeline(t *testing.T, idx store.Index, id string) []store.StepRow {
	t.Helper()
	steps, err := idx.Timeline(t.Context(), id)
	must(t, err)
	return steps
}

func search(t *testing.T, idx store.Index, q store.SearchQuery) []store.EventRow {
	t.Helper()
	rows, err := idx.Search(t.Context(), q)
	must(t, err)
	return rows
}

func cursor(t *testing.T, idx store.Index, id string) uint64 {
	t.Helper()
	c, err := idx.Cursor(t.Context(), id)
	must(t, err)
	return c
}

func hasBlob(t *testing.T, idx store.Index, rec, cid string) bool {
	t.Helper()
	ok, err := idx.HasBlob(t.Context(), rec, cid)
	must(t, err)
	return ok
}

// checkBlobs asks HasBlob about up to 16 of the blobs rows carry (spread
// over the recording), a blob none of them carries and the empty CID, and
// compares with the model.
func checkBlobs(t *testing.T, idx store.Index, rec string, rows []store.EventRow) {
	t.Helper()
	var cids []string
	for _, r := range rows {
		if r.CID != "" {
			cids = append(cids, r.CID)
		}
	}
	if n := len(cids); n > 16 {
		picked := make([]string, 0, 16)
		for i := range 16 {
			picked = append(picked, cids[i*(n-1)/15])
		}
		cids = picked
	}
	cids = append(cids, absentCID, "")
	for _, c := range cids {
		if got, want := hasBlob(t, idx, rec, c), wantHasBlob(rows, rec, c); got != want {
			t.Errorf("HasBlob(%s, %q) = %v, want %v", rec, c, got, want)
		}
	}
}

// absentCID is a well-formed CID no generated row carries (genEvents'
// CIDs end in hexadecimal digits, never in 'z').
const absentCID = "bafkreizzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"

// checkProjection compares everything the index says about one recording
// with the model of the rows it should hold.
func checkProjection(t *testing.T, idx store.Index, rec string, rows []store.EventRow, through uint64) {
	t.Helper()
	got := recording(t, idx, rec)
	if c, w := countersOf(got), wantCounters(rows); c != w {
		t.Errorf("%s counters = %+v, want %+v", rec, c, w)
	}
	if got.IndexedTo != through {
		t.Errorf("%s indexed_through = %d, want %d", rec, got.IndexedTo, through)
	}
	if c := cursor(t, idx, rec); c != through {
		t.Errorf("Cursor(%s) = %d, want %d", rec, c, through)
	}
	sameSteps(t, rec+" timeline", timeline(t, idx, rec), wantTimeline(rows))
	q := store.EventQuery{Recording: rec, Limit: eventsMax}
	sameEvents(t, rec+" events", events(t, idx, q), wantEvents(rows, q))
	checkBlobs(t, idx, rec, rows)
}

func testRecordingRoundTrip(t *testing.T, idx store.Index) {
	open := store.RecordingRow{RecordingMeta: store.RecordingMeta{
		ID: "rt-1", Project: "shop", Flow: "checkout",
		Labels:     map[string]string{"branch": "main", "ci": "github"},
		Executor:   "agent-7",
		Versions:   map[string]string{"engine": "chromium 156", "app": "sha256:ab12"},
		PlanDigest: "sha256:plan", CreatedAt: baseTS + 42,
	}, State: store.StateOpen}
	other := store.RecordingRow{RecordingMeta: store.RecordingMeta{
		ID: "rt-2", Project: "other", CreatedAt: baseTS + 43}, State: store.StateOpen}
	put(t, idx, open, other)

	got := recording(t, idx, open.ID)
	if !sameMeta(got, open) {
		t.Errorf("Recording = %+v\nwant %+v", got, open)
	}
	if (countersOf(got) != counters{}) || got.IndexedTo != 0 {
		t.Errorf("new recording has counters %+v, cursor %d; want zero", countersOf(got), got.IndexedTo)
	}

	// Finishing replaces the metadata wholesale: a label dropped stays
	// dropped, a version changed is changed.
	finished := open
	finished.Labels = map[string]string{"branch": "main"}
	finished.Versions = map[string]string{"engine": "chromium 157"}
	finished.FinishedAt = open.CreatedAt + 90_000_000_000
	finished.Verdict = "fail"
	finished.FailureSignature = "NOT_ACTIONABLE at step 3: button \"Apply\""
	finished.State = store.StateFinished
	finished.Root = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	put(t, idx, finished)
	if got := recording(t, idx, open.ID); !sameMeta(got, finished) {
		t.Errorf("after finish Recording = %+v\nwant %+v", got, finished)
	}
	if got := recording(t, idx, other.ID); !sameMeta(got, other) {
		t.Errorf("the other recording changed: %+v\nwant %+v", got, other)
	}
}

func testUnknownRecording(t *testing.T, idx store.Index) {
	put(t, idx, store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: "known", CreatedAt: baseTS}, State: store.StateOpen})
	if _, err := idx.Recording(t.Context(), "unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Recording(unknown) error = %v, want one wrapping store.ErrNotFound", err)
	}
	if c, err := idx.Cursor(t.Context(), "unknown"); c != 0 || err != nil {
		t.Errorf("Cursor(unknown) = %d, %v; want 0, nil", c, err)
	}
	if rows := events(t, idx, store.EventQuery{Recording: "unknown"}); len(rows) != 0 {
		t.Errorf("Events(unknown) = %d rows, want none", len(rows))
	}
	if steps := timeline(t, idx, "unknown"); len(steps) != 0 {
		t.Errorf("Timeline(unknown) = %d steps, want none", len(steps))
	}
}

func testPutKeepsCounters(t *testing.T, idx store.Index) {
	r := store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: "keep", Project: "p", CreatedAt: baseTS}, State: store.StateOpen}
	put(t, idx, r)
	rows := genEvents(r.ID, 120, 12, 1)
	index(t, idx, r.ID, rows, 50)

	// PutRecording carries counters of its own; they must be ignored.
	r.State, r.Verdict, r.FinishedAt = store.StateFinished, "pass", baseTS+1
	r.Events, r.Bytes, r.Steps, r.FirstTS, r.LastTS, r.IndexedTo = 999_999, 1, 77, 5, 6, 3
	put(t, idx, r)
	if got := recording(t, idx, r.ID); !sameMeta(got, r) {
		t.Errorf("metadata not replaced: %+v\nwant %+v", got, r)
	}
	checkProjection(t, idx, r.ID, rows, rows[len(rows)-1].Seq)
}

// testEventsBeforePut: a reindex may project events before the recording's
// metadata; the cursor and counters must survive, and the row must read
// as open until PutRecording fills it in.
func testEventsBeforePut(t *testing.T, idx store.Index) {
	const id = "orphan"
	rows := genEvents(id, 90, 9, 2)
	index(t, idx, id, rows, 40)
	if got := recording(t, idx, id); got.State != store.StateOpen {
		t.Errorf("placeholder state = %q, want %q", got.State, store.StateOpen)
	}
	checkProjection(t, idx, id, rows, 90)

	r := store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: id, Project: "late", Flow: "f", CreatedAt: baseTS},
		State: store.StateFinished, Root: "bafkreiroot"}
	put(t, idx, r)
	if got := recording(t, idx, id); !sameMeta(got, r) {
		t.Errorf("after PutRecording = %+v\nwant %+v", got, r)
	}
	checkProjection(t, idx, id, rows, 90)
}

// recordingsFixture puts 30 generated recordings and returns them.
func recordingsFixture(t *testing.T, idx store.Index) []store.RecordingRow {
	t.Helper()
	recs := genRecordings("rec", 30, 3)
	order := rand.New(rand.NewPCG(4, 4)).Perm(len(recs))
	for _, i := range order {
		put(t, idx, recs[i])
	}
	return recs
}

func testRecordingsFilter(t *testing.T, idx store.Index) {
	recs := recordingsFixture(t, idx)
	byTime := wantRecordings(recs, store.RecordingFilter{})
	// Bounds that are exact creation times, so inclusive and exclusive
	// ends both matter.
	since, until := byTime[20].CreatedAt, byTime[5].CreatedAt
	filters := []store.RecordingFilter{
		{},
		{Project: "alpha"},
		{Project: "beta"},
		{Flow: "login"},
		{Verdict: "fail"},
		{Verdict: "pass", Project: "gamma"},
		{State: store.StateOpen},
		{State: store.StateFinished, Flow: "checkout"},
		{Signature: "timeout"},
		{Signature: "POST /API", Project: "alpha"},
		{Since: since},
		{Until: until},
		{Since: since, Until: until},
		{Since: since, Until: until, Project: "alpha"},
		{Project: "nobody"},
		{Limit: 4},
		{Project: "alpha", Limit: 2},
	}
	for _, f := range filters {
		want := wantRecordings(recs, f)
		want = head(want, limitOf(f.Limit, recordingsDefault, recordingsMax))
		got, err := idx.Recordings(t.Context(), f)
		must(t, err)
		sameRecordings(t, fmt.Sprintf("Recordings(%+v)", f), got, want)
	}
	// The fixture must make the filters bite, or the checks above prove
	// little.
	if n := len(wantRecordings(recs, store.RecordingFilter{Project: "alpha"})); n == 0 || n == len(recs) {
		t.Fatalf("fixture: project alpha has %d of %d recordings", n, len(recs))
	}
	if n := len(wantRecordings(recs, store.RecordingFilter{Signature: "timeout"})); n == 0 || n == len(recs) {
		t.Fatalf("fixture: %d of %d recordings have a timeout signature", n, len(recs))
	}
	if n := len(wantRecordings(recs, store.RecordingFilter{Since: since, Until: until})); n == 0 || n == len(recs) {
		t.Fatalf("fixture: the time window holds %d of %d recordings", n, len(recs))
	}
}

func testRecordingsPages(t *testing.T, idx store.Index) {
	recs := recordingsFixture(t, idx)
	for _, f := range []store.RecordingFilter{{}, {Project: "alpha"}, {State: store.StateFinished}} {
		want := wantRecordings(recs, f)
		// Page size 1 puts a page boundary between every two recordings,
		// the tied ones included.
		for _, size := range []int{1, 2, 3, 7} {
			f := f
			f.Limit = size
			var all []store.RecordingRow
			for page := 0; ; page++ {
				got, err := idx.Recordings(t.Context(), f)
				must(t, err)
				if len(got) > size {
					t.Fatalf("page %d of %+v has %d rows", page, f, len(got))
				}
				all = append(all, got...)
				if len(got) < size || page > len(recs) {
					break
				}
				f.After = got[len(got)-1].ID
			}
			sameRecordings(t, fmt.Sprintf("pages of %d of %+v", size, f), all, want)
		}
	}
}

func testRecordingsDefaultLimit(t *testing.T, idx store.Index) {
	recs := genRecordings("many", 103, 5)
	put(t, idx, recs...)
	got, err := idx.Recordings(t.Context(), store.RecordingFilter{})
	must(t, err)
	sameRecordings(t, "Recordings with no limit", got, head(wantRecordings(recs, store.RecordingFilter{}), recordingsDefault))
}

func testEvents(t *testing.T, idx store.Index) {
	a := genEvents("ev-a", 400, 40, 6)
	b := genEvents("ev-b", 150, 10, 7)
	index(t, idx, "ev-a", a, 1, 7, 100, 64)
	index(t, idx, "ev-b", b, 150)

	step := func(n int) *int { return &n }
	var queries []store.EventQuery
	for _, rec := range []string{"ev-a", "ev-b"} {
		queries = append(queries,
			store.EventQuery{Recording: rec},
			store.EventQuery{Recording: rec, AfterSeq: 1},
			store.EventQuery{Recording: rec, AfterSeq: 149},
			store.EventQuery{Recording: rec, AfterSeq: 399},
			store.EventQuery{Recording: rec, AfterSeq: 400},
			store.EventQuery{Recording: rec, Limit: 1},
			store.EventQuery{Recording: rec, Limit: 13, AfterSeq: 100},
		)
		for _, s := range []int{0, 1, 9, 17, 39, 40} {
			queries = append(queries,
				store.EventQuery{Recording: rec, Step: step(s)},
				store.EventQuery{Recording: rec, Step: step(s), AfterSeq: a[len(a)/2].Seq},
				store.EventQuery{Recording: rec, Step: step(s), Limit: 2})
		}
		for _, k := range event.Kinds {
			queries = append(queries,
				store.EventQuery{Recording: rec, Kind: k},
				store.EventQuery{Recording: rec, Kind: k, Step: step(3)},
				store.EventQuery{Recording: rec, Kind: k, AfterSeq: 120, Limit: 5})
		}
	}
	all := append(slices.Clone(a), b...)
	for _, q := range queries {
		sameEvents(t, fmt.Sprintf("Events(%s)", describe(q)), events(t, idx, q), wantEvents(all, q))
	}

	// Paging by AfterSeq walks every row once.
	var walked []store.EventRow
	q := store.EventQuery{Recording: "ev-a", Limit: 37}
	for {
		page := events(t, idx, q)
		walked = append(walked, page...)
		if len(page) < q.Limit {
			break
		}
		q.AfterSeq = page[len(page)-1].Seq
	}
	sameEvents(t, "Events paged by 37", walked, a)
}

func describe(q store.EventQuery) string {
	s := fmt.Sprintf("rec=%s kind=%q after=%d limit=%d", q.Recording, q.Kind, q.AfterSeq, q.Limit)
	if q.Step != nil {
		s += fmt.Sprintf(" step=%d", *q.Step)
	}
	return s
}

func testEventsLimits(t *testing.T, idx store.Index) {
	rows := genEvents("lim", eventsMax+50, 100, 8)
	index(t, idx, "lim", rows, 2500)
	for _, limit := range []int{0, 5000, eventsMax, eventsMax + 1, 50_000} {
		q := store.EventQuery{Recording: "lim", Limit: limit}
		sameEvents(t, fmt.Sprintf("Events(limit %d)", limit), events(t, idx, q), wantEvents(rows, q))
	}
}

// testReplay sends overlapping, repeated and out-of-order batches; the
// index must hold each row once, count it once, and keep the receipt with
// the highest seq whatever order the batches came in.
func testReplay(t *testing.T, idx store.Index) {
	const id = "replay"
	rows := genEvents(id, 300, 30, 9)
	// One step spans rows 185..215, with receipts at seq 191 and 211 that
	// arrive in reverse order below (211 in [200:300], 191 in [150:200]).
	for i := 185; i <= 215; i++ {
		rows[i].Step = rows[185].Step
	}
	receipt(&rows[190], "early")
	receipt(&rows[210], "late")

	batches := []struct{ from, to int }{
		{0, 100}, {0, 100}, {50, 150}, {200, 300}, {150, 200}, {120, 260}, {299, 300}, {0, 300},
	}
	var sent [][]store.EventRow
	var through uint64
	for _, b := range batches {
		batch := rows[b.from:b.to]
		last := batch[len(batch)-1].Seq
		must(t, idx.IndexEvents(t.Context(), id, batch, last))
		sent = append(sent, batch)
		through = max(through, last)
		t.Run(fmt.Sprintf("after[%d:%d]", b.from, b.to), func(t *testing.T) {
			checkProjection(t, idx, id, indexed(sent...), through)
		})
	}
	tl := timeline(t, idx, id)
	for _, s := range tl {
		if s.Step == rows[185].Step && s.ErrorCode != "CODE_late" {
			t.Errorf("step %d reports receipt %q, want the later one (CODE_late)", s.Step, s.ErrorCode)
		}
	}
}

func testCursor(t *testing.T, idx store.Index) {
	const id = "cur"
	rows := genEvents(id, 30, 3, 10)
	steps := []struct {
		rows    []store.EventRow
		through uint64
	}{
		{nil, 5},           // a cursor may move with no rows (all redacted away, say)
		{rows[:10], 10},    //
		{rows[:5], 5},      // a replay never moves it back
		{nil, 3},           //
		{rows[10:30], 40},  // through may pass the last row
		{rows[20:30], 30},  //
		{rows[29:30], 100}, //
	}
	var want uint64
	for i, s := range steps {
		must(t, idx.IndexEvents(t.Context(), id, s.rows, s.through))
		want = max(want, s.through)
		if c := cursor(t, idx, id); c != want {
			t.Fatalf("after call %d (through %d): Cursor = %d, want %d", i, s.through, c, want)
		}
	}
	checkProjection(t, idx, id, rows, want)
}

func testTimeline(t *testing.T, idx store.Index) {
	rng := rand.New(rand.NewPCG(11, 11))
	for i, shape := range []struct{ n, steps int }{{600, 25}, {50, 50}, {40, 1}, {1, 1}} {
		id := fmt.Sprintf("tl-%d", i)
		rows := genEvents(id, shape.n, shape.steps, uint64(20+i))
		index(t, idx, id, rows, 1+rng.IntN(60), 1+rng.IntN(200), 1+rng.IntN(100))
		want := wantTimeline(rows)
		if len(want) != shape.steps {
			t.Fatalf("fixture: %d steps, want %d", len(want), shape.steps)
		}
		sameSteps(t, id+" timeline", timeline(t, idx, id), want)
		if got := recording(t, idx, id).Steps; got != len(want) {
			t.Errorf("%s Steps = %d, want %d", id, got, len(want))
		}
	}
}

// searchFixture indexes three recordings across two projects, one with a
// failure signature, and returns their metadata and all their rows.
func searchFixture(t *testing.T, idx store.Index) ([]store.RecordingRow, []store.EventRow) {
	t.Helper()
	recs := []store.RecordingRow{
		{RecordingMeta: store.RecordingMeta{ID: "srch-a", Project: "alpha", CreatedAt: baseTS,
			FailureSignature: "TimeoutError: waiting for #pay"}, State: store.StateFinished},
		{RecordingMeta: store.RecordingMeta{ID: "srch-b", Project: "alpha", CreatedAt: baseTS + 1}, State: store.StateOpen},
		{RecordingMeta: store.RecordingMeta{ID: "srch-c", Project: "beta", CreatedAt: baseTS + 2}, State: store.StateOpen},
	}
	var all []store.EventRow
	for i, r := range recs {
		put(t, idx, r)
		rows := genEvents(r.ID, 300, 20, uint64(30+i))
		index(t, idx, r.ID, rows, 128)
		all = append(all, rows...)
	}
	return recs, all
}

func testSearch(t *testing.T, idx store.Index) {
	recs, all := searchFixture(t, idx)
	queries := []store.SearchQuery{
		{Text: "typeerror", Limit: 1000},
		{Text: "TYPEERROR"},
		{Text: "Uncaught TypeError"},
		{Text: "stale_ref", Limit: 1000},
		{Text: "timeouterror", Limit: 1000}, // the failure signature of srch-a
		{Text: "timeouterror", EventsOnly: true, Limit: 1000},
		{Text: "typeerror", EventsOnly: true, Limit: 1000},
		{Text: "shop.example"}, // more matches than the default page
		{Text: "shop.example", Limit: 7},
		{URL: "/api/cart", Limit: 1000},
		{URL: "/api/cart", Status: 500},
		{Status: 404, Limit: 1000},
		{ErrorCode: "STALE_REF", Limit: 1000},
		{ErrorCode: "STALE"}, // exact, not a substring
		{Project: "beta", Text: "typeerror", Limit: 1000},
		{Project: "alpha", Status: 500, Limit: 1000},
		{Recordings: []string{"srch-a", "srch-c"}, Text: "error", Limit: 1000},
		{Recordings: []string{"srch-b"}, Project: "beta"},
		{Recordings: []string{"nope"}},
		{Text: "no such text anywhere"},
		{Limit: 50},
	}
	for _, q := range queries {
		want := wantSearch(recs, all, q)
		sameEvents(t, fmt.Sprintf("Search(%+v)", q), search(t, idx, q), want)
	}

	// The fixture must make the checks above discriminate.
	sig := wantSearch(recs, all, store.SearchQuery{Text: "timeouterror", Limit: 1000})
	if len(sig) != 300 {
		t.Errorf("fixture: the failure signature matches %d rows, want all 300 of srch-a", len(sig))
	}
	if n := len(wantSearch(recs, all, store.SearchQuery{Text: "shop.example", Limit: 1000})); n <= searchDefault {
		t.Errorf("fixture: %d rows match shop.example, want more than a default page", n)
	}
	folded := 0
	for _, r := range wantSearch(recs, all, store.SearchQuery{Text: "typeerror", Limit: 1000}) {
		if !strings.Contains(r.Text, "typeerror") {
			folded++
		}
	}
	if folded == 0 {
		t.Error("fixture: no row matches typeerror only by folding case")
	}
}

// testSearchLiteral checks that '%', '_' and '\' in a query match only
// themselves, and so do the quotes, operators and column filters of a
// full-text query syntax (a backend may answer through a text index).
// Each query has a decoy that the query would match were the character a
// wildcard or an escape, or the word an operator.
func testSearchLiteral(t *testing.T, idx store.Index) {
	const id = "literal"
	texts := []string{
		"progress 100% done", "progress 100 done", "progress 1000 done",
		"field_name is required", "fieldXname is required",
		`saved to C:\tmp\report`, "saved to C:/tmp/report", "saved to C:tmp",
		"plain text",
		`quoted "hi" there`, "quoted hi there",
		"cats AND dogs", "dogs and more cats",
		"fish OR fowl", "fish only",
		"NEAR(fish fowl)",
		"glob* pattern", "globstar pattern",
		"text: needle", "a needle alone",
		`ends with a quote"`,
	}
	var rows []store.EventRow
	for i, text := range texts {
		rows = append(rows, store.EventRow{Recording: id, Seq: uint64(i + 1), Step: i, TS: baseTS + int64(i),
			Kind: event.KindConsole, Size: 100, Loc: store.Locator{Segment: 1, Offset: int64(i) * 100, Length: 100},
			Summary: event.Summary{Level: "info", Text: text, URL: fmt.Sprintf("https://x.example/p_%d?q=%d%%25", i, i)}})
	}
	rows = append(rows, store.EventRow{Recording: id, Seq: uint64(len(rows) + 1), Step: 99, TS: baseTS + 99,
		Kind: event.KindHAR, Size: 100, Loc: store.Locator{Segment: 1, Offset: 9999, Length: 100},
		Summary: event.Summary{URL: "https://x.example/pXq?q=25", Method: "GET", Status: 200}})
	recs := []store.RecordingRow{{RecordingMeta: store.RecordingMeta{ID: id, CreatedAt: baseTS}, State: store.StateOpen}}
	put(t, idx, recs...)
	index(t, idx, id, rows, len(rows))

	for _, c := range []struct {
		q         store.SearchQuery
		wantCount int // the model must agree; a second, independent check
	}{
		{store.SearchQuery{Text: "100%"}, 1},
		{store.SearchQuery{Text: "0% d"}, 1},
		{store.SearchQuery{Text: "field_name"}, 1},
		{store.SearchQuery{Text: `C:\tmp`}, 1},
		{store.SearchQuery{Text: `\`}, 1},
		{store.SearchQuery{Text: "%"}, len(texts)},  // the console rows' p_N?q=N%25 URLs, not the HAR row
		{store.SearchQuery{URL: "p_"}, len(texts)},  // not pXq
		{store.SearchQuery{URL: "%25"}, len(texts)}, // not q=25
		{store.SearchQuery{URL: "p_1?q=1%25"}, 1},   // long enough for a trigram index; not p_10..p_19
		{store.SearchQuery{Text: `"hi" t`}, 1},      // not: hi t
		{store.SearchQuery{Text: `d "hi"`}, 1},
		{store.SearchQuery{Text: `"hi"`}, 1},
		{store.SearchQuery{Text: `quote"`}, 1},
		{store.SearchQuery{Text: `"`}, 2},
		{store.SearchQuery{Text: "cats AND dogs"}, 1}, // not: cats, dogs
		{store.SearchQuery{Text: "fish OR fowl"}, 1},  // not: fish or fowl
		{store.SearchQuery{Text: "NEAR(fish fowl)"}, 1},
		{store.SearchQuery{Text: "fish fowl"}, 1}, // not: fish ... fowl
		{store.SearchQuery{Text: "glob*"}, 1},     // not the prefix glob
		{store.SearchQuery{Text: "text: needle"}, 1},
		{store.SearchQuery{Text: "text : needle"}, 0}, // not needle in a column named text
		{store.SearchQuery{Text: "AND"}, 2},           // an operator alone is text, and folds case
	} {
		want := wantSearch(recs, rows, c.q)
		if len(want) != c.wantCount {
			t.Fatalf("fixture: model finds %d rows for %+v, the test expects %d", len(want), c.q, c.wantCount)
		}
		sameEvents(t, fmt.Sprintf("Search(%+v)", c.q), search(t, idx, c.q), want)
	}
}

// testHasBlob: HasBlob is true exactly for the blobs an indexed event of
// that recording carries. Identical bytes have one CID across recordings
// (and projects), so a blob one recording carries must not read as
// carried by another; most events carry no blob, so the empty CID must not
// match them.
func testHasBlob(t *testing.T, idx store.Index) {
	const a, b = "blob-a", "blob-b"
	recs := []store.RecordingRow{
		{RecordingMeta: store.RecordingMeta{ID: a, Project: "alpha", CreatedAt: baseTS}, State: store.StateFinished,
			Root: "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{RecordingMeta: store.RecordingMeta{ID: b, Project: "beta", CreatedAt: baseTS + 1}, State: store.StateOpen},
	}
	put(t, idx, recs...)
	ra, rb := genEvents(a, 300, 30, 60), genEvents(b, 200, 20, 61)
	// A frame of b has the same bytes as one of a: the same CID.
	var onlyA, onlyB []string
	for _, r := range ra {
		if r.CID != "" {
			onlyA = append(onlyA, r.CID)
		}
	}
	for _, r := range rb {
		if r.CID != "" {
			onlyB = append(onlyB, r.CID)
		}
	}
	if len(onlyA) < 3 || len(onlyB) < 3 {
		t.Fatalf("fixture: %d and %d rows carry blobs, want at least 3 each", len(onlyA), len(onlyB))
	}
	shared := onlyA[1]
	for i := range rb {
		if rb[i].CID == onlyB[1] {
			rb[i].CID = shared
		}
	}
	onlyA, onlyB = slices.Delete(onlyA, 1, 2), slices.Delete(onlyB, 1, 2)
	index(t, idx, a, ra, 64)
	index(t, idx, b, rb, 50)
	// A replay leaves copies behind in some backends until they merge.
	index(t, idx, a, ra[100:200], 100)
	all := append(slices.Clone(ra), rb...)

	for _, c := range []struct {
		rec, cid string
		what     string
	}{
		{a, onlyA[0], "a blob of a"},
		{a, onlyA[len(onlyA)-1], "a's last blob"},
		{b, onlyB[0], "a blob of b"},
		{a, shared, "a blob both carry, through a"},
		{b, shared, "a blob both carry, through b"},
		{a, onlyB[0], "b's blob through a"},
		{b, onlyA[0], "a's blob through b"},
		{a, absentCID, "a blob nobody carries"},
		{a, "", "the empty CID (most events carry no blob)"},
		{b, "", "the empty CID through b"},
		{a, recs[0].Root, "a's root (no event carries it)"},
		{a, onlyA[0][:30], "a prefix of a's blob"},
		{a, strings.ToUpper(onlyA[0]), "a's blob in upper case"},
		{"unknown", onlyA[0], "a's blob through an unknown recording"},
		{"", onlyA[0], "a's blob through the empty recording id"},
	} {
		want := wantHasBlob(all, c.rec, c.cid)
		if got := hasBlob(t, idx, c.rec, c.cid); got != want {
			t.Errorf("HasBlob(%s, %q) (%s) = %v, want %v", c.rec, c.cid, c.what, got, want)
		}
	}
	// The model must make the cases above bite.
	if !wantHasBlob(all, a, onlyA[0]) || !wantHasBlob(all, b, shared) || wantHasBlob(all, a, onlyB[0]) {
		t.Fatal("fixture: the model does not tell the recordings' blobs apart")
	}

	must(t, idx.DeleteRecording(t.Context(), a))
	for _, c := range []string{onlyA[0], shared} {
		if hasBlob(t, idx, a, c) {
			t.Errorf("HasBlob(%s, %s) after DeleteRecording = true", a, c)
		}
	}
	if !hasBlob(t, idx, b, shared) {
		t.Errorf("HasBlob(%s, %s) = false after deleting %s, which shared the blob", b, shared, a)
	}
	checkBlobs(t, idx, b, rb)

	// Indexed again, a holds only what was sent since.
	index(t, idx, a, ra[:50], 50)
	checkBlobs(t, idx, a, ra[:50])
	last := onlyA[len(onlyA)-1]
	if wantHasBlob(ra[:50], a, last) {
		t.Fatal("fixture: a's last blob is among its first 50 events")
	}
	if hasBlob(t, idx, a, last) {
		t.Errorf("HasBlob(%s, %s) finds the blob of an event deleted and not indexed again", a, last)
	}
}

// testDelete deletes the more recently created of two recordings (where
// a backend reusing keys would expose leftovers) and then indexes it again.
func testDelete(t *testing.T, idx store.Index) {
	recs := []store.RecordingRow{
		{RecordingMeta: store.RecordingMeta{ID: "del-keep", Project: "p", CreatedAt: baseTS}, State: store.StateOpen},
		{RecordingMeta: store.RecordingMeta{ID: "del-gone", Project: "p", CreatedAt: baseTS + 1}, State: store.StateOpen},
	}
	put(t, idx, recs...)
	keep, gone := genEvents("del-keep", 200, 10, 40), genEvents("del-gone", 200, 10, 41)
	index(t, idx, "del-keep", keep, 64)
	index(t, idx, "del-gone", gone, 64)
	keepBefore := recording(t, idx, "del-keep")

	must(t, idx.DeleteRecording(t.Context(), "del-gone"))

	if _, err := idx.Recording(t.Context(), "del-gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted Recording error = %v, want store.ErrNotFound", err)
	}
	if c := cursor(t, idx, "del-gone"); c != 0 {
		t.Errorf("deleted Cursor = %d, want 0", c)
	}
	if rows := events(t, idx, store.EventQuery{Recording: "del-gone"}); len(rows) != 0 {
		t.Errorf("deleted recording still has %d events", len(rows))
	}
	if steps := timeline(t, idx, "del-gone"); len(steps) != 0 {
		t.Errorf("deleted recording still has %d steps", len(steps))
	}
	q := store.SearchQuery{Text: "shop.example", Limit: 1000}
	sameEvents(t, "Search after delete", search(t, idx, q), wantSearch(recs, keep, q))
	list, err := idx.Recordings(t.Context(), store.RecordingFilter{})
	must(t, err)
	sameRecordings(t, "Recordings after delete", list, recs[:1])

	if got := recording(t, idx, "del-keep"); !sameMeta(got, keepBefore) || countersOf(got) != countersOf(keepBefore) {
		t.Errorf("the other recording changed: %+v\nwas %+v", got, keepBefore)
	}
	checkProjection(t, idx, "del-keep", keep, 200)

	// Indexing the deleted id again starts from nothing: no leftover
	// events, steps or counts.
	index(t, idx, "del-gone", gone[:50], 50)
	checkProjection(t, idx, "del-gone", gone[:50], 50)
}

func testReset(t *testing.T, idx store.Index) {
	recs, _ := searchFixture(t, idx)
	must(t, idx.Reset(t.Context()))

	list, err := idx.Recordings(t.Context(), store.RecordingFilter{})
	must(t, err)
	if len(list) != 0 {
		t.Errorf("after Reset Recordings = %v", ids(list))
	}
	for _, r := range recs {
		if _, err := idx.Recording(t.Context(), r.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after Reset Recording(%s) error = %v, want store.ErrNotFound", r.ID, err)
		}
		if c := cursor(t, idx, r.ID); c != 0 {
			t.Errorf("after Reset Cursor(%s) = %d", r.ID, c)
		}
		if n := len(events(t, idx, store.EventQuery{Recording: r.ID})); n != 0 {
			t.Errorf("after Reset %s has %d events", r.ID, n)
		}
		if n := len(timeline(t, idx, r.ID)); n != 0 {
			t.Errorf("after Reset %s has %d steps", r.ID, n)
		}
	}
	if n := len(search(t, idx, store.SearchQuery{})); n != 0 {
		t.Errorf("after Reset Search finds %d rows", n)
	}

	// A reindex after Reset counts from zero.
	rows := genEvents(recs[0].ID, 100, 5, 30)
	index(t, idx, recs[0].ID, rows, 30)
	checkProjection(t, idx, recs[0].ID, rows, 100)
}

// testConcurrentReads reads while one writer indexes: reads must not fail
// and the cursor must never go back.
func testConcurrentReads(t *testing.T, idx store.Index) {
	const id = "conc"
	rows := genEvents(id, 2000, 100, 50)
	put(t, idx, store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: id, CreatedAt: baseTS}, State: store.StateOpen})

	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- readUntil(t, idx, id, done)
		}()
	}
	index(t, idx, id, rows, 100)
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	checkProjection(t, idx, id, rows, 2000)
}

func readUntil(t *testing.T, idx store.Index, id string, done <-chan struct{}) error {
	var last uint64
	for {
		select {
		case <-done:
			return nil
		default:
		}
		c, err := idx.Cursor(t.Context(), id)
		if err != nil {
			return err
		}
		if c < last {
			return fmt.Errorf("cursor went back from %d to %d", last, c)
		}
		last = c
		if _, err := idx.Recording(t.Context(), id); err != nil {
			return err
		}
		if _, err := idx.Timeline(t.Context(), id); err != nil {
			return err
		}
		if _, err := idx.Events(t.Context(), store.EventQuery{Recording: id, AfterSeq: c}); err != nil {
			return err
		}
	}
}

// testExpired: retention candidates are finished recordings created before
// a time, oldest first, judged by each recording's newest row.
func testExpired(t *testing.T, idx store.Index) {
	ctx := t.Context()
	put := func(id, state string, created int64) {
		t.Helper()
		r := store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: id, CreatedAt: created}, State: state}
		if err := idx.PutRecording(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	put("old-1", store.StateFinished, 10)
	put("old-2", store.StateFinished, 20)
	put("old-open", store.StateOpen, 5)
	put("new", store.StateFinished, 100)
	put("reopened", store.StateFinished, 1)
	put("reopened", store.StateOpen, 1) // the newest row decides
	for _, c := range []struct {
		before int64
		limit  int
		want   string
	}{
		{50, 0, "[old-1 old-2]"},
		{50, 1, "[old-1]"},
		{11, 10, "[old-1]"},
		{1000, 0, "[old-1 old-2 new]"},
		{1, 0, "[]"},
	} {
		got, err := idx.Expired(ctx, c.before, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("Expired(%d, %d) = %v, want %s", c.before, c.limit, got, c.want)
		}
	}
}
