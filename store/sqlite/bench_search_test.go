package sqlite

import (
	"fmt"
	"testing"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

// scaleRecordings is the number of recordings of BenchmarkSearchScale's
// stores; only their length changes, so the store grows tenfold in events.
const scaleRecordings = 200

// scaleRare is the rare word: one event of the store has it.
const scaleRare = "zebra-7781"

// BenchmarkSearchScale times a search for a rare word in stores of 100,000
// and 1,000,000 events (200 recordings of 500 and of 5,000 events, each an
// indextest.BenchRow of about 300 bytes of URL and text; one recording in
// ten has a failure signature), through the text index (fts: Search) and
// by the scan that answered every search before the index (like:
// scanSearch), and logs each path's ms/op (wall and CPU) at both sizes and
// their ratio, beside the goal (fts ≤ 20 ms, flat from 100k to 1M).
//
// Building the stores dominates: about 100 CPU seconds (4.5 minutes in all
// on a busy 2-core machine), and 0.7 GB under the temporary directory,
// removed at the end. Run it with -v, which shows the summary lines:
//
//	go test -v -run '^$' -bench BenchmarkSearchScale -benchtime 20x -timeout 60m ./store/sqlite/
func BenchmarkSearchScale(b *testing.B) {
	q := store.SearchQuery{Text: scaleRare}
	// Wall and CPU time per search: the machine may be shared, and the CPU
	// figure is the one other load does not move.
	ms, cpuMS := map[string][]float64{}, map[string][]float64{}
	sizes := []int{500, 5000}
	for _, perRec := range sizes {
		db := buildScaleStore(b, perRec)
		for _, path := range []struct {
			name   string
			search func(*DB) ([]store.EventRow, error)
		}{
			{"fts", func(db *DB) ([]store.EventRow, error) { return db.Search(b.Context(), q) }},
			{"like", func(db *DB) ([]store.EventRow, error) { return db.scanSearch(b.Context(), q) }},
		} {
			b.Run(fmt.Sprintf("%s/events=%d", path.name, scaleRecordings*perRec), func(b *testing.B) {
				cpu0 := cpuTime(b)
				for b.Loop() {
					rows, err := path.search(db)
					if err != nil {
						b.Fatal(err)
					}
					if len(rows) != 1 {
						b.Fatalf("%d rows, want 1", len(rows))
					}
				}
				per := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
				cpu := float64((cpuTime(b) - cpu0).Microseconds()) / 1000 / float64(b.N)
				b.ReportMetric(per, "ms/op")
				b.ReportMetric(cpu, "cpu-ms/op")
				ms[path.name] = append(ms[path.name], per)
				cpuMS[path.name] = append(cpuMS[path.name], cpu)
			})
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"like", "fts"} {
		if m, c := ms[name], cpuMS[name]; len(m) == len(sizes) && len(c) == len(sizes) {
			b.Logf("%-4s rare word: %8.2f ms at 100k events, %8.2f ms at 1M, 1M/100k = %5.2f× (CPU: %8.2f ms, %8.2f ms, %5.2f×)",
				name, m[0], m[1], m[1]/m[0], c[0], c[1], c[1]/c[0])
		}
	}
	b.Logf("goal: fts ≤ 20 ms at 1M and flat (1M/100k near 1×)")
}

// buildScaleStore indexes scaleRecordings recordings of perRec events in
// one IndexEvents batch each, as the projector sends them, and puts the
// rare word into one event near the middle of the store. It logs the
// indexing rate and the file's size.
func buildScaleStore(b *testing.B, perRec int) *DB {
	b.Helper()
	ctx := b.Context()
	db := openTemp(b)
	cpu0 := cpuTime(b)
	for i := range scaleRecordings {
		id := fmt.Sprintf("scale-%03d", i)
		meta := store.RecordingMeta{ID: id, Project: fmt.Sprintf("p%d", i%10), CreatedAt: int64(i + 1)}
		if i%10 == 3 {
			meta.FailureSignature = "TimeoutError: waiting for #pay"
		}
		if err := db.PutRecording(ctx, store.RecordingRow{RecordingMeta: meta, State: store.StateFinished}); err != nil {
			b.Fatal(err)
		}
		rows := indextest.BenchRows(id, 1, perRec)
		if i == scaleRecordings/2 {
			rows[perRec/2].Text = "checkout stalled: " + scaleRare + " never answered"
		}
		if err := db.IndexEvents(ctx, id, rows, uint64(perRec)); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime(b) - cpu0
	var pages, pageSize int64
	if err := db.r.QueryRow(`SELECT (SELECT page_count FROM pragma_page_count), (SELECT page_size FROM pragma_page_size)`).
		Scan(&pages, &pageSize); err != nil {
		b.Fatal(err)
	}
	n := scaleRecordings * perRec
	b.Logf("built %d events: %.0f rows/cpu-s, %d MB", n, float64(n)/cpu.Seconds(), pages*pageSize>>20)
	return db
}
