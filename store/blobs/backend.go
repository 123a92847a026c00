package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/flightrec/flightrec/store/layout"
)

// A Backend keeps a blob store's objects by key, in the style of Tempo's
// backend.RawReader/RawWriter: a flat namespace of whole objects that are
// put, read whole or by byte range, checked, listed and deleted. Keys are
// slash-separated relative paths ("<xy>/<cid>" for a loose blob, as
// layout.BlobTree names it under its directory). The local backend keeps
// them as files under a directory, exactly the tree FSBlobs has always
// written; an object store (S3: issue 20) keeps them under a bucket prefix
// and answers byte ranges with ranged GETs.
type Backend interface {
	RawReader
	RawWriter
}

// RawReader reads a backend's objects.
type RawReader interface {
	// Get opens the object at key for reading, whole (Read) or by range
	// (ReadAt); Size is its length. A missing key is ErrNotFound.
	Get(ctx context.Context, key string) (BlobReader, error)
	// GetRange reads len(p) bytes at offset off of the object at key; an
	// object shorter than off+len(p) is io.ErrUnexpectedEOF.
	GetRange(ctx context.Context, key string, off int64, p []byte) error
	// Stat returns the size of the object at key: whether it exists. A
	// missing key is ErrNotFound.
	Stat(ctx context.Context, key string) (int64, error)
	// List calls fn with every object whose key starts with prefix (""
	// or a directory ending in "/"), in no particular order, stopping at
	// the first error fn returns. Objects being written are not listed.
	List(ctx context.Context, prefix string, fn func(key string, size int64) error) error
}

// RawWriter writes a backend's objects.
type RawWriter interface {
	// Put stores data at key durably and atomically: a reader sees the
	// whole object or none, and a key that exists is replaced whole.
	Put(ctx context.Context, key string, data []byte) error
	// Delete removes the object at key durably. A missing key is
	// ErrNotFound.
	Delete(ctx context.Context, key string) error
}

// ErrBadKey is a key a backend refuses: not a clean relative path, or one
// with a component starting with "." (the names of temporaries).
var ErrBadKey = errors.New("blobs: invalid object key")

// checkKey refuses keys that could leave the backend's directory or name
// a temporary.
func checkKey(key string) error {
	if !fs.ValidPath(key) || key == "." {
		return fmt.Errorf("%w %q", ErrBadKey, key)
	}
	for _, part := range strings.Split(key, "/") {
		if strings.HasPrefix(part, ".") {
			return fmt.Errorf("%w %q", ErrBadKey, key)
		}
	}
	return nil
}

// Local is the Backend of a directory: the object at key is the file
// Dir/key. Put writes a temporary (".tmp-*") beside it, fsyncs it, renames
// it into place and fsyncs the directory (and, when it made the directory,
// its parent), as FSBlobs writes a loose blob.
type Local struct{ Dir string }

var _ Backend = Local{}

func (l Local) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.Dir, filepath.FromSlash(key)), nil
}

// notFound maps a missing file to ErrNotFound; other errors are the
// filesystem's (they name the path).
func notFound(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("object %s: %w", key, ErrNotFound)
	}
	return err
}

// Get opens the file of key.
func (l Local) Get(_ context.Context, key string) (BlobReader, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	return openFile(key, p)
}

// openFile opens the file at p as a BlobReader.
func openFile(key, p string) (BlobReader, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, notFound(key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, notFound(key, err)
	}
	return &fileBlob{File: f, size: fi.Size()}, nil
}

// GetRange reads len(p) bytes at off of the file of key.
func (l Local) GetRange(ctx context.Context, key string, off int64, p []byte) error {
	r, err := l.Get(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.ReadAt(p, off); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("object %s: %w", key, err)
	}
	return nil
}

// Stat returns the size of the file of key.
func (l Local) Stat(_ context.Context, key string) (int64, error) {
	p, err := l.path(key)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, notFound(key, err)
	}
	return fi.Size(), nil
}

// List walks the files under prefix, leaving out temporaries and other
// names starting with ".".
func (l Local) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	root := l.Dir
	if prefix != "" {
		p, err := l.path(strings.TrimSuffix(prefix, "/"))
		if err != nil {
			return err
		}
		root = p
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while listing
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != root {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(l.Dir, p)
		return fn(filepath.ToSlash(rel), fi.Size())
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Put writes the file of key atomically and durably.
func (l Local) Put(_ context.Context, key string, data []byte) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("store: object %s: %w", key, err)
		}
		if err := syncDirs(l.Dir, path.Dir(key)); err != nil {
			return err
		}
	}
	if err := writeTemp(dir, p, data); err != nil {
		return fmt.Errorf("store: object %s: %w", key, err)
	}
	return layout.SyncDir(dir)
}

// syncDirs fsyncs root and each directory of rel under it (whose entries
// MkdirAll may just have made).
func syncDirs(root, rel string) error {
	if err := layout.SyncDir(root); err != nil {
		return err
	}
	d := root
	for _, part := range strings.Split(rel, "/") {
		if part == "." || part == "" {
			continue
		}
		d = filepath.Join(d, part)
		if err := layout.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the file of key and fsyncs its directory.
func (l Local) Delete(_ context.Context, key string) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return notFound(key, err)
	}
	return layout.SyncDir(filepath.Dir(p))
}
