package dom

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand"
	"slices"
	"sync"
	"testing"
)

func marshal(t testing.TB, cp *Checkpoints, through uint64) []byte {
	t.Helper()
	b, err := cp.Marshal(through)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A set restored from its stored form gives, at every step and at every
// seq tried, the state replaying the recording from its start gives; it
// answers its counts as the set it was stored from, reads a checkpoint
// only when a seek needs it, and goes on taking events.
func TestStoredSetRoundTrip(t *testing.T) {
	evs := genEvents(genOpts{seed: 9, events: 3000, items: 40, steps: 30, snapshots: 2, noise: true})
	half := len(evs) * 2 / 3
	orig := build(t, evs[:half], 32)
	b := marshal(t, orig, evs[half-1].Seq+5)
	reads := 0
	got, through, err := OpenCheckpoints(int64(len(b)), func(off int64, p []byte) error {
		reads++
		copy(p, b[off:])
		return nil
	})
	if err != nil || through != evs[half-1].Seq+5 {
		t.Fatalf("Open: %v, through %d", err, through)
	}
	if a, b := got.Stats(), orig.Stats(); a.Events != b.Events || a.Kept != b.Kept || a.Malformed != b.Malformed ||
		a.Skipped != b.Skipped || a.Nodes != b.Nodes || a.Checkpoints != b.Checkpoints {
		t.Fatalf("stats %+v, stored from %+v", a, b)
	}
	if reads != 1 || len(b) <= firstRead {
		t.Fatalf("opening a set of %d bytes made %d reads, want 1 (the head)", len(b), reads)
	}
	if _, err := got.AfterStep(20); err != nil || reads != 2 {
		t.Fatalf("one seek: %v, %d reads, want the head's and one checkpoint's", err, reads)
	}
	// Seeks in parallel, reading checkpoints as they go (go test -race).
	par, _, err := UnmarshalCheckpoints(b)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := g; step <= 30; step += 2 {
				a, err := par.AfterStep(step)
				w, _ := orig.AfterStep(step)
				if err != nil || render(t, a) != render(t, w) {
					t.Errorf("a parallel seek to step %d differs (%v)", step, err)
				}
			}
		}()
	}
	wg.Wait()
	// Every step's before and after, and sampled seqs, against a replay
	// from the start.
	var seqs []uint64
	for step := 0; step <= 31; step++ {
		if got.SeqAfterStep(step) != orig.SeqAfterStep(step) {
			t.Fatalf("SeqAfterStep(%d) = %d, want %d", step, got.SeqAfterStep(step), orig.SeqAfterStep(step))
		}
		seqs = append(seqs, got.SeqAfterStep(step))
	}
	seqs = append(seqs, sampleSeqs(orig, evs[half-1].Seq, 200, rand.New(rand.NewSource(3)))...)
	slices.Sort(seqs)
	ref, next := NewDoc(), 0
	for _, seq := range seqs {
		for next < half && evs[next].Seq <= seq {
			_ = ref.Apply(evs[next].Data) // malformed events change nothing either way
			next++
		}
		a, err := got.At(seq)
		if err != nil {
			t.Fatalf("At(%d): %v", seq, err)
		}
		if render(t, a) != render(t, ref) {
			t.Fatalf("restored At(%d) renders differently from a replay from the start", seq)
		}
	}
	// Extended after a restore, it is the set built in one pass; and
	// stored again, it reads back the same.
	whole := build(t, evs, 32)
	for _, e := range evs[half:] {
		if err := got.Add(e); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	}
	again, _, err := UnmarshalCheckpoints(marshal(t, got, evs[len(evs)-1].Seq))
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range sampleSeqs(whole, evs[len(evs)-1].Seq, 100, rand.New(rand.NewSource(4))) {
		w, _ := whole.At(seq)
		for _, cp := range []*Checkpoints{got, again} {
			a, err := cp.At(seq)
			if err != nil || render(t, a) != render(t, w) {
				t.Fatalf("extended after restore, At(%d) differs (%v)", seq, err)
			}
		}
	}
}

// A stored set of another format version is ErrSetFormat; a truncated one
// is ErrStored; and a flipped bit anywhere is never another page: the set
// does not open, or the seeks that read the damaged checkpoint fail with
// ErrStored, and every other seek gives the state it was stored with.
func TestStoredSetDamage(t *testing.T) {
	evs := genEvents(genOpts{seed: 10, events: 800, items: 20, steps: 8})
	cp := build(t, evs, 32)
	b := marshal(t, cp, evs[len(evs)-1].Seq)
	other := append([]byte(setMagic), byte(SetFormat+1))
	other = append(other, b[len(setMagic)+1:]...)
	if _, _, err := UnmarshalCheckpoints(other); !errors.Is(err, ErrSetFormat) {
		t.Fatalf("another format: %v, want ErrSetFormat", err)
	}
	for n := 0; n < len(b); n += max(1, len(b)/500) {
		if _, _, err := UnmarshalCheckpoints(b[:n]); !errors.Is(err, ErrStored) {
			t.Fatalf("a set truncated to %d of %d bytes: %v, want ErrStored", n, len(b), err)
		}
	}
	var seqs []uint64
	want := map[uint64]string{}
	for step := 0; step <= 8; step++ {
		seqs = append(seqs, cp.SeqAfterStep(step))
	}
	// A seek to a checkpoint's seq reads that checkpoint's section: these
	// touch every section.
	for _, c := range cp.cps {
		seqs = append(seqs, c.seq)
	}
	for _, seq := range seqs {
		d, err := cp.At(seq)
		if err != nil {
			t.Fatal(err)
		}
		want[seq] = render(t, d)
	}
	// Where the sections begin: magic, format, head length, head, digest.
	hl, n := binary.Uvarint(b[len(setMagic)+1:])
	body := len(setMagic) + 1 + n + int(hl) + sha256.Size
	r := rand.New(rand.NewSource(1))
	refused, failedSeeks := 0, 0
	for k := range 80 {
		bad := append([]byte(nil), b...)
		// Half the flips in the head, half among the sections.
		at := len(setMagic) + 1 + r.Intn(body-len(setMagic)-1)
		if k%2 == 1 {
			at = body + r.Intn(len(b)-body)
		}
		bad[at] ^= byte(1 << r.Intn(8))
		got, _, err := UnmarshalCheckpoints(bad)
		if err != nil {
			if !errors.Is(err, ErrStored) && !errors.Is(err, ErrSetFormat) {
				t.Fatalf("a flipped bit: %v, want ErrStored", err)
			}
			refused++
			continue
		}
		if at < body {
			t.Fatalf("a bit flipped in the head at %d was not noticed", at)
		}
		for _, seq := range seqs {
			d, err := got.At(seq)
			if err != nil {
				if !errors.Is(err, ErrStored) {
					t.Fatalf("At(%d) of a damaged set: %v, want ErrStored", seq, err)
				}
				failedSeeks++
				continue
			}
			if render(t, d) != want[seq] {
				t.Fatalf("a flipped bit showed another page at seq %d", seq)
			}
		}
	}
	if refused == 0 || failedSeeks == 0 {
		t.Fatalf("300 flips: %d sets refused, %d seeks failed: the damage was not where it should be", refused, failedSeeks)
	}
}
