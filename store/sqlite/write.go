package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// insertChunks are the row counts of the multi-row event inserts. One
// statement per row would spend most of IndexEvents in per-statement
// overhead (database/sql, binding, VDBE setup); a batch is instead written
// 64 rows per statement and its remainder 16, 4 and 1 at a time, so four
// prepared statements cover every batch size. 64 rows × 18 columns stays far
// below SQLite's limit of 32,766 parameters.
var insertChunks = []int{64, 16, 4, 1}

// eventColumns is the number of values insertEventsSQL takes per row.
const eventColumns = 18

// insertEventsSQL is a multi-row insert of fresh rows (see freshRows).
//
// OR FAIL, not the default ABORT: an ABORT statement that writes many rows
// must be able to undo just itself, so SQLite keeps a statement journal,
// copying each page before changing it, which cost a third of IndexEvents.
// On any error IndexEvents rolls back the whole transaction, so undoing
// the single statement buys nothing.
func insertEventsSQL(rows int) string {
	row := "(" + strings.Repeat("?, ", eventColumns-1) + "?)"
	return `INSERT OR FAIL INTO events
	(rec, seq, step, ts, kind, cid, size, seg, off, len,
	 url, method, status, level, text, action, outcome, error_code)
	VALUES ` + strings.Repeat(row+", ", rows-1) + row
}

const updateCountersSQL = `UPDATE recordings SET
	events = events + ?1,
	bytes = bytes + ?2,
	steps = steps + ?3,
	first_ts = CASE WHEN ?4 = 0 THEN first_ts WHEN first_ts = 0 THEN ?4 ELSE min(first_ts, ?4) END,
	last_ts = max(last_ts, ?5),
	indexed_through = max(indexed_through, ?6)
	WHERE rid = ?7`

// kindIndex maps a kind to its position in event.Kinds, which is also the
// order of the n_<kind> columns in the steps statements below.
var kindIndex = func() map[event.Kind]int {
	m := make(map[event.Kind]int, len(event.Kinds))
	for i, k := range event.Kinds {
		m[k] = i
	}
	return m
}()

var insertStepSQL, updateStepSQL = stepStatements()

// stepStatements builds the two statements that fold a batch's per-step
// totals into steps: an insert for a step seen for the first time (its
// RowsAffected tells IndexEvents to count a new step) and an update for one
// seen before.
func stepStatements() (insert, update string) {
	// Parameters are numbered because the update uses some twice.
	const fixedIns, fixedUpd = 12, 10
	cols := make([]string, len(event.Kinds))
	vals := make([]string, len(event.Kinds))
	sets := make([]string, len(event.Kinds))
	for i, k := range event.Kinds {
		cols[i] = kindColumn(k)
		vals[i] = fmt.Sprintf("?%d", fixedIns+1+i)
		sets[i] = fmt.Sprintf("%s = %s + ?%d", cols[i], cols[i], fixedUpd+1+i)
	}
	insert = `INSERT OR IGNORE INTO steps
		(rec, step, start_ts, end_ts, events, first_seq, last_seq,
		 receipt_seq, action, target, outcome, error_code, ` + strings.Join(cols, ", ") + `)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ` + strings.Join(vals, ", ") + `)`
	// SQLite evaluates every SET expression against the row as it was, so
	// the CASEs all compare with the old receipt_seq.
	n := fixedUpd + len(event.Kinds)
	update = `UPDATE steps SET
		start_ts = min(start_ts, ?1),
		end_ts = max(end_ts, ?2),
		events = events + ?3,
		first_seq = min(first_seq, ?4),
		last_seq = max(last_seq, ?5),
		action = CASE WHEN ?6 > receipt_seq THEN ?7 ELSE action END,
		target = CASE WHEN ?6 > receipt_seq THEN ?8 ELSE target END,
		outcome = CASE WHEN ?6 > receipt_seq THEN ?9 ELSE outcome END,
		error_code = CASE WHEN ?6 > receipt_seq THEN ?10 ELSE error_code END,
		receipt_seq = max(receipt_seq, ?6),
		` + strings.Join(sets, ",\n\t\t") + fmt.Sprintf(`
		WHERE rec = ?%d AND step = ?%d`, n+1, n+2)
	return insert, update
}

