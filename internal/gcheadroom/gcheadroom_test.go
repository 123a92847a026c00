package gcheadroom

import (
	"runtime"
	"runtime/debug"
	"testing"
)

var sink []byte

// cycles allocates total bytes of garbage in 64 KiB pieces with a small
// live heap and returns how many collections that took.
func cycles(total int) uint32 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	for n := 0; n < total; n += 64 << 10 {
		sink = make([]byte, 64<<10)
	}
	runtime.ReadMemStats(&ms)
	return ms.NumGC - before
}

// TestHeadroom: with 32 MiB of headroom, allocating 512 MiB with a live
// heap of a few megabytes takes about 16 cycles, against many more at the
// collector's 4 MB floor (how many more moves as the pacer learns, so
// the most of two runs, before and after); stop puts GOGC back.
func TestHeadroom(t *testing.T) {
	const total, headroom = 512 << 20, 32 << 20
	plain := cycles(total)
	stop := Start(headroom)
	with := cycles(total)
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC after stop: %d, want 100", p)
	}
	plain = max(plain, cycles(total))
	if with > total/headroom+8 || with*2 > plain {
		t.Errorf("%d cycles with %d MiB of headroom, %d without, for %d MiB allocated", with, headroom>>20, plain, total>>20)
	}
	t.Logf("%d cycles with %d MiB of headroom, %d without, for %d MiB allocated", with, headroom>>20, plain, total>>20)
}

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, scanned, headroom uint64
		base, want              int
	}{
		// A small heap: the collector's minimum (4 MiB × GOGC/100) sets
		// the goal at live + headroom.
		{200 << 10, 400 << 10, 32 * mib, 100, 804},
		// A medium one: live + scanned × GOGC/100 does.
		{20 * mib, 21 * mib, 64 * mib, 100, 305},
		// A large one keeps GOGC's pacing.
		{1 << 30, 1<<30 + mib, 64 * mib, 100, 100},
		{100 * mib, 101 * mib, 64 * mib, 200, 200},
		{0, 0, 64 * mib, 100, 1600},
	} {
		if got := percent(c.live, c.scanned, c.headroom, c.base); got != c.want {
			t.Errorf("percent(%d, %d, %d, %d) = %d, want %d", c.live, c.scanned, c.headroom, c.base, got, c.want)
		}
	}
}
