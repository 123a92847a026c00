package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"

	"github.com/flightrec/flightrec/event"
)

// schemaVersion is stored in PRAGMA user_version. Bump it and append a step
// to migrations when the schema changes; never edit a released step.
const schemaVersion = 3

// ftsSchemaVersion is the first version with the text index events_fts.
const ftsSchemaVersion = 3

// migrations[i] takes the schema from version i to i+1.
var migrations = [][]string{
	{
		// rid is a compact integer key that events and steps refer to: a
		// recording id is a long string, and repeating it in every event row
		// and every index entry would double the size of the hot tables.
		`CREATE TABLE recordings (
			rid               INTEGER PRIMARY KEY,
			id                TEXT    NOT NULL UNIQUE,
			project           TEXT    NOT NULL DEFAULT '',
			flow              TEXT    NOT NULL DEFAULT '',
			labels            TEXT    NOT NULL DEFAULT 'null', -- JSON object
			executor          TEXT    NOT NULL DEFAULT '',
			versions          TEXT    NOT NULL DEFAULT 'null', -- JSON object
			plan_digest       TEXT    NOT NULL DEFAULT '',
			created_at        INTEGER NOT NULL DEFAULT 0,
			finished_at       INTEGER NOT NULL DEFAULT 0,
			verdict           TEXT    NOT NULL DEFAULT '',
			failure_signature TEXT    NOT NULL DEFAULT '',
			state             TEXT    NOT NULL DEFAULT 'open',
			root              TEXT    NOT NULL DEFAULT '',
			events            INTEGER NOT NULL DEFAULT 0,
			bytes             INTEGER NOT NULL DEFAULT 0,
			steps             INTEGER NOT NULL DEFAULT 0,
			first_ts          INTEGER NOT NULL DEFAULT 0, -- 0: no event yet
			last_ts           INTEGER NOT NULL DEFAULT 0,
			indexed_through   INTEGER NOT NULL DEFAULT 0  -- the projection cursor
		)`,
		// Recordings pages newest first, overall or within a project.
		`CREATE INDEX recordings_newest ON recordings (created_at DESC, id DESC)`,
		`CREATE INDEX recordings_project ON recordings (project, created_at DESC, id DESC)`,

		// WITHOUT ROWID clusters the rows by (rec, seq): a replay hits the
		// primary key directly, a recording's events are contiguous on disk,
		// and there is no separate rowid b-tree to maintain on insert.
		`CREATE TABLE events (
			rec        INTEGER NOT NULL, -- recordings.rid
			seq        INTEGER NOT NULL,
			step       INTEGER NOT NULL,
			ts         INTEGER NOT NULL,
			kind       TEXT    NOT NULL,
			cid        TEXT    NOT NULL DEFAULT '',
			size       INTEGER NOT NULL DEFAULT 0,
			seg        INTEGER NOT NULL,
			off        INTEGER NOT NULL,
			len        INTEGER NOT NULL,
			url        TEXT    NOT NULL DEFAULT '',
			method     TEXT    NOT NULL DEFAULT '',
			status     INTEGER NOT NULL DEFAULT 0,
			level      TEXT    NOT NULL DEFAULT '',
			text       TEXT    NOT NULL DEFAULT '',
			action     TEXT    NOT NULL DEFAULT '',
			outcome    TEXT    NOT NULL DEFAULT '',
			error_code TEXT    NOT NULL DEFAULT '',
			PRIMARY KEY (rec, seq)
		) WITHOUT ROWID`,
		`CREATE INDEX events_step ON events (rec, step, seq)`,
		`CREATE INDEX events_kind ON events (rec, kind, seq)`,

		// One row per (recording, step), maintained by IndexEvents so that a
		// timeline costs O(steps). The per-kind counters n_<kind> are added
		// by ensureKindColumns. receipt_seq is the seq of the receipt that
		// action..error_code summarise: a receipt with a higher seq replaces
		// it, whatever order batches arrive in.
		`CREATE TABLE steps (
			rec         INTEGER NOT NULL,
			step        INTEGER NOT NULL,
			start_ts    INTEGER NOT NULL,
			end_ts      INTEGER NOT NULL,
			events      INTEGER NOT NULL,
			first_seq   INTEGER NOT NULL,
			last_seq    INTEGER NOT NULL,
			receipt_seq INTEGER NOT NULL DEFAULT 0,
			action      TEXT    NOT NULL DEFAULT '',
			target      TEXT    NOT NULL DEFAULT '',
			outcome     TEXT    NOT NULL DEFAULT '',
			error_code  TEXT    NOT NULL DEFAULT '',
			PRIMARY KEY (rec, step)
		) WITHOUT ROWID`,
	},
	{
		// HasBlob: does an event of the recording carry this blob? Partial,
		// since most events carry none: the index holds only the rows
		// with a blob, and finds one by (rec, cid) without walking the
		// recording's events.
		`CREATE INDEX events_cid ON events (rec, cid) WHERE cid != ''`,
	},
	{
		// The text index of Search (see search.go). FTS5 keys its rows by
		// an integer rowid and events have a two-column key, so event_docs
		// gives each event with searchable text a doc id: by doc for a
		// search's hits, by (rec, seq) for a delete. AUTOINCREMENT never
		// hands out a doc id again, so "doc > the largest before this
		// batch" names exactly the batch's new docs.
		`CREATE TABLE event_docs (
			doc INTEGER PRIMARY KEY AUTOINCREMENT,
			rec INTEGER NOT NULL,
			seq INTEGER NOT NULL
		)`,
		`CREATE UNIQUE INDEX event_docs_event ON event_docs (rec, seq)`,
		// Contentless: the text lives in events already, and the index
		// only has to say which docs contain a string. contentless_delete
		// lets a delete name a doc by rowid alone. The trigram tokenizer
		// indexes every 3-character window of the text, case folded
		// (case_sensitive 0: Unicode folding, a superset of LIKE's ASCII
		// folding). detail=none keeps no columns or positions, so the
		// index says only "this doc has these trigrams somewhere":
		// a fifth of the size of detail=full, and twice as fast to
		// write. Search asks for all the trigrams of the string and
		// rechecks the candidates with LIKE (search.go).
		`CREATE VIRTUAL TABLE events_fts USING fts5(url, text, error_code,
			content='', contentless_delete=1, detail=none, tokenize='trigram case_sensitive 0')`,
		// Migrating an existing index fills the text index from the events
		// already there; on a new one these copy nothing.
		insertDocsSQL,
		insertFTSSQL(`0`),
	},
}

