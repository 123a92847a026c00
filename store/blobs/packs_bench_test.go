package blobs

import (
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
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
		if err := p.put(ds, datas, nil); err != nil {
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

// BenchmarkPackOpenDelta reads blobs kept in a chain of deltas
// (packDeltaDepth after a whole one, as similar screencast frames are):
// 50 KB blobs as byte deltas, and 800×500 JPEG frames as JPEG deltas; it
// reports the time to read the chain's last, beside the time to read its
// head (one zstd frame, no base) measured in the same run.
func BenchmarkPackOpenDelta(b *testing.B) {
	b.Run("bytes", func(b *testing.B) { openDelta(b, similar(b, packDeltaDepth+1, 50_000)) })
	// 800×500 frames, Chromium's screencast size in the demo.
	b.Run("JPEG", func(b *testing.B) { openDelta(b, blobstest.Frames(b, packDeltaDepth+1, 800, 500, false, 1)) })
}

// openDelta is BenchmarkPackOpenDelta for a chain of datas.
func openDelta(b *testing.B, datas [][]byte) {
	dir := b.TempDir()
	fb, err := OpenFSBlobs(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer fb.Close()
	var cids []cid.Cid
	for i := range datas {
		cids = append(cids, putAll(b, fb, datas[i:i+1])...)
	}
	if loc, _ := fb.packs.has(sha256.Sum256(datas[packDeltaDepth])); !loc.d {
		b.Fatal("the chain's last blob is not a delta")
	}
	read := func(c cid.Cid) {
		fb.packs.frames = frameCache{} // a cold read: no frame kept from the last
		r, err := fb.Open(c)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, r)
		r.Close()
	}
	start := time.Now()
	for range 50 {
		read(cids[0])
	}
	head := time.Since(start) / 50
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		read(cids[packDeltaDepth])
	}
	b.StopTimer()
	b.ReportMetric(float64(head.Nanoseconds()), "head_ns/op")
}

// BenchmarkPackOpenScan opens a store whose pack being filled (no index:
// each process that opens the store scans it) holds 100 800×500 JPEG
// frames, most kept as JPEG deltas: what every open of such a store costs
// before its first put, reported per frame.
func BenchmarkPackOpenScan(b *testing.B) {
	frames := blobstest.Frames(b, 100, 800, 500, false, 3)
	dir := b.TempDir()
	fb, err := OpenFSBlobs(dir)
	if err != nil {
		b.Fatal(err)
	}
	for i := range frames {
		putAll(b, fb, frames[i:i+1])
	}
	fb.Close()
	for b.Loop() {
		fb, err := OpenFSBlobs(dir)
		if err != nil {
			b.Fatal(err)
		}
		fb.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(len(frames))/1000, "ms/frame")
}
