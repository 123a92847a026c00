package store

import (
	"os"

	"github.com/flightrec/flightrec/store/layout"
)

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old file or the new one (layout.WriteFileAtomic).
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return layout.WriteFileAtomic(path, data, perm)
}

// SyncDir fsyncs a directory, making changes to its entries durable
// (layout.SyncDir).
func SyncDir(dir string) error { return layout.SyncDir(dir) }
