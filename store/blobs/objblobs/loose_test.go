package objblobs_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/objstore"
)

// logLike is about size bytes of JSON lines such as a recording's log
// holds, and the offsets where its records end.
func logLike(seed uint64, size int) ([]byte, []int64) {
	r := rand.New(rand.NewPCG(seed, 7))
	kinds := []string{"console", "network", "dom", "input", "navigation"}
	var data []byte
	var cuts []int64
	for i := 0; len(data) < size; i++ {
		rec := fmt.Sprintf(`{"seq":%d,"t":%d,"kind":%q,"url":"https://app.example.com/items/%d?page=%d","status":%d,"ms":%d,"id":"%016x"}`+"\n",
			i, 1700000000000+int64(i)*37+r.Int64N(30), kinds[r.IntN(len(kinds))], r.IntN(5000), r.IntN(40),
			[]int{200, 200, 200, 304, 404, 500}[r.IntN(6)], r.IntN(900), r.Uint64())
		data = append(data, rec...)
		cuts = append(cuts, int64(len(data)))
	}
	return data, cuts
}

func plainKey(c cid.Cid) string { return "loose/" + layout.ShardOf(c.String()) + "/" + c.String() }
func zstKey(c cid.Cid) string   { return plainKey(c) + layout.CompressedSuffix }

// objectSize is key's size, or -1 when it does not exist.
func objectSize(t *testing.T, obj objstore.Store, key string) int64 {
	t.Helper()
	info, err := obj.Stat(context.Background(), key)
	if errors.Is(err, objstore.ErrNotExist) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return info.Size
}

// frameEnds reads the seek table of a seekable blob by hand (the layout
// blobs/zseek.go documents) and returns where its frames end,
// uncompressed.
func frameEnds(t *testing.T, enc []byte) []int64 {
	t.Helper()
	if len(enc) < 24 || string(enc[:8]) != "FRZSEK\x00\x03" || string(enc[len(enc)-8:]) != "FRZTAB\x00\x01" {
		t.Fatalf("not a seekable blob: %q…", enc[:min(8, len(enc))])
	}
	n := int(binary.LittleEndian.Uint32(enc[len(enc)-16:]))
	table := enc[len(enc)-16-8*n : len(enc)-16]
	var ends []int64
	var at int64
	for i := range n {
		at += int64(binary.LittleEndian.Uint32(table[8*i+4:]))
		ends = append(ends, at)
	}
	return ends
}

// countingStore counts the bytes asked for by ranged GETs.
type countingStore struct {
	objstore.Store
	ranged atomic.Int64
}

func (c *countingStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if n > 0 {
		c.ranged.Add(n)
	}
	return c.Store.GetRange(ctx, key, off, n)
}

// readModes runs f with the default read sizes (a small compressed
// object read whole and checked at Open) and with every compressed
// object read by ranges, its seek table found in a 1 KiB tail.
func readModes(t *testing.T, f func(t *testing.T, ranged bool)) {
	t.Run("whole", func(t *testing.T) { f(t, false) })
	t.Run("ranged", func(t *testing.T) {
		defer objblobs.SetReadSizes(0, 1<<10)()
		f(t, true)
	})
}

