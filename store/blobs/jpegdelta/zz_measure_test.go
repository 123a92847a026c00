package jpegdelta

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestZZMeasure(t *testing.T) {
	for _, dir := range []string{"/tmp/tr0/screencast"} {
		names, _ := filepath.Glob(dir + "/*.jpeg")
		sort.Strings(names)
		var frames [][]byte
		for _, n := range names {
			b, _ := os.ReadFile(n)
			frames = append(frames, b)
		}
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
		var raw, alone, bdelta, jd, jdz int
		var tEnc, tDec time.Duration
		for i, f := range frames {
			raw += len(f)
			a := len(enc.EncodeAll(f, nil))
			alone += a
			if i == 0 {
				bdelta += a
				jd += a
				jdz += a
				continue
			}
			base := frames[i-1]
			e2, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderDictRaw(1, base))
			bdelta += min(a, len(e2.EncodeAll(f, nil)))
			t0 := time.Now()
			d, err := Encode(f, base)
			tEnc += time.Since(t0)
			if err != nil {
				t.Logf("frame %d: %v", i, err)
				jd += a
				jdz += a
				continue
			}
			t0 = time.Now()
			back, err := Decode(d, base, 1<<24)
			tDec += time.Since(t0)
			if err != nil || !bytes.Equal(back, f) {
				t.Fatalf("frame %d: round trip %v", i, err)
			}
			jd += len(d)
			e3, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderDictRaw(2, Header(base)))
			jdz += min(a, len(e3.EncodeAll(d, nil)))
		}
		t.Logf("%s: %d frames raw %d, alone %d, byte deltas %d, jpeg deltas %d, zstd'd %d; enc %v dec %v", dir, len(frames), raw, alone, bdelta, jd, jdz, tEnc/time.Duration(len(frames)), tDec/time.Duration(len(frames)))
	}
}
