package objblobs_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/objstore"
)

func openNode(t *testing.T, obj objstore.Store, node string) *objblobs.Store {
	t.Helper()
	s, err := objblobs.OpenWith(context.Background(), obj, objblobs.Options{Node: node, Grace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func none(cid.Cid) bool { return false }

// worstMomentSweeper opens node's store (a grace of 300 ms) whose sweep,
// once it has listed the holds for the last time and before it deletes,
// runs *reuse once: where another node's reuse of a blob the sweep
// condemned cannot be seen in a hold, so that node must store it again.
func worstMomentSweeper(t *testing.T, obj objstore.Store, node string, reuse *func()) *objblobs.Store {
	t.Helper()
	s, err := objblobs.OpenWithHook(context.Background(), obj, objblobs.Options{Node: node, Grace: 300 * time.Millisecond},
		func(step string) {
			if step == "holds-listed-again" && *reuse != nil {
				(*reuse)()
				*reuse = nil
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustRead checks that s reads every blob of datas under cids.
func mustRead(t *testing.T, s *objblobs.Store, what string, cids []cid.Cid, datas [][]byte) {
	t.Helper()
	for i, c := range cids {
		if got := blobstest.Read(t, s.Open, c); !bytes.Equal(got, datas[i]) {
			t.Fatalf("%s: blob %d differs", what, i)
		}
	}
}

// mustBeGone checks that no blob of cids is stored any more.
func mustBeGone(t *testing.T, s *objblobs.Store, what string, cids []cid.Cid) {
	t.Helper()
	for i, c := range cids {
		if _, err := s.Open(c); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("%s: blob %d: %v, want ErrNotFound (collected)", what, i, err)
		}
	}
}

// TestSweepAcrossNodes: node B sweeps a bucket node A writes. Blobs a
// hold record names survive; blobs nothing names are collected (a pack
// all dead removed, a pack mostly dead rewritten with its live blobs); a
// blob A reuses after B condemned it (A's hold written after B's second
// listing could not be, so it is written as the sweep waits) survives,
// because A stores it again; a second sweeper meanwhile collects nothing.
func TestSweepAcrossNodes(t *testing.T) {
	obj := localObjects(t)
	a := openNode(t, obj(), "a")
	// B's sweep lets A's batch run at the worst moment: after B listed the
	// holds for the last time, before it deletes. A's hold is not seen;
	// A must notice the blobs are condemned and store them again.
	var reuse func()
	b := worstMomentSweeper(t, obj(), "b", &reuse)

	kept := blobstest.RandMany(t, 20, 1000)
	kc := blobstest.PutMany(t, a.PutMany, kept)
	if err := a.HoldFor("rec1", "batch", kc); err != nil {
		t.Fatal(err)
	}
	dead := blobstest.RandMany(t, 20, 1000)
	dc := blobstest.PutMany(t, a.PutMany, dead)
	large := blobstest.Rand(t, blobs.PackMaxBlob+1)
	lc := blobstest.PutMany(t, a.PutMany, [][]byte{large})
	// A pack mostly dead: two small live blobs, eight larger dead ones.
	mixed := append(blobstest.RandMany(t, 2, 100), blobstest.RandMany(t, 8, 3000)...)
	mc := blobstest.PutMany(t, a.PutMany, mixed)
	if err := a.HoldFor("rec1", "batch", mc[:2]); err != nil {
		t.Fatal(err)
	}
	// Dead now; A reuses them while the sweep waits.
	reused := blobstest.RandMany(t, 10, 1000)
	rc := blobstest.PutMany(t, a.PutMany, reused)
	// Dead too; A reuses them after the sweep deleted them (its index
	// still names their pack).
	late := blobstest.RandMany(t, 10, 1000)
	latec := blobstest.PutMany(t, a.PutMany, late)

	sw := b.BeginSweep()
	// One sweeper at a time: A's sweep meanwhile collects nothing.
	other := a.BeginSweep()
	if rep, err := other.Collect(none, nil); err != nil || rep.Removed != 0 {
		t.Fatalf("a second sweeper collected %+v, %v", rep, err)
	}
	other.End()

	// Hold first, then put, as ingest does.
	reuse = func() {
		if err := a.HoldFor("rec2", "batch", rc); err != nil {
			t.Error(err)
		}
		if _, err := a.PutMany(reused); err != nil {
			t.Error(err)
		}
	}
	rep, err := sw.Collect(none, nil)
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	if reuse != nil {
		t.Fatal("the sweep never reached its deletions")
	}
	if want := len(dead) + 1 + 8 + len(late) + len(reused); rep.Removed < want {
		t.Errorf("removed %d blobs, want at least %d: %+v", rep.Removed, want, rep)
	}
	mustBeGone(t, openNode(t, obj(), "peek"), "dead until reused", latec)
	if err := a.HoldFor("rec3", "batch", latec); err != nil {
		t.Fatal(err)
	}
	blobstest.PutMany(t, a.PutMany, late)

	c := openNode(t, obj(), "c") // a node opened after the sweep
	for _, s := range []*objblobs.Store{a, b, c} {
		mustRead(t, s, "held", kc, kept)
		mustRead(t, s, "held in a rewritten pack", mc[:2], mixed[:2])
		mustRead(t, s, "reused while condemned", rc, reused)
		mustRead(t, s, "reused once collected", latec, late)
	}
	mustBeGone(t, c, "dead pack", dc)
	mustBeGone(t, c, "dead loose", lc)
	mustBeGone(t, c, "dead part of a rewritten pack", mc[2:])

	// Once published, a recording's holds go; a sweep then collects what
	// only they kept, and keeps what live says.
	if err := a.ReleaseHolds("rec1", ""); err != nil {
		t.Fatal(err)
	}
	sw = b.BeginSweep()
	liveSet := map[cid.Cid]bool{kc[0]: true}
	if _, err := sw.Collect(func(x cid.Cid) bool { return liveSet[x] }, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	c = openNode(t, obj(), "c2")
	mustRead(t, c, "live", kc[:1], kept[:1])
	mustBeGone(t, c, "released", mc[:2])
	mustRead(t, c, "still held", rc, reused)
}

// TestSweepSparesRecordingsPublishedMeanwhile: a batch reuses a blob just
// before node A learns it is condemned, its recording is published and
// its holds released, all while B's sweep waits: B's second listing of
// the holds finds nothing, and B must spare the blob because the newly
// published manifest names it.
func TestSweepSparesRecordingsPublishedMeanwhile(t *testing.T) {
	obj := localObjects(t)
	// A manifest here is the CIDs it references, one a line.
	refs := func(m []byte) ([]cid.Cid, error) {
		out := []cid.Cid{blobs.Sum(m)}
		for _, line := range bytes.Fields(m) {
			c, err := blobs.ParseCID(string(line))
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	opts := func(node string) objblobs.Options {
		return objblobs.Options{Node: node, Grace: 4 * time.Second, Refs: refs}
	}
	a, err := objblobs.OpenWith(context.Background(), obj(), opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	x := blobstest.RandMany(t, 3, 500)
	xc := blobstest.PutMany(t, a.PutMany, x) // dead: nothing holds them
	b, err := objblobs.OpenWithHook(context.Background(), obj(), opts("b"), func(step string) {
		switch step {
		case "condemning":
			// A's view of the condemned set is fresh, and empty.
			blobstest.PutMany(t, a.PutMany, blobstest.RandMany(t, 1, 10))
		case "condemned":
			// Within Grace/2 of that view: A reuses x without looking
			// again, publishes and releases the holds.
			if err := a.HoldFor("rec", "batch", xc); err != nil {
				t.Error(err)
			}
			blobstest.PutMany(t, a.PutMany, x)
			var m bytes.Buffer
			for _, c := range xc {
				m.WriteString(c.String() + "\n")
			}
			mc, _, err := a.Put(m.Bytes())
			if err == nil {
				err = a.PutRecordingFile("rec", "ROOT", []byte(mc.String()+"\n"))
			}
			if err == nil {
				err = a.ReleaseHolds("rec", "")
			}
			if err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	sw := b.BeginSweep()
	if _, err := sw.Collect(none, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	mustRead(t, openNode(t, obj(), "c"), "published while the sweep waited", xc, x)
}

// localObjects returns an opener of one directory of objects: each call
// is another node's view of the same bucket.
func localObjects(t *testing.T) func() objstore.Store {
	dir := t.TempDir()
	return func() objstore.Store {
		s, err := objstore.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// TestIndexSnapshot: a node that opens after another reads the pack index
// from its snapshot (no pack header read), the headers of packs written
// since only, and never indexes a pack a sweep removed.
func TestIndexSnapshot(t *testing.T) {
	obj := localObjects(t)
	a := openNode(t, obj(), "a")
	var batches [][][]byte
	for range 4 {
		batch := blobstest.RandMany(t, 3, 200)
		blobstest.PutMany(t, a.PutMany, batch)
		batches = append(batches, batch)
	}
	if b := openNode(t, obj(), "b"); b.HeaderReads() != 4 {
		t.Fatalf("the first node to open read %d headers, want 4", b.HeaderReads())
	}
	c := openNode(t, obj(), "c")
	if c.HeaderReads() != 0 {
		t.Fatalf("a node opening after a snapshot read %d headers, want 0", c.HeaderReads())
	}
	cids := blobstest.PutMany(t, a.PutMany, batches[2]) // already stored
	mustRead(t, c, "from the snapshot's index", cids, batches[2])
	late := blobstest.RandMany(t, 3, 200)
	blobstest.PutMany(t, a.PutMany, late)
	if d := openNode(t, obj(), "d"); d.HeaderReads() != 1 {
		t.Fatalf("read %d headers, want the one pack written since", d.HeaderReads())
	}
	// A sweep with nothing held collects every pack.
	sw := c.BeginSweep()
	if _, err := sw.Collect(none, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	e := openNode(t, obj(), "e")
	if n := blobstest.Count(t, e.Walk); n != 0 || e.HeaderReads() != 0 {
		t.Fatalf("after the sweep: %d blobs indexed, %d headers read", n, e.HeaderReads())
	}
}

// TestOneSweeperAtATime: while one node's sweep holds the lease, another
// node's sweep says so (Elsewhere) and collects nothing; once the first
// ends, the second can sweep.
func TestOneSweeperAtATime(t *testing.T) {
	obj := localObjects(t)
	a := openNode(t, obj(), "a")
	b := openNode(t, obj(), "b")
	dead := blobstest.PutMany(t, a.PutMany, blobstest.RandMany(t, 5, 1000))
	first := a.BeginSweep()
	second := b.BeginSweep()
	err := second.(interface{ Elsewhere() error }).Elsewhere()
	if !errors.Is(err, objblobs.ErrLeaseHeld) {
		t.Fatalf("second sweep while the first holds the lease: Elsewhere() = %v, want ErrLeaseHeld", err)
	}
	if rep, err := second.Collect(func(cid.Cid) bool { return false }, nil); err != nil || rep.Removed != 0 {
		t.Fatalf("second sweep collected %+v, %v: want nothing", rep, err)
	}
	second.End()
	if err := first.(interface{ Elsewhere() error }).Elsewhere(); err != nil {
		t.Fatalf("the lease holder's Elsewhere() = %v", err)
	}
	first.End()
	third := b.BeginSweep()
	defer third.End()
	if err := third.(interface{ Elsewhere() error }).Elsewhere(); err != nil {
		t.Fatalf("after the first sweep ended: Elsewhere() = %v", err)
	}
	_ = dead // unreferenced and unheld: only the lease kept the second sweep from them
}