// PutRecording inserts or replaces a recording's metadata, state and root.
// The counters and the cursor belong to IndexEvents and are left alone.
func (db *DB) PutRecording(ctx context.Context, r store.RecordingRow) error {
	if r.ID == "" {
		return errors.New("sqlite index: put recording: empty id")
	}
	labels, err := json.Marshal(r.Labels)
	if err != nil {
		return fmt.Errorf("sqlite index: put recording %s: labels: %w", r.ID, err)
	}
	versions, err := json.Marshal(r.Versions)
	if err != nil {
		return fmt.Errorf("sqlite index: put recording %s: versions: %w", r.ID, err)
	}
	state := r.State
	if state == "" {
		state = store.StateOpen
	}
	// An UPSERT rather than INSERT OR REPLACE: REPLACE deletes the row and
	// would both reset the counters and give the recording a new rid,
	// orphaning its events.
	_, err = db.w.ExecContext(ctx, `INSERT INTO recordings
		(id, project, flow, labels, executor, versions, plan_digest,
		 created_at, finished_at, verdict, failure_signature, state, root)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
		 project = excluded.project, flow = excluded.flow, labels = excluded.labels,
		 executor = excluded.executor, versions = excluded.versions,
		 plan_digest = excluded.plan_digest, created_at = excluded.created_at,
		 finished_at = excluded.finished_at, verdict = excluded.verdict,
		 failure_signature = excluded.failure_signature,
		 state = excluded.state, root = excluded.root`,
		r.ID, r.Project, r.Flow, string(labels), r.Executor, string(versions), r.PlanDigest,
		r.CreatedAt, r.FinishedAt, r.Verdict, r.FailureSignature, state, r.Root)
	if err != nil {
		return fmt.Errorf("sqlite index: put recording %s: %w", r.ID, err)
	}
	db.ck.wrote()
	return nil
}

// stepTotals accumulates what one batch adds to one step.
type stepTotals struct {
	start, end         int64
	events             int64
	first, last        int64
	counts             []int64 // by kindIndex
	receiptSeq         int64   // 0: no receipt in this batch
	action, target     string
	outcome, errorCode string
}

// IndexEvents inserts rows, folds the newly inserted ones into steps and the
// recording's counters, and advances the cursor, all in one transaction.
// Only rows not indexed before count, so a replayed or overlapping batch
// changes nothing but (possibly) the cursor.
func (db *DB) IndexEvents(ctx context.Context, recording string, rows []store.EventRow, through uint64) error {
	if err := store.CheckBatch(recording, rows, through); err != nil {
		return fmt.Errorf("sqlite index: index events of %s: %w", recording, err)
	}
	if db.insStep == nil { // OpenReadOnly prepares no statements
		return fmt.Errorf("sqlite index: index events of %s: %w", recording, store.ErrReadOnly)
	}
	if err := db.indexEvents(ctx, recording, rows, through); err != nil {
		return fmt.Errorf("sqlite index: index events of %s: %w", recording, err)
	}
	return nil
}

func (db *DB) indexEvents(ctx context.Context, recording string, rows []store.EventRow, through uint64) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // a no-op once committed; the error is the one returned

	rid, err := ensureRecording(ctx, tx, recording)
	if err != nil {
		return err
	}

	fresh, err := freshRows(ctx, tx, rid, rows)
	if err != nil {
		return err
	}
	if err := db.insertEvents(ctx, tx, rid, fresh); err != nil {
		return err
	}
	steps := map[int]*stepTotals{}
	var bytes, firstTS, lastTS int64
	var loSeq, hiSeq uint64
	for i := range fresh {
		r := &fresh[i]
		if i == 0 || r.Seq < loSeq {
			loSeq = r.Seq
		}
		hiSeq = max(hiSeq, r.Seq)
		bytes += r.Size
		if firstTS == 0 || r.TS < firstTS {
			firstTS = r.TS
		}
		lastTS = max(lastTS, r.TS)
		addToStep(steps, r)
	}
	added := int64(len(fresh))
	if added > 0 {
		if err := indexText(ctx, tx, rid, loSeq, hiSeq); err != nil {
			return err
		}
	}

	newSteps, err := db.foldSteps(ctx, tx, rid, steps)
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, db.updCounter).ExecContext(ctx,
		added, bytes, newSteps, firstTS, lastTS, int64(through), rid); err != nil {
		return fmt.Errorf("update counters: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	db.ck.wrote()
	return nil
}

// freshRows returns the rows of the batch that are not indexed yet, each
// seq once, so that only they are inserted and counted: this is what makes
// a replayed or overlapping batch count nothing twice. Finding them costs
// one range read of the primary key; the write lock, taken at BEGIN, keeps
// the answer true until commit.
func freshRows(ctx context.Context, tx *sql.Tx, rid int64, rows []store.EventRow) ([]store.EventRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	lo, hi := rows[0].Seq, rows[0].Seq
	ascending := true
	for i := 1; i < len(rows); i++ {
		s := rows[i].Seq
		ascending = ascending && s > rows[i-1].Seq
		lo, hi = min(lo, s), max(hi, s)
	}
	res, err := tx.QueryContext(ctx, `SELECT seq FROM events WHERE rec = ? AND seq BETWEEN ? AND ?`,
		rid, int64(lo), int64(hi))
	if err != nil {
		return nil, fmt.Errorf("find indexed seqs: %w", err)
	}
	defer res.Close()
	seen := map[uint64]bool{}
	for res.Next() {
		var seq int64
		if err := res.Scan(&seq); err != nil {
			return nil, fmt.Errorf("find indexed seqs: %w", err)
		}
		seen[uint64(seq)] = true
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("find indexed seqs: %w", err)
	}
	if len(seen) == 0 && ascending {
		return rows, nil // the common case: all new, no duplicates
	}
	fresh := make([]store.EventRow, 0, len(rows)-len(seen))
	for _, r := range rows {
		if !seen[r.Seq] {
			seen[r.Seq] = true
			fresh = append(fresh, r)
		}
	}
	return fresh, nil
}

// insertEvents writes rows with the multi-row statements of insertChunks.
func (db *DB) insertEvents(ctx context.Context, tx *sql.Tx, rid int64, rows []store.EventRow) error {
	stmts := make([]*sql.Stmt, len(insertChunks))
	args := make([]any, 0, insertChunks[0]*eventColumns)
	for len(rows) > 0 {
		c := 0
		for insertChunks[c] > len(rows) {
			c++ // ends at the 1-row statement at the latest
		}
		n := insertChunks[c]
		if stmts[c] == nil {
			stmts[c] = tx.StmtContext(ctx, db.insEvents[c])
		}
		args = args[:0]
		for i := range rows[:n] {
			args = appendEventArgs(args, rid, &rows[i])
		}
		if _, err := stmts[c].ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("insert events from seq %d: %w", rows[0].Seq, err)
		}
		rows = rows[n:]
	}
	return nil
}

