package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flightrec/flightrec/store"
)

// PutRecording inserts a new version of a recording's metadata, state and
// root. The counters are summed from steps and the cursor lives in
// cursors, so neither is touched.
func (db *DB) PutRecording(ctx context.Context, r store.RecordingRow) error {
	return db.PutRecordings(ctx, []store.RecordingRow{r})
}

// PutRecordings is PutRecording of several recordings in one insert per
// table: what loading many recordings at once (a reindex, the scale
// benchmark) wants, since every insert makes a part.
func (db *DB) PutRecordings(ctx context.Context, rs []store.RecordingRow) error {
	vs := make([]recordingValues, len(rs))
	for i, r := range rs {
		if r.ID == "" {
			return errors.New("clickhouse index: put recording: empty id")
		}
		if r.CreatedAt < 0 || r.FinishedAt < 0 {
			return fmt.Errorf("clickhouse index: put recording %s: negative timestamp", r.ID)
		}
		labels, err := json.Marshal(r.Labels)
		if err != nil {
			return fmt.Errorf("clickhouse index: put recording %s: labels: %w", r.ID, err)
		}
		versions, err := json.Marshal(r.Versions)
		if err != nil {
			return fmt.Errorf("clickhouse index: put recording %s: versions: %w", r.ID, err)
		}
		state := r.State
		if state == "" {
			state = store.StateOpen
		}
		vs[i] = recordingValues{
			id: r.ID, project: r.Project, flow: r.Flow, labels: string(labels), executor: r.Executor,
			versions: string(versions), planDigest: r.PlanDigest, createdAt: uint64(r.CreatedAt),
			finishedAt: uint64(r.FinishedAt), verdict: r.Verdict, failureSignature: r.FailureSignature,
			state: state, root: r.Root, updatedAt: db.version(),
		}
	}
	if len(vs) == 0 {
		return nil
	}
	if err := db.ready(ctx); err != nil {
		return err
	}
	if err := db.insertRecording(ctx, vs...); err != nil {
		what := "recording " + rs[0].ID
		if len(rs) > 1 {
			what = describeIDs(recordingIDs(rs))
		}
		return fmt.Errorf("clickhouse index: put %s: %w", what, err)
	}
	for _, r := range rs {
		db.placed.Store(r.ID, struct{}{})
	}
	return nil
}

func recordingIDs(rs []store.RecordingRow) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

type recordingValues struct {
	id, project, flow, labels, executor, versions, planDigest string
	createdAt, finishedAt                                     uint64
	verdict, failureSignature, state, root                    string
	updatedAt                                                 uint64
}

// insertRecording writes the rows into recordings_meta, then
// recordings_list. A listing that finds a row in the list newer than the
// one by id (a PutRecording between the two inserts) reads that page again
// without its window (see Recordings); a failure between them fails the
// call, and the caller's retry writes both again.
func (db *DB) insertRecording(ctx context.Context, vs ...recordingValues) error {
	for _, t := range []table{recordingsMetaTable, recordingsListTable} {
		b, err := db.conn.PrepareBatch(ctx, "INSERT INTO "+t.name+" ("+t.columnList()+")")
		if err != nil {
			return err
		}
		for _, v := range vs {
			if err := b.Append(v.id, v.project, v.flow, v.labels, v.executor, v.versions, v.planDigest,
				v.createdAt, v.finishedAt, v.verdict, v.failureSignature, v.state, v.root, v.updatedAt); err != nil {
				_ = b.Abort()
				return err
			}
		}
		if err := b.Send(); err != nil {
			return err
		}
	}
	return nil
}

