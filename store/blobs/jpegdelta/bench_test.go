package jpegdelta

import (
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
)

// BenchmarkFrame measures what a JPEG delta costs for an 800×500 frame
// (Chromium's screencast size in the demo): parsing a frame (on every
// put of a JPEG), making a delta (under the packs' lock), rebuilding a
// frame from one (every read, once per delta in its chain); and, the
// peer measured in the same run, compressing and decompressing the frame
// with zstd's fastest level, what every packed frame already costs.
func BenchmarkFrame(b *testing.B) {
	frames := blobstest.Frames(b, 2, 800, 500, false, 1)
	f0, err := Parse(frames[0])
	if err != nil {
		b.Fatal(err)
	}
	f1, _ := Parse(frames[1])
	delta, err := Delta(f1, f0)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("an 800×500 frame of %d bytes: a delta of %d", len(frames[1]), len(delta))
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(frames[1])))
		for b.Loop() {
			if _, err := Parse(frames[1]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("delta", func(b *testing.B) {
		for b.Loop() {
			if _, err := Delta(f1, f0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("signature", func(b *testing.B) {
		for b.Loop() {
			_ = f1.Signature()
		}
	})
	s0, s1 := f0.Signature(), f1.Signature()
	b.Run("alike", func(b *testing.B) {
		for b.Loop() {
			if Alike(s1, s0) < 0 {
				b.Fatal("not alike")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(frames[1])))
		for b.Loop() {
			if _, err := Decode(delta, frames[0], len(frames[1])); err != nil {
				b.Fatal(err)
			}
		}
	})
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	z := enc.EncodeAll(frames[1], nil)
	b.Run("zstd-compress", func(b *testing.B) {
		b.SetBytes(int64(len(frames[1])))
		for b.Loop() {
			enc.EncodeAll(frames[1], nil)
		}
	})
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	b.Run("zstd-decompress", func(b *testing.B) {
		b.SetBytes(int64(len(frames[1])))
		for b.Loop() {
			if _, err := dec.DecodeAll(z, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
