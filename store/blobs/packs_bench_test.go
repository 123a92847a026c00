package blobs

import (
	"crypto/rand"
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

// BenchmarkPackPut appends batches of 20 × 50 KB frames to a pack and
// reports MB/s beside the same process's 1 MiB write+fsync bandwidth.
func BenchmarkPackPut(b *testing.B) {
	dir := b.TempDir()
	p, err := openPacks(dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer p.close()
	datas := make([][]byte, 20)
	ds := make([][32]byte, 20)
	b.SetBytes(20 * 50_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range datas {
			datas[j] = make([]byte, 50_000)
			rand.Read(datas[j])
			ds[j] = sha256.Sum256(datas[j])
		}
		b.StartTimer()
		if err := p.put(ds, datas); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	f, _ := os.CreateTemp(dir, "base")
	buf := make([]byte, 1<<20)
	start := time.Now()
	for i := 0; i < 64; i++ {
		f.Write(buf)
		f.Sync()
	}
	b.ReportMetric(64*1.048576/time.Since(start).Seconds(), "baseline_MB/s")
	f.Close()
}
