package sqlite

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDeletePurge times, in a store of 100,000 events
// (buildScaleStore: 200 recordings of 500, a 64 MB file), deleting one
// recording of 500 events (DeleteRecording) and then purging what it left
// (PurgeDeleted: the FTS5 'optimize' that rewrites the text index, and the
// TRUNCATE checkpoint), each op one of each. Run it with -v:
//
//	go test -v -run '^$' -bench BenchmarkDeletePurge -benchtime 5x -timeout 30m ./store/sqlite/
func BenchmarkDeletePurge(b *testing.B) {
	db := buildScaleStore(b, 500)
	defer db.Close()
	ctx := b.Context()
	var del, purge time.Duration
	cpu0 := cpuTime(b)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if err := db.DeleteRecording(ctx, fmt.Sprintf("scale-%03d", i)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := db.PurgeDeleted(ctx); err != nil {
			b.Fatal(err)
		}
		del += t1.Sub(t0)
		purge += time.Since(t1)
		i++
	}
	cpu := cpuTime(b) - cpu0
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(del), "delete-ms/op")
	b.ReportMetric(ms(purge), "purge-ms/op")
	b.ReportMetric(ms(cpu), "cpu-ms/op")
	b.Logf("100k events, one recording of 500 deleted per op: delete %.0f ms, purge %.0f ms (wall); %.0f CPU ms per op in all",
		ms(del), ms(purge), ms(cpu))
}
