// Package disk measures this machine's disk for benchmarks that report
// their throughput against it (the log's appends, the blob store's
// batches). It imports nothing of flightrec's, so the store's own tests
// can use it.
package disk

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Baseline measures this machine's write+fsync throughput, in MB/s, for
// chunks of n bytes appended to one file: the ceiling an fsync-per-batch
// log can reach.
func Baseline(b *testing.B, n int) float64 {
	f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := bytes.Repeat([]byte{'x'}, n)
	start := time.Now()
	var written int64
	for time.Since(start) < 500*time.Millisecond {
		if _, err := f.Write(p); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		written += int64(n)
	}
	return float64(written) / time.Since(start).Seconds() / 1e6
}
