package blobs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
)

func putAll(t testing.TB, b *FSBlobs, datas [][]byte) []cid.Cid {
	t.Helper()
	return blobstest.PutMany(t, b.PutMany, datas)
}

func blobsOf(t testing.TB, n, size int) [][]byte { t.Helper(); return blobstest.RandMany(t, n, size) }

// TestPackTornTail cuts the last batch's pack bytes at every point of its
// last entry: reopening keeps every earlier blob, drops the torn one, and
// later puts append cleanly. A flipped byte in a whole last entry is no torn
// tail: nothing is cut, and the blob is reported corrupt by its CID.
func TestPackTornTail(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := blobsOf(t, 3, 700)
	fc := putAll(t, b, first)
	last := randBytes(t, 300)
	lc := putAll(t, b, [][]byte{last})[0]
	b.Close()
	pack := filepath.Join(dir, "packs", "00000001.pack")
	whole, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	entry := packEntryHdr + len(last)
	start := len(packMagic) + len(first)*(packEntryHdr+700)
	if len(whole) < start+entry {
		t.Fatalf("pack of %d bytes is shorter than what was put", len(whole))
	}
	whole = whole[:start+entry] // the rest is preallocated zeros
	damage := func(name string, bs []byte, torn bool) {
		t.Helper()
		if err := os.WriteFile(pack, bs, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := OpenFSBlobs(dir)
		if err != nil {
			t.Fatalf("%s: reopen: %v", name, err)
		}
		defer b.Close()
		for i, c := range fc {
			if got := readBlob(t, b, c); !bytes.Equal(got, first[i]) {
				t.Fatalf("%s: earlier blob %d lost", name, i)
			}
		}
		_, err = b.Stat(lc)
		switch {
		case err == nil:
			t.Fatalf("%s: the damaged blob is still listed", name)
		case !torn && !errors.Is(err, ErrBlobCorrupt):
			t.Fatalf("%s: Stat of the flipped blob: %v, want ErrBlobCorrupt", name, err)
		}
		wantCut := int64(len(bs) - start)
		if !torn {
			wantCut = 0
		}
		if b.PackCut() != wantCut {
			t.Fatalf("%s: cut %d bytes, want %d", name, b.PackCut(), wantCut)
		}
		again := putAll(t, b, [][]byte{last})[0]
		if got := readBlob(t, b, again); !bytes.Equal(got, last) {
			t.Fatalf("%s: re-put blob differs", name)
		}
	}
	for cut := start + 1; cut < len(whole); cut += 37 {
		damage("cut", append([]byte(nil), whole[:cut]...), true)
	}
	flipped := append([]byte(nil), whole...)
	flipped[start+packEntryHdr+10] ^= 0x40
	damage("flip", flipped, false)
}

// TestPackFlippedByteMidPack flips one byte of one blob in the middle of
// the pack being filled, and one byte of another blob's length: reopening
// (writer and read-only) cuts and zeroes nothing, reports the first blob by
// CID, and serves every other blob with its bytes.
func TestPackFlippedByteMidPack(t *testing.T) {
	for _, where := range []string{"body", "length"} {
		dir := t.TempDir()
		datas, cids, bs := packOneByOne(t, dir, 20, 5000)
		pack := filepath.Join(dir, "packs", "00000001.pack")
		const victim = 7
		at := len(packMagic) + victim*(packEntryHdr+5000)
		if where == "body" {
			bs[at+packEntryHdr+123] ^= 0x08
		} else {
			bs[at+2] ^= 0x20 // the length runs far past the entry
		}
		if err := os.WriteFile(pack, bs, 0o644); err != nil {
			t.Fatal(err)
		}
		check := func(name string, b *FSBlobs) {
			t.Helper()
			err := checkAroundDamage(t, where+" "+name, b, pack, bs, cids, datas, victim)
			if where == "body" && !errors.Is(err, ErrBlobCorrupt) {
				t.Fatalf("%s %s: %v, want ErrBlobCorrupt", where, name, err)
			}
		}
		ro, err := openFSBlobs(dir, true)
		if err != nil {
			t.Fatal(err)
		}
		check("read-only", ro)
		ro.Close()
		rw, err := OpenFSBlobs(dir)
		if err != nil {
			t.Fatal(err)
		}
		check("writer", rw)
		_, corrupt := rw.PackDamage()
		if _, ok := corrupt[cids[victim].String()]; where == "body" && (!ok || len(corrupt) != 1) {
			t.Fatalf("PackDamage: %v, want just %s", corrupt, cids[victim])
		}
		// Appends continue after the damage, which stays.
		more := randBytes(t, 900)
		mc := putAll(t, rw, [][]byte{more})[0]
		if got := readBlob(t, rw, mc); !bytes.Equal(got, more) {
			t.Fatalf("%s: put after damage reads back wrong", where)
		}
		// A sweep that finds every blob dead does not rewrite the
		// damaged pack: its bytes are evidence.
		if err := rw.packs.finishCurrent(); err != nil {
			t.Fatal(err)
		}
		sw := rw.BeginSweep()
		if _, err := sw.Collect(func(cid.Cid) bool { return false }, nil); err != nil {
			t.Fatal(err)
		}
		sw.End()
		end := len(packMagic) + len(datas)*(packEntryHdr+5000) // the entries, without the preallocated rest
		if after, err := os.ReadFile(pack); err != nil || len(after) < end || !bytes.Equal(after[:end], bs[:end]) {
			t.Fatalf("%s: a sweep rewrote the damaged pack: %v", where, err)
		}
		rw.Close()
		// The pack is full now, and what is known of its damage outlives
		// the process: another open finds the corrupt blob corrupt (not
		// missing), and another sweep leaves the pack alone.
		finished, err := os.ReadFile(pack)
		if err != nil {
			t.Fatal(err)
		}
		rw, err = OpenFSBlobs(dir)
		if err != nil {
			t.Fatal(err)
		}
		err = checkAroundDamage(t, where+" reopened after it was finished", rw, pack, finished, cids, datas, victim)
		if where == "body" && !errors.Is(err, ErrBlobCorrupt) {
			t.Fatalf("%s reopened after it was finished: %v, want ErrBlobCorrupt", where, err)
		}
		sw = rw.BeginSweep()
		if _, err := sw.Collect(func(cid.Cid) bool { return false }, nil); err != nil {
			t.Fatal(err)
		}
		sw.End()
		if after, err := os.ReadFile(pack); err != nil || len(after) < end || !bytes.Equal(after[:end], bs[:end]) {
			t.Fatalf("%s: a sweep after a reopen rewrote the damaged pack: %v", where, err)
		}
		rw.Close()
		// Damage that reaches its last entry later is not taken for a
		// torn tail: the pack was finished, every entry acknowledged.
		if _, err := os.Stat(filepath.Join(dir, "packs", "00000001.damaged")); err != nil {
			t.Fatalf("%s: the finished damaged pack has no marker: %v", where, err)
		}
		last, err := os.ReadFile(pack)
		if err != nil {
			t.Fatal(err)
		}
		last[len(last)-10] ^= 0x01 // in the body of the blob put after the damage
		if err := os.WriteFile(pack, last, 0o644); err != nil {
			t.Fatal(err)
		}
		rw, err = OpenFSBlobs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if after, _ := os.ReadFile(pack); !bytes.Equal(after, last) {
			t.Fatalf("%s: a finished damaged pack was cut from %d to %d bytes at open", where, len(last), len(after))
		}
		if _, err := rw.Open(mc); !errors.Is(err, ErrBlobCorrupt) {
			t.Fatalf("%s: the last blob, damaged later: %v, want ErrBlobCorrupt", where, err)
		}
		rw.Close()
	}
}

func TestPackRollAndIndex(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.packs.maxBytes = 64 << 10 // roll every few blobs
	datas := blobsOf(t, 40, 20<<10)
	var cids []cid.Cid
	for i := 0; i < len(datas); i += 4 {
		cids = append(cids, putAll(t, b, datas[i:i+4])...)
	}
	b.Close()
	idx, _ := filepath.Glob(filepath.Join(dir, "packs", "*.idx"))
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
	if len(packs) < 5 || len(idx) != len(packs)-1 {
		t.Fatalf("%d packs, %d indexes", len(packs), len(idx))
	}
	// A damaged index is rebuilt from its pack.
	os.WriteFile(idx[0], []byte("FRPIDX\x00\x01garbage"), 0o444)
	b2, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	for i, c := range cids {
		if got := readBlob(t, b2, c); !bytes.Equal(got, datas[i]) {
			t.Fatalf("blob %d differs after reopen", i)
		}
	}
	if n := walkCount(t, b2); n != len(datas) {
		t.Fatalf("walk: %d blobs, want %d", n, len(datas))
	}
	// Stored once across reopen; a loose Put of packed bytes is a no-op.
	before := packBytes(t, dir)
	putAll(t, b2, datas[:8])
	if _, created, _ := b2.Put(datas[0]); created || packBytes(t, dir) != before {
		t.Fatal("packed blobs were stored again")
	}
	if err := b2.Delete(cids[0]); err == nil {
		t.Fatal("deleting a packed blob should say it is packed")
	}
}

// TestPackConcurrentPuts: writers racing on one pack (with rolls and
// shared digests) each get back only durable, readable blobs, and a reopen
// finds every one.
func TestPackConcurrentPuts(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.packs.maxBytes = 200 << 10
	shared := blobsOf(t, 4, 3000)
	const writers, batches = 8, 12
	all := make([][][]byte, writers)
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		all[w] = blobsOf(t, batches*3, 5000)
		go func(w int) {
			for i := 0; i < batches; i++ {
				batch := append([][]byte{shared[i%len(shared)]}, all[w][i*3:i*3+3]...)
				cids, err := b.PutMany(batch)
				if err != nil {
					errs <- err
					return
				}
				for j, c := range cids { // visible and intact as soon as PutMany returns
					r, err := b.Open(c)
					if err != nil {
						errs <- err
						return
					}
					got := make([]byte, r.Size())
					r.ReadAt(got, 0)
					r.Close()
					if !bytes.Equal(got, batch[j]) {
						errs <- os.ErrInvalid
						return
					}
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	b2, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	want := writers*batches*3 + len(shared)
	if n := walkCount(t, b2); n != want {
		t.Fatalf("%d blobs after reopen, want %d", n, want)
	}
	for w := range all {
		for _, d := range all[w] {
			if got := readBlob(t, b2, Sum(d)); !bytes.Equal(got, d) {
				t.Fatal("a blob differs after reopen")
			}
		}
	}
	if b2.PackCut() != 0 {
		t.Fatalf("a clean close left %d torn bytes", b2.PackCut())
	}
}

// TestPackAnyFlippedByte flips, in turn, each byte of the pack header and
// of one entry in the middle of the pack being filled: the blob store
// always opens, cuts nothing, and serves every other blob with its bytes.
func TestPackAnyFlippedByte(t *testing.T) {
	datas, cids, orig := packOneByOne(t, t.TempDir(), 5, 300)
	const victim = 2
	start := len(packMagic) + victim*(packEntryHdr+300)
	var positions []int
	for i := 0; i < len(packMagic); i++ {
		positions = append(positions, i)
	}
	for i := start; i < start+packEntryHdr+300; i++ {
		positions = append(positions, i)
	}
	for _, pos := range positions {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "packs"), 0o755)
		pack := filepath.Join(dir, "packs", "00000001.pack")
		bs := append([]byte(nil), orig...)
		bs[pos] ^= 0x20
		os.WriteFile(pack, bs, 0o644)
		b, err := OpenFSBlobs(dir)
		if err != nil {
			t.Fatalf("byte %d: open: %v", pos, err)
		}
		v := victim
		if pos < start {
			v = -1 // the header: every blob is served
		}
		checkAroundDamage(t, fmt.Sprintf("byte %d", pos), b, pack, bs, cids, datas, v)
		b.Close()
	}
}

// packOneByOne puts n random blobs of size bytes into a new blob store at
// dir, one batch each (as frames arrive), closes it, and returns the
// blobs, their CIDs and the pack's bytes.
func packOneByOne(t *testing.T, dir string, n, size int) ([][]byte, []cid.Cid, []byte) {
	t.Helper()
	datas := blobsOf(t, n, size)
	cids, bs := packEach(t, dir, datas)
	return datas, cids, bs
}

// packEach puts datas into a new blob store at dir, one batch each (so
// each is an entry, in order), closes it, and returns their CIDs and the
// pack's bytes.
func packEach(t testing.TB, dir string, datas [][]byte) ([]cid.Cid, []byte) {
	t.Helper()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cids []cid.Cid
	for i := range datas {
		cids = append(cids, putAll(t, b, datas[i:i+1])...)
	}
	b.Close()
	bs, err := os.ReadFile(filepath.Join(dir, "packs", "00000001.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return cids, bs
}

// checkAroundDamage checks a blob store opened over a damaged pack that
// held bs: every blob but the victim (-1: none) is served with its bytes,
// the victim is not served (its error is returned), and the pack was
// neither cut nor changed.
func checkAroundDamage(t *testing.T, what string, b *FSBlobs, pack string, bs []byte, cids []cid.Cid, datas [][]byte, victim int) error {
	t.Helper()
	var victimErr error
	for i, c := range cids {
		r, err := b.Open(c)
		if i == victim {
			if err == nil {
				r.Close()
				t.Fatalf("%s: the damaged blob is served", what)
			}
			victimErr = err
			continue
		}
		if err != nil {
			t.Fatalf("%s: blob %d: %v", what, i, err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if !bytes.Equal(got, datas[i]) {
			t.Fatalf("%s: blob %d served with other bytes", what, i)
		}
	}
	after, err := os.ReadFile(pack)
	if err != nil || b.PackCut() != 0 || len(after) < len(bs) || !bytes.Equal(after[:len(bs)], bs) {
		t.Fatalf("%s: the pack was changed (cut %d): %v", what, b.PackCut(), err)
	}
	return victimErr
}
