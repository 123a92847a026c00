// Package blobstest holds the helpers the blob store's tests and the
// store's tests share: random blobs, putting and reading them back. It
// imports no flightrec package, so store/blobs's own tests can use it.
package blobstest

import (
	"crypto/rand"
	"io"
	"os"
	"testing"

	"github.com/ipfs/go-cid"
)

// Rand is n random bytes.
func Rand(t testing.TB, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if _, err := rand.Read(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// RandMany is n random blobs of size bytes each.
func RandMany(t testing.TB, n, size int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		out[i] = Rand(t, size)
	}
	return out
}

// Similar returns n blobs of size bytes that zstd shrinks alone to about
// half (16-byte runs drawn from a palette, each about 4 times, as a page's
// JPEG blocks repeat) and that differ from each other only in a small
// region, as consecutive screencast frames of one page differ below the
// block that changed: a pack keeps each as a delta against the one
// before.
func Similar(t testing.TB, n, size int) [][]byte {
	t.Helper()
	runs := max(8, size/64)
	palette := Rand(t, runs*16)
	pick := Rand(t, size/16+1)
	page := make([]byte, 0, size+16)
	for _, k := range pick {
		at := int(k) % runs * 16
		page = append(page, palette[at:at+16]...)
	}
	page = page[:size]
	out := make([][]byte, n)
	for i := range out {
		b := append([]byte(nil), page...)
		at := (i * 997) % (size - 256)
		copy(b[at:], Rand(t, 200))
		out[i] = b
	}
	return out
}

// PutMany puts datas in one batch with put (a blob store's PutMany).
func PutMany(t testing.TB, put func([][]byte) ([]cid.Cid, error), datas [][]byte) []cid.Cid {
	t.Helper()
	cids, err := put(datas)
	if err != nil {
		t.Fatal(err)
	}
	return cids
}

// Blob is what a blob store's Open returns.
type Blob interface {
	io.ReadCloser
	Size() int64
}

// Read reads blob c whole with open (a blob store's Open), checking that
// its Size is what was read.
func Read[B Blob](t testing.TB, open func(cid.Cid) (B, error), c cid.Cid) []byte {
	t.Helper()
	r, err := open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != int64(len(p)) {
		t.Fatalf("Size %d, read %d bytes", r.Size(), len(p))
	}
	return p
}

// Names lists the names in directory dir.
func Names(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Count counts the blobs walk (a blob store's Walk) visits.
func Count(t testing.TB, walk func(func(cid.Cid, int64) error) error) int {
	t.Helper()
	n := 0
	if err := walk(func(cid.Cid, int64) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
