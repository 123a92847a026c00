package jpegdelta

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
)

// TestRoundTrip: a frame kept against the one before it comes back byte
// for byte, for colour (4:2:0) and grey frames of sizes that are and are
// not whole MCUs; a frame that changed in a few MCUs takes a small part of
// its bytes.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		w, h int
		gray bool
	}{{1, 1, false}, {8, 8, true}, {17, 9, false}, {33, 47, true}, {320, 200, false}, {800, 500, false}, {799, 501, true}} {
		frames := blobstest.Frames(t, 4, tc.w, tc.h, tc.gray, uint64(tc.w))
		for i := 1; i < len(frames); i++ {
			delta, err := Encode(frames[i], frames[i-1])
			if err != nil {
				t.Fatalf("%dx%d gray %v frame %d: %v", tc.w, tc.h, tc.gray, i, err)
			}
			back, err := Decode(delta, frames[i-1], len(frames[i]))
			if err != nil || !bytes.Equal(back, frames[i]) {
				t.Fatalf("%dx%d gray %v frame %d: round trip: %v", tc.w, tc.h, tc.gray, i, err)
			}
			if _, err := Decode(delta, frames[i-1], len(frames[i])-1); !errors.Is(err, ErrDamaged) {
				t.Fatalf("%dx%d: a rebuilt frame larger than the bound: %v", tc.w, tc.h, err)
			}
			if tc.w*tc.h >= 320*200 && len(delta)*5 > len(frames[i]) {
				t.Errorf("%dx%d gray %v frame %d: a delta of %d bytes for a %d-byte frame that changed in a few MCUs",
					tc.w, tc.h, tc.gray, i, len(delta), len(frames[i]))
			}
		}
		// Against itself: nothing coded but the header and the map.
		same, err := Encode(frames[0], frames[0])
		if err != nil {
			t.Fatal(err)
		}
		if back, err := Decode(same, frames[0], len(frames[0])); err != nil || !bytes.Equal(back, frames[0]) {
			t.Fatalf("%dx%d: a frame against itself: %v", tc.w, tc.h, err)
		}
	}
}

// TestNotApplicable: what this package does not rebuild exactly is
// refused, never kept wrong.
func TestNotApplicable(t *testing.T) {
	frames := blobstest.Frames(t, 2, 64, 48, false, 1)
	other := blobstest.Frames(t, 1, 64, 40, false, 1)
	gray := blobstest.Frames(t, 1, 64, 48, true, 1)
	sof := bytes.Index(frames[1], []byte{0xFF, 0xC0})
	progressive := append([]byte(nil), frames[1]...)
	progressive[sof+1] = 0xC2
	arithmetic := append([]byte(nil), frames[1]...)
	arithmetic[sof+1] = 0xC9
	// A restart interval: markers in the scan this package does not write.
	dri := append(append(append([]byte(nil), frames[1][:2]...), 0xFF, 0xDD, 0, 4, 0, 8), frames[1][2:]...)
	// Zero bits padding the scan's last byte, where libjpeg and Go write ones.
	eoi := len(frames[1]) - 2
	zeroPad := append([]byte(nil), frames[1]...)
	zeroPad[eoi-1] &^= 1
	for name, data := range map[string][]byte{
		"progressive": progressive, "arithmetic": arithmetic, "restart interval": dri,
		"truncated": frames[1][:len(frames[1])/2], "not a JPEG": []byte("GIF89a...."), "empty": nil,
		"trailing garbage in the scan": append(append(append([]byte(nil), frames[1][:eoi]...), 0x12, 0x34), frames[1][eoi:]...),
	} {
		if _, err := Encode(data, frames[0]); !errors.Is(err, ErrNotApplicable) {
			t.Errorf("%s: %v, want ErrNotApplicable", name, err)
		}
	}
	if _, err := Parse(zeroPad); err == nil {
		// Only refused when the flipped bit was padding; otherwise it
		// changed a coefficient and the frame is another, still exact.
		f, _ := parse(zeroPad)
		if again, _ := f.encode(len(zeroPad)); !bytes.Equal(again, zeroPad) {
			t.Error("a frame that does not come back exactly was parsed")
		}
	}
	for name, base := range map[string][]byte{"another size": other[0], "grey against colour": gray[0]} {
		if _, err := Encode(frames[1], base); !errors.Is(err, ErrNotApplicable) {
			t.Errorf("%s: %v, want ErrNotApplicable", name, err)
		}
	}
}

// TestDamagedDelta: every flipped byte of a delta either fails to decode
// or decodes to a JPEG within the bound (the pack's checksum and digest
// catch the rest); none panics.
func TestDamagedDelta(t *testing.T) {
	frames := blobstest.Frames(t, 2, 96, 64, false, 2)
	delta, err := Encode(frames[1], frames[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range delta {
		for _, bit := range []byte{0x01, 0x80} {
			d := append([]byte(nil), delta...)
			d[i] ^= bit
			out, err := Decode(d, frames[0], len(frames[1])*2)
			if err == nil && len(out) > len(frames[1])*2 {
				t.Fatalf("byte %d: %d bytes past the bound", i, len(out))
			}
			if err != nil && !errors.Is(err, ErrDamaged) {
				t.Fatalf("byte %d: %v", i, err)
			}
		}
	}
	for cut := range len(delta) {
		if _, err := Decode(delta[:cut], frames[0], len(frames[1])); err == nil {
			t.Fatalf("a delta cut to %d of %d bytes decoded", cut, len(delta))
		}
	}
}

// TestBomb: a JPEG of a few bytes that names a huge frame is refused
// before its coefficients are allocated.
func TestBomb(t *testing.T) {
	frames := blobstest.Frames(t, 1, 16, 16, false, 3)
	sof := bytes.Index(frames[0], []byte{0xFF, 0xC0})
	big := append([]byte(nil), frames[0]...)
	big[sof+5], big[sof+6], big[sof+7], big[sof+8] = 0xFF, 0xFF, 0xFF, 0xFF
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Parse(big); !errors.Is(err, ErrNotApplicable) {
		t.Fatalf("a 65535×65535 frame in %d bytes: %v", len(big), err)
	}
	if _, err := Decode([]byte(magic), big, 1<<20); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a delta against it: %v", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("refusing it allocated %d bytes", grew)
	}
}

func FuzzDecode(f *testing.F) {
	frames := blobstest.Frames(f, 3, 40, 24, false, 4)
	d1, _ := Encode(frames[1], frames[0])
	d2, _ := Encode(frames[2], frames[0])
	f.Add(d1, frames[0])
	f.Add(d2, frames[1])
	f.Add([]byte(magic), frames[2])
	f.Fuzz(func(t *testing.T, delta, base []byte) {
		out, err := Decode(delta, base, 1<<16)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("%d bytes past the bound", len(out))
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, fr := range blobstest.Frames(f, 2, 24, 16, false, 5) {
		f.Add(fr)
	}
	f.Add(blobstest.Frames(f, 1, 9, 9, true, 5)[0])
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := Parse(data)
		if err != nil {
			return
		}
		// What parses comes back exactly, and a delta against itself
		// rebuilds it.
		d, err := Delta(fr, fr)
		if err != nil {
			t.Fatalf("a parsed frame against itself: %v", err)
		}
		back, err := Decode(d, data, len(data))
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("a parsed frame against itself does not come back: %v", err)
		}
	})
}
