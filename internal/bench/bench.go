// Package bench measures flightrec's hot paths against this machine's own
// limits, measured in the same run: sha256 throughput (every byte stored is
// hashed once) and fsync'd sequential write bandwidth (every byte
// acknowledged is fsync'd once). Figures are medians of several runs.
package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// Options size a bench run.
type Options struct {
	Dir         string // scratch directory on the disk to measure
	Runs        int    // runs per figure; the median is reported
	SmallEvents int    // events per small-event run
	Frames      int    // 50 KB frames per frame run
	Clients     int    // concurrent recordings
	StepSteps   int    // steps of the step-view recording
	Progress    io.Writer
}

// Result holds every figure of one bench run.
type Result struct {
	SHA256MBps        float64 `json:"sha256_mb_per_s"`
	FsyncWriteMBps    float64 `json:"fsync_write_mb_per_s"`
	SmallEventBytes   float64 `json:"small_event_mean_bytes"`
	SmallEventsPerSec float64 `json:"small_events_per_s"`
	SmallMBps         float64 `json:"small_events_mb_per_s"`
	SmallVsSHA256     float64 `json:"small_events_mb_ratio_to_sha256"`
	SmallVsFsync      float64 `json:"small_events_mb_ratio_to_fsync_write"`
	// The same small events with redaction off, and the ratio (median of
	// per-run ratios); redaction's plan is evaluated once per recording.
	SmallUnredactedPerSec         float64 `json:"small_events_unredacted_per_s"`
	RedactedVsUnredacted          float64 `json:"redacted_to_unredacted_ratio"`
	PolicyEvaluationsPerRecording float64 `json:"policy_evaluations_per_recording"`
	// The process's CPU time per small event, redacted and not (medians),
	// and the median of per-run ratios unredacted/redacted: what redaction
	// costs, less swayed than the wall-clock ratio by a disk or a machine
	// shared with other work.
	SmallCPUMicros           float64 `json:"small_events_cpu_us_per_event"`
	SmallUnredactedCPUMicros float64 `json:"small_events_unredacted_cpu_us_per_event"`
	RedactedVsUnredactedCPU  float64 `json:"redacted_to_unredacted_cpu_ratio"`
	FrameMBps                float64 `json:"frame_ingest_mb_per_s"`
	FrameVsFsync             float64 `json:"frame_ingest_ratio_to_fsync_write"`
	FrameVsSHA256            float64 `json:"frame_ingest_ratio_to_sha256"`
	StepFirstMicros          float64 `json:"step_view_first_us"`
	StepLastMicros           float64 `json:"step_view_last_us"`
	StepLastFirstRatio       float64 `json:"step_view_last_to_first_ratio"`
	StepEvents               int     `json:"step_view_events_per_step"`
	Runs                     int     `json:"runs"`
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func (o *Options) logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// Run measures everything and returns the medians. Each run measures the
// machine's limits right before the ingest figures it is compared with:
// this kind of virtual disk is markedly faster on blocks it has written
// before, so limits measured once, apart, would not be comparable.
func Run(ctx context.Context, o Options) (*Result, error) {
	res := &Result{Runs: o.Runs}
	var sha, fs, small, smallMB, frames, frameRatio, first, last, unredacted, redRatio []float64
	var cpu, rawCPU, cpuRatio []float64 // CPU-µs per small event
	for i := 0; i < o.Runs; i++ {
		sha = append(sha, SHA256MBps())
		w, err := FsyncWriteMBps(o.Dir)
		if err != nil {
			return nil, err
		}
		fs = append(fs, w)
		mbps, err := ingestFrames(ctx, o)
		if err != nil {
			return nil, err
		}
		frames = append(frames, mbps)
		frameRatio = append(frameRatio, mbps/w)
		eps, smb, mean, err := ingestSmall(ctx, o, true)
		if err != nil {
			return nil, err
		}
		small, smallMB = append(small, eps), append(smallMB, smb)
		cpu = append(cpu, 1e6*lastCPU/float64(o.SmallEvents/o.Clients*o.Clients))
		res.SmallEventBytes = mean
		res.PolicyEvaluationsPerRecording = lastEvalsPerRecording
		raw, _, _, err := ingestSmall(ctx, o, false)
		if err != nil {
			return nil, err
		}
		unredacted = append(unredacted, raw)
		redRatio = append(redRatio, eps/raw)
		rawCPU = append(rawCPU, 1e6*lastCPU/float64(o.SmallEvents/o.Clients*o.Clients))
		cpuRatio = append(cpuRatio, rawCPU[i]/cpu[i])
		o.logf("run %d: sha256 %.0f MB/s, fsync'd write %.0f MB/s; frames %.1f MB/s (%.3f of it); small events %.0f/s redacted, %.0f/s unredacted (%.3f); CPU %.1f µs/event redacted, %.1f unredacted (%.3f)",
			i+1, sha[i], w, mbps, mbps/w, eps, raw, eps/raw, cpu[i], rawCPU[i], cpuRatio[i])
	}
	f, l, per, err := stepView(ctx, o)
	if err != nil {
		return nil, err
	}
	first, last = f, l
	res.StepEvents = per
	res.SHA256MBps, res.FsyncWriteMBps = median(sha), median(fs)
	res.SmallEventsPerSec, res.SmallMBps = median(small), median(smallMB)
	res.SmallUnredactedPerSec, res.RedactedVsUnredacted = median(unredacted), median(redRatio)
	res.SmallCPUMicros, res.SmallUnredactedCPUMicros, res.RedactedVsUnredactedCPU = median(cpu), median(rawCPU), median(cpuRatio)
	res.SmallVsSHA256, res.SmallVsFsync = res.SmallMBps/res.SHA256MBps, res.SmallMBps/res.FsyncWriteMBps
	res.FrameMBps = median(frames)
	res.FrameVsFsync, res.FrameVsSHA256 = median(frameRatio), res.FrameMBps/res.SHA256MBps
	res.StepFirstMicros, res.StepLastMicros = median(first), median(last)
	res.StepLastFirstRatio = res.StepLastMicros / res.StepFirstMicros
	return res, nil
}

// SHA256MBps hashes 64 MiB in 1 MiB pieces.
func SHA256MBps() float64 {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	for i := 0; i < 64; i++ {
		sha256.Sum256(buf)
	}
	return 64 * 1.048576 / time.Since(start).Seconds()
}

// FsyncWriteMBps writes 256 MiB sequentially in 1 MiB writes, each followed
// by fsync: the bandwidth of durable appends of 1 MiB batches.
func FsyncWriteMBps(dir string) (float64, error) {
	f, err := os.CreateTemp(dir, "fsync-bench-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// Incompressible bytes, like the JPEG frames measured against it: a
	// virtual disk may compress or dedupe a repeated pattern.
	bufs := make([][]byte, 8)
	rng := rand.NewChaCha8([32]byte{1})
	for i := range bufs {
		bufs[i] = make([]byte, 1<<20)
		rng.Read(bufs[i])
	}
	start := time.Now()
	for i := 0; i < 256; i++ {
		if _, err := f.Write(bufs[i%len(bufs)]); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return 256 * 1.048576 / time.Since(start).Seconds(), nil
}

// server starts the app in process behind a loopback HTTP listener.
func server(dir string, redaction bool) (*app.App, string, func(), error) {
	var cfg app.Config
	cfg.Store.Data = dir
	cfg.Ingest.Limits = ingest.DefaultLimits
	cfg.Ingest.MeasureWithoutRedaction = !redaction
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, "", nil, err
	}
	srv := httptest.NewServer(a.Handler())
	return a, srv.URL, func() { srv.Close(); a.Close() }, nil
}

// smallEvents makes n events of about 300 bytes: console lines, rrweb
// mutations, snapshots and receipts, the bulk of a real recording.
func smallEvents(n int, seed uint64) ([]event.Envelope, float64) {
	evs := make([]event.Envelope, n)
	ts := int64(1764483600000000000)
	var total int
	for i := range evs {
		ts += 1_000_000
		step := 1 + i/50
		var data string
		switch i % 4 {
		case 0:
			data = fmt.Sprintf(`{"level":"log","text":"cart updated: item %d qty %d total %d.%02d EUR (session %x)","url":"https://app.example/static/js/app.3f9a1c.js","line":%d,"column":%d}`, i, i%7, i%500, i%100, seed+uint64(i), 1000+i%900, i%80)
		case 1:
			data = fmt.Sprintf(`{"type":3,"timestamp":%d,"data":{"source":0,"texts":[{"id":%d,"value":"Subtotal: %d.%02d EUR"}],"attributes":[{"id":%d,"attributes":{"class":"price updated"}}],"removes":[],"adds":[]}}`, ts/1e6, i%900, i%500, i%100, i%901)
		case 2:
			data = fmt.Sprintf(`{"view":"delta","when":"after","origin":"https://pv-4718.preview.example","nonce":"%x","text":"+ status \"Saved\" @e%d\n- button \"Save\" @e%d\n  textbox \"Quantity\" value=\"%d\""}`, seed+uint64(i), i%99, i%98, i%9)
		case 3:
			data = fmt.Sprintf(`{"step":%d,"action":{"verb":"click","target":{"ref":"@e%d","role":"button","name":"Add to cart"}},"outcome":"done","rule":"preview-auto","started_at":%d,"ended_at":%d,"browser_seconds":0.21}`, step, i%99, ts, ts+1000)
		}
		kinds := []event.Kind{event.KindConsole, event.KindDOM, event.KindSnapshot, event.KindReceipt}
		evs[i] = event.Envelope{Seq: uint64(i + 1), TS: ts, Step: step, Kind: kinds[i%4], Data: json.RawMessage(data)}
		b, _ := json.Marshal(evs[i])
		total += len(b) + 1
	}
	return evs, float64(total) / float64(n)
}

// batches pre-encodes NDJSON batches so the client costs little during
// the measurement (data is already compact JSON: no re-encoding).
func batches(evs []event.Envelope, per int) [][]byte {
	var out [][]byte
	for i := 0; i < len(evs); i += per {
		var b []byte
		for _, e := range evs[i:min(i+per, len(evs))] {
			b = fmt.Appendf(b, `{"seq":%d,"ts":%d,"step":%d,"kind":%q,"data":%s}`+"\n", e.Seq, e.TS, e.Step, e.Kind, e.Data)
		}
		out = append(out, b)
	}
	return out
}

// ingestAll opens one recording per client, sends every client's batches
// concurrently over loopback HTTP and waits until the index has every
// event: the figure is end to end (HTTP, decode, fsync, index).
func ingestAll(ctx context.Context, a *app.App, base string, perClient [][][]byte, events int) (time.Duration, error) {
	c := client.New(base)
	ids := make([]string, len(perClient))
	for i := range ids {
		rep, err := c.Open(ctx, wire.OpenRequest{Project: "bench"})
		if err != nil {
			return 0, err
		}
		ids[i] = rep.ID
	}
	runtime.GC() // the set-up's garbage is not the measurement's
	cpu0 := cpuSeconds()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(perClient))
	for i, bs := range perClient {
		wg.Add(1)
		go func(id string, bs [][]byte) {
			defer wg.Done()
			for _, b := range bs {
				if _, err := c.Append(ctx, id, b); err != nil {
					errs <- err
					return
				}
			}
		}(ids[i], bs)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	for _, id := range ids {
		for {
			row, err := a.Index.Recording(ctx, id)
			if err == nil && row.Events == int64(events/len(ids)) {
				break
			}
			if time.Since(start) > 5*time.Minute {
				return 0, fmt.Errorf("index did not catch up")
			}
			time.Sleep(time.Millisecond)
		}
	}
	d := time.Since(start)
	lastCPU = cpuSeconds() - cpu0
	return d, nil
}

// lastEvalsPerRecording is the policy evaluations per recording of the last
// redacted small-event run.
var lastEvalsPerRecording float64

// lastCPU is the process CPU seconds (user+system) of the last ingestAll:
// server and client together, since both run in this process.
var lastCPU float64

func cpuSeconds() float64 { return rusageSeconds(syscall.RUSAGE_SELF) }

// childCPUSeconds is the user+system time of this process's waited-for
// children (ffmpeg).
func childCPUSeconds() float64 { return rusageSeconds(syscall.RUSAGE_CHILDREN) }

// rusageSeconds is who's user+system CPU time.
func rusageSeconds(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func ingestSmall(ctx context.Context, o Options, redaction bool) (eps, mbps, mean float64, err error) {
	dir, err := os.MkdirTemp(o.Dir, "small-*")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	a, base, stop, err := server(dir, redaction)
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	per := o.SmallEvents / o.Clients
	var perClient [][][]byte
	var bytesSent int
	for i := 0; i < o.Clients; i++ {
		evs, m := smallEvents(per, uint64(i))
		mean = m
		bs := batches(evs, 1000)
		for _, b := range bs {
			bytesSent += len(b)
		}
		perClient = append(perClient, bs)
	}
	d, err := ingestAll(ctx, a, base, perClient, per*o.Clients)
	if err != nil {
		return 0, 0, 0, err
	}
	if redaction {
		lastEvalsPerRecording = float64(a.Policy.Evaluations()) / float64(o.Clients)
	}
	return float64(per*o.Clients) / d.Seconds(), float64(bytesSent) / 1e6 / d.Seconds(), mean, nil
}

// framesPerBatch is how many 50 KB frames one append carries: 4 MB, the
// batch size flightrec ingest sends by default (--batch-bytes).
var framesPerBatch = 80

func ingestFrames(ctx context.Context, o Options) (float64, error) {
	dir, err := os.MkdirTemp(o.Dir, "frames-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	a, base, stop, err := server(dir, true)
	if err != nil {
		return 0, err
	}
	defer stop()
	per := o.Frames / o.Clients
	var perClient [][][]byte
	img := make([]byte, 50_000)
	rng := rand.NewChaCha8([32]byte{2})
	for c := 0; c < o.Clients; c++ {
		evs := make([]event.Envelope, per)
		for i := range evs {
			// Random bytes: distinct per frame (dedup does not flatter the
			// figure) and incompressible, like JPEG.
			rng.Read(img)
			data := fmt.Sprintf(`{"mime":"image/jpeg","image":"%s","width":1280,"height":800,"cursor":{"x":%d,"y":%d}}`,
				base64.StdEncoding.EncodeToString(img), i%1280, i%800)
			evs[i] = event.Envelope{Seq: uint64(i + 1), TS: int64(1764483600000000000 + i*200_000_000), Step: 1 + i/5,
				Kind: event.KindFrame, Data: json.RawMessage(data)}
		}
		perClient = append(perClient, batches(evs, framesPerBatch))
	}
	d, err := ingestAll(ctx, a, base, perClient, per*o.Clients)
	if err != nil {
		return 0, err
	}
	o.logf("  frames: %.2f s wall, %.2f CPU-s (%.0f%% of %d cores), %.2f CPU-ms per MB", d.Seconds(), lastCPU,
		100*lastCPU/d.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), 1000*lastCPU/(float64(per*o.Clients)*0.05))
	return float64(per*o.Clients) * 0.05 / d.Seconds(), nil
}

// stepView records StepSteps steps and times GET …/steps/1 and
// …/steps/StepSteps alternately, many times each.
func stepView(ctx context.Context, o Options) (first, last []float64, perStep int, err error) {
	dir, err := os.MkdirTemp(o.Dir, "steps-*")
	if err != nil {
		return nil, nil, 0, err
	}
	defer os.RemoveAll(dir)
	a, base, stop, err := server(dir, true)
	if err != nil {
		return nil, nil, 0, err
	}
	defer stop()
	evs := testgen.Recording(testgen.Options{Seed: 9, Steps: o.StepSteps, EventsPerStep: 10})
	perStep = 11
	if _, err := ingestAll(ctx, a, base, [][][]byte{batches(evs, 2000)}, len(evs)); err != nil {
		return nil, nil, 0, err
	}
	rows, err := a.Index.Recordings(ctx, store.RecordingFilter{Limit: 1})
	if err != nil || len(rows) != 1 {
		return nil, nil, 0, fmt.Errorf("step bench: %v", err)
	}
	id := rows[0].ID
	get := func(step int) (float64, error) {
		start := time.Now()
		resp, err := http.Get(fmt.Sprintf("%s/v1/recordings/%s/steps/%d", base, id, step))
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"kind":"receipt"`)) {
			return 0, fmt.Errorf("step %d: %d", step, resp.StatusCode)
		}
		return float64(time.Since(start).Microseconds()), nil
	}
	for i := 0; i < 200; i++ {
		f, err := get(1)
		if err != nil {
			return nil, nil, 0, err
		}
		l, err := get(o.StepSteps)
		if err != nil {
			return nil, nil, 0, err
		}
		if i >= 20 { // warm-up
			first, last = append(first, f), append(last, l)
		}
	}
	return first, last, perStep, nil
}

// Report renders a result for people.
func Report(r *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "machine limits (median of %d):\n", r.Runs)
	fmt.Fprintf(&b, "  sha256                 %8.0f MB/s\n", r.SHA256MBps)
	fmt.Fprintf(&b, "  fsync'd write (1 MiB)  %8.0f MB/s\n", r.FsyncWriteMBps)
	fmt.Fprintf(&b, "ingest, end to end (loopback HTTP, decode, validate, fsync'd log, index caught up):\n")
	fmt.Fprintf(&b, "  small events (%.0f B)  %8.0f events/s  %6.1f MB/s  = %.3f of sha256, %.3f of fsync'd write\n",
		r.SmallEventBytes, r.SmallEventsPerSec, r.SmallMBps, r.SmallVsSHA256, r.SmallVsFsync)
	fmt.Fprintf(&b, "  redaction on vs off   %8.0f events/s unredacted; redacted = %.3f of it (median of per-run ratios); %.0f policy evaluation(s) per recording\n",
		r.SmallUnredactedPerSec, r.RedactedVsUnredacted, r.PolicyEvaluationsPerRecording)
	fmt.Fprintf(&b, "  redaction CPU         %8.1f µs/event redacted, %.1f unredacted: unredacted = %.3f of redacted (median of per-run ratios)\n",
		r.SmallCPUMicros, r.SmallUnredactedCPUMicros, r.RedactedVsUnredactedCPU)
	fmt.Fprintf(&b, "  frames (50 KB blobs)   %8.1f MB/s     = %.3f of fsync'd write (median of per-run ratios), %.3f of sha256\n",
		r.FrameMBps, r.FrameVsFsync, r.FrameVsSHA256)
	fmt.Fprintf(&b, "step view (%d events per step):\n", r.StepEvents)
	fmt.Fprintf(&b, "  first step %.0f µs, last step %.0f µs, ratio %.2f\n",
		r.StepFirstMicros, r.StepLastMicros, r.StepLastFirstRatio)
	return b.String()
}

// ScratchDir returns a scratch directory under dir.
func ScratchDir(dir string) (string, func(), error) {
	d, err := os.MkdirTemp(dir, "flightrec-bench-*")
	if err != nil {
		return "", nil, err
	}
	return filepath.Clean(d), func() { os.RemoveAll(d) }, nil
}
