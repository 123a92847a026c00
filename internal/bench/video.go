package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/wire"
)

// VideoOptions size the executor-video benchmark.
type VideoOptions struct {
	Dir     string // scratch directory
	Runs    int    // runs per figure; the median is reported
	Seconds int    // length of the synthetic stream
	Width   int
	Height  int
}

// VideoResult is the executor-video benchmark: ingesting a WebM stream
// (parse, GOP blobs, fsync'd log) as received, and with a mask over every
// GOP (each decoded, painted and re-encoded by ffmpeg).
type VideoResult struct {
	Seconds       int     `json:"video_seconds"`
	Width         int     `json:"width"`
	Height        int     `json:"height"`
	StreamMB      float64 `json:"stream_mb"`
	GOPs          int     `json:"gops"`
	SHA256MBps    float64 `json:"sha256_mb_per_s"`
	PlainPerCPU   float64 `json:"unmasked_video_s_per_cpu_s"`
	PlainPerWall  float64 `json:"unmasked_video_s_per_s"`
	PlainVsSHA256 float64 `json:"unmasked_stream_mb_ratio_to_sha256"`
	MaskedPerCPU  float64 `json:"masked_video_s_per_cpu_s"`
	MaskedPerWall float64 `json:"masked_video_s_per_s"`
	// MaskedVsPlain is the CPU cost ratio: masked video-seconds per CPU
	// second over unmasked (median of per-run ratios).
	MaskedVsPlain float64 `json:"masked_to_unmasked_cpu_ratio"`
	Runs          int     `json:"runs"`
}

// videoChunk is how much of the stream one video event carries.
const videoChunk = 256 << 10

// RunVideo makes a screen-like synthetic stream with ffmpeg (a light page
// with a panel of moving content sliding across it, 5 frames a second, a
// keyframe every 10 s, VP8), then ingests it Runs times unmasked and Runs
// times masked, through the whole server on loopback HTTP. CPU is this
// process's and its children's (ffmpeg) user+system time.
func RunVideo(ctx context.Context, o VideoOptions, progress func(string, ...any)) (*VideoResult, error) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("the video benchmark needs ffmpeg (apt-get install ffmpeg): %w", err)
	}
	path := filepath.Join(o.Dir, "stream.webm")
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, ff, "-hide_banner", "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", fmt.Sprintf("color=c=0xf4f4f4:s=%dx%d:r=5", o.Width, o.Height),
		"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=s=%dx%d:r=5", o.Width/4, o.Height/4),
		"-filter_complex", fmt.Sprintf("[0][1]overlay=x='mod(t*%d,%d)':y=%d:shortest=1", o.Width/20, o.Width*3/4, o.Height/3),
		"-t", strconv.Itoa(o.Seconds), "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8",
		"-b:v", "1M", "-g", "50", "-keyint_min", "50", "-threads", "2", "-f", "webm", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ffmpeg making the stream: %v: %s", err, out)
	}
	stream, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	progress("video: a %d s %dx%d stream of %.1f MB made in %.0f s", o.Seconds, o.Width, o.Height,
		float64(len(stream))/1e6, time.Since(t0).Seconds())
	res := &VideoResult{Seconds: o.Seconds, Width: o.Width, Height: o.Height, StreamMB: float64(len(stream)) / 1e6, Runs: o.Runs}
	var sha, plainCPU, plainWall, maskCPU, maskWall, ratio []float64
	for i := 0; i < o.Runs; i++ {
		sha = append(sha, SHA256MBps())
		pc, pw, gops, err := ingestVideo(ctx, o, stream, false)
		if err != nil {
			return nil, err
		}
		mc, mw, _, err := ingestVideo(ctx, o, stream, true)
		if err != nil {
			return nil, err
		}
		res.GOPs = gops
		s := float64(o.Seconds)
		plainCPU, plainWall = append(plainCPU, s/pc), append(plainWall, s/pw)
		maskCPU, maskWall = append(maskCPU, s/mc), append(maskWall, s/mw)
		ratio = append(ratio, (s/mc)/(s/pc))
		progress("video run %d: unmasked %.1f video-s per CPU-s (%.1f per s); masked %.2f per CPU-s (%.2f per s); %d GOPs",
			i+1, s/pc, s/pw, s/mc, s/mw, gops)
	}
	res.SHA256MBps = median(sha)
	res.PlainPerCPU, res.PlainPerWall = median(plainCPU), median(plainWall)
	res.MaskedPerCPU, res.MaskedPerWall = median(maskCPU), median(maskWall)
	res.MaskedVsPlain = median(ratio)
	res.PlainVsSHA256 = res.StreamMB * res.PlainPerWall / float64(o.Seconds) / res.SHA256MBps
	return res, nil
}

