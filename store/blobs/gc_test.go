package blobs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/layout"
)

// liveSet is a mark set.
type liveSet map[string]bool

func (l liveSet) has(c cid.Cid) bool { return l[c.String()] }

// packFiles lists the pack directory of the blob directory dir.
func packFiles(t testing.TB, dir string) []string {
	t.Helper()
	return blobstest.Names(t, layout.BlobTree{Dir: dir}.Packs())
}

// TestCollectKeepsTouched: a blob Put again (a dedup) after BeginSweep is
// kept though the mark set does not have it — loose, packed, and by Put
// or PutMany — and a blob Put anew during the sweep is kept too.
func TestCollectKeepsTouched(t *testing.T) {
	b, _ := openTestBlobs(t)
	defer b.Close()
	b.packs.maxBytes = 8 << 10
	packed := blobsOf(t, 12, 1000)
	putAll(t, b, packed)
	putAll(t, b, blobsOf(t, 12, 1000)) // roll: packed ones are in full packs
	loose := blobsOf(t, 3, 1000)
	for _, l := range loose {
		if _, _, err := b.Put(l); err != nil {
			t.Fatal(err)
		}
	}
	sw := b.BeginSweep()
	defer sw.End()
	if _, created, err := b.Put(packed[0]); err != nil || created {
		t.Fatalf("dedup put: %v %v", created, err)
	}
	putAll(t, b, [][]byte{packed[1]})
	if _, _, err := b.Put(loose[0]); err != nil {
		t.Fatal(err)
	}
	putAll(t, b, [][]byte{loose[1]}) // packs it too
	fresh := randBytes(t, 900)
	putAll(t, b, [][]byte{fresh})
	rep, err := sw.Collect(func(cid.Cid) bool { return false }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range [][]byte{packed[0], packed[1], loose[0], loose[1], fresh} {
		if got := readBlob(t, b, Sum(d)); !bytes.Equal(got, d) {
			t.Fatal("a touched blob differs")
		}
		if !sw.Touched(Sum(d)) {
			t.Fatal("not recorded as touched")
		}
	}
	for _, d := range append(packed[2:], loose[2]) {
		if _, err := b.Stat(Sum(d)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an untouched dead blob survived: %v", err)
		}
	}
	if rep.Removed == 0 {
		t.Fatal("nothing removed")
	}
}

// TestBeginSweepWaitsForHolds: a sweep does not begin while a
// put-then-reference sequence that started before it is running.
func TestBeginSweepWaitsForHolds(t *testing.T) {
	b, _ := openTestBlobs(t)
	defer b.Close()
	release := b.Hold()
	x := randBytes(t, 100)
	putAll(t, b, [][]byte{x}) // before the sweep: not touched
	began := make(chan Sweeper)
	go func() { began <- b.BeginSweep() }()
	select {
	case <-began:
		t.Fatal("BeginSweep returned while a hold taken before it was held")
	default:
	}
	// Puts do not wait for a sweep that is beginning.
	later := b.Hold()
	putAll(t, b, [][]byte{randBytes(t, 10)})
	release()
	release() // idempotent
	later()
	sw := <-began
	if sw.Touched(Sum(x)) {
		t.Fatal("a put before the sweep counts as touched")
	}
	sw.End()
	sw.End()
	// The next sweep can begin.
	b.BeginSweep().End()
}

// TestCollectActivePack: the pack being filled is left alone while all
// its blobs stay; once one of them is dead it is finished and collected
// like a full pack, and the next put starts a new one.
func TestCollectActivePack(t *testing.T) {
	b, dir := openTestBlobs(t)
	defer b.Close()
	datas := blobsOf(t, 6, 1000)
	putAll(t, b, datas)
	before := packFiles(t, dir)
	sw := b.BeginSweep()
	rep, err := sw.Collect(func(cid.Cid) bool { return true }, nil)
	sw.End()
	if err != nil || rep.Removed != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	if after := packFiles(t, dir); !slices.Equal(before, after) {
		t.Fatalf("a sweep with nothing dead changed the packs %v to %v", before, after)
	}
	// Half of them dead: the pack is finished and rewritten.
	keep := map[string]bool{}
	for _, d := range datas[:3] {
		keep[Sum(d).String()] = true
	}
	sw = b.BeginSweep()
	rep, err = sw.Collect(func(c cid.Cid) bool { return keep[c.String()] }, nil)
	sw.End()
	if err != nil || rep.Removed != 3 {
		t.Fatalf("%+v %v", rep, err)
	}
	for _, d := range datas[:3] {
		readBlob(t, b, Sum(d))
	}
	for _, d := range datas[3:] {
		if _, err := b.Stat(Sum(d)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a dead blob of the active pack survived: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "packs", "00000001.pack")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the finished pack was not rewritten: %v", err)
	}
	putAll(t, b, [][]byte{randBytes(t, 10)}) // a new pack
}

// TestPackDuplicatesAtOpen: the same blob in two packs (a crash between
// a repack's new pack and the old one's removal) loads once.
func TestPackDuplicatesAtOpen(t *testing.T) {
	b, dir := openTestBlobs(t)
	b.packs.maxBytes = 1
	datas := blobsOf(t, 3, 500)
	putAll(t, b, datas)
	small := randBytes(t, 10)
	putAll(t, b, [][]byte{small}) // roll: pack 1 is full
	b.Close()
	pd := filepath.Join(dir, "packs")
	for _, ext := range []string{"pack", "idx"} {
		p, _ := os.ReadFile(filepath.Join(pd, "00000001."+ext))
		os.WriteFile(filepath.Join(pd, "00000007."+ext), p, 0o444)
	}
	// An orphan index and a half-written pack go at open.
	os.WriteFile(filepath.Join(pd, "00000009.idx"), []byte("x"), 0o444)
	os.WriteFile(filepath.Join(pd, ".tmp-123"), []byte("x"), 0o444)
	b2, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if n := walkCount(t, b2); n != 4 {
		t.Fatalf("walk: %d blobs, want 4", n)
	}
	for _, f := range []string{"00000009.idx", ".tmp-123"} {
		if _, err := os.Stat(filepath.Join(pd, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s not removed at open", f)
		}
	}
	for _, d := range datas {
		readBlob(t, b2, Sum(d))
	}
	// A sweep drops the copies the index does not use.
	sw := b2.BeginSweep()
	live := liveSet{SumString(small): true}
	for _, d := range datas {
		live[SumString(d)] = true
	}
	rep, err := sw.Collect(live.has, nil)
	sw.End()
	if err != nil || rep.Removed != 0 || rep.Kept != 3 { // pack 2 is still being filled
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := os.Stat(filepath.Join(pd, "00000001.pack")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the duplicate pack was kept: %v", err)
	}
	for _, d := range datas {
		readBlob(t, b2, Sum(d))
	}
}
