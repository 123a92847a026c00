package sqlite

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

// TestOpenReadOnly: a read-only open creates no index, reads what a live
// writer committed, refuses every write, and leaves the database file as
// it was.
func TestOpenReadOnly(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "index.sqlite")
	if db, err := OpenReadOnly(path); err == nil {
		db.Close()
		t.Fatal("opened an index that does not exist")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only open created %s: %v", path, err)
	}
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.IndexEvents(ctx, "r1", indextest.BenchRows("r1", 1, 10), 10); err != nil {
		t.Fatal(err)
	}
	// Beside the live writer.
	r, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := r.Cursor(ctx, "r1"); err != nil || c != 10 {
		t.Fatalf("read-only cursor = %d, %v; want 10", c, err)
	}
	if err := r.IndexEvents(ctx, "r1", indextest.BenchRows("r1", 11, 5), 15); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("IndexEvents on a read-only index: %v", err)
	}
	row := store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: "r2", Project: "p", CreatedAt: 1}, State: store.StateOpen}
	if err := r.PutRecording(ctx, row); err == nil {
		t.Error("PutRecording on a read-only index succeeded")
	}
	if err := r.Reset(ctx); err == nil {
		t.Error("Reset on a read-only index succeeded")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := w.Cursor(ctx, "r1"); err != nil || c != 10 {
		t.Fatalf("cursor after the read-only session = %d, %v; want 10", c, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// With no writer: the file is read, not changed.
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err = OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := r.Cursor(ctx, "r1"); err != nil || c != 10 {
		t.Fatalf("read-only cursor with no writer = %d, %v; want 10", c, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("a read-only session changed %s (%v)", path, err)
	}
}