// appendEventArgs appends the eventColumns values of r, in
// insertEventsSQL's order.
func appendEventArgs(args []any, rid int64, r *store.EventRow) []any {
	return append(args, rid, int64(r.Seq), r.Step, r.TS, string(r.Kind),
		r.CID, r.Size, r.Loc.Segment, r.Loc.Offset, r.Loc.Length,
		r.URL, r.Method, r.Status, r.Level, r.Text, r.Action, r.Outcome, r.ErrorCode)
}

// ensureRecording returns the rid of recording, creating a placeholder row
// (state open, no metadata) when IndexEvents runs before PutRecording, as a
// reindex may: the cursor needs a row to live in.
func ensureRecording(ctx context.Context, tx *sql.Tx, id string) (int64, error) {
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO recordings (id, state) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
		id, store.StateOpen); err != nil {
		return 0, fmt.Errorf("create recording row: %w", err)
	}
	var rid int64
	if err := tx.QueryRowContext(ctx, `SELECT rid FROM recordings WHERE id = ?`, id).Scan(&rid); err != nil {
		return 0, fmt.Errorf("find recording row: %w", err)
	}
	return rid, nil
}

func addToStep(steps map[int]*stepTotals, r *store.EventRow) {
	seq := int64(r.Seq)
	s := steps[r.Step]
	if s == nil {
		s = &stepTotals{start: r.TS, end: r.TS, first: seq, last: seq, counts: make([]int64, len(event.Kinds))}
		steps[r.Step] = s
	}
	s.start, s.end = min(s.start, r.TS), max(s.end, r.TS)
	s.first, s.last = min(s.first, seq), max(s.last, seq)
	s.events++
	s.counts[kindIndex[r.Kind]]++
	if r.Kind == event.KindReceipt && seq > s.receiptSeq {
		s.receiptSeq = seq
		s.action, s.target, s.outcome, s.errorCode = r.Action, r.Text, r.Outcome, r.ErrorCode
	}
}

