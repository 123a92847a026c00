// Package clickhouse is flightrec's fleet store.Index on ClickHouse, spoken
// to over the native protocol (github.com/ClickHouse/clickhouse-go/v2).
//
// The schema runs on ClickHouse 18.16 (Debian's clickhouse-server, which
// the tests use) and on current releases: UInt64 nanosecond timestamps,
// MergeTree engines, explicit column lists on insert, and nothing newer
// (no LowCardinality, codecs, skip indexes, TTL, DateTime64, Map or
// server-side query parameters).
//
// ClickHouse has no transactions and no unique keys, so the index is built
// to be correct under replays rather than to prevent them:
//
//   - events is a ReplacingMergeTree ordered by (recording, step, seq). A
//     recording's step is a function of its seq, so (recording, seq) is the
//     identity the engine collapses on when it merges, and every read
//     collapses what is not merged yet (LIMIT 1 BY seq) before it counts,
//     so a replayed row never counts twice, in any answer.
//   - recordings_meta (ordered by id) and recordings_list (ordered by
//     created_at, id) each hold one row per PutRecording, versioned by
//     updated_at (ReplacingMergeTree(updated_at)); reads take each id's
//     newest row with argMax. The list reads a window of the newest
//     creation times in recordings_list and confirms the page by id (see
//     Recordings).
//   - steps holds each step's totals, recomputed from events by the writer
//     for the steps each insert touched, versioned by their event count
//     (the row with the most is the newest): the timeline is a recording's
//     range of steps, and the counters (events, bytes, steps, first and
//     last ts) are sums over it.
//   - cursors holds each recording's indexed_through; the cursor is the
//     maximum ever written, so it never moves back. IndexEvents writes the
//     rows first and the cursor second: a crash in between leaves rows
//     beyond the cursor, which the projector sends again, harmlessly.
//   - DeleteRecording and Reset are mutations (ALTER TABLE … DELETE) and
//     TRUNCATE; DeleteRecording waits until system.mutations reports them
//     done, so no read after it returns sees the deleted rows.
//
// IndexEvents calls go through a group-committing writer: calls that
// arrive together share one insert of events (cut into chunks inserted over
// insert_streams connections at once when large) and one of cursors, and
// each returns only once its rows and cursor are written.
//
// # A cluster
//
// `flightrec clickhouse ddl --cluster NAME` prints the cluster schema:
// Replicated*MergeTree tables events_local, recordings_meta_local,
// recordings_list_local, steps_local and cursors_local on every node
// (ZooKeeper paths by the {shard} and {replica} macros of each server's
// config) and Distributed tables of the same names without _local over
// them, sharded by cityHash64 of the recording id, so all of a recording's
// rows live on one shard, where its duplicates collapse. (The steps'
// totals are recomputed by reading events through the Distributed table
// right after inserting them: a read served by a replica that has not
// fetched the new part yet leaves those totals short until the step's
// next insert. A single server has no such lag.)
// Run the output once with clickhouse-client --multiquery, then point
// flightrec at any node with ?cluster=NAME in the DSN: the index then
// creates nothing itself, reads and inserts through the Distributed tables
// (insert_distributed_sync=1, so an insert returns once the shard has the
// rows), and sends DELETE and TRUNCATE to the local tables of one live
// replica per shard (the Replicated tables carry them to the others; see
// cluster.go), waiting on those replicas' system.mutations. The servers' profile must set
// distributed_product_mode=local (a recording's events and metadata share
// a shard) and load_balancing=in_order (reads go to the replica the
// insert wrote): Open refuses a cluster without them.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/flightrec/flightrec/store"
)

var _ store.Index = (*DB)(nil)

// DefaultDatabase is the database a DSN without a path uses.
const DefaultDatabase = "flightrec"

// Defaults of the DSN options this package reads (see Open).
const (
	defaultBatchRows       = 100_000
	defaultInsertStreams   = 2
	defaultMutationTimeout = 5 * time.Minute
	defaultDialTimeout     = 5 * time.Second
)

