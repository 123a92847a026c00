// Package gcheadroom keeps Go's garbage collector from starting a cycle
// before the heap has grown by a set number of bytes since the last one.
//
// The collector starts a cycle once the heap has grown by GOGC percent
// (100) of what the last cycle left live, and by at least 4 MB. A
// flightrec node keeps little live (a cluster node's index is ClickHouse
// and its blobs are in S3), so it collects every few megabytes it
// allocates, and a cycle costs about the same whatever it frees: spread
// over three nodes, the same load made about half again as many cycles as
// on one (issue 21's profiles: 106 against 70 for the same 430 MB
// allocated). After every cycle this package sets GOGC so that the next
// one starts at live + max(live × GOGC/100, headroom): a small heap gets
// the headroom, a large one the collector's own pacing, unchanged. The
// cost is memory: up to headroom bytes of garbage more than GOGC alone
// would keep. GOMEMLIMIT still applies on top.
package gcheadroom

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Start keeps headroom bytes of growth between cycles until stop is
// called, which puts back the GOGC in effect before. A headroom of 0 or
// less, or a collector turned off (GOGC=off), does nothing.
func Start(headroom int64) (stop func()) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if headroom <= 0 || base < 0 {
		return func() {}
	}
	t := &tuner{headroom: uint64(headroom), base: base}
	t.sample[0].Name = "/gc/heap/live:bytes"
	t.sample[1].Name = "/gc/scan/stack:bytes"
	t.sample[2].Name = "/gc/scan/globals:bytes"
	t.tune()
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopped = true
		debug.SetGCPercent(t.base)
	}
}

type tuner struct {
	headroom uint64
	base     int
	mu       sync.Mutex
	stopped  bool
	// sample is what the collector's goal grows with: the live heap,
	// and the stacks and globals the last cycle scanned.
	sample [3]metrics.Sample
}

// sentinel is allocated for one cycle: its cleanup runs after the cycle
// that found it unreachable. It holds a pointer and is larger than the
// tiny allocator's 16 bytes, so it is an object of its own.
type sentinel struct {
	_ *int
	_ [6]uint64
}

// arm has tune run after the next cycle, and arm again.
func (t *tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *tuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

// tune sets GOGC for the next cycle from what the last one left live; it
// reports false once stopped.
func (t *tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample[:])
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	debug.SetGCPercent(percent(v[0], v[0]+v[1]+v[2], t.headroom, t.base))
	return true
}

// heapMinimum is the collector's floor for a goal at GOGC=100; it scales
// with GOGC (the GC guide's "4 MiB × GOGC/100").
const heapMinimum = 4 << 20

// percent is the GOGC that puts the next cycle's goal at live + max(
// headroom, scanned × base/100). The collector's goal is the larger of
// live + scanned × GOGC/100 (scanned: the live heap and the stacks and
// globals the last cycle scanned) and heapMinimum × GOGC/100, so GOGC is
// bounded by both.
func percent(live, scanned, headroom uint64, base int) int {
	scanned = max(scanned, 1)
	growth := max(headroom, scanned*uint64(base)/100)
	byScan := (growth*100 + scanned - 1) / scanned // rounded up
	byMinimum := (live + growth) * 100 / heapMinimum
	p := min(byScan, byMinimum)
	if p < uint64(base) {
		return base
	}
	return int(min(p, math.MaxInt32))
}
