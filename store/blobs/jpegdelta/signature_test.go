package jpegdelta

import (
	"testing"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
)

// TestSignature: a frame is alike itself in every MCU; a frame of its
// page changed in a few MCUs is more alike it than another page is, and
// its delta against the most alike is the smallest; another geometry is
// never alike (-1).
func TestSignature(t *testing.T) {
	page := blobstest.Frames(t, 3, 320, 200, false, 51)
	other := blobstest.Frames(t, 1, 320, 200, false, 52)
	small := blobstest.Frames(t, 1, 160, 100, false, 51)
	sig := func(b []byte) (Signature, *Frame) {
		f, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return f.Signature(), f
	}
	s0, f0 := sig(page[0])
	s2, _ := sig(page[2])
	so, fo := sig(other[0])
	ss, _ := sig(small[0])
	mcus := len(s0.mcus)
	if got := Alike(s0, s0); got != mcus || mcus != 20*13 {
		t.Fatalf("a frame alike itself in %d of %d MCUs", got, mcus)
	}
	same, diff := Alike(s2, s0), Alike(s2, so)
	if same <= diff || same < mcus/2 {
		t.Fatalf("alike its page in %d MCUs, another page in %d, of %d", same, diff, mcus)
	}
	_, f2 := sig(page[2])
	d0, err := Delta(f2, f0)
	if err != nil {
		t.Fatal(err)
	}
	do, err := Delta(f2, fo)
	if err != nil {
		t.Fatal(err)
	}
	if len(d0) >= len(do) {
		t.Fatalf("the delta against the most alike takes %d bytes, against the other %d", len(d0), len(do))
	}
	if Alike(s0, ss) != -1 || Alike(Signature{}, Signature{}) != -1 {
		t.Fatal("another geometry, or no signature, is alike")
	}
}
