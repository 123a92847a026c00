// Package backendtest is the conformance suite of blobs.Backend: every
// backend (the local directory, an object store) runs it, so the blob
// store can rely on the same behaviour from each.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sort"
	"testing"

	"github.com/flightrec/flightrec/store/blobs"
)

// Run checks the backend open returns (a fresh, empty one per call).
func Run(t *testing.T, open func(t *testing.T) blobs.Backend) {
	ctx := context.Background()
	t.Run("PutGetStat", func(t *testing.T) {
		b := open(t)
		data := []byte("the quick brown fox")
		if err := b.Put(ctx, "ab/one", data); err != nil {
			t.Fatal(err)
		}
		r, err := b.Get(ctx, "ab/one")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) || r.Size() != int64(len(data)) {
			t.Fatalf("Get: %q (size %d), %v", got, r.Size(), err)
		}
		if n, err := b.Stat(ctx, "ab/one"); err != nil || n != int64(len(data)) {
			t.Fatalf("Stat: %d, %v", n, err)
		}
		// A Put over an existing key replaces it whole.
		if err := b.Put(ctx, "ab/one", []byte("short")); err != nil {
			t.Fatal(err)
		}
		if n, _ := b.Stat(ctx, "ab/one"); n != 5 {
			t.Fatalf("after a second Put: size %d, want 5", n)
		}
	})
	t.Run("GetRange", func(t *testing.T) {
		b := open(t)
		data := []byte("0123456789")
		if err := b.Put(ctx, "packs/00000001.pack", data); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 4)
		if err := b.GetRange(ctx, "packs/00000001.pack", 3, p); err != nil || string(p) != "3456" {
			t.Fatalf("GetRange: %q, %v", p, err)
		}
		r, err := b.Get(ctx, "packs/00000001.pack")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.ReadAt(p, 6); err != nil || string(p) != "6789" {
			t.Fatalf("ReadAt: %q, %v", p, err)
		}
		if err := b.GetRange(ctx, "packs/00000001.pack", 8, p); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("a range past the end: %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		b := open(t)
		if _, err := b.Get(ctx, "ab/none"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("Get: %v", err)
		}
		if _, err := b.Stat(ctx, "ab/none"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("Stat: %v", err)
		}
		if err := b.GetRange(ctx, "ab/none", 0, make([]byte, 1)); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("GetRange: %v", err)
		}
		if err := b.Delete(ctx, "ab/none"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("Delete: %v", err)
		}
	})
	t.Run("ListDelete", func(t *testing.T) {
		b := open(t)
		keys := []string{"ab/x", "ab/y", "cd/z", "packs/00000001.pack"}
		for _, k := range keys {
			if err := b.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		list := func(prefix string) []string {
			var out []string
			err := b.List(ctx, prefix, func(k string, n int64) error {
				if n != int64(len(k)) {
					t.Errorf("List: %s has size %d, want %d", k, n, len(k))
				}
				out = append(out, k)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(out)
			return out
		}
		if got := list(""); !slices.Equal(got, keys) {
			t.Fatalf("List(\"\") = %v, want %v", got, keys)
		}
		if got := list("ab/"); !slices.Equal(got, keys[:2]) {
			t.Fatalf("List(ab/) = %v", got)
		}
		if got := list("none/"); len(got) != 0 {
			t.Fatalf("List(none/) = %v", got)
		}
		if err := b.Delete(ctx, "ab/x"); err != nil {
			t.Fatal(err)
		}
		if got := list("ab/"); !slices.Equal(got, []string{"ab/y"}) {
			t.Fatalf("after Delete: %v", got)
		}
		stop := errors.New("stop")
		if err := b.List(ctx, "", func(string, int64) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("List did not return fn's error: %v", err)
		}
	})
	t.Run("BadKeys", func(t *testing.T) {
		b := open(t)
		for _, k := range []string{"", "/abs", "../up", "ab/../../up", "ab/.tmp-1", ".hidden"} {
			if err := b.Put(ctx, k, []byte("x")); !errors.Is(err, blobs.ErrBadKey) {
				t.Errorf("Put(%q): %v, want ErrBadKey", k, err)
			}
			if _, err := b.Stat(ctx, k); !errors.Is(err, blobs.ErrBadKey) {
				t.Errorf("Stat(%q): %v, want ErrBadKey", k, err)
			}
		}
	})
}
