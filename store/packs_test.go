package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/go-cid"
)

func putAll(t *testing.T, b *FSBlobs, datas [][]byte) []cid.Cid {
	t.Helper()
	cids, err := b.PutMany(datas)
	if err != nil {
		t.Fatal(err)
	}
	return cids
}

func blobsOf(t *testing.T, n, size int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		out[i] = randBytes(t, size)
	}
	return out
}

// TestPackTornTail cuts the last batch's pack bytes at every point of its
// last entry (and flips a byte in it): reopening keeps every earlier blob,
// drops the torn one, and later puts append cleanly.
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
	start := len(whole) - entry
	damage := func(name string, bs []byte) {
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
		if _, err := b.Stat(lc); err == nil {
			t.Fatalf("%s: the torn blob is still listed", name)
		}
		if b.PackCut() != int64(len(bs)-start) {
			t.Fatalf("%s: cut %d bytes, want %d", name, b.PackCut(), len(bs)-start)
		}
		again := putAll(t, b, [][]byte{last})[0]
		if got := readBlob(t, b, again); !bytes.Equal(got, last) {
			t.Fatalf("%s: re-put blob differs", name)
		}
	}
	for cut := start + 1; cut < len(whole); cut += 37 {
		damage("cut", append([]byte(nil), whole[:cut]...))
	}
	flipped := append([]byte(nil), whole...)
	flipped[start+packEntryHdr+10] ^= 0x40
	damage("flip", flipped)
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