// foldSteps writes a batch's step totals and returns how many steps are new
// to the recording. Steps go in ascending order so the writes walk the
// b-tree forward.
func (db *DB) foldSteps(ctx context.Context, tx *sql.Tx, rid int64, steps map[int]*stepTotals) (int64, error) {
	order := make([]int, 0, len(steps))
	for step := range steps {
		order = append(order, step)
	}
	sort.Ints(order)

	ins := tx.StmtContext(ctx, db.insStep)
	upd := tx.StmtContext(ctx, db.updStep)
	var created int64
	args := make([]any, 0, 14+len(event.Kinds))
	for _, step := range order {
		s := steps[step]
		args = append(args[:0], rid, step, s.start, s.end, s.events, s.first, s.last,
			s.receiptSeq, s.action, s.target, s.outcome, s.errorCode)
		for _, n := range s.counts {
			args = append(args, n)
		}
		res, err := ins.ExecContext(ctx, args...)
		if err != nil {
			return 0, fmt.Errorf("insert step %d: %w", step, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("insert step %d: %w", step, err)
		}
		if n == 1 {
			created++
			continue
		}
		args = append(args[:0], s.start, s.end, s.events, s.first, s.last,
			s.receiptSeq, s.action, s.target, s.outcome, s.errorCode)
		for _, n := range s.counts {
			args = append(args, n)
		}
		args = append(args, rid, step)
		if _, err := upd.ExecContext(ctx, args...); err != nil {
			return 0, fmt.Errorf("update step %d: %w", step, err)
		}
	}
	return created, nil
}

// DeleteRecording removes a recording, its events, their text index
// entries and its steps. Deleting an unknown recording is not an error:
// the outcome is the same.
func (db *DB) DeleteRecording(ctx context.Context, id string) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite index: delete %s: begin: %w", id, err)
	}
	defer tx.Rollback() // a no-op once committed; the error is the one returned

	var rid int64
	switch err := tx.QueryRowContext(ctx, `SELECT rid FROM recordings WHERE id = ?`, id).Scan(&rid); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("sqlite index: delete %s: %w", id, err)
	}
	// The text index first: it finds the recording's docs through
	// event_docs.
	for _, q := range []string{
		deleteFTSSQL,
		deleteDocsSQL,
		`DELETE FROM events WHERE rec = ?`,
		`DELETE FROM steps WHERE rec = ?`,
		`DELETE FROM recordings WHERE rid = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, rid); err != nil {
			return fmt.Errorf("sqlite index: delete %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite index: delete %s: commit: %w", id, err)
	}
	db.ck.wrote()
	return nil
}

// PurgeDeleted removes from the file what deletes left of the rows they
// deleted (store.Purger). The deleted docs' trigrams leave the text
// index's segments only when a merge rewrites them: 'optimize' merges every
// segment into one (rewriting the whole text index: the sweep calls this
// once per batch), and secure_delete zeroes the pages it frees. Then
// purgeWAL drops the WAL frames that still hold the old rows.
func (db *DB) PurgeDeleted(ctx context.Context) error {
	if _, err := db.w.ExecContext(ctx, optimizeFTSSQL); err != nil {
		return fmt.Errorf("sqlite index: purge events_fts: %w", err)
	}
	db.purgeWAL(ctx)
	return nil
}

// purgeWAL runs after a purge or a Reset commits. secure_delete zeroes the
// pages a delete frees, but only in the pages' new versions: the WAL still
// holds the frames earlier commits wrote, deleted rows and all, and a
// checkpoint that merely restarts the WAL overwrites them only as far as
// later commits reach. A TRUNCATE checkpoint copies the WAL into the file
// (where the zeroed pages replace the old) and cuts the WAL to nothing. It
// waits (busy_timeout) for other processes' readers to leave the WAL; if
// one stays, or the background checkpointer is mid-checkpoint (SQLITE_BUSY
// at once, which is brief) it is tried again a few times; if it still does
// not pass, the checkpointer takes the TRUNCATE over and retries it until
// it passes, and Close makes a last attempt. The delete itself stands
// either way.
func (db *DB) purgeWAL(ctx context.Context) {
	for try := 0; try < purgeTries; try++ {
		if db.truncateNow(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			db.ck.truncateWAL()
			return
		case <-time.After(purgeRetry):
		}
	}
	db.ck.truncateWAL()
}

// purgeTries × purgeRetry bounds how long a purge waits out a concurrent
// checkpoint (each takes milliseconds; under load, up to a few hundred).
const (
	purgeTries = 20
	purgeRetry = 50 * time.Millisecond
)

// truncateNow runs one TRUNCATE checkpoint on the writer's connection and
// reports whether it cut the WAL to nothing.
func (db *DB) truncateNow(ctx context.Context) bool {
	var busy, frames, copied int
	err := db.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied)
	return err == nil && busy == 0
}

// Reset drops every row. The schema stays; DELETE without WHERE lets SQLite
// truncate each table rather than delete row by row, and 'delete-all'
// drops the text index's segments whole, so only the WAL needs purging.
func (db *DB) Reset(ctx context.Context) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite index: reset: begin: %w", err)
	}
	defer tx.Rollback() // a no-op once committed; the error is the one returned
	if _, err := tx.ExecContext(ctx, resetFTSSQL); err != nil {
		return fmt.Errorf("sqlite index: reset events_fts: %w", err)
	}
	for _, t := range []string{"event_docs", "events", "steps", "recordings"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t); err != nil {
			return fmt.Errorf("sqlite index: reset %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite index: reset: commit: %w", err)
	}
	db.purgeWAL(ctx)
	return nil
}
