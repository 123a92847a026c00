package dom

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
// before sets were kept; "stored" reads the kept set from a file and
// restores it. The stored case at two lengths shows it flat in the
// recording's length.
func BenchmarkFirstViewAfterRestart(b *testing.B) {
	for _, n := range []int{10000, 50000} {
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
		if err := os.WriteFile(path, built.Marshal(evs[len(evs)-1].Seq), 0o644); err != nil {
			b.Fatal(err)
		}
		st := built.Stats()
		b.Logf("%d events, %d nodes, %d checkpoints", st.Events, st.Nodes, st.Checkpoints)
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
			})
		}
		b.Run(fmt.Sprintf("stored/events=%d", n), func(b *testing.B) {
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
			b.ReportMetric(float64(len(buf.Bytes())), "html-bytes")
		})
	}
}