// looseSeekable: PutSeekable of a 300 KB log stores one compressed
// object (no plain one), much smaller than the log, whose frames end at
// the given cuts; it reads back at any offset on the writing node and on
// another, by ranges (a read in the middle fetches a fraction of the
// object), and from several goroutines at once; Stat and Walk give the
// log's size, StoredBytes the object's.
func looseSeekable(t *testing.T, obj func() objstore.Store, ranged bool) {
	data, cuts := logLike(1, 300<<10)
	a := open(t, obj())
	c, created, err := a.PutSeekable(data, cuts)
	if err != nil || !created || c != blobs.Sum(data) {
		t.Fatalf("PutSeekable: %v, created %v, %v", c, created, err)
	}
	o := obj()
	zn := objectSize(t, o, zstKey(c))
	if zn < 0 || objectSize(t, o, plainKey(c)) != -1 {
		t.Fatalf("after PutSeekable: compressed object %d bytes, plain %d; want only the compressed one", zn, objectSize(t, o, plainKey(c)))
	}
	t.Logf("a %d-byte log kept in %d bytes (%.3f)", len(data), zn, float64(zn)/float64(len(data)))
	if zn > int64(len(data))/3 {
		t.Fatalf("compressed object of %d bytes for a %d-byte log", zn, len(data))
	}
	enc, _, err := objstore.ReadAll(context.Background(), o, zstKey(c))
	if err != nil {
		t.Fatal(err)
	}
	isCut := map[int64]bool{int64(len(data)): true}
	for _, x := range cuts {
		isCut[x] = true
	}
	ends := frameEnds(t, enc)
	if len(ends) < 3 {
		t.Fatalf("%d frames, want several", len(ends))
	}
	for _, e := range ends {
		if !isCut[e] {
			t.Fatalf("a frame ends at %d, not at a record's end", e)
		}
	}
	if back, err := blobs.DecodeSeekable(enc); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("the object decodes to other bytes (%v)", err)
	}

	cs := &countingStore{Store: obj()}
	b := open(t, cs) // another node
	for _, s := range []*objblobs.Store{a, b} {
		r, err := s.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Size() != int64(len(data)) {
			t.Fatalf("Size %d, want %d", r.Size(), len(data))
		}
		before := cs.ranged.Load()
		for _, at := range []int64{150 << 10, 0, ends[0] - 5, ends[1], int64(len(data)) - 10} {
			p := make([]byte, 10)
			if n, err := r.ReadAt(p, at); n != 10 || (err != nil && err != io.EOF) || !bytes.Equal(p, data[at:at+10]) {
				t.Fatalf("ReadAt %d: %d bytes %q, %v; want %q", at, n, p[:n], err, data[at:at+10])
			}
			if s == b && at == 150<<10 && ranged {
				if got := cs.ranged.Load() - before; got == 0 || got > zn/2 {
					t.Fatalf("a 10-byte read in the middle fetched %d of the object's %d bytes", got, zn)
				}
			}
		}
		p := make([]byte, 20)
		if n, err := r.ReadAt(p, int64(len(data))-10); n != 10 || err != io.EOF {
			t.Fatalf("ReadAt across the end: %d, %v", n, err)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 20 {
					at := int64((g*7919 + i*104729) % (len(data) - 300))
					q := make([]byte, 300)
					if _, err := r.ReadAt(q, at); err != nil || !bytes.Equal(q, data[at:at+300]) {
						t.Errorf("concurrent ReadAt %d: %v", at, err)
						return
					}
				}
			})
		}
		wg.Wait()
		r.Close()
		if got := blobstest.Read(t, s.Open, c); !bytes.Equal(got, data) {
			t.Fatal("read whole: differs")
		}
		if n, err := s.Stat(c); err != nil || n != int64(len(data)) {
			t.Fatalf("Stat %d, %v; want %d", n, err, len(data))
		}
		sizes := map[cid.Cid]int64{}
		if err := s.Walk(func(c cid.Cid, n int64) error { sizes[c] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		if len(sizes) != 1 || sizes[c] != int64(len(data)) {
			t.Fatalf("Walk %v, want %s of %d bytes", sizes, c, len(data))
		}
		if n, err := s.StoredBytes(); err != nil || n != zn {
			t.Fatalf("StoredBytes %d, %v; want the object's %d", n, err, zn)
		}
	}
	// Stored again, in either call: nothing new.
	if _, created, err := a.PutSeekable(data, cuts); err != nil || created {
		t.Fatalf("PutSeekable again: created %v, %v", created, err)
	}
	if _, created, err := b.Put(data); err != nil || created {
		t.Fatalf("Put of the same log: created %v, %v", created, err)
	}
	if n := count(t, o, "loose/"); n != 1 {
		t.Fatalf("%d loose objects, want 1", n)
	}
}

func TestLooseSeekableOnLocalObjects(t *testing.T) {
	readModes(t, func(t *testing.T, ranged bool) { looseSeekable(t, localObjects(t), ranged) })
}

func TestLooseSeekableOnS3(t *testing.T) {
	srv := testenv.S3(t)
	readModes(t, func(t *testing.T, ranged bool) {
		prefix := fmt.Sprintf("seekable-%v", ranged)
		looseSeekable(t, func() objstore.Store { return srv.Store(t, prefix) }, ranged)
	})
}