// IndexEvents inserts rows and then moves the recording's cursor to
// through; it returns once both are written. Rows already indexed are
// inserted again and collapse with their first copy (at merge, and at
// read before that), so a replay changes nothing but, possibly, the
// cursor.
func (db *DB) IndexEvents(ctx context.Context, recording string, rows []store.EventRow, through uint64) error {
	if err := checkBatch(recording, rows, through); err != nil {
		return fmt.Errorf("clickhouse index: index events of %s: %w", recording, err)
	}
	if err := db.ready(ctx); err != nil {
		return err
	}
	// The cursor needs a recording to belong to: a reindex may project
	// events before the metadata. The placeholder is version 0, so any
	// PutRecording, before or after, wins over it.
	if _, ok := db.placed.Load(recording); !ok {
		if err := db.insertRecording(ctx, recordingValues{id: recording, labels: "null", versions: "null",
			state: store.StateOpen}); err != nil {
			return fmt.Errorf("clickhouse index: index events of %s: placeholder: %w", recording, err)
		}
		db.placed.Store(recording, struct{}{})
	}
	// The writer may still read the rows after a caller whose context
	// ended has returned and reused its slice: it gets a copy.
	req := &writeReq{recording: recording, rows: slices.Clone(rows), through: through}
	if err := db.w.submit(ctx, req); err != nil {
		return fmt.Errorf("clickhouse index: index events of %s: %w", recording, err)
	}
	return nil
}

// checkBatch refuses what the schema could not hold faithfully: the
// contract's checks (store.CheckBatch), then the ranges of this schema's
// columns.
func checkBatch(recording string, rows []store.EventRow, through uint64) error {
	if err := store.CheckBatch(recording, rows, through); err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		switch {
		case r.TS < 0 || r.Size < 0:
			return fmt.Errorf("row %d (seq %d): negative ts or size", i, r.Seq)
		case r.Loc.Segment < 0 || int64(r.Loc.Segment) > math.MaxUint32 || r.Loc.Offset < 0 ||
			r.Loc.Length < 0 || int64(r.Loc.Length) > math.MaxUint32:
			return fmt.Errorf("row %d (seq %d): locator out of range", i, r.Seq)
		case int64(r.Status) < math.MinInt32 || int64(r.Status) > math.MaxInt32:
			return fmt.Errorf("row %d (seq %d): status out of range", i, r.Seq)
		}
	}
	return nil
}

// writeReq is one IndexEvents call waiting for the writer.
type writeReq struct {
	recording string
	rows      []store.EventRow
	through   uint64
	done      chan error // buffered: the writer never waits for the caller
}

// writer group-commits IndexEvents calls: the calls that arrive while an
// insert is in flight (or within flushInterval of the first) leave together
// in one insert of events and one of cursors, so concurrent projections
// make few, large inserts (what MergeTree wants) rather than many small
// ones. A batch holds at most maxRows rows (a call with more is split),
// and every caller waits until its rows and cursor are written.
type writer struct {
	db            *DB
	maxRows       int
	streams       int
	flushInterval time.Duration
	reqs          chan *writeReq
	stop          chan struct{}
	done          chan struct{}
	// inserts counts event inserts sent (tests read it).
	inserts atomic.Int64
}

// flushTimeout bounds one batch's inserts, whatever the callers' contexts:
// a caller that gives up stops waiting, but the batch it joined (shared
// with other callers) is written or fails on its own.
const flushTimeout = 2 * time.Minute

var errClosed = errors.New("index closed")

