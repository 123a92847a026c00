package dom

import (
	"errors"
	"math/rand"
	"testing"
)

// A set restored from its stored form answers every seek, every step and
// its counts as the set it was stored from, and goes on taking events.
func TestStoredSetRoundTrip(t *testing.T) {
	evs := genEvents(genOpts{seed: 9, events: 3000, items: 40, steps: 30, snapshots: 2, noise: true})
	half := len(evs) * 2 / 3
	orig := build(t, evs[:half], 32)
	b := orig.Marshal(evs[half-1].Seq + 5)
	got, through, err := UnmarshalCheckpoints(b)
	if err != nil || through != evs[half-1].Seq+5 {
		t.Fatalf("Unmarshal: %v, through %d", err, through)
	}
	if a, b := got.Stats(), orig.Stats(); a.Events != b.Events || a.Kept != b.Kept || a.Malformed != b.Malformed ||
		a.Skipped != b.Skipped || a.Nodes != b.Nodes || a.Checkpoints != b.Checkpoints {
		t.Fatalf("stats %+v, stored from %+v", a, b)
	}
	for _, seq := range sampleSeqs(orig, evs[half-1].Seq, 200, rand.New(rand.NewSource(3))) {
		a, err := got.At(seq)
		if err != nil {
			t.Fatalf("At(%d): %v", seq, err)
		}
		b, _ := orig.At(seq)
		if render(t, a) != render(t, b) {
			t.Fatalf("restored At(%d) renders differently", seq)
		}
	}
	for step := 0; step <= 31; step++ {
		if got.SeqAfterStep(step) != orig.SeqAfterStep(step) {
			t.Fatalf("SeqAfterStep(%d) = %d, want %d", step, got.SeqAfterStep(step), orig.SeqAfterStep(step))
		}
	}
	// Extended after a restore, it is the set built in one pass.
	whole := build(t, evs, 32)
	for _, e := range evs[half:] {
		if err := got.Add(e); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	}
	for _, seq := range sampleSeqs(whole, evs[len(evs)-1].Seq, 100, rand.New(rand.NewSource(4))) {
		a, _ := got.At(seq)
		b, _ := whole.At(seq)
		if render(t, a) != render(t, b) {
			t.Fatalf("extended after restore, At(%d) differs", seq)
		}
	}
}

// A stored set of another format version is ErrSetFormat; a truncated one
// is an error; flipped bytes never panic (the blob's CID is what guards
// its bytes: this is about a set written wrong, not altered at rest).
func TestStoredSetRefused(t *testing.T) {
	evs := genEvents(genOpts{seed: 10, events: 600, items: 20, steps: 8})
	cp := build(t, evs, 32)
	b := cp.Marshal(evs[len(evs)-1].Seq)
	other := append([]byte(setMagic), byte(SetFormat+1))
	other = append(other, b[len(setMagic)+1:]...)
	if _, _, err := UnmarshalCheckpoints(other); !errors.Is(err, ErrSetFormat) {
		t.Fatalf("another format: %v, want ErrSetFormat", err)
	}
	for n := 0; n < len(b); n += max(1, len(b)/500) {
		if _, _, err := UnmarshalCheckpoints(b[:n]); err == nil {
			t.Fatalf("a set truncated to %d of %d bytes was read", n, len(b))
		}
	}
	r := rand.New(rand.NewSource(1))
	for range 300 {
		bad := append([]byte(nil), b...)
		bad[len(setMagic)+1+r.Intn(len(bad)-len(setMagic)-1)] ^= byte(1 + r.Intn(255))
		got, _, err := UnmarshalCheckpoints(bad)
		if err != nil {
			continue
		}
		// A flip inside compressed state or block bytes decodes as a set;
		// it must then fail at the seek, not panic.
		for _, seq := range []uint64{0, 100, 300, 600} {
			_, _ = got.At(seq)
		}
	}
}