// TestSingleBlobBatch: a batch of one new blob is a loose object: kept
// compressed when it compresses (a frame that repeats a motif), plain
// when it does not; both read back whole on another node with their
// sizes, and no pack is written.
func TestSingleBlobBatch(t *testing.T) {
	readModes(t, func(t *testing.T, ranged bool) {
		obj := localObjects(t)
		a := open(t, obj())
		comp := bytes.Repeat(blobstest.Rand(t, 64), 30<<10/64)
		random := blobstest.Rand(t, 30<<10)
		cc := blobstest.PutMany(t, a.PutMany, [][]byte{comp})[0]
		rc := blobstest.PutMany(t, a.PutMany, [][]byte{random})[0]
		o := obj()
		zn := objectSize(t, o, zstKey(cc))
		if zn < 0 || zn > int64(len(comp))*9/10 || objectSize(t, o, plainKey(cc)) != -1 {
			t.Fatalf("compressible blob: compressed object %d bytes, plain %d", zn, objectSize(t, o, plainKey(cc)))
		}
		t.Logf("a %d-byte repeated motif kept in %d bytes (%.4f)", len(comp), zn, float64(zn)/float64(len(comp)))
		if n := objectSize(t, o, plainKey(rc)); n != int64(len(random)) || objectSize(t, o, zstKey(rc)) != -1 {
			t.Fatalf("random blob: plain object %d bytes, compressed %d; want plain %d", n, objectSize(t, o, zstKey(rc)), len(random))
		}
		if n := count(t, o, "packs/"); n != 0 {
			t.Fatalf("%d packs for two batches of one", n)
		}
		b := open(t, obj())
		for _, s := range []*objblobs.Store{a, b} {
			mustRead(t, s, "single-blob batches", []cid.Cid{cc, rc}, [][]byte{comp, random})
			for i, c := range []cid.Cid{cc, rc} {
				if n, err := s.Stat(c); err != nil || n != int64(len([][]byte{comp, random}[i])) {
					t.Fatalf("Stat of blob %d: %d, %v", i, n, err)
				}
			}
			if n, err := s.StoredBytes(); err != nil || n != zn+int64(len(random)) {
				t.Fatalf("StoredBytes %d, %v; want %d", n, err, zn+int64(len(random)))
			}
		}
	})
}

// TestOldPlainLoose: a bucket a previous version wrote (a compressible
// blob as a plain loose object) reads as before; putting the blob again,
// by any call, stores nothing (the plain form is the blob); Delete
// removes it.
func TestOldPlainLoose(t *testing.T) {
	obj := localObjects(t)
	data, cuts := logLike(2, 100<<10)
	c := blobs.Sum(data)
	putObject(t, obj(), plainKey(c), data)
	a := open(t, obj())
	mustRead(t, a, "old plain", []cid.Cid{c}, [][]byte{data})
	if n, err := a.Stat(c); err != nil || n != int64(len(data)) {
		t.Fatalf("Stat %d, %v", n, err)
	}
	if n := blobstest.Count(t, a.Walk); n != 1 {
		t.Fatalf("Walk saw %d blobs, want 1", n)
	}
	if _, created, err := a.PutSeekable(data, cuts); err != nil || created {
		t.Fatalf("PutSeekable over the old plain object: created %v, %v", created, err)
	}
	if _, created, err := a.Put(data); err != nil || created {
		t.Fatalf("Put over the old plain object: created %v, %v", created, err)
	}
	blobstest.PutMany(t, a.PutMany, [][]byte{data})
	if n := objectSize(t, obj(), zstKey(c)); n != -1 {
		t.Fatalf("a compressed copy of %d bytes was written beside the plain one", n)
	}
	if err := a.Delete(c); err != nil {
		t.Fatal(err)
	}
	if n := count(t, obj(), "loose/"); n != 0 {
		t.Fatalf("%d loose objects after Delete", n)
	}
	if err := a.Delete(c); !errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("Delete of a deleted blob: %v, want ErrNotFound", err)
	}
}

