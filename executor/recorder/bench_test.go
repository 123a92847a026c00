package recorder_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/wire"
)

// sink is an ingest endpoint that acknowledges every batch and keeps
// nothing: the benchmark measures the recorder, not the server (whose own
// costs flightrec bench measures), so the process's CPU and memory are the
// recorder's.
type sink struct {
	bytes atomic.Int64
	mu    sync.Mutex
	next  int
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/recordings":
		s.mu.Lock()
		s.next++
		id := fmt.Sprintf("bench%021d", s.next)
		s.mu.Unlock()
		mask := (&policy.Plan{MaskInputTypes: []string{"password", "hidden"}, MaskAutocomplete: []string{"cc-*"},
			MaskNamePatterns: []string{"card|pass(word)?"}}).MaskRules()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(wire.OpenReply{ID: id, Mask: &mask})
	case strings.HasSuffix(r.URL.Path, "/events"):
		s.bytes.Add(int64(len(body)))
		// The last line's seq is what the batch acknowledges through.
		lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
		var last struct {
			Seq uint64 `json:"seq"`
		}
		_ = json.Unmarshal(lines[len(lines)-1], &last)
		_ = json.NewEncoder(w).Encode(wire.AppendReply{AckedThrough: last.Seq})
	case strings.HasSuffix(r.URL.Path, "/finish"):
		_ = json.NewEncoder(w).Encode(wire.FinishReply{Root: "bafkreibench"})
	default:
		http.NotFound(w, r)
	}
}

// BenchmarkRecordDemoFlows records both demo flows per iteration and
// reports the recorder's output rate against recorded wall time, its own
// CPU (this process: recorder and sink) and the browser's (its process
// tree), both as a share of one core, and the recorder's memory.
//
//	go test -run '^$' -bench RecordDemoFlows -benchtime 1x -count 3 ./executor/recorder/
func BenchmarkRecordDemoFlows(b *testing.B) {
	path := testenv.RequireChromium(b)
	shop, err := demoapp.Start(demoapp.Options{GiftCardBug: true})
	if err != nil {
		b.Fatal(err)
	}
	defer shop.Close()
	var flows []*flow.Flow
	for _, name := range demoapp.FlowNames() {
		file, data, err := demoapp.FlowFile(name)
		if err != nil {
			b.Fatal(err)
		}
		fl, err := flow.Parse(file, data)
		if err != nil {
			b.Fatal(err)
		}
		flows = append(flows, fl.Expand(shop.URL()))
	}
	sk := &sink{}
	hs := httptest.NewServer(sk)
	defer hs.Close()
	c := client.New(hs.URL)

	var (
		events            uint64
		wall, browserCPU  time.Duration
		peakHeap          uint64
		stopHeap          = make(chan struct{})
		heapDone          = make(chan struct{})
		ruStart, ruFinish syscall.Rusage
	)
	go func() { // sample the heap while recording
		defer close(heapDone)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stopHeap:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				peakHeap = max(peakHeap, ms.HeapInuse)
			}
		}
	}()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ruStart)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, fl := range flows {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			res, err := recorder.Record(ctx, recorder.Config{Chromium: path}, fl, c)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			events += res.Total
			wall += res.Wall
			browserCPU += res.BrowserCPU
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ruFinish)
	close(stopHeap)
	<-heapDone
	cpu := func(ru syscall.Rusage) time.Duration {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	own := cpu(ruFinish) - cpu(ruStart)
	b.ReportMetric(float64(events)/wall.Seconds(), "events/wall-s")
	b.ReportMetric(float64(sk.bytes.Load())/wall.Seconds()/1e3, "sent-KB/wall-s")
	b.ReportMetric(own.Seconds()/wall.Seconds(), "recorder-cores")
	b.ReportMetric(browserCPU.Seconds()/wall.Seconds(), "browser-cores")
	b.ReportMetric(float64(peakHeap)/(1<<20), "recorder-peak-heap-MiB")
	b.ReportMetric(float64(ruFinish.Maxrss)/1024, "process-maxrss-MiB")
}
