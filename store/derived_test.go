package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestDerivedBlobsAreReferenced: a derived blob is found again by name,
// References lists it (so a sweep keeps it), and replacing it drops the
// old one from References.
func TestDerivedBlobsAreReferenced(t *testing.T) {
	s, err := OpenStore(t.TempDir(), LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := NewRecordingID(time.Now())
	if err := s.Create(RecordingMeta{ID: id, Project: "p", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Derived(id, "video.webm"); err != nil || ok {
		t.Fatalf("before any put: ok=%v err=%v", ok, err)
	}
	c1, err := s.PutDerived(id, "video.webm", []byte("first build"))
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Derived(id, "video.webm")
	if err != nil || !ok || !got.Equals(c1) {
		t.Fatalf("Derived = %v %v %v, want %v", got, ok, err, c1)
	}
	refs, err := s.References(id)
	if err != nil || !slices.Contains(refs, c1.String()) {
		t.Fatalf("References = %v, %v; want it to hold %s", refs, err, c1)
	}
	c2, err := s.PutDerived(id, "video.webm", []byte("second build"))
	if err != nil {
		t.Fatal(err)
	}
	refs, _ = s.References(id)
	if slices.Contains(refs, c1.String()) || !slices.Contains(refs, c2.String()) {
		t.Fatalf("after replacing: References = %v", refs)
	}
	if _, err := s.PutDerived(id, "../escape", []byte("x")); err == nil {
		t.Fatal("a name with a slash was accepted")
	}
	if _, err := s.PutDerived(NewRecordingID(time.Now()), "video.webm", []byte("x")); err == nil {
		t.Fatal("a derived blob of a recording that does not exist was recorded")
	}
}

// TestPutDerivedFile: a blob built in a file under the data directory is
// moved into the blob store (the temporary is gone, the blob has its
// bytes and CID, the same as PutDerived would give); the same bytes again
// leave the second file to the caller; a read-only store refuses; and a
// video temporary a crash left is removed when the store is opened.
func TestPutDerivedFile(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := NewRecordingID(time.Now())
	if err := s.Create(RecordingMeta{ID: id, Project: "p", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("a built video "), 100000) // past a pack's largest blob
	tmp := filepath.Join(dir, VideoTempPrefix+"built-1")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := s.PutDerivedFile(id, "video.webm", tmp)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != Sum(data).String() {
		t.Fatalf("CID %s, want %s", c, Sum(data))
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temporary is still there: %v", err)
	}
	if got, ok, err := s.Derived(id, "video.webm"); err != nil || !ok || !got.Equals(c) {
		t.Fatalf("Derived = %v %v %v", got, ok, err)
	}
	if got := readBlob(t, s.Blobs, c); !bytes.Equal(got, data) {
		t.Fatalf("the stored blob has %d bytes, not the file's", len(got))
	}
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if c2, err := s.PutDerivedFile(id, "video.webm", tmp); err != nil || !c2.Equals(c) {
		t.Fatalf("same bytes again: %v %v", c2, err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("a file already stored should be left to the caller: %v", err)
	}
	s.Close()
	ro, err := OpenStoreReadOnly(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.PutDerivedFile(id, "video.webm", tmp); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only PutDerivedFile: %v", err)
	}
	ro.Close()
	s, err = OpenStore(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a crash's video temporary survived opening the store: %v", err)
	}
	if got := readBlob(t, s.Blobs, c); !bytes.Equal(got, data) {
		t.Fatal("the kept video changed")
	}
}
