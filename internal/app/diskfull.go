package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/sqlite"
	"github.com/flightrec/flightrec/wire"
)

// startError names the cause of a failure to open the data directory or
// the index, and what to do about it: a full filesystem (ENOSPC from the
// store, SQLITE_FULL from the index, or a SQLite I/O error on a
// filesystem with no space left) names the directory to free space under;
// a damaged index names reindex. Anything else is returned as it is.
func startError(dir string, err error) error {
	var e *wire.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	free, known := freeBytes(dir)
	abs, _ := filepath.Abs(dir)
	if abs == "" {
		abs = dir
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), sqlite.Full(err), known && free == 0:
		return wire.New(http.StatusInsufficientStorage, "STORAGE_FULL",
			fmt.Sprintf("free space on the filesystem holding %s (remove files that are not flightrec's, or expired recordings with flightrec retention sweep --data %s), then start again", abs, dir),
			"no space left on device (ENOSPC): the filesystem holding the data directory %s has %d bytes free: %v", abs, free, err)
	case sqlite.Corrupt(err):
		return indexCorrupt(dir, err)
	}
	return err
}

// indexCorrupt is the refusal for a damaged embedded index.
func indexCorrupt(dir string, err error) *wire.Error {
	return wire.New(http.StatusServiceUnavailable, "INDEX_CORRUPT",
		fmt.Sprintf("stop the server and run flightrec reindex --data %s: it moves the damaged index aside and rebuilds it from the logs and manifests", dir),
		"the index is damaged: %v", err)
}

// OpenForReindex opens the store and an index to rebuild: an embedded
// index SQLite finds damaged is moved aside (index.sqlite.corrupt-TIME,
// kept for inspection) and a new one made, since nothing in it is the
// only copy of anything.
//
// The index is reset here, as reindex does first anyway: a file SQLite
// opens may still be malformed past its first page, which only a write
// finds. In shared mode (Blobs set) it is not: the index is every node's,
// and reindex rebuilds it recording by recording (store.Store.Reindex).
func (c StoreConfig) OpenForReindex(ctx context.Context) (*store.Store, store.Index, error) {
	st, idx, err := c.Open()
	if err == nil && c.Blobs != "" {
		return st, idx, nil
	}
	if err == nil {
		if err = idx.Reset(ctx); err == nil {
			return st, idx, nil
		}
		idx.Close()
		st.Close()
	}
	if !sqlite.Corrupt(err) || c.Index != "" {
		return nil, nil, err
	}
	path, aside := layout.Of(c.Data).Index(), layout.Of(c.Data).IndexAside(time.Now().Unix())
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if rerr := os.Rename(path+suffix, aside+suffix); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("move the damaged index aside: %w (after: %w)", rerr, err)
		}
	}
	return c.Open()
}
