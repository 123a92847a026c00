package retention_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/wire"
)

// BenchmarkSweep sweeps a store of N recordings (FLIGHTREC_BENCH_RECORDINGS,
// default 10,000) of which a tenth expire: failing runs kept, passing ones
// past their 14 days. It reports the sweep's time and its peak heap.
//
//	go test -run '^$' -bench Sweep -benchtime 1x ./retention/
func BenchmarkSweep(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("FLIGHTREC_BENCH_RECORDINGS")); err == nil && v > 0 {
		n = v
	}
	h := newHarness(b)
	start := h.now
	ctx := context.Background()
	evs := testgen.Recording(testgen.Options{Steps: 1, EventsPerStep: 1, Seed: 7})
	lines := testgen.NDJSON(evs)
	c := client.New(h.base)
	for i := 0; i < n; i++ {
		verdict := "fail"
		if i%10 == 0 {
			verdict = "pass"
		}
		rep, err := c.Open(ctx, wire.OpenRequest{Project: "shop", Flow: "checkout"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Append(ctx, rep.ID, lines); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Finish(ctx, rep.ID, verdict); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.app.Proj.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	h.setDay(start, 20)
	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	b.ResetTimer()
	t0 := time.Now()
	rep, err := h.app.Sweeper.Sweep(ctx, false, nil)
	elapsed := time.Since(t0)
	b.StopTimer()
	close(stop)
	<-sampled
	if err != nil {
		b.Fatal(err)
	}
	if len(rep.Deleted) != n/10 {
		b.Fatalf("deleted %d, want %d", len(rep.Deleted), n/10)
	}
	b.ReportMetric(elapsed.Seconds(), "sweep-s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(rep.Considered), "recordings")
	b.ReportMetric(float64(len(rep.Deleted)), "deleted")
	_ = retention.Day
}