// TestLooseCompressedDamage: a byte flipped anywhere in a compressed
// loose object (magic, frames, seek table, tail) is never served as the
// blob: Open or a read answers ErrBlobCorrupt, or the bytes read are the
// blob's. Read whole, a small object's damage is caught at Open.
func TestLooseCompressedDamage(t *testing.T) {
	readModes(t, func(t *testing.T, ranged bool) {
		obj := localObjects(t)
		data, cuts := logLike(3, 200<<10)
		c, _, err := open(t, obj()).PutSeekable(data, cuts)
		if err != nil {
			t.Fatal(err)
		}
		o := obj()
		key := zstKey(c)
		n := objectSize(t, o, key)
		if n < 0 {
			t.Fatal("not stored compressed")
		}
		enc, _, err := objstore.ReadAll(context.Background(), o, key)
		if err != nil {
			t.Fatal(err)
		}
		// Stat reads the magic and the tail: the count, the CRC, the
		// tail's magic and the seek table before them.
		table := n - 16 - 8*int64(len(frameEnds(t, enc)))
		var at []int64
		for i := range int64(64) {
			at = append(at, i, n-1-i) // the magic, the tail, the table
		}
		for i := int64(64); i < n-64; i += 61 {
			at = append(at, i) // the frames
		}
		caught, atOpen := 0, 0
		for _, i := range at {
			rewrite(t, o, key, func(b []byte) { b[i] ^= 0x10 })
			s := open(t, obj())
			r, err := s.Open(c)
			if err == nil {
				got := make([]byte, len(data))
				_, err = r.ReadAt(got, 0)
				r.Close()
				if err == nil && !bytes.Equal(got, data) {
					t.Fatalf("byte %d of %d flipped: other bytes served", i, n)
				}
			} else {
				atOpen++
			}
			if err != nil && err != io.EOF {
				if !errors.Is(err, blobs.ErrBlobCorrupt) || errors.Is(err, blobs.ErrNotFound) {
					t.Fatalf("byte %d of %d flipped: %v, want ErrBlobCorrupt", i, n, err)
				}
				caught++
			}
			size, err := s.Stat(c)
			if i < 8 || i >= table {
				if !errors.Is(err, blobs.ErrBlobCorrupt) {
					t.Fatalf("byte %d of %d flipped (header or table): Stat %d, %v; want ErrBlobCorrupt", i, n, size, err)
				}
			} else if err != nil || size != int64(len(data)) {
				t.Fatalf("byte %d of %d flipped (a frame): Stat %d, %v; want %d", i, n, size, err, len(data))
			}
			rewrite(t, o, key, func(b []byte) { b[i] ^= 0x10 })
		}
		t.Logf("%d of %d flipped bytes caught (%d at Open)", caught, len(at), atOpen)
		if !ranged && atOpen != caught {
			t.Fatalf("read whole, %d damaged objects opened", caught-atOpen)
		}
		if ranged && atOpen == caught {
			t.Fatal("read by ranges, every damage was caught at Open: the frames were decoded there")
		}
		mustRead(t, open(t, obj()), "restored", []cid.Cid{c}, [][]byte{data})

		// A well-formed compressed object of other bytes under the CID's
		// key: read whole, its rehash catches it at Open.
		other := bytes.Clone(data)
		other[len(other)/2] ^= 1
		putObject(t, o, key, blobs.EncodeSeekable(other, cuts))
		r, err := open(t, obj()).Open(c)
		if !ranged && !errors.Is(err, blobs.ErrBlobCorrupt) {
			t.Fatalf("open of another blob's compressed form: %v, want ErrBlobCorrupt", err)
		}
		if err == nil {
			r.Close()
		}
	})
}

// TestLooseCompressedOutage: a compressed blob read by ranges while the
// object store is down answers ErrUnavailable, not ErrBlobCorrupt (a
// frame that could not be fetched is not a damaged one), and reads again
// once it is back.
func TestLooseCompressedOutage(t *testing.T) {
	defer objblobs.SetReadSizes(0, 1<<10)()
	srv := testenv.S3(t)
	s := open(t, srv.Store(t, "zoutage"))
	data, cuts := logLike(4, 300<<10)
	c, _, err := s.PutSeekable(data, cuts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv.Stop()
	p := make([]byte, 100)
	if _, err := r.ReadAt(p, 200<<10); !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, blobs.ErrBlobCorrupt) {
		t.Fatalf("read during an outage: %v, want ErrUnavailable and not ErrBlobCorrupt", err)
	}
	if _, err := s.Open(c); !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, blobs.ErrNotFound) || errors.Is(err, blobs.ErrBlobCorrupt) {
		t.Fatalf("open during an outage: %v, want ErrUnavailable", err)
	}
	if _, err := s.Stat(c); !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("stat during an outage: %v, want ErrUnavailable", err)
	}
	srv.Start()
	if _, err := r.ReadAt(p, 200<<10); err != nil || !bytes.Equal(p, data[200<<10:200<<10+100]) {
		t.Fatalf("read after the outage: %v", err)
	}
}

