// Package sqlite is flightrec's embedded store.Index on pure-Go SQLite
// (modernc.org/sqlite).
//
// The index is a projection of the logs and manifests, rebuildable with
// flightrec reindex, so it trades per-commit durability for speed: WAL
// journal with synchronous=NORMAL (a power loss may lose the last commits,
// never corrupt the file; the cursor rolls back with the rows, so reindexing
// resumes exactly). Writes go through one connection, reads through a small
// pool of query-only connections that WAL lets run beside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/flightrec/flightrec/store"
)

var (
	_ store.Index  = (*DB)(nil)
	_ store.Purger = (*DB)(nil)
)

// DB is a store.Index backed by one SQLite file.
type DB struct {
	w  *sql.DB // the single writer connection; it serializes writes
	r  *sql.DB // query-only readers
	ck *checkpointer

	// Statements of the IndexEvents hot path, prepared once on the writer
	// and bound to each transaction with Tx.StmtContext.
	insEvents  []*sql.Stmt // by insertChunks
	insStep    *sql.Stmt
	updStep    *sql.Stmt
	updCounter *sql.Stmt

	// fts: the schema has the text index (search.go). Open migrates to it;
	// OpenReadOnly finds what the file has, and an older file is searched
	// by scanning.
	fts bool
}

// busyTimeoutMS bounds how long a statement waits for another process's
// lock (a reindex beside a running server) before failing with SQLITE_BUSY.
const busyTimeoutMS = 10_000

// Open opens or creates the index at path, creating its directory and
// migrating its schema as needed.
func Open(path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlite index: empty path")
	}
	// The driver reads everything after '?' as DSN parameters, and each
	// pooled connection to ":memory:" or a memory URI would get a database
	// of its own.
	if strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("sqlite index: %q is not a plain file path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite index: create directory: %w", err)
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMS)
	// The writer: WAL with synchronous=NORMAL (see the package comment); a
	// 32 MB page cache, so the b-tree pages a batch touches stay resident;
	// automatic checkpoints off, since checkpoint.go does them in the
	// background; and _txlock=immediate, which takes the write lock at
	// BEGIN, because a deferred transaction that reads first and then
	// writes fails with SQLITE_BUSY, without waiting, when another process
	// wrote in between. secure_delete overwrites what a delete frees with
	// zeros: a recording retention removed leaves no trace in free pages.
	w, err := sql.Open("sqlite", path+"?"+common+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=secure_delete(1)"+
		"&_pragma=cache_size(-32000)&_pragma=wal_autocheckpoint(0)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite index: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	db := &DB{w: w, fts: true}
	ctx := context.Background()
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite index %s: %w", path, err)
	}
	// Readers open after the writer has switched the file to WAL.
	r, err := sql.Open("sqlite", path+"?"+common+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite index: open readers %s: %w", path, err)
	}
	n := max(runtime.GOMAXPROCS(0), 2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	db.r = r
	ckConn, err := sql.Open("sqlite", path+"?"+common)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite index: open checkpointer %s: %w", path, err)
	}
	ckConn.SetMaxOpenConns(1)
	db.ck = startCheckpointer(ckConn)

	if err := db.prepare(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite index %s: %w", path, err)
	}
	return db, nil
}

// OpenReadOnly opens an existing index for reading only (mode=ro), for
// commands that check or read beside a running server: it creates,
// migrates and checkpoints nothing, and any write fails. SQLite may still
// update the -shm and -wal files that WAL readers share.
func OpenReadOnly(path string) (*DB, error) {
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("sqlite index: %q is not a plain file path", path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("sqlite index: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite index: %w", err)
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro&" +
		fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=query_only(1)", busyTimeoutMS)}
	r, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("sqlite index: open %s read-only: %w", path, err)
	}
	n := max(runtime.GOMAXPROCS(0), 2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.Ping(); err != nil {
		r.Close()
		return nil, fmt.Errorf("sqlite index: open %s read-only: %w", path, err)
	}
	var v int
	if err := r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		r.Close()
		return nil, fmt.Errorf("sqlite index: open %s read-only: schema version: %w", path, err)
	}
	// Writes go to the same read-only pool, where SQLite refuses them.
	return &DB{w: r, r: r, fts: v >= ftsSchemaVersion}, nil
}

func (db *DB) prepare(ctx context.Context) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&db.insStep, insertStepSQL},
		{&db.updStep, updateStepSQL},
		{&db.updCounter, updateCountersSQL},
	} {
		s, err := db.w.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = s
	}
	for _, n := range insertChunks {
		s, err := db.w.PrepareContext(ctx, insertEventsSQL(n))
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		db.insEvents = append(db.insEvents, s)
	}
	return nil
}

// Close stops the checkpointer and releases the connections; SQLite
// checkpoints what remains of the WAL when the last one closes.
func (db *DB) Close() error {
	var errs []error
	stmts := append([]*sql.Stmt{db.insStep, db.updStep, db.updCounter}, db.insEvents...)
	for _, s := range stmts {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if db.ck != nil {
		errs = append(errs, db.ck.close())
		// A purge's TRUNCATE the checkpointer had not managed yet: the
		// WAL may still hold deleted text, so try once more now that no
		// checkpoint runs beside it.
		if db.ck.truncate.Load() && !db.truncateNow(context.Background()) {
			errs = append(errs, errors.New("the WAL could not be truncated after a purge (another connection held it): deleted text may remain in index.sqlite-wal until the next purge"))
		}
	}
	if db.r != nil && db.r != db.w {
		errs = append(errs, db.r.Close())
	}
	errs = append(errs, db.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite index: close: %w", err)
	}
	return nil
}
