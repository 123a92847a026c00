package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/sqlite"
	"github.com/flightrec/flightrec/wire"
)

// Lock takes the data directory's lock for command (a server passes its
// listen address too), waiting up to c.LockTimeout while a short command
// holds it. A refusal is the DATA_DIR_LOCKED envelope (LockError).
func (c StoreConfig) Lock(command, addr string) (*store.DirLock, error) {
	l, err := store.LockDir(c.Data, store.LockOptions{
		Holder: store.LockHolder{Command: command, Addr: addr}, Wait: c.LockTimeout})
	if err != nil {
		return nil, LockError(err)
	}
	return l, nil
}

// LockError maps a *store.LockedError to the DATA_DIR_LOCKED envelope
// (other errors pass through): every command that writes refuses the same
// way, naming the holder and what to do about it.
func LockError(err error) error {
	var le *store.LockedError
	if !errors.As(err, &le) {
		return err
	}
	h := le.Holder
	var next string
	switch {
	case h.Server():
		next = fmt.Sprintf("stop that server (pid %d), or send this command through it with --server %s",
			h.PID, serverURL(h.Addr))
	case h.PID != 0:
		next = fmt.Sprintf("wait for flightrec %s (pid %d) to finish and run this again, or raise --lock-timeout",
			h.Command, h.PID)
	default:
		next = "find the process holding " + layout.Of(le.Dir).Lock() +
			" (fuser -v FILE) and stop it, or use --server URL if it is a server"
	}
	e := wire.New(http.StatusConflict, "DATA_DIR_LOCKED", next, "%v", le)
	if h.PID != 0 {
		e = e.With("pid", h.PID)
	}
	if h.Addr != "" {
		e = e.With("addr", h.Addr)
	}
	return e
}

// serverURL is the URL of a server listening on addr; an address that
// binds every interface is reached on loopback.
func serverURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "URL"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// OpenForWrite takes the data directory's lock for command, then opens the
// store and the index. The caller closes the index and the store, then the
// lock.
func (c StoreConfig) OpenForWrite(command string) (*store.Store, store.Index, *store.DirLock, error) {
	lock, err := c.Lock(command, "")
	if err != nil {
		return nil, nil, nil, err
	}
	st, idx, err := c.Open()
	if err != nil {
		lock.Close()
		return nil, nil, nil, err
	}
	return st, idx, lock, nil
}

// OpenReadOnly opens an existing data directory read-only (no lock: it
// works beside a running server and changes no byte) for commands that
// check or read.
func (c StoreConfig) OpenReadOnly() (*store.Store, error) {
	if fi, err := os.Stat(c.Data); err != nil || !fi.IsDir() {
		return nil, wire.New(0, "NO_DATA_DIR", "give the data directory with --data DIR (env FLIGHTREC_DATA)",
			"%s is not a data directory", c.Data)
	}
	lo := store.LogOptions{SegmentBytes: c.SegmentBytes}
	if c.Blobs == "" {
		return store.OpenStoreReadOnly(c.Data, lo)
	}
	b, err := OpenBlobs(context.Background(), c.Blobs, c.BlobCredentials, c.blobOptions())
	if err != nil {
		return nil, err
	}
	return store.OpenStoreReadOnlyWithBlobs(c.Data, lo, b)
}

// OpenIndexReadOnly opens the index a DSN names for reading only: the
// embedded SQLite file is opened with mode=ro (SQLite may still touch its
// -shm and -wal files); ClickHouse is a separate server, opened as usual.
func OpenIndexReadOnly(dsn, dataDir string) (store.Index, error) {
	switch {
	case dsn == "":
		return sqlite.OpenReadOnly(layout.Of(dataDir).Index())
	case strings.HasPrefix(dsn, "sqlite:"):
		return sqlite.OpenReadOnly(strings.TrimPrefix(dsn, "sqlite:"))
	}
	return OpenIndex(dsn, dataDir)
}