// ingestVideo sends the stream to a fresh server in 256 KiB chunks, eight
// to a batch, with (masked) one mask rectangle over the whole stream so
// every GOP is re-encoded, and finishes the recording. It returns the CPU
// and wall seconds from the first append to the finish, and the GOPs
// stored.
func ingestVideo(ctx context.Context, o VideoOptions, stream []byte, masked bool) (cpu, wall float64, gops int, err error) {
	dir, err := os.MkdirTemp(o.Dir, "video-*")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	a, base, stop, err := server(dir, true)
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	c := client.New(base)
	rep, err := c.Open(ctx, wire.OpenRequest{Project: "bench-video"})
	if err != nil {
		return 0, 0, 0, err
	}
	const start = int64(1_764_483_600_000_000_000)
	var lines [][]byte
	seq := uint64(1)
	add := func(ts int64, data any) {
		b, _ := json.Marshal(data)
		l, _ := json.Marshal(event.Envelope{Seq: seq, TS: ts, Step: 1, Kind: event.KindVideo, Data: b})
		lines = append(lines, l)
		seq++
	}
	if masked {
		add(start, map[string]any{"mime": "video/webm", "stream_start_ts": start, "masks": []event.TimedRect{{
			Rect:   event.Rect{X: o.Width / 8, Y: o.Height / 4, W: o.Width / 2, H: o.Height / 8},
			FromTS: start, ToTS: start + int64(o.Seconds)*1e9}}})
	}
	for off := 0; off < len(stream); off += videoChunk {
		end := min(off+videoChunk, len(stream))
		ts := start + int64(float64(o.Seconds)*1e9*float64(off)/float64(len(stream)))
		add(ts+1, map[string]any{"mime": "video/webm", "stream_start_ts": start,
			"chunk": base64.StdEncoding.EncodeToString(stream[off:end])})
	}
	runtime.GC()
	cpu0 := cpuSeconds() + childCPUSeconds()
	t0 := time.Now()
	for i := 0; i < len(lines); i += 8 {
		body := bytes.Join(lines[i:min(i+8, len(lines))], []byte("\n"))
		if _, err := c.Append(ctx, rep.ID, body); err != nil {
			return 0, 0, 0, err
		}
	}
	if _, err := c.Finish(ctx, rep.ID, "pass"); err != nil {
		return 0, 0, 0, err
	}
	wall = time.Since(t0).Seconds()
	cpu = cpuSeconds() + childCPUSeconds() - cpu0
	// Count what was stored: every GOP kept, none dropped.
	m, _, err := a.Store.Manifest(rep.ID)
	if err != nil {
		return 0, 0, 0, err
	}
	gops = len(m.Blobs)
	rules := map[string]int64{}
	if m.Redaction != nil {
		for _, r := range m.Redaction.Rules {
			rules[r.Rule] += r.Count
		}
	}
	switch {
	case rules["video:undecodable"]+rules["video:unmaskable"]+rules["video:dropped-unmasked"] > 0:
		return 0, 0, 0, fmt.Errorf("GOPs were dropped: %v", rules)
	case masked && rules["video:mask"] == 0:
		return 0, 0, 0, fmt.Errorf("the masked run masked nothing: %v", rules)
	}
	return cpu, wall, gops, nil
}

// VideoReport renders a video result for people.
func VideoReport(r *VideoResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "executor video ingest (%d s of %dx%d VP8, %.1f MB, %d GOPs; median of %d; CPU = server + ffmpeg):\n",
		r.Seconds, r.Width, r.Height, r.StreamMB, r.GOPs, r.Runs)
	fmt.Fprintf(&b, "  unmasked   %8.1f video-s per CPU-s  %8.1f video-s per s  (stream rate %.4f of sha256)\n",
		r.PlainPerCPU, r.PlainPerWall, r.PlainVsSHA256)
	fmt.Fprintf(&b, "  masked     %8.2f video-s per CPU-s  %8.2f video-s per s  (every GOP re-encoded: %.3f of unmasked per CPU-s)\n",
		r.MaskedPerCPU, r.MaskedPerWall, r.MaskedVsPlain)
	return b.String()
}
