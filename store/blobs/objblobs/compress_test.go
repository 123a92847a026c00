package objblobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/objstore"
)

// pattern is size bytes of a repeated text, which zstd shrinks to a
// small fraction of itself.
func pattern(seed string, size int) []byte {
	return bytes.Repeat([]byte(seed+" frame 0123456789 abcdef; "), size/len(seed)+1)[:size]
}

// packEnt is an entry of a pack header, as the package comment lays it
// out (read here by hand, so that the layout is what it says).
type packEnt struct {
	d              [32]byte
	off, n, raw    uint64
	flags          byte
	compressedFlag bool
}

// packHeader reads the version-2 header of pack key, by digest.
func packHeader(t *testing.T, obj objstore.Store, key string) map[[32]byte]packEnt {
	t.Helper()
	b, _, err := objstore.ReadAll(context.Background(), obj, key)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:8]) != "FRPACK2\n" {
		t.Fatalf("pack %s starts %q, want FRPACK2", key, b[:8])
	}
	count := int(binary.BigEndian.Uint32(b[8:]))
	out := map[[32]byte]packEnt{}
	for i := range count {
		p := b[12+i*57:]
		e := packEnt{d: [32]byte(p[:32]), off: binary.BigEndian.Uint64(p[32:]), n: binary.BigEndian.Uint64(p[40:]),
			raw: binary.BigEndian.Uint64(p[48:]), flags: p[56]}
		e.compressedFlag = e.flags == 1
		if e.flags > 1 || !e.compressedFlag && e.raw != e.n || e.off+e.n > uint64(len(b)) {
			t.Fatalf("pack %s: bad entry %d: %+v", key, i, e)
		}
		out[e.d] = e
	}
	return out
}

// packKeys lists the pack objects with their sizes.
func packKeys(t *testing.T, obj objstore.Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for info, err := range obj.List(context.Background(), "packs/") {
		if err != nil {
			t.Fatal(err)
		}
		out[info.Key] = info.Size
	}
	return out
}

func onlyPack(t *testing.T, obj objstore.Store) (string, int64) {
	t.Helper()
	keys := packKeys(t, obj)
	if len(keys) != 1 {
		t.Fatalf("%d pack objects, want 1", len(keys))
	}
	for k, n := range keys {
		return k, n
	}
	panic("unreachable")
}

