// Package statedoc is one small document of shared state (the token list,
// a recording's pins) kept either as a file in the data directory (the
// single-node default) or as one object in the deployment's object store
// (shared mode, `serve --blobs s3://…`), so that every node reads and
// changes the same one. Its owners (access.Tokens, retention.Pins) are
// given a Doc at construction and never know which.
package statedoc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/objstore"
)

// Doc is one document of state.
type Doc interface {
	// Read returns the document's bytes (nil when it does not exist yet).
	Read(ctx context.Context) ([]byte, error)
	// Update replaces the document with change(old) (old nil: none yet)
	// without losing a concurrent writer's change, on this node or
	// another. change may run more than once; its error ends the update.
	Update(ctx context.Context, change func(old []byte) ([]byte, error)) error
	// Delete removes the document (a missing one is no error).
	Delete(ctx context.Context) error
	// Shared says whether other nodes change the document too, so that a
	// cached copy goes stale without this node knowing.
	Shared() bool
}

// File is a document kept in a file, written atomically with mode perm.
// Its writers in one process are serialized here; across processes the
// data directory's lock (held by a server while it runs) keeps them apart.
func File(path string, perm os.FileMode) Doc { return &file{path: path, perm: perm} }

type file struct {
	path string
	perm os.FileMode
	mu   sync.Mutex
}

func (f *file) Read(context.Context) ([]byte, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (f *file) Update(ctx context.Context, change func(old []byte) ([]byte, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, err := f.Read(ctx)
	if err != nil {
		return err
	}
	b, err := change(old)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return err
	}
	if err := store.WriteFileAtomic(f.path, b, f.perm); err != nil {
		return fmt.Errorf("writing %s: %w", f.path, err)
	}
	return nil
}

func (f *file) Delete(context.Context) error {
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (f *file) Shared() bool { return false }

// Object is a document kept as the object key in obj, changed by
// read-modify-write on its ETag (objstore.Update): two nodes changing it
// at once both keep their change.
func Object(obj objstore.Store, key string) Doc { return &object{obj: obj, key: key} }

type object struct {
	obj objstore.Store
	key string
}

func (o *object) Read(ctx context.Context) ([]byte, error) {
	b, _, err := objstore.ReadAll(ctx, o.obj, o.key)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (o *object) Update(ctx context.Context, change func(old []byte) ([]byte, error)) error {
	_, err := objstore.Update(ctx, o.obj, o.key, func(old []byte, _ bool) ([]byte, error) { return change(old) })
	return err
}

func (o *object) Delete(ctx context.Context) error { return o.obj.Delete(ctx, o.key) }

func (o *object) Shared() bool { return true }