// DB is a store.Index in one ClickHouse database.
type DB struct {
	conn     driver.Conn
	opts     *clickhouse.Options
	database string
	// cluster, when set, names the cluster whose Replicated and Distributed
	// tables `flightrec clickhouse ddl` created: DDL and mutations then go
	// to the *_local tables ON CLUSTER, and Open creates no tables.
	cluster         string
	mutationTimeout time.Duration
	// shards are connections to each server of the cluster, for the
	// statements that go to one replica per shard (onShards).
	shards shardConns

	w *writer

	// setup guards the database's creation and migration (ready).
	setup   sync.Mutex
	isReady atomic.Bool

	// placed remembers the recordings this process has given a row in
	// recordings (PutRecording, or IndexEvents' placeholder), so that
	// IndexEvents inserts a placeholder once per recording, not per batch.
	placed sync.Map // recording id → struct{}

	// clock makes updated_at strictly increasing within the process, so
	// two PutRecordings of one id never tie (argMax would then pick either).
	clock atomic.Int64

	// listWindow is the width (ns) of the window of creation times the
	// last unfiltered first page needed (see Recordings): every listing
	// starts there.
	listWindow atomic.Int64
}

// Options are what a DSN configures beyond the connection itself.
type options struct {
	database        string
	cluster         string
	batchRows       int
	insertStreams   int
	flushInterval   time.Duration
	mutationTimeout time.Duration
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseDSN splits a DSN into the driver's options and this package's own.
// The package's own query parameters are removed before the driver sees
// the DSN, since it passes unknown ones to the server as settings.
func parseDSN(dsn string) (*clickhouse.Options, options, error) {
	var o options
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, o, errors.New("clickhouse index: malformed DSN (want clickhouse://user:pass@host:9000/db)")
	}
	if u.Scheme != "clickhouse" {
		return nil, o, fmt.Errorf("clickhouse index: DSN scheme %q: want clickhouse:// (the native protocol)", u.Scheme)
	}
	q := u.Query()
	o.database = strings.Trim(u.Path, "/")
	if o.database == "" {
		o.database = DefaultDatabase
	}
	if !identRE.MatchString(o.database) {
		return nil, o, fmt.Errorf("clickhouse index: database name %q: use letters, digits and _", o.database)
	}
	o.cluster = q.Get("cluster")
	if o.cluster != "" && !identRE.MatchString(o.cluster) {
		return nil, o, fmt.Errorf("clickhouse index: cluster name %q: use letters, digits and _", o.cluster)
	}
	o.batchRows = defaultBatchRows
	if v := q.Get("batch_rows"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, o, fmt.Errorf("clickhouse index: batch_rows %q: want a positive integer", v)
		}
		o.batchRows = n
	}
	o.insertStreams = defaultInsertStreams
	if v := q.Get("insert_streams"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return nil, o, fmt.Errorf("clickhouse index: insert_streams %q: want 1 to 64", v)
		}
		o.insertStreams = n
	}
	if v := q.Get("flush_interval"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, o, fmt.Errorf("clickhouse index: flush_interval %q: want a duration such as 10ms", v)
		}
		o.flushInterval = d
	}
	o.mutationTimeout = defaultMutationTimeout
	if v := q.Get("mutation_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, o, fmt.Errorf("clickhouse index: mutation_timeout %q: want a duration such as 5m", v)
		}
		o.mutationTimeout = d
	}
	for _, k := range []string{"cluster", "batch_rows", "insert_streams", "flush_interval", "mutation_timeout"} {
		q.Del(k)
	}
	hasDial := q.Has("dial_timeout")
	u.RawQuery = q.Encode()
	u.Path = "/" + o.database
	opts, err := clickhouse.ParseDSN(u.String())
	if err != nil {
		// The driver's errors redact credentials; keep it that way.
		return nil, o, fmt.Errorf("clickhouse index: %w", err)
	}
	if !hasDial {
		opts.DialTimeout = defaultDialTimeout
	}
	if o.cluster != "" {
		// An insert into a Distributed table returns, by default, before
		// the shards have the rows: the cursor's durability needs them
		// there. (The settings that are not numbers, which clickhouse-go
		// cannot send to 18.16, come from the server's profile:
		// clusterSettings.)
		if _, set := opts.Settings["insert_distributed_sync"]; !set {
			opts.Settings["insert_distributed_sync"] = 1
		}
	}
	return opts, o, nil
}