// compressedRoundTrip: a compressible blob is packed compressed (its
// entry flagged, its stored bytes under a tenth of it, the pack object
// that much smaller), an incompressible one plain; both read back whole,
// and Stat and Walk give their uncompressed sizes, on the writing node
// and on another that reads the pack's header.
func compressedRoundTrip(t *testing.T, obj func() objstore.Store) {
	a := open(t, obj())
	comp := pattern("a", 200<<10)
	plain := blobstest.Rand(t, 50<<10)
	datas := [][]byte{comp, plain}
	cids := blobstest.PutMany(t, a.PutMany, datas)

	o := obj()
	key, size := onlyPack(t, o)
	hdr := packHeader(t, o, key)
	ce, pe := hdr[sha256.Sum256(comp)], hdr[sha256.Sum256(plain)]
	if !ce.compressedFlag || ce.raw != uint64(len(comp)) || ce.n >= uint64(len(comp))/10 {
		t.Fatalf("compressible blob's entry %+v: want compressed, raw %d, stored under a tenth", ce, len(comp))
	}
	if pe.compressedFlag || pe.n != uint64(len(plain)) {
		t.Fatalf("random blob's entry %+v: want plain, %d bytes", pe, len(plain))
	}
	if want := int64(12 + 2*57 + ce.n + pe.n); size != want {
		t.Fatalf("pack object of %d bytes, want %d (header and stored bytes)", size, want)
	}
	if size >= int64(len(comp)) {
		t.Fatalf("pack object of %d bytes holds a %d-byte compressible blob: not compressed", size, len(comp))
	}

	b := open(t, obj()) // another node: the index from the pack's header
	for _, s := range []*objblobs.Store{a, b} {
		sizes := map[cid.Cid]int64{}
		if err := s.Walk(func(c cid.Cid, n int64) error { sizes[c] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		for i, c := range cids {
			if got := blobstest.Read(t, s.Open, c); !bytes.Equal(got, datas[i]) {
				t.Fatalf("blob %d read back differs", i)
			}
			if n, err := s.Stat(c); err != nil || n != int64(len(datas[i])) {
				t.Fatalf("stat blob %d: %d, %v; want %d", i, n, err, len(datas[i]))
			}
			if sizes[c] != int64(len(datas[i])) {
				t.Fatalf("walk gave blob %d size %d, want %d", i, sizes[c], len(datas[i]))
			}
		}
		// What the bucket holds: the pack, compressed.
		if n, err := s.StoredBytes(); err != nil || n != size {
			t.Fatalf("StoredBytes %d, %v; want the pack's %d", n, err, size)
		}
	}
	// A node opening from the snapshot b wrote knows the entries too.
	c := open(t, obj())
	if c.HeaderReads() != 0 {
		t.Fatalf("read %d headers, want the snapshot's index", c.HeaderReads())
	}
	if n, err := c.Stat(cids[0]); err != nil || n != int64(len(comp)) {
		t.Fatalf("stat from the snapshot: %d, %v", n, err)
	}
	if got := blobstest.Read(t, c.Open, cids[0]); !bytes.Equal(got, comp) {
		t.Fatal("compressed blob read through the snapshot's index differs")
	}
}

func TestCompressedOnLocalObjects(t *testing.T) { compressedRoundTrip(t, localObjects(t)) }

func TestCompressedOnS3(t *testing.T) {
	srv := testenv.S3(t)
	compressedRoundTrip(t, func() objstore.Store { return srv.Store(t, "compressed") })
}

// rewrite replaces object key with change applied to its bytes.
func rewrite(t *testing.T, obj objstore.Store, key string, change func([]byte)) {
	t.Helper()
	ctx := context.Background()
	b, _, err := objstore.ReadAll(ctx, obj, key)
	if err != nil {
		t.Fatal(err)
	}
	change(b)
	if _, err := obj.Put(ctx, key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCompressedDamage: a byte flipped anywhere in a compressed entry's
// stored bytes is never served as the blob: Open answers ErrBlobCorrupt
// (the frame's checksum or size, ErrBadPacked, or else the rehash of what
// it decodes to, catches it), on the node that indexed it and on one
// that opens after. A flipped byte in a plain entry is caught by the
// rehash, as before.
func TestCompressedDamage(t *testing.T) {
	obj := localObjects(t)
	a := open(t, obj())
	comp := pattern("b", 200<<10)
	plain := blobstest.Rand(t, 4000)
	cids := blobstest.PutMany(t, a.PutMany, [][]byte{comp, plain})
	o := obj()
	key, _ := onlyPack(t, o)
	hdr := packHeader(t, o, key)
	ce, pe := hdr[sha256.Sum256(comp)], hdr[sha256.Sum256(plain)]
	if !ce.compressedFlag {
		t.Fatal("the compressible blob was packed plain")
	}

	// The middle of the frame: its compressed blocks.
	mid := ce.off + ce.n/2
	rewrite(t, o, key, func(b []byte) { b[mid] ^= 0x40 })
	for _, s := range []*objblobs.Store{a, open(t, obj())} {
		_, err := s.Open(cids[0])
		if !errors.Is(err, blobs.ErrBlobCorrupt) || !errors.Is(err, blobs.ErrBadPacked) {
			t.Fatalf("open of a damaged compressed blob: %v, want ErrBlobCorrupt and ErrBadPacked", err)
		}
		if got := blobstest.Read(t, s.Open, cids[1]); !bytes.Equal(got, plain) {
			t.Fatal("the undamaged blob beside it differs")
		}
	}
	rewrite(t, o, key, func(b []byte) { b[mid] ^= 0x40 })

	// Every byte of the frame, header and checksum included: an error or
	// the blob itself, never other bytes.
	caught := 0
	for at := ce.off; at < ce.off+ce.n; at++ {
		rewrite(t, o, key, func(b []byte) { b[at] ^= 0x01 })
		r, err := a.Open(cids[0])
		if err == nil {
			got := make([]byte, r.Size())
			r.ReadAt(got, 0)
			r.Close()
			if !bytes.Equal(got, comp) {
				t.Fatalf("byte %d of the frame flipped: Open served other bytes", at-ce.off)
			}
		} else if !errors.Is(err, blobs.ErrBlobCorrupt) {
			t.Fatalf("byte %d of the frame flipped: %v, want ErrBlobCorrupt", at-ce.off, err)
		} else {
			caught++
		}
		rewrite(t, o, key, func(b []byte) { b[at] ^= 0x01 })
	}
	t.Logf("%d of the frame's %d bytes flipped were caught, the others decode to the blob", caught, ce.n)

	rewrite(t, o, key, func(b []byte) { b[pe.off+pe.n/2] ^= 0x40 })
	if _, err := a.Open(cids[1]); !errors.Is(err, blobs.ErrBlobCorrupt) {
		t.Fatalf("open of a damaged plain blob: %v, want ErrBlobCorrupt", err)
	}
}

// putObject stores b under key.
func putObject(t *testing.T, obj objstore.Store, key string, b []byte) {
	t.Helper()
	if _, err := obj.Put(context.Background(), key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// putV1Pack stores a version-1 pack of datas under its sha-256, as the
// previous version did, and returns its key.
func putV1Pack(t *testing.T, obj objstore.Store, datas [][]byte) string {
	t.Helper()
	body := objblobs.V1Pack(datas)
	sum := sha256.Sum256(body)
	key := "packs/" + hex.EncodeToString(sum[:])
	putObject(t, obj, key, body)
	return key
}

// TestOldPacksStillRead: a bucket the previous version wrote (FRPACK1
// packs, an FRIDX1 snapshot) reads as before, beside version-2 packs
// written since; a sweep rewrites a mostly dead version-1 pack's live
// blobs into a version-2 pack.
func TestOldPacksStillRead(t *testing.T) {
	old := [][]byte{pattern("old", 30<<10), blobstest.Rand(t, 1000), blobstest.Rand(t, 60<<10), {}}
	check := func(t *testing.T, s *objblobs.Store, what string) {
		t.Helper()
		sizes := map[cid.Cid]int64{}
		if err := s.Walk(func(c cid.Cid, n int64) error { sizes[c] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		for i, d := range old {
			c := blobs.Sum(d)
			if got := blobstest.Read(t, s.Open, c); !bytes.Equal(got, d) {
				t.Fatalf("%s: old blob %d differs", what, i)
			}
			if n, err := s.Stat(c); err != nil || n != int64(len(d)) || sizes[c] != int64(len(d)) {
				t.Fatalf("%s: old blob %d: stat %d, %v, walk %d; want %d", what, i, n, err, sizes[c], len(d))
			}
		}
	}

	t.Run("headers", func(t *testing.T) {
		obj := localObjects(t)
		key := putV1Pack(t, obj(), old)
		a := openNode(t, obj(), "a")
		if a.HeaderReads() != 1 {
			t.Fatalf("read %d headers, want 1", a.HeaderReads())
		}
		check(t, a, "from its header")
		// The snapshot a wrote (version 2) names the old pack's entries.
		b := openNode(t, obj(), "b")
		if b.HeaderReads() != 0 {
			t.Fatalf("read %d headers, want the snapshot's index", b.HeaderReads())
		}
		check(t, b, "from the new snapshot")

		// New packs beside it; then a sweep that keeps only old[0] and
		// old[1] of the old pack (less than half of its bytes) rewrites
		// them into a version-2 pack.
		fresh := [][]byte{pattern("new", 100<<10), blobstest.Rand(t, 3000)}
		fc := blobstest.PutMany(t, a.PutMany, fresh)
		if err := a.HoldFor("rec", "batch", append([]cid.Cid{blobs.Sum(old[0]), blobs.Sum(old[1])}, fc...)); err != nil {
			t.Fatal(err)
		}
		sw := b.BeginSweep()
		if _, err := sw.Collect(none, nil); err != nil {
			t.Fatal(err)
		}
		sw.End()
		if _, ok := packKeys(t, obj())[key]; ok {
			t.Fatal("the mostly dead old pack was kept")
		}
		c := openNode(t, obj(), "c")
		for _, s := range []*objblobs.Store{a, b, c} {
			mustRead(t, s, "old blobs kept", []cid.Cid{blobs.Sum(old[0]), blobs.Sum(old[1])}, old[:2])
			mustRead(t, s, "new blobs", fc, fresh)
			mustBeGone(t, s, "old blobs dead", []cid.Cid{blobs.Sum(old[2]), blobs.Sum(old[3])})
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		obj := localObjects(t)
		o := obj()
		key := putV1Pack(t, o, old)
		// index/packs as the previous version wrote it.
		snap := []byte("FRIDX1\n")
		snap = binary.BigEndian.AppendUint16(snap, uint16(len(key)))
		snap = append(snap, key...)
		snap = binary.BigEndian.AppendUint32(snap, uint32(len(old)))
		snap = append(snap, objblobs.V1Pack(old)[12:12+48*len(old)]...)
		putObject(t, o, "index/packs", snap)
		a := openNode(t, obj(), "a")
		if a.HeaderReads() != 0 {
			t.Fatalf("read %d headers, want the old snapshot's index", a.HeaderReads())
		}
		check(t, a, "from the old snapshot")
	})
}

// TestSweepKeepsCompressed: a sweep that rewrites a mostly dead pack
// copies its live compressed blobs as they are kept (flag, stored bytes,
// size), and counts what it frees in stored bytes.
func TestSweepKeepsCompressed(t *testing.T) {
	obj := localObjects(t)
	a := openNode(t, obj(), "a")
	liveComp := pattern("live", 200<<10)
	livePlain := blobstest.Rand(t, 2000)
	deadComp := pattern("dead", 300<<10)
	deadPlain := blobstest.Rand(t, 40<<10)
	datas := [][]byte{liveComp, livePlain, deadComp, deadPlain}
	cids := blobstest.PutMany(t, a.PutMany, datas)
	if err := a.HoldFor("rec", "batch", cids[:2]); err != nil {
		t.Fatal(err)
	}
	o := obj()
	key, size := onlyPack(t, o)
	before := packHeader(t, o, key)
	dc, dp := before[sha256.Sum256(deadComp)], before[sha256.Sum256(deadPlain)]
	if !dc.compressedFlag || !before[sha256.Sum256(liveComp)].compressedFlag {
		t.Fatal("a compressible blob was packed plain")
	}

	b := openNode(t, obj(), "b")
	sw := b.BeginSweep()
	rep, err := sw.Collect(none, nil)
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(dc.n + dp.n); rep.Freed != want {
		t.Errorf("freed %d bytes, want the dead blobs' stored %d", rep.Freed, want)
	}
	keys := packKeys(t, o)
	if _, ok := keys[key]; ok || len(keys) != 1 {
		t.Fatalf("packs after the sweep: %v, want only the rewrite of %s", keys, key)
	}
	var newKey string
	var newSize int64
	for k, n := range keys {
		newKey, newSize = k, n
	}
	if rep.DiskFreed != size-newSize {
		t.Errorf("disk freed %d, want %d - %d", rep.DiskFreed, size, newSize)
	}
	after := packHeader(t, o, newKey)
	for _, d := range datas[:2] {
		was, now := before[sha256.Sum256(d)], after[sha256.Sum256(d)]
		if now.compressedFlag != was.compressedFlag || now.n != was.n || now.raw != uint64(len(d)) {
			t.Fatalf("entry copied as %+v, was %+v", now, was)
		}
	}
	c := openNode(t, obj(), "c")
	for _, s := range []*objblobs.Store{a, b, c} {
		mustRead(t, s, "live after the rewrite", cids[:2], datas[:2])
		if n, err := s.Stat(cids[0]); err != nil || n != int64(len(liveComp)) {
			t.Fatalf("stat after the rewrite: %d, %v", n, err)
		}
	}
	mustBeGone(t, c, "dead", cids[2:])
}

// TestDamagedHeaders: a pack object whose header is malformed, of either
// version, fails the opening that reads it, naming the pack, as a bad
// magic always did: never a panic, nor an allocation the object's size
// does not bound.
func TestDamagedHeaders(t *testing.T) {
	good := [][]byte{pattern("x", 10<<10), blobstest.Rand(t, 500)}
	sums := [][32]byte{sha256.Sum256(good[0]), sha256.Sum256(good[1])}
	type ent struct {
		off, n, raw uint64
		flags       byte
	}
	v2 := func(count uint32, ents []ent, tail int) []byte {
		b := append([]byte("FRPACK2\n"), binary.BigEndian.AppendUint32(nil, count)...)
		for i, e := range ents {
			b = append(b, sums[i%2][:]...)
			b = binary.BigEndian.AppendUint64(b, e.off)
			b = binary.BigEndian.AppendUint64(b, e.n)
			b = binary.BigEndian.AppendUint64(b, e.raw)
			b = append(b, e.flags)
		}
		return append(b, make([]byte, tail)...)
	}
	h2 := uint64(12 + 2*57)
	for name, body := range map[string][]byte{
		"bad magic":                  []byte("FRPACK3\n\x00\x00\x00\x00"),
		"v2 truncated header":        v2(2, []ent{{h2, 10, 10, 0}}, 0),
		"v2 count past the object":   v2(1<<32-1, nil, 1000),
		"v2 raw above PackMaxBlob":   v2(2, []ent{{h2, 10, blobs.PackMaxBlob + 1, 1}, {h2 + 10, 5, 5, 0}}, 15),
		"v2 raw of 2^64-1":           v2(2, []ent{{h2, 10, 1<<64 - 1, 1}, {h2 + 10, 5, 5, 0}}, 15),
		"v2 offset inside header":    v2(2, []ent{{12, 10, 10, 0}, {h2 + 10, 5, 5, 0}}, 15),
		"v2 bytes past the end":      v2(2, []ent{{h2, 10, 10, 0}, {h2 + 10, 6, 6, 0}}, 15),
		"v2 offset and length wrap":  v2(2, []ent{{h2, 10, 10, 0}, {1<<63 - 1, 1<<63 - 1, 1 << 20, 1}}, 15),
		"v2 unknown flag":            v2(2, []ent{{h2, 10, 10, 2}, {h2 + 10, 5, 5, 0}}, 15),
		"v2 plain raw is not stored": v2(2, []ent{{h2, 10, 11, 0}, {h2 + 10, 5, 5, 0}}, 15),
		"v1 count past the object":   append([]byte("FRPACK1\n\xff\xff\xff\xff"), make([]byte, 100)...),
		"v1 offset and length wrap": func() []byte {
			b := objblobs.V1Pack(good)
			binary.BigEndian.PutUint64(b[12+48+32:], 1<<63-1)
			binary.BigEndian.PutUint64(b[12+48+40:], 1<<63-1)
			return b
		}(),
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			obj := localObjects(t)
			a := open(t, obj())
			blobstest.PutMany(t, a.PutMany, good) // a good pack beside it
			key := fmt.Sprintf("packs/%x", sha256.Sum256(body))
			putObject(t, obj(), key, body)
			_, err := objblobs.Open(context.Background(), obj())
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Fatalf("open over a damaged pack: %v, want an error naming %s", err, key)
			}
		})
	}
}
