package objbackend_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/backendtest"
	"github.com/flightrec/flightrec/store/blobs/objbackend"
	"github.com/flightrec/flightrec/store/objstore"
)

func TestOnLocalObjects(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) blobs.Backend {
		s, err := objstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return objbackend.Backend{Store: s}
	})
}

// s3Backend opens a backend on a fresh prefix of srv's bucket.
func s3Backend(t *testing.T, srv *testenv.S3Server, prefix string) objbackend.Backend {
	return objbackend.Backend{Store: srv.Store(t, prefix)}
}

func TestOnS3(t *testing.T) {
	srv := testenv.S3(t)
	n := 0
	backendtest.Run(t, func(t *testing.T) blobs.Backend {
		n++
		return s3Backend(t, srv, "suite-"+strconv.Itoa(n))
	})
}

// TestReaderAndOutage: the reader streams, seeks and reads at offsets by
// ranged GETs; with the server down, every call is objstore.ErrUnavailable
// and never blobs.ErrNotFound (a sweep must not take a blob for gone).
func TestReaderAndOutage(t *testing.T) {
	srv := testenv.S3(t)
	b := s3Backend(t, srv, "reader")
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<12)
	if err := b.Put(ctx, "packs/00000001.pack", data); err != nil {
		t.Fatal(err)
	}
	r, err := b.Get(ctx, "packs/00000001.pack")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll: %d bytes, %v", len(got), err)
	}
	if _, err := r.Seek(100, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 10)
	if _, err := io.ReadFull(r, p); err != nil || !bytes.Equal(p, data[100:110]) {
		t.Fatalf("after Seek: %q, %v", p, err)
	}
	if n, err := r.ReadAt(p, int64(len(data))-4); n != 4 || err != io.EOF || !bytes.Equal(p[:4], data[len(data)-4:]) {
		t.Fatalf("ReadAt across the end: %d, %v", n, err)
	}
	r.Close()

	srv.Stop()
	for name, err := range map[string]error{
		"get":    func() error { _, err := b.Get(ctx, "packs/00000001.pack"); return err }(),
		"stat":   func() error { _, err := b.Stat(ctx, "packs/00000001.pack"); return err }(),
		"range":  b.GetRange(ctx, "packs/00000001.pack", 0, p),
		"put":    b.Put(ctx, "ab/new", []byte("x")),
		"delete": b.Delete(ctx, "packs/00000001.pack"),
		"list":   b.List(ctx, "", func(string, int64) error { return nil }),
	} {
		if !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, blobs.ErrNotFound) {
			t.Errorf("%s with the server down: %v, want unavailable and not not-found", name, err)
		}
	}
	srv.Start()
	if n, err := b.Stat(ctx, "packs/00000001.pack"); err != nil || n != int64(len(data)) {
		t.Fatalf("after the restart: %d, %v", n, err)
	}
}