// TestSweepLooseForms: a sweep deletes every loose form of a dead blob (a
// compressed one, and one kept in both forms), counting their stored
// bytes, and keeps a held compressed blob readable; a dead compressed
// blob a batch reuses while the sweep waits is stored again and stays
// readable on every node.
func TestSweepLooseForms(t *testing.T) {
	obj := localObjects(t)
	a := openNode(t, obj(), "a")
	var reuse func()
	b := worstMomentSweeper(t, obj(), "b", &reuse)
	live, liveCuts := logLike(5, 200<<10)
	dead, deadCuts := logLike(6, 200<<10)
	both, _ := logLike(7, 100<<10)
	again, againCuts := logLike(8, 150<<10)
	lc, _, err := a.PutSeekable(live, liveCuts)
	if err != nil {
		t.Fatal(err)
	}
	dc, _, err := a.PutSeekable(dead, deadCuts)
	if err != nil {
		t.Fatal(err)
	}
	ac, _, err := a.PutSeekable(again, againCuts)
	if err != nil {
		t.Fatal(err)
	}
	// Both forms, as two nodes writing at once may leave.
	bc := blobs.Sum(both)
	putObject(t, obj(), plainKey(bc), both)
	putObject(t, obj(), zstKey(bc), blobs.EncodeSeekable(both, nil))
	if err := a.HoldFor("rec", "batch", []cid.Cid{lc}); err != nil {
		t.Fatal(err)
	}
	o := obj()
	var deadBytes int64
	for _, key := range []string{zstKey(dc), plainKey(bc), zstKey(bc), zstKey(ac)} {
		n := objectSize(t, o, key)
		if n < 0 {
			t.Fatalf("%s not stored", key)
		}
		deadBytes += n
	}
	reuse = func() {
		if err := a.HoldFor("rec2", "batch", []cid.Cid{ac}); err != nil {
			t.Error(err)
		}
		if _, _, err := a.PutSeekable(again, againCuts); err != nil {
			t.Error(err)
		}
	}
	sw := b.BeginSweep()
	rep, err := sw.Collect(none, nil)
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	if reuse != nil {
		t.Fatal("the sweep never reached its deletions")
	}
	if rep.Removed != 3 || rep.Freed != deadBytes || rep.DiskFreed != deadBytes {
		t.Errorf("report %+v: want 3 blobs removed, %d bytes freed", rep, deadBytes)
	}
	for _, key := range []string{zstKey(dc), plainKey(bc), zstKey(bc), zstKey(ac)} {
		if n := objectSize(t, o, key); n != -1 {
			t.Errorf("%s (%d bytes) left by the sweep", key, n)
		}
	}
	c := openNode(t, obj(), "c")
	for _, s := range []*objblobs.Store{a, b, c} {
		mustRead(t, s, "held", []cid.Cid{lc}, [][]byte{live})
		mustRead(t, s, "reused while condemned", []cid.Cid{ac}, [][]byte{again})
		mustBeGone(t, s, "dead", []cid.Cid{dc, bc})
	}
}