// kindName is what a kind must look like to become part of a column name.
var kindName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// kindColumn names the steps column counting events of kind k.
func kindColumn(k event.Kind) string { return "n_" + string(k) }

// migrate brings the database to schemaVersion in one transaction, so a
// crash mid-way leaves the previous version intact. It is a no-op on a
// current database.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback() // a no-op once committed; the error is the one returned

	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("index schema version %d is newer than this binary's %d; use a newer flightrec or rebuild the index", v, schemaVersion)
	}
	for ; v < schemaVersion; v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
		}
	}
	if err := ensureKindColumns(ctx, tx); err != nil {
		return err
	}
	// PRAGMA takes no bound parameters; v is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}

// ensureKindColumns adds a steps counter for every kind of event.Kinds that
// has none yet. The vocabulary may grow without a schema version bump; a
// kind added later starts at zero, which is exact, since IndexEvents refuses
// kinds it has no column for.
func ensureKindColumns(ctx context.Context, tx *sql.Tx) error {
	have := map[string]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info('steps')`)
	if err != nil {
		return fmt.Errorf("read steps columns: %w", err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("read steps columns: %w", err)
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read steps columns: %w", err)
	}
	for _, k := range event.Kinds {
		if !kindName.MatchString(string(k)) {
			return fmt.Errorf("event kind %q cannot name a column", k)
		}
		col := kindColumn(k)
		if have[col] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE steps ADD COLUMN `+col+` INTEGER NOT NULL DEFAULT 0`); err != nil {
			return fmt.Errorf("add steps column %s: %w", col, err)
		}
	}
	return nil
}
