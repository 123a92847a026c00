package dom

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
)

func build(t testing.TB, evs []Event, every int) *Checkpoints {
	t.Helper()
	cp := NewCheckpoints(every)
	for _, e := range evs {
		if err := cp.Add(e); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Add(%d): %v", e.Seq, err)
		}
	}
	return cp
}

// sampleSeqs returns, ascending, n random seqs, every checkpoint's seq and
// its neighbours, 0 and the ends.
func sampleSeqs(cp *Checkpoints, last uint64, n int, r *rand.Rand) []uint64 {
	seqs := []uint64{0, 1, 2, last - 1, last, last + 10}
	for range n {
		seqs = append(seqs, uint64(r.Int63n(int64(last)+1)))
	}
	for _, c := range cp.cps {
		seqs = append(seqs, c.seq, c.seq+1)
		if c.seq > 0 {
			seqs = append(seqs, c.seq-1)
		}
	}
	slices.Sort(seqs)
	return slices.Compact(seqs)
}

// The state a checkpoint set gives at a seq is the state replaying the
// stream from its start gives, at every seq tried.
func TestCheckpointsMatchReplay(t *testing.T) {
	evs := genEvents(genOpts{seed: 1, events: 5000, items: 40, steps: 60, snapshots: 2, noise: true})
	for _, every := range []int{16, 7} {
		t.Run(fmt.Sprint("every=", every), func(t *testing.T) {
			cp := build(t, evs, every)
			st := cp.Stats()
			if st.Malformed == 0 || st.Ignored == 0 || st.Skipped == 0 || st.Kept < 3000 {
				t.Fatalf("the stream does not exercise what it should: %+v", st)
			}
			if st.Checkpoints < int(st.Kept)/every {
				t.Fatalf("%d checkpoints for %d kept events every %d", st.Checkpoints, st.Kept, every)
			}
			ref := NewDoc()
			next := 0
			seqs := sampleSeqs(cp, evs[len(evs)-1].Seq, 300, rand.New(rand.NewSource(2)))
			for _, seq := range seqs {
				for next < len(evs) && evs[next].Seq <= seq {
					_ = ref.Apply(evs[next].Data) // malformed events change nothing either way
					next++
				}
				got, err := cp.At(seq)
				if err != nil {
					t.Fatalf("At(%d): %v", seq, err)
				}
				if a, b := render(t, got), render(t, ref); a != b {
					t.Fatalf("At(%d) renders differently from a replay:\n%s\nvs\n%s", seq, a, b)
				}
				if got.Text() != ref.Text() || got.Skipped() != ref.Skipped() || got.Href() != ref.Href() {
					t.Fatalf("At(%d): text, skips or href differ", seq)
				}
			}
		})
	}
}

// The checkpoints land on step boundaries, so a step's before and after
// states replay nothing, and "after step n" is the last event of a step ≤ n.
func TestSteps(t *testing.T) {
	evs := genEvents(genOpts{seed: 3, events: 3000, items: 30, steps: 20})
	cp := build(t, evs, 64)
	for n := -1; n <= 22; n++ {
		var want uint64
		for _, e := range evs {
			if e.Step <= n {
				want = e.Seq
			}
		}
		if got := cp.SeqAfterStep(n); got != want {
			t.Fatalf("SeqAfterStep(%d) = %d, want %d", n, got, want)
		}
		if n < 1 || n > 20 {
			continue
		}
		if k := replays(t, cp, want); k != 0 {
			t.Errorf("the state after step %d (seq %d) replays %d events", n, want, k)
		}
		after, err := cp.AfterStep(n)
		if err != nil {
			t.Fatal(err)
		}
		before, err := cp.BeforeStep(n + 1)
		if err != nil {
			t.Fatal(err)
		}
		if render(t, after) != render(t, before) {
			t.Fatalf("after step %d is not before step %d", n, n+1)
		}
	}

	// Steps that go back: "after step n" is a prefix of the stream up to
	// the last event of a step ≤ n.
	cp = NewCheckpoints(4)
	base := fullEv(shop())
	texts := []string{"one", "two", "three", "four"}
	steps := []int{1, 2, 1, 3}
	if err := cp.Add(Event{Seq: 1, Step: 0, Data: base}); err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		ev := mutEv(mutM{Texts: []textM{{ID: 20, Value: &texts[i]}}})
		if err := cp.Add(Event{Seq: uint64(i + 2), Step: s, Data: ev}); err != nil {
			t.Fatal(err)
		}
	}
	for n, want := range map[int]uint64{0: 1, 1: 4, 2: 4, 3: 5, 9: 5} {
		if got := cp.SeqAfterStep(n); got != want {
			t.Errorf("SeqAfterStep(%d) = %d, want %d", n, got, want)
		}
	}
	d, _ := cp.AfterStep(1)
	if d.Text() != "Cart apple pear three A B" {
		t.Errorf("after step 1: %q", d.Text())
	}
	d, _ = cp.BeforeStep(0)
	if d.Text() != "" || d.Nodes() != 0 {
		t.Errorf("before step 0 is not empty: %q", d.Text())
	}
	if err := cp.Add(Event{Seq: 5, Data: base}); !errors.Is(err, ErrOrder) {
		t.Errorf("Add of an old seq = %v, want ErrOrder", err)
	}
}

