package webm

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"
)

// countingWriter counts what Encode writes.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)

// BenchmarkEncode encodes 60 s of 1280×800 JPEG frames at 5 fps (10
// steps) and reports seconds of video per second of wall time
// (video-s/s: above 1 keeps up with a recording) and the output's size
// per minute of video.
func BenchmarkEncode(b *testing.B) {
	testenv.RequireFFmpeg(b, "ffmpeg")
	rec := synth(b, 60*time.Second, 10, 3)
	opt := Options{Start: rec.start, End: rec.end}
	var size int64
	b.ResetTimer()
	for b.Loop() {
		var w countingWriter
		if err := Encode(context.Background(), opt, slices.Values(rec.frames), rec.chapters, &w); err != nil {
			b.Fatal(err)
		}
		size = w.n
	}
	video := float64(rec.end-rec.start) / 1e9
	b.ReportMetric(video*float64(b.N)/b.Elapsed().Seconds(), "video-s/s")
	b.ReportMetric(float64(size)/(video/60), "bytes/min")
}