func startWriter(db *DB, maxRows, streams int, flushInterval time.Duration) *writer {
	w := &writer{db: db, maxRows: maxRows, streams: streams, flushInterval: flushInterval,
		reqs: make(chan *writeReq), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *writer) submit(ctx context.Context, r *writeReq) error {
	r.done = make(chan error, 1)
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stop:
		return errClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the writer after the batch in flight.
func (w *writer) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	for {
		var first *writeReq
		select {
		case first = <-w.reqs:
		case <-w.stop:
			return
		}
		batch := []*writeReq{first}
		n := len(first.rows)
		if w.flushInterval > 0 {
			timer := time.NewTimer(w.flushInterval)
		collect:
			for n < w.maxRows {
				select {
				case r := <-w.reqs:
					batch = append(batch, r)
					n += len(r.rows)
				case <-timer.C:
					break collect
				case <-w.stop:
					break collect
				}
			}
			timer.Stop()
		} else {
		drain: // whoever is already waiting joins
			for n < w.maxRows {
				select {
				case r := <-w.reqs:
					batch = append(batch, r)
					n += len(r.rows)
				default:
					break drain
				}
			}
		}
		err := w.flush(batch)
		for _, r := range batch {
			r.done <- err
		}
	}
}

// flush writes a batch's rows, then its cursors. A large batch is cut
// into chunks inserted over several connections at once: the server
// writes each insert's part in one thread, so one stream leaves its other
// cores idle (on this project's 2-core machines, two streams insert
// 50,000-row batches about 1.7 times as fast as one).
func (w *writer) flush(batch []*writeReq) error {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	n := 0
	for _, r := range batch {
		n += len(r.rows)
	}
	chunkRows := min(w.maxRows, max(minStreamRows, (n+w.streams-1)/w.streams))
	var (
		chunks []*eventColumns
		cur    = &eventColumns{}
	)
	for _, r := range batch {
		for rows := r.rows; len(rows) > 0; {
			k := min(len(rows), chunkRows-cur.len())
			cur.add(r.recording, rows[:k])
			rows = rows[k:]
			if cur.len() == chunkRows {
				chunks = append(chunks, cur)
				cur = &eventColumns{}
			}
		}
	}
	if cur.len() > 0 {
		chunks = append(chunks, cur)
	}
	errs := make(chan error, len(chunks))
	sem := make(chan struct{}, w.streams)
	for _, c := range chunks {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- w.insertEvents(ctx, c)
		}()
	}
	var first error
	for range chunks {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	if err := w.db.recomputeSteps(ctx, batch); err != nil {
		return err
	}
	b, err := w.db.conn.PrepareBatch(ctx, "INSERT INTO cursors ("+cursorsTable.columnList()+")")
	if err != nil {
		return fmt.Errorf("insert cursor: %w", err)
	}
	for _, r := range batch {
		if err := b.Append(r.recording, r.through); err != nil {
			_ = b.Abort()
			return fmt.Errorf("insert cursor: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert cursor: %w", err)
	}
	return nil
}

// recomputeSteps writes the totals of every step the batch's rows fall in,
// recomputed from the events table (see stepsTable): for each recording,
// the steps from its batch's lowest to its highest, one range of the
// events key each.
func (db *DB) recomputeSteps(ctx context.Context, batch []*writeReq) error {
	type span struct{ lo, hi int }
	spans := map[string]span{}
	for _, r := range batch {
		for i := range r.rows {
			step := r.rows[i].Step
			s, ok := spans[r.recording]
			if !ok {
				s = span{step, step}
			}
			spans[r.recording] = span{min(s.lo, step), max(s.hi, step)}
		}
	}
	if len(spans) == 0 {
		return nil
	}
	ids := make([]string, 0, len(spans))
	for id := range spans {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	conds := make([]string, len(ids))
	for i, id := range ids {
		s := spans[id]
		conds[i] = fmt.Sprintf("(recording = %s AND step >= %d AND step <= %d)", quoteString(id), s.lo, s.hi)
	}
	q := "INSERT INTO steps (" + stepsTable.columnList() + ") " + stepTotalsSQL(strings.Join(conds, " OR "))
	if err := db.conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("step totals: %w", err)
	}
	return nil
}

// minStreamRows is the smallest chunk a batch is cut into for parallel
// inserts: below it, a part's fixed cost outweighs the parallelism.
const minStreamRows = 10_000

func (w *writer) insertEvents(ctx context.Context, cols *eventColumns) error {
	b, err := w.db.conn.PrepareBatch(ctx, "INSERT INTO events ("+eventsTable.columnList()+")")
	if err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	for i, c := range cols.slices() {
		if err := b.Column(i).Append(c); err != nil {
			_ = b.Abort()
			return fmt.Errorf("insert events: column %d: %w", i, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	w.inserts.Add(1)
	return nil
}

// eventColumns holds rows column by column, in eventsTable's order: the
// driver appends a whole slice per column far faster than row by row.
type eventColumns struct {
	recording                               []string
	seq                                     []uint64
	step                                    []int64
	ts                                      []uint64
	kind, cid                               []string
	size                                    []uint64
	seg                                     []uint32
	off                                     []uint64
	length                                  []uint32
	url, method                             []string
	status                                  []int32
	level, text, action, outcome, errorCode []string
}

func (c *eventColumns) len() int { return len(c.seq) }

func (c *eventColumns) add(recording string, rows []store.EventRow) {
	for i := range rows {
		r := &rows[i]
		c.recording = append(c.recording, recording)
		c.seq = append(c.seq, r.Seq)
		c.step = append(c.step, int64(r.Step))
		c.ts = append(c.ts, uint64(r.TS))
		c.kind = append(c.kind, string(r.Kind))
		c.cid = append(c.cid, r.CID)
		c.size = append(c.size, uint64(r.Size))
		c.seg = append(c.seg, uint32(r.Loc.Segment))
		c.off = append(c.off, uint64(r.Loc.Offset))
		c.length = append(c.length, uint32(r.Loc.Length))
		c.url = append(c.url, r.URL)
		c.method = append(c.method, r.Method)
		c.status = append(c.status, int32(r.Status))
		c.level = append(c.level, r.Level)
		c.text = append(c.text, r.Text)
		c.action = append(c.action, r.Action)
		c.outcome = append(c.outcome, r.Outcome)
		c.errorCode = append(c.errorCode, r.ErrorCode)
	}
}

func (c *eventColumns) slices() []any {
	return []any{c.recording, c.seq, c.step, c.ts, c.kind, c.cid, c.size, c.seg, c.off, c.length,
		c.url, c.method, c.status, c.level, c.text, c.action, c.outcome, c.errorCode}
}

// mutable are the tables and the column naming a recording in each, in
// the order DeleteRecording removes them: the recording leaves listings
// first, its cursor last.
var mutable = []struct{ table, column string }{
	{recordingsListTable.name, "id"},
	{recordingsMetaTable.name, "id"},
	{eventsTable.name, "recording"},
	{stepsTable.name, "recording"},
	{cursorsTable.name, "recording"},
}

// DeleteRecording removes a recording's rows from every table and returns
// once ClickHouse has applied the deletions, so no later read sees them.
// Deleting an unknown recording is not an error. On a cluster with a
// replica down, rows only that replica holds (stranded parts:
// waitMutations) are deleted when it returns, and reads may see them in
// the moment before (docs/design.md § ClickHouse).
//
// Deletions are mutations, which on 18.16 rewrite every part of the table
// whatever it holds: delete many recordings with one DeleteRecordings call.
func (db *DB) DeleteRecording(ctx context.Context, id string) error {
	return db.DeleteRecordings(ctx, []string{id})
}

// DeleteRecordings removes several recordings with one mutation per table.
func (db *DB) DeleteRecordings(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := db.ready(ctx); err != nil {
		return err
	}
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = quoteString(id)
	}
	in := strings.Join(list, ", ")
	for _, m := range mutable {
		err := db.onShards(ctx, func(table string) string {
			return fmt.Sprintf("ALTER TABLE %s DELETE WHERE %s IN (%s)", table, m.column, in)
		}, m.table)
		if err != nil {
			return fmt.Errorf("clickhouse index: delete %s: %w", describeIDs(ids), err)
		}
	}
	for _, id := range ids {
		db.placed.Delete(id)
	}
	if err := db.waitMutations(ctx); err != nil {
		return fmt.Errorf("clickhouse index: delete %s: %w", describeIDs(ids), err)
	}
	return nil
}

func describeIDs(ids []string) string {
	if len(ids) == 1 {
		return ids[0]
	}
	return fmt.Sprintf("%d recordings", len(ids))
}

// localTable names the table a mutation or TRUNCATE goes to: the table
// itself, or on a cluster its *_local table (on each shard: onShards).
func (db *DB) localTable(name string) string {
	if db.cluster == "" {
		return name
	}
	return fmt.Sprintf("%s.%s_local", db.database, name)
}

// Reset drops every row of every table; the schema stays.
func (db *DB) Reset(ctx context.Context) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.name
	}
	if err := db.onShards(ctx, func(table string) string { return "TRUNCATE TABLE " + table }, names...); err != nil {
		return fmt.Errorf("clickhouse index: reset: %w", err)
	}
	db.placed.Clear()
	return nil
}
