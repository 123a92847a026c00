// Package objbackend is the blobs.Backend of an object store
// (objstore.Store: local files, or S3): what the blob store needs to keep
// its loose blobs and packs in a bucket. It passes the same conformance
// suite (blobs/backendtest) as blobs.Local, on both object stores.
//
// Errors keep both meanings: a missing object is blobs.ErrNotFound and
// objstore.ErrNotExist, and an unreachable store stays
// objstore.ErrUnavailable, so the ingest path can answer 503 rather than
// acknowledge.
package objbackend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/objstore"
)

// Backend keeps a blob store's objects in an object store.
type Backend struct{ Store objstore.Store }

var _ blobs.Backend = Backend{}

// checkKey applies the blob store's key rule (a clean relative path, no
// component starting with ".", the names of temporaries) and the object
// store's.
func checkKey(key string) error {
	if !fs.ValidPath(key) || key == "." {
		return fmt.Errorf("%w %q", blobs.ErrBadKey, key)
	}
	for part := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(part, ".") {
			return fmt.Errorf("%w %q", blobs.ErrBadKey, key)
		}
	}
	if err := objstore.CheckKey(key); err != nil {
		return fmt.Errorf("%w: %w", blobs.ErrBadKey, err)
	}
	return nil
}

// mapErr adds blobs.ErrNotFound to a missing object's error.
func mapErr(key string, err error) error {
	if errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("object %s: %w (%w)", key, blobs.ErrNotFound, err)
	}
	return err
}

// Get opens the object for reading: Read streams it from the store,
// ReadAt asks for each range.
func (b Backend) Get(ctx context.Context, key string) (blobs.BlobReader, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	info, err := b.Store.Stat(ctx, key)
	if err != nil {
		return nil, mapErr(key, err)
	}
	return &reader{ctx: ctx, store: b.Store, key: key, size: info.Size}, nil
}

// GetRange fills p from offset off; an object that ends first is
// io.ErrUnexpectedEOF.
func (b Backend) GetRange(ctx context.Context, key string, off int64, p []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := readRange(ctx, b.Store, key, off, p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readRange reads up to len(p) bytes at off, with io.ReaderAt's contract:
// fewer bytes only with an error (io.EOF at the object's end).
func readRange(ctx context.Context, s objstore.Store, key string, off int64, p []byte) (int, error) {
	rc, err := s.GetRange(ctx, key, off, int64(len(p)))
	if errors.Is(err, objstore.ErrRange) {
		return 0, io.EOF
	}
	if err != nil {
		return 0, mapErr(key, err)
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if err == io.ErrUnexpectedEOF || (err == io.EOF && len(p) > 0) {
		err = io.EOF
	}
	return n, err
}

// Stat returns the object's size.
func (b Backend) Stat(ctx context.Context, key string) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	info, err := b.Store.Stat(ctx, key)
	if err != nil {
		return 0, mapErr(key, err)
	}
	return info.Size, nil
}

// List calls fn with each object under prefix (in key order, though the
// contract promises none), leaving out names starting with ".".
func (b Backend) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	for info, err := range b.Store.List(ctx, prefix) {
		if err != nil {
			return err
		}
		if checkKey(info.Key) != nil {
			continue // not a blob store's name
		}
		if err := fn(info.Key, info.Size); err != nil {
			return err
		}
	}
	return nil
}

// Put stores data at key, replacing what was there.
func (b Backend) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := b.Store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{})
	return err
}

// Delete removes the object. The blob contract reports a missing key,
// which an object store's delete does not (S3 answers 204 either way), so
// it is asked first: a key deleted by another sweeper in between is gone
// all the same.
func (b Backend) Delete(ctx context.Context, key string) error {
	if _, err := b.Stat(ctx, key); err != nil {
		return err
	}
	return b.Store.Delete(ctx, key)
}

// reader is a blobs.BlobReader over an object: Read and Seek stream from
// the position (one ranged GET until the next Seek), ReadAt makes one
// ranged GET per call and is safe for concurrent use.
type reader struct {
	ctx   context.Context
	store objstore.Store
	key   string
	size  int64
	pos   int64
	body  io.ReadCloser // open at pos, or nil
}

func (r *reader) Size() int64 { return r.size }

func (r *reader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.body == nil {
		rc, err := r.store.GetRange(r.ctx, r.key, r.pos, -1)
		if err != nil {
			return 0, mapErr(r.key, err)
		}
		r.body = rc
	}
	n, err := r.body.Read(p)
	r.pos += int64(n)
	if err == io.EOF && r.pos < r.size {
		err = io.ErrUnexpectedEOF // the object shrank: replaced meanwhile
	}
	return n, err
}

func (r *reader) Seek(offset int64, whence int) (int64, error) {
	pos := offset
	switch whence {
	case io.SeekCurrent:
		pos += r.pos
	case io.SeekEnd:
		pos += r.size
	}
	if pos < 0 {
		return r.pos, fmt.Errorf("object %s: seek to %d", r.key, pos)
	}
	if pos != r.pos && r.body != nil {
		r.body.Close()
		r.body = nil
	}
	r.pos = pos
	return pos, nil
}

func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	return readRange(r.ctx, r.store, r.key, off, p)
}

func (r *reader) Close() error {
	if r.body != nil {
		err := r.body.Close()
		r.body = nil
		return err
	}
	return nil
}
