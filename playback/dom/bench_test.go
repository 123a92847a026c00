package dom

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// benchEvents is a long SPA recording: 60,000 dom events over 100 steps,
// a page of some 3,700 nodes that keeps its size while list items come
// and go, texts and attributes change and fields are typed into, with
// pointer and scroll events among them and two navigations.
var benchEvents = sync.OnceValue(func() []Event {
	return genEvents(genOpts{seed: 42, events: 60000, items: 400, steps: 100, snapshots: 2})
})

func buildBench(b *testing.B) (*Checkpoints, time.Duration) {
	evs := benchEvents()
	start := time.Now()
	cp := NewCheckpoints(0)
	for _, e := range evs {
		if err := cp.Add(e); err != nil {
			b.Fatal(err)
		}
	}
	return cp, time.Since(start)
}

// BenchmarkRenderStep renders the state after step 1 and after the last
// step from one checkpoint set: a seek to the end must cost what a seek to
// the start does. worst is a seq whose checkpoint is followed by the most
// replay (Every events).
func BenchmarkRenderStep(b *testing.B) {
	cp, took := buildBench(b)
	st := cp.Stats()
	b.Logf("%d events (%d kept), %d nodes, %d checkpoints, %d bytes, built in %v",
		st.Events, st.Kept, st.Nodes, st.Checkpoints, st.Bytes, took)
	lastStep := benchEvents()[len(benchEvents())-1].Step
	worst := uint64(0)
	for i := 1; i < len(cp.cps); i++ {
		if cp.cps[i].seq-cp.cps[i-1].seq > worst {
			worst = cp.cps[i].seq - 1
		}
	}
	cases := []struct {
		name string
		at   func() (*Doc, error)
	}{
		{"first", func() (*Doc, error) { return cp.AfterStep(1) }},
		{"last", func() (*Doc, error) { return cp.AfterStep(lastStep) }},
		{"worst", func() (*Doc, error) { return cp.At(worst) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				d, err := c.at()
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				if err := d.RenderInert(&buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "html-bytes")
		})
	}
}

// BenchmarkCheckpointsBuild builds the set for the whole recording.
func BenchmarkCheckpointsBuild(b *testing.B) {
	benchEvents()
	var cp *Checkpoints
	for b.Loop() {
		cp, _ = buildBench(b)
	}
	st := cp.Stats()
	b.ReportMetric(float64(st.Bytes), "cp-bytes")
	b.ReportMetric(float64(st.Checkpoints), "checkpoints")
	b.ReportMetric(float64(st.Events), "events")
}

// BenchmarkFirstViewAfterRestart is the first DOM view of a finished
// recording after a restart (the state after its last step, rendered):
// "rebuild" builds the checkpoint set from every event, as a server did
// before sets were kept; "stored" opens the kept set's file, reads its
// head and the one checkpoint the view restores (OpenCheckpoints, as
// playback/domkeep.go does over a blob); "whole" reads the whole set
// first, as format 1 did. It prints each figure beside
// issue 19's goal (≤ 30 ms, flat in the recording's length) and the
// ratios between lengths.
func BenchmarkFirstViewAfterRestart(b *testing.B) {
	const goalMS = 30
	lengths := []int{10000, 50000, 200000}
	stored, whole := map[int]float64{}, map[int]float64{}
	var rebuilt float64
	for _, n := range lengths {
		evs := genEvents(genOpts{seed: 42, events: n, items: 330, steps: 100, snapshots: 1})
		lastStep := evs[len(evs)-1].Step
		view := func(b *testing.B, cp *Checkpoints, buf *bytes.Buffer) {
			d, err := cp.AfterStep(lastStep)
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			if err := d.RenderInert(buf); err != nil {
				b.Fatal(err)
			}
		}
		built := NewCheckpoints(0)
		for _, e := range evs {
			_ = built.Add(e)
		}
		path := filepath.Join(b.TempDir(), "set")
		raw := marshal(b, built, evs[len(evs)-1].Seq)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			b.Fatal(err)
		}
		st := built.Stats()
		b.Logf("%d events, %d nodes, %d checkpoints, stored set %d bytes", st.Events, st.Nodes, st.Checkpoints, len(raw))
		built, raw = nil, nil
		runtime.GC() // what building left is not the stored case's to collect
		b.Run(fmt.Sprintf("stored/events=%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				fi, err := f.Stat()
				if err != nil {
					b.Fatal(err)
				}
				cp, _, err := OpenCheckpoints(fi.Size(), func(off int64, p []byte) error {
					_, err := f.ReadAt(p, off)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				view(b, cp, &buf)
				f.Close()
			}
			stored[n] = float64(b.Elapsed().Microseconds()) / 1e3 / float64(b.N)
			b.ReportMetric(float64(len(buf.Bytes())), "html-bytes")
		})
		// What format 1 paid on top: the whole set read before a seek.
		b.Run(fmt.Sprintf("whole/events=%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				raw, err := os.ReadFile(path)
				if err != nil {
					b.Fatal(err)
				}
				cp, _, err := UnmarshalCheckpoints(raw)
				if err != nil {
					b.Fatal(err)
				}
				view(b, cp, &buf)
			}
			whole[n] = float64(b.Elapsed().Microseconds()) / 1e3 / float64(b.N)
		})
		if n == 50000 {
			b.Run(fmt.Sprintf("rebuild/events=%d", n), func(b *testing.B) {
				var buf bytes.Buffer
				for b.Loop() {
					cp := NewCheckpoints(0)
					for _, e := range evs {
						_ = cp.Add(e)
					}
					view(b, cp, &buf)
				}
				rebuilt = float64(b.Elapsed().Microseconds()) / 1e3 / float64(b.N)
			})
		}
	}
	if stored[lengths[0]] == 0 {
		return // a -bench pattern left some out
	}
	b.Logf("issue 19's goal, figure ÷ goal (≤ 1 meets it):")
	for _, n := range lengths {
		b.Logf("  first DOM view after a restart, %7d events  %8.2f ms  goal ≤ %d ms  %5.2f  (reading the whole set: %.2f ms)",
			n, stored[n], goalMS, stored[n]/goalMS, whole[n])
	}
	for _, n := range lengths[1:] {
		b.Logf("  %7d ÷ %d events  %5.2f×  (goal: flat)", n, lengths[0], stored[n]/stored[lengths[0]])
	}
	if rebuilt > 0 {
		b.Logf("  rebuilding instead, 50000 events  %8.2f ms (%.0f× the stored set)", rebuilt, rebuilt/stored[50000])
	}
}