// replays counts the events At(seq) replays after its checkpoint.
func replays(t testing.TB, cp *Checkpoints, seq uint64) int {
	t.Helper()
	i := sort.Search(len(cp.cps), func(i int) bool { return cp.cps[i].seq > seq }) - 1
	if i == len(cp.cps)-1 {
		k := 0
		for _, e := range cp.tail {
			if e.seq <= seq {
				k++
			}
		}
		if k == len(cp.tail) {
			return 0 // the live state is copied
		}
		return k
	}
	blk, err := decompress(cp.cps[i].block)
	if err != nil {
		t.Fatal(err)
	}
	k, s := 0, cp.cps[i].seq
	for len(blk) > 0 {
		d, n := binary.Uvarint(blk)
		size, m := binary.Uvarint(blk[n:])
		blk = blk[n+m+int(size):]
		if s += d; s <= seq {
			k++
		}
	}
	return k
}

// A set built in two goes, with reads between, equals one built at once.
func TestCheckpointsExtend(t *testing.T) {
	evs := genEvents(genOpts{seed: 4, events: 2000, items: 30, steps: 10, snapshots: 1})
	whole := build(t, evs, 32)
	part := build(t, evs[:1111], 32)
	if part.LastSeq() != 1111 {
		t.Fatalf("LastSeq = %d", part.LastSeq())
	}
	d, err := part.At(5000) // past the end: the live state
	if err != nil {
		t.Fatal(err)
	}
	want, _ := whole.At(1111)
	if render(t, d) != render(t, want) {
		t.Fatalf("the open set's end differs")
	}
	for _, e := range evs[1111:] {
		if err := part.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range sampleSeqs(whole, 2000, 100, rand.New(rand.NewSource(5))) {
		a, err := part.At(seq)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := whole.At(seq)
		if render(t, a) != render(t, b) {
			t.Fatalf("At(%d) differs after extending", seq)
		}
	}
}

func TestCache(t *testing.T) {
	evs := genEvents(genOpts{seed: 6, events: 1500, items: 30, steps: 10})
	var avail atomic.Uint64
	var fills atomic.Int32
	fill := func(cp *Checkpoints, from uint64) (uint64, error) {
		fills.Add(1)
		upTo := avail.Load()
		for _, e := range evs {
			if e.Seq > from && e.Seq <= upTo {
				if err := cp.Add(e); err != nil {
					return from, err
				}
			}
		}
		return upTo, nil
	}
	c := NewCache(1<<30, 64)

	avail.Store(700) // an open recording
	cp, err := c.Get("r1", 700, fill)
	if err != nil || cp.LastSeq() != 700 || fills.Load() != 1 {
		t.Fatalf("Get = %v, LastSeq %d, fills %d", err, cp.LastSeq(), fills.Load())
	}
	if cp2, _ := c.Get("r1", 650, fill); cp2 != cp || fills.Load() != 1 {
		t.Fatalf("a read within what was filled filled again")
	}
	avail.Store(1500) // it grew
	cp2, err := c.Get("r1", 1500, fill)
	if err != nil || cp2 != cp || cp.LastSeq() != 1500 || fills.Load() != 2 {
		t.Fatalf("extend: %v, LastSeq %d, fills %d", err, cp.LastSeq(), fills.Load())
	}
	whole := build(t, evs, 64)
	for _, seq := range []uint64{1, 333, 700, 701, 1200, 1500} {
		a, _ := cp.At(seq)
		b, _ := whole.At(seq)
		if render(t, a) != render(t, b) {
			t.Fatalf("cached set differs at %d", seq)
		}
	}
	c.Get("r1", 1500, fill) // accounts for the state At kept
	if c.Bytes() != cp.Bytes() || c.Len() != 1 {
		t.Fatalf("Bytes %d vs %d, Len %d", c.Bytes(), cp.Bytes(), c.Len())
	}

	// A failing fill keeps what it added, and the next Get goes on.
	boom := errors.New("store unavailable")
	half := func(cp *Checkpoints, from uint64) (uint64, error) {
		for _, e := range evs[from:800] {
			_ = cp.Add(e)
		}
		return 0, boom
	}
	cp3, err := c.Get("r2", 1500, half)
	if !errors.Is(err, boom) || cp3.LastSeq() != 800 {
		t.Fatalf("failing fill: %v, LastSeq %d", err, cp3.LastSeq())
	}
	var from uint64
	if _, err := c.Get("r2", 1500, func(cp *Checkpoints, f uint64) (uint64, error) { from = f; return fill(cp, f) }); err != nil || from != 800 {
		t.Fatalf("retry: %v from %d", err, from)
	}

	// The budget evicts the least recently used.
	small := NewCache(cp.Bytes()+cp.Bytes()/2, 64)
	for _, id := range []string{"a", "b", "a", "c"} {
		if _, err := small.Get(id, 1500, fill); err != nil {
			t.Fatal(err)
		}
	}
	if small.Len() != 1 || small.Bytes() > cp.Bytes()+cp.Bytes()/2 {
		t.Fatalf("Len %d, Bytes %d over budget", small.Len(), small.Bytes())
	}
	small.Remove("c")
	if small.Len() != 0 || small.Bytes() != 0 {
		t.Fatalf("after Remove: Len %d Bytes %d", small.Len(), small.Bytes())
	}

	// Concurrent readers and a growing recording (run with -race).
	avail.Store(300)
	cc := NewCache(1<<30, 16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 30; i++ {
				if g == 0 && i%3 == 0 {
					avail.Store(min(1500, avail.Load()+100))
				}
				up := avail.Load()
				cp, err := cc.Get("r", up, fill)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := cp.At(uint64(r.Int63n(int64(up) + 1))); err != nil {
					t.Error(err)
					return
				}
				_ = cp.Bytes()
			}
		}()
	}
	wg.Wait()
}
