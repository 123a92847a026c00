package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/objstore"
)

// TestSharedKnownHashes: in shared mode the known-value hashes an open
// recording's batches taught node A are read by node B (which takes the
// recording over when A is lost) from the object store.
func TestSharedKnownHashes(t *testing.T) {
	bucket := t.TempDir()
	open := func() *store.Store {
		obj, err := objstore.NewLocal(bucket)
		if err != nil {
			t.Fatal(err)
		}
		b, err := objblobs.Open(context.Background(), obj)
		if err != nil {
			t.Fatal(err)
		}
		s, err := store.OpenStoreWithBlobs(t.TempDir(), store.LogOptions{}, b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	id := store.NewRecordingID(time.Now())
	if err := a.Create(store.RecordingMeta{ID: id, Project: "p", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	first, second := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	for _, h := range [][]byte{first, second} {
		if err := a.AppendKnownHashes(id, h); err != nil {
			t.Fatal(err)
		}
	}
	want := append(append([]byte{}, first...), second...)
	for name, s := range map[string]*store.Store{"A": a, "B": b} {
		if got, err := s.KnownHashes(id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("node %s reads %x, %v; want %x", name, got, err, want)
		}
	}
}