// looseTwoNodes: node a stores compressed, node b (opened before) reads
// it; a blob an old node left plain is put again by a new node and stays
// readable, plain, on both; with both forms there (two nodes writing at
// once) both read it, Walk reports it once, and Delete removes both; two
// nodes putting one new blob at once store it once.
func looseTwoNodes(t *testing.T, obj func() objstore.Store) {
	a := open(t, obj())
	b := open(t, obj())
	data, cuts := logLike(9, 120<<10)
	c, created, err := a.PutSeekable(data, cuts)
	if err != nil || !created {
		t.Fatalf("PutSeekable: created %v, %v", created, err)
	}
	mustRead(t, b, "written compressed by a", []cid.Cid{c}, [][]byte{data})
	if n, err := b.Stat(c); err != nil || n != int64(len(data)) {
		t.Fatalf("Stat on b: %d, %v", n, err)
	}

	old, _ := logLike(10, 80<<10)
	oc := blobs.Sum(old)
	putObject(t, obj(), plainKey(oc), old) // an old node's Put
	if _, created, err := b.Put(old); err != nil || created {
		t.Fatalf("b's Put of a blob stored plain: created %v, %v", created, err)
	}
	o := obj()
	if objectSize(t, o, zstKey(oc)) != -1 || objectSize(t, o, plainKey(oc)) != int64(len(old)) {
		t.Fatal("the old plain blob was stored again")
	}
	mustRead(t, a, "old plain, put again", []cid.Cid{oc}, [][]byte{old})
	mustRead(t, b, "old plain, put again", []cid.Cid{oc}, [][]byte{old})

	putObject(t, o, zstKey(oc), blobs.EncodeSeekable(old, nil)) // both forms
	for _, s := range []*objblobs.Store{a, b} {
		mustRead(t, s, "both forms", []cid.Cid{oc}, [][]byte{old})
		sizes := map[cid.Cid]int64{}
		n := 0
		if err := s.Walk(func(c cid.Cid, size int64) error { sizes[c] = size; n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != 2 || sizes[oc] != int64(len(old)) || sizes[c] != int64(len(data)) {
			t.Fatalf("Walk: %d calls, %v", n, sizes)
		}
	}
	if err := a.Delete(oc); err != nil {
		t.Fatal(err)
	}
	if objectSize(t, o, zstKey(oc)) != -1 || objectSize(t, o, plainKey(oc)) != -1 {
		t.Fatal("Delete left a form behind")
	}
	mustBeGone(t, b, "deleted on a", []cid.Cid{oc})

	fresh, freshCuts := logLike(11, 90<<10)
	var made atomic.Int32
	var wg sync.WaitGroup
	for _, s := range []*objblobs.Store{a, b} {
		wg.Go(func() {
			_, created, err := s.PutSeekable(fresh, freshCuts)
			if err != nil {
				t.Error(err)
			}
			if created {
				made.Add(1)
			}
		})
	}
	wg.Wait()
	if made.Load() != 1 {
		t.Fatalf("two nodes putting one blob at once: %d created it", made.Load())
	}
	mustRead(t, a, "put by both", []cid.Cid{blobs.Sum(fresh)}, [][]byte{fresh})
}

func TestLooseTwoNodesOnLocalObjects(t *testing.T) { looseTwoNodes(t, localObjects(t)) }

func TestLooseTwoNodesOnS3(t *testing.T) {
	srv := testenv.S3(t)
	looseTwoNodes(t, func() objstore.Store { return srv.Store(t, "twonodes") })
}

// TestRescueLargeBlob: a blob larger than a pack's bound (a sealed
// segment may be 16 MiB), condemned by a sweep and put again meanwhile,
// is rescued into a pack of its own, plain; every node, one opened after
// (reading the pack's header) and one opened from the index snapshot,
// reads it. (The pack header's bound on a blob's size holds for
// compressed entries only: a plain one is bounded by its object.)
func TestRescueLargeBlob(t *testing.T) {
	obj := localObjects(t)
	a := openNode(t, obj(), "a")
	var reuse func()
	b := worstMomentSweeper(t, obj(), "b", &reuse)
	big := make([]byte, blobs.PackMaxBlob+4096)
	if _, err := crand.Read(big); err != nil {
		t.Fatal(err)
	}
	bc, _, err := a.Put(big)
	if err != nil {
		t.Fatal(err)
	}
	reuse = func() {
		if err := a.HoldFor("rec", "batch", []cid.Cid{bc}); err != nil {
			t.Error(err)
		}
		if _, _, err := a.Put(big); err != nil {
			t.Error(err)
		}
	}
	sw := b.BeginSweep()
	_, err = sw.Collect(none, nil)
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	if reuse != nil {
		t.Fatal("the sweep never reached its deletions")
	}
	c := openNode(t, obj(), "c")
	d := openNode(t, obj(), "d")
	for _, s := range []*objblobs.Store{a, b, c, d} {
		mustRead(t, s, "rescued while condemned", []cid.Cid{bc}, [][]byte{big})
	}
}