// Open connects to the ClickHouse server a DSN names, creates the database
// if it is missing and migrates the schema. If the server cannot be
// reached, Open still returns the index, which does both on the first call
// that reaches the server; any other failure (credentials refused, a
// schema newer than this binary's) is an error.
//
// DSN: clickhouse://user:pass@host:9000/db?param=value&…  The path is the
// database (default flightrec). Parameters this package reads:
//
//	batch_rows=N         most rows in one insert (default 100000)
//	insert_streams=N     connections a large batch is inserted over at
//	                     once, in chunks of at least 10000 rows (default 2)
//	flush_interval=D     how long a batch waits for concurrent IndexEvents
//	                     calls to join it (default 0: it leaves as soon as
//	                     the previous insert is done)
//	mutation_timeout=D   how long DeleteRecording waits for its mutations
//	                     (default 5m)
//	cluster=NAME         use the tables of `flightrec clickhouse ddl
//	                     --cluster NAME` (created beforehand by an operator)
//
// Every other parameter goes to clickhouse-go (dial_timeout, compress,
// max_open_conns, secure, …) or, if it knows none by that name, to the
// server as a setting.
func Open(ctx context.Context, dsn string) (*DB, error) {
	opts, o, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := clickhouse.Open(opts) // connects on first use
	if err != nil {
		return nil, fmt.Errorf("clickhouse index: %w", err)
	}
	db := &DB{conn: conn, opts: opts, database: o.database, cluster: o.cluster, mutationTimeout: o.mutationTimeout}
	db.w = startWriter(db, o.batchRows, o.insertStreams, o.flushInterval)
	if err := db.ready(ctx); err != nil {
		if !unreachable(err) {
			db.Close()
			return nil, err
		}
		// A server must start, and acknowledge ingest, while ClickHouse
		// is down: the log is the truth, the projector retries, and the
		// first call that reaches the server sets the schema up.
		slog.Warn("clickhouse index: server unreachable; the schema is checked when it answers",
			"database", o.database, "err", err)
	}
	return db, nil
}

// ready creates the database and migrates the schema, once: every method
// calls it first, so an index opened while the server was unreachable
// sets itself up when it comes back.
func (db *DB) ready(ctx context.Context) error {
	if db.isReady.Load() {
		return nil
	}
	db.setup.Lock()
	defer db.setup.Unlock()
	if db.isReady.Load() {
		return nil
	}
	if err := createDatabase(ctx, db.opts, db.cluster, db.database); err != nil {
		return err
	}
	if err := db.migrate(ctx); err != nil {
		return fmt.Errorf("clickhouse index %s: %w", db.database, err)
	}
	db.isReady.Store(true)
	return nil
}

// unreachable reports whether err says the server could not be reached
// (as opposed to refusing what was asked).
func unreachable(err error) bool {
	var (
		op *net.OpError
		ex *clickhouse.Exception
	)
	if errors.As(err, &ex) {
		return false
	}
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, context.DeadlineExceeded)
}

// createDatabase creates the database over a connection to the server's
// default database: a connection naming a missing database is refused.
func createDatabase(ctx context.Context, opts *clickhouse.Options, cluster, database string) error {
	if cluster != "" {
		return nil // created by the cluster DDL
	}
	bare := *opts
	bare.Auth.Database = ""
	conn, err := clickhouse.Open(&bare)
	if err != nil {
		return fmt.Errorf("clickhouse index: %w", err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(database)); err != nil {
		return fmt.Errorf("clickhouse index: create database %s: %w", database, err)
	}
	return nil
}

// Database is the database the index lives in.
func (db *DB) Database() string { return db.database }

// DiskBytes is the size on disk of the index's active parts.
func (db *DB) DiskBytes(ctx context.Context) (uint64, error) {
	var n uint64
	err := db.conn.QueryRow(ctx, `SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ?`, db.database).Scan(&n)
	return n, err
}

// Close waits for the writer to finish the inserts it has taken and
// closes the connections.
func (db *DB) Close() error {
	db.w.close()
	db.closeShards()
	if err := db.conn.Close(); err != nil {
		return fmt.Errorf("clickhouse index: close: %w", err)
	}
	return nil
}

// version returns an updated_at for a recordings row: the wall clock in
// ns, but strictly above every version this process gave before.
func (db *DB) version() uint64 {
	for {
		last := db.clock.Load()
		v := max(time.Now().UnixNano(), last+1)
		if db.clock.CompareAndSwap(last, v) {
			return uint64(v)
		}
	}
}

// quoteIdent quotes a ClickHouse identifier.
func quoteIdent(s string) string {
	return "`" + strings.NewReplacer("\\", "\\\\", "`", "\\`").Replace(s) + "`"
}

// quoteString is a ClickHouse string literal of s.
func quoteString(s string) string {
	return "'" + strings.NewReplacer("\\", "\\\\", "'", "\\'").Replace(s) + "'"
}
