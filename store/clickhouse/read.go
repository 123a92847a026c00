package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// placeholders is "?, ?, …" for n values. The driver would bind a slice
// as an Array literal, which 18.16 refuses on the right of IN.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Cursor returns the highest seq indexed for recording, 0 if none.
func (db *DB) Cursor(ctx context.Context, recording string) (uint64, error) {
	if err := db.ready(ctx); err != nil {
		return 0, err
	}
	var c uint64
	if err := db.conn.QueryRow(ctx, `SELECT max(through) FROM cursors WHERE recording = ?`, recording).Scan(&c); err != nil {
		return 0, fmt.Errorf("clickhouse index: cursor of %s: %w", recording, err)
	}
	return c, nil
}

// latest is the recordings row of each id as its newest version has it.
// The aliases differ from the column names: ClickHouse resolves an alias
// before a column of the same name, which would nest the aggregates.
var latest = latestOf("project", "flow", "labels", "executor", "versions", "plan_digest",
	"created_at", "finished_at", "verdict", "failure_signature", "state", "root")

// latestOf selects id and, for each column named, its newest value as
// r_<column>.
func latestOf(columns ...string) string {
	var b strings.Builder
	b.WriteString("id")
	for _, c := range columns {
		fmt.Fprintf(&b, ",\n\targMax(%s, updated_at) AS r_%s", c, c)
	}
	return b.String()
}

// pointRead is the SETTINGS clause of the reads that touch a few granules
// (a page of the list, one recording, their counters): 18.16 starts
// max_threads fresh threads for every query and gives each column of each
// part it opens a read buffer of max_read_buffer_size (1 MiB). For such a
// read that setup is much of the cost: on the 100,000-recording list, one
// thread and 64 KiB buffers took schema 2's page query from 30 MB to 7 MB
// (system.query_log) and from 29 to 18 ms at a load average of 10 (medians
// of 21). A SETTINGS clause applies to the query's subqueries, and to a
// UNION only when it wraps it.
const pointRead = ` SETTINGS max_threads = 1, max_read_buffer_size = 65536`

func scanRecording(rows driver.Rows) (store.RecordingRow, error) {
	var (
		r                     store.RecordingRow
		labels, versions      string
		createdAt, finishedAt uint64
	)
	if err := rows.Scan(&r.ID, &r.Project, &r.Flow, &labels, &r.Executor, &versions, &r.PlanDigest,
		&createdAt, &finishedAt, &r.Verdict, &r.FailureSignature, &r.State, &r.Root); err != nil {
		return r, err
	}
	r.CreatedAt, r.FinishedAt = int64(createdAt), int64(finishedAt)
	if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
		return r, fmt.Errorf("labels of %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(versions), &r.Versions); err != nil {
		return r, fmt.Errorf("versions of %s: %w", r.ID, err)
	}
	return r, nil
}

// queryRecordings runs q, a query selecting latest, and returns its rows
// with their counters and cursors filled in (readCounters, by the rows'
// ids). Reading the counters of the page's candidates at the same time as
// the page, by a subquery, was measured and cost more: 18.16 ran the
// subquery's window again for each, tripling the server's CPU.
func (db *DB) queryRecordings(ctx context.Context, q string, args ...any) ([]store.RecordingRow, error) {
	var out []store.RecordingRow
	err := db.scanEach(ctx, q, args, func(rows driver.Rows) error {
		r, err := scanRecording(rows)
		out = append(out, r)
		return err
	})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	ids := make([]any, len(out))
	for i, r := range out {
		ids[i] = r.ID
	}
	sums, through, err := db.readCounters(ctx, placeholders(len(ids)), ids)
	if err != nil {
		return nil, err
	}
	fillCounters(out, sums, through)
	return out, nil
}

// fillCounters sets recs' counters and cursors from readCounters' answers.
func fillCounters(recs []store.RecordingRow, sums map[string]counters, through map[string]uint64) {
	for i := range recs {
		r := &recs[i]
		if c, ok := sums[r.ID]; ok {
			r.Events, r.Bytes, r.Steps = int64(c.events), int64(c.bytes), int(c.steps)
			r.FirstTS, r.LastTS = int64(c.first), int64(c.last)
		}
		r.IndexedTo = through[r.ID]
	}
}

// counters are a recording's totals, summed over its steps.
type counters struct{ events, bytes, steps, first, last uint64 }

// readCounters sums the counters of the recordings that in (an IN list,
// with args) names over their steps' totals (each step's row with the most
// events: see stepsTable) and reads their cursors, in two queries sent at
// once on two connections: 18.16 charges every query a fixed setup (about
// 1 ms of CPU), and on a shared machine two waits overlap where a chain
// of them adds up. As one query (UNION ALL) they cost more than both
// apart, since 18.16 starts threads for a union whatever max_threads
// says.
func (db *DB) readCounters(ctx context.Context, in string, args []any) (map[string]counters, map[string]uint64, error) {
	var (
		wg       sync.WaitGroup
		sums     = map[string]counters{}
		stepsErr error
	)
	wg.Go(func() {
		// FINAL collapses each step's rows to the one with the most
		// events (the table's version) as it reads the key's ranges: a
		// third less CPU than collapsing by GROUP BY step first.
		stepsErr = db.scanEach(ctx, `SELECT recording, sum(events), sum(bytes), count(), min(first_ts), max(last_ts)
			FROM steps FINAL WHERE recording IN (`+in+`) GROUP BY recording`+pointRead, args, func(rows driver.Rows) error {
			var (
				id string
				c  counters
			)
			err := rows.Scan(&id, &c.events, &c.bytes, &c.steps, &c.first, &c.last)
			sums[id] = c
			return err
		})
	})
	through := map[string]uint64{}
	cursorsErr := db.scanEach(ctx, `SELECT recording, max(through) FROM cursors WHERE recording IN (`+in+`)
		GROUP BY recording`+pointRead, args, func(rows driver.Rows) error {
		var (
			id string
			c  uint64
		)
		err := rows.Scan(&id, &c)
		through[id] = c
		return err
	})
	wg.Wait()
	if err := errors.Join(stepsErr, cursorsErr); err != nil {
		return nil, nil, fmt.Errorf("counters: %w", err)
	}
	return sums, through, nil
}

// scanEach runs q and calls each for every row.
func (db *DB) scanEach(ctx context.Context, q string, args []any, each func(driver.Rows) error) error {
	rows, err := db.conn.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Recording returns one recording; an unknown id is store.ErrNotFound.
func (db *DB) Recording(ctx context.Context, id string) (store.RecordingRow, error) {
	if err := db.ready(ctx); err != nil {
		return store.RecordingRow{}, err
	}
	recs, err := db.queryRecordings(ctx, `SELECT `+latest+` FROM recordings_meta WHERE id = ? GROUP BY id`+pointRead, id)
	if err != nil {
		return store.RecordingRow{}, fmt.Errorf("clickhouse index: recording %s: %w", id, err)
	}
	if len(recs) == 1 {
		return recs[0], nil
	}
	// A recording whose events another process indexed after this one
	// deleted it has a cursor and no row: it reads as a placeholder, as
	// one made by IndexEvents would.
	sums, through, err := db.readCounters(ctx, "?", []any{id})
	if err != nil {
		return store.RecordingRow{}, fmt.Errorf("clickhouse index: recording %s: %w", id, err)
	}
	if through[id] > 0 {
		recs = []store.RecordingRow{{RecordingMeta: store.RecordingMeta{ID: id}, State: store.StateOpen}}
		fillCounters(recs, sums, through)
		return recs[0], nil
	}
	return store.RecordingRow{}, fmt.Errorf("clickhouse index: recording %s: %w", id, store.ErrNotFound)
}

// Recordings lists recordings newest first (created_at, then id, both
// descending, so the order is total and pages never overlap).
//
// Filters apply to each recording's newest row. 18.16 cannot read a table
// backwards in key order, so a listing reads a window of the newest part
// of recordings_list's key (created_at ≥ lo): the window's rows give each
// recording in it a newest row and the page, whose ids recordings_meta
// then confirms against all their rows. A full page from a window is the
// answer, since every row outside it is older than every row in the page;
// a short one widens the window (×32, from the width the last unfiltered
// first page needed) until it holds the page or reaches the oldest
// recording. The
// last window is unbounded below, and then the list's newest rows are
// every recording's newest rows, so it is exact whatever the data.
func (db *DB) Recordings(ctx context.Context, f store.RecordingFilter) ([]store.RecordingRow, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	var (
		cand, having []string
		candArgs     []any
		havingArgs   []any
		// windowCols are the columns the window's newest rows need: the
		// order's and the filters'. Reading only those (not labels,
		// versions…) is most of what a window's read saves.
		windowCols = []string{"created_at"}
	)
	// floor is the oldest created_at a listing can need.
	var floor uint64
	// anchor is the newest: now (with an hour for clocks ahead), or the
	// filter's upper bound.
	anchor := uint64(time.Now().Add(time.Hour).UnixNano())
	// keep filters the newest rows on cond (over latestOf's aliases of
	// col, which the window then reads).
	keep := func(col, cond string, arg any) {
		if !slices.Contains(windowCols, col) {
			windowCols = append(windowCols, col)
		}
		having, havingArgs = append(having, cond), append(havingArgs, arg)
	}
	if f.Project != "" {
		cand, candArgs = append(cand, `project = ?`), append(candArgs, f.Project)
		keep("project", `r_project = ?`, f.Project)
	}
	if f.Since != 0 {
		floor = clampTS(f.Since)
		cand, candArgs = append(cand, `created_at >= ?`), append(candArgs, floor)
		keep("created_at", `r_created_at >= ?`, floor)
	}
	if f.Until != 0 {
		anchor = min(anchor, clampTS(f.Until))
		cand, candArgs = append(cand, `created_at < ?`), append(candArgs, clampTS(f.Until))
		keep("created_at", `r_created_at < ?`, clampTS(f.Until))
	}
	if f.Flow != "" {
		keep("flow", `r_flow = ?`, f.Flow)
	}
	if f.Verdict != "" {
		keep("verdict", `r_verdict = ?`, f.Verdict)
	}
	if f.State != "" {
		keep("state", `r_state = ?`, f.State)
	}
	if f.Signature != "" {
		keep("failure_signature", `positionCaseInsensitiveUTF8(r_failure_signature, ?) > 0`, f.Signature)
	}
	if f.After != "" {
		// Keyset paging: strictly after the previous page's last row. An
		// After that no longer exists yields an empty page rather than
		// restarting from the top.
		var created []uint64
		err := db.scanEach(ctx, `SELECT argMax(created_at, updated_at) FROM recordings_meta WHERE id = ? GROUP BY id`+pointRead,
			[]any{f.After}, func(rows driver.Rows) error {
				var c uint64
				err := rows.Scan(&c)
				created = append(created, c)
				return err
			})
		if err != nil {
			return nil, fmt.Errorf("clickhouse index: recordings: %w", err)
		}
		if len(created) == 0 {
			return nil, nil
		}
		anchor = min(anchor, created[0]+1)
		cand, candArgs = append(cand, `created_at <= ?`), append(candArgs, created[0])
		having = append(having, `(r_created_at < ? OR (r_created_at = ? AND id < ?))`)
		havingArgs = append(havingArgs, created[0], created[0], f.After)
	}
	limit := store.PageSize(f.Limit, store.DefaultRecordingsPage, store.MaxRecordingsPage)
	havingSQL := ""
	if len(having) > 0 {
		havingSQL = ` HAVING ` + strings.Join(having, ` AND `)
	}
	page := ` GROUP BY id` + havingSQL + ` ORDER BY r_created_at DESC, id DESC LIMIT ?`
	for width := max(db.listWindow.Load(), minListWindow); ; width *= 32 {
		where, args := slices.Clone(cand), slices.Clone(candArgs)
		bounded := anchor > floor && anchor-floor > uint64(width)
		if bounded {
			where, args = append(where, `created_at >= ?`), append(args, anchor-uint64(width))
		}
		q := `SELECT ` + latest + ` FROM recordings_meta WHERE id IN (SELECT id FROM (SELECT ` + latestOf(windowCols...) +
			` FROM recordings_list`
		if len(where) > 0 {
			q += ` WHERE ` + strings.Join(where, ` AND `)
		}
		q += page + `))` + page + pointRead
		args = append(append(append(append(args, havingArgs...), limit), havingArgs...), limit)
		out, err := db.queryRecordings(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("clickhouse index: recordings: %w", err)
		}
		if len(out) == limit || !bounded {
			// Only an unfiltered first page sets where the next listing
			// starts: a sparse filter, or the last page of the list,
			// needs a window as wide as the data, and remembering that
			// width made every later listing read the whole table.
			if len(having) == 0 && len(cand) == 0 {
				db.listWindow.Store(width)
			}
			return out, nil
		}
	}
}

// minListWindow is the narrowest window of creation times (ns) a listing
// reads first: a day.
const minListWindow = int64(24 * time.Hour)

// clampTS maps a filter's int64 ns onto the UInt64 column: no stored time
// is negative, so a negative bound compares like 0.
func clampTS(ts int64) uint64 {
	if ts < 0 {
		return 0
	}
	return uint64(ts)
}

// timelineSQL reads one recording's steps' totals (see stepsTable), each
// step's row with the most events, in step order: the recording's rows
// are one range of the steps key.
var timelineSQL = func() string {
	counts := make([]string, len(stepKinds))
	for i, k := range stepKinds {
		counts[i] = "n_" + string(k)
	}
	return `SELECT step, first_ts, last_ts, events, first_seq, last_seq, action, target, outcome, error_code,
		` + strings.Join(counts, ", ") + `
		FROM steps WHERE recording = ? ORDER BY step, events DESC LIMIT 1 BY step`
}()

// Timeline returns a recording's steps in order; an unknown recording has
// none.
func (db *DB) Timeline(ctx context.Context, recording string) ([]store.StepRow, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := db.conn.Query(ctx, timelineSQL, recording)
	if err != nil {
		return nil, fmt.Errorf("clickhouse index: timeline of %s: %w", recording, err)
	}
	defer rows.Close()
	var out []store.StepRow
	counts := make([]uint64, len(stepKinds))
	dst := make([]any, 0, 10+len(stepKinds))
	for rows.Next() {
		var (
			s                          store.StepRow
			step                       int64
			start, end, n, first, last uint64
		)
		dst = append(dst[:0], &step, &start, &end, &n, &first, &last,
			&s.Action, &s.Target, &s.Outcome, &s.ErrorCode)
		for i := range counts {
			dst = append(dst, &counts[i])
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, fmt.Errorf("clickhouse index: timeline of %s: %w", recording, err)
		}
		s.Step, s.StartTS, s.EndTS, s.Events = int(step), int64(start), int64(end), int64(n)
		s.FirstSeq, s.LastSeq = first, last
		s.Counts = make(map[event.Kind]int64)
		for i, c := range counts {
			if c != 0 {
				s.Counts[stepKinds[i]] = int64(c)
			}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse index: timeline of %s: %w", recording, err)
	}
	return out, nil
}

const eventCols = `seq, step, ts, kind, cid, size, seg, off, len,
	url, method, status, level, text, action, outcome, error_code`

// queryEvents runs an events query. Search selects the recording ahead of
// eventCols; Events knows it already (recording != "").
func (db *DB) queryEvents(ctx context.Context, q string, args []any, recording string) ([]store.EventRow, error) {
	rows, err := db.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.EventRow
	for rows.Next() {
		var (
			e                  store.EventRow
			seq, ts, size, off uint64
			step               int64
			seg, length        uint32
			status             int32
			kind               string
		)
		dst := []any{&seq, &step, &ts, &kind, &e.CID, &size, &seg, &off, &length,
			&e.URL, &e.Method, &status, &e.Level, &e.Text, &e.Action, &e.Outcome, &e.ErrorCode}
		if recording == "" {
			dst = append([]any{&e.Recording}, dst...)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		if recording != "" {
			e.Recording = recording
		}
		e.Seq, e.Step, e.TS, e.Kind, e.Size = seq, int(step), int64(ts), event.Kind(kind), int64(size)
		e.Loc = store.Locator{Segment: int(seg), Offset: int64(off), Length: int(length)}
		e.Status = int(status)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Events returns one recording's events in seq order, with their locators.
// A step's events are one range of the key.
func (db *DB) Events(ctx context.Context, q store.EventQuery) ([]store.EventRow, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if q.Recording == "" {
		return nil, nil // no recording has an empty id
	}
	var b strings.Builder
	b.WriteString(`SELECT ` + eventCols + ` FROM events WHERE recording = ?`)
	args := []any{q.Recording}
	if q.Step != nil {
		b.WriteString(` AND step = ?`)
		args = append(args, int64(*q.Step))
	}
	if q.Kind != "" {
		b.WriteString(` AND kind = ?`)
		args = append(args, string(q.Kind))
	}
	b.WriteString(` AND seq > ? ORDER BY seq LIMIT 1 BY seq LIMIT ?`)
	args = append(args, q.AfterSeq, store.PageSize(q.Limit, store.DefaultEventsPage, store.MaxEventsPage))
	out, err := db.queryEvents(ctx, b.String(), args, q.Recording)
	if err != nil {
		return nil, fmt.Errorf("clickhouse index: events of %s: %w", q.Recording, err)
	}
	return out, nil
}

// HasBlob reports whether an indexed event of recording carries the blob
// cid. recording leads the events key, so the read is the recording's
// range of the key, and LIMIT 1 stops at the first match. Copies of a
// replayed row not merged yet are the same row, blob included, so whether
// one exists needs no collapsing (LIMIT 1 BY seq) first. (It selects a
// column: 18.16 answers SELECT 1 … LIMIT 1 from a Distributed table with
// Code 8.) An empty cid, or an unknown recording, is false.
func (db *DB) HasBlob(ctx context.Context, recording, cid string) (bool, error) {
	if recording == "" || cid == "" {
		return false, nil // no event carries the empty CID
	}
	if err := db.ready(ctx); err != nil {
		return false, err
	}
	var n uint64
	if err := db.conn.QueryRow(ctx, `SELECT count() FROM
		(SELECT seq FROM events WHERE recording = ? AND cid = ? LIMIT 1)`, recording, cid).Scan(&n); err != nil {
		return false, fmt.Errorf("clickhouse index: blob of %s: %w", recording, err)
	}
	return n > 0, nil
}

// latestWhere selects the ids of recordings whose newest row satisfies
// cond (an expression over latest's aliases).
func latestWhere(cond string) string {
	return `SELECT id FROM (SELECT ` + latest + ` FROM recordings_meta GROUP BY id) WHERE ` + cond
}

// Search finds events across recordings, ordered by recording id and seq,
// each seq once. Text and URL match as substrings with no wildcard
// (position, not LIKE), folding case across UTF-8 (the embedded index
// folds ASCII only). match() with an RE2 pattern was measured instead: on
// 18.16 its (?i) flag is ignored for a pattern that is all literal, and
// with (?i:…) it is no faster where many rows match and slower where few
// do.
func (db *DB) Search(ctx context.Context, q store.SearchQuery) ([]store.EventRow, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if q.Recordings != nil && len(q.Recordings) == 0 {
		return nil, nil // restricted to no recording at all
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if q.Recordings != nil {
		add(`recording IN (`+placeholders(len(q.Recordings))+`)`, anys(q.Recordings)...)
	}
	if q.Project != "" {
		add(`recording IN (`+latestWhere(`r_project = ?`)+`)`, q.Project)
	}
	if q.URL != "" {
		add(`positionCaseInsensitiveUTF8(url, ?) > 0`, q.URL)
	}
	if q.Status != 0 {
		add(`status = ?`, int32(q.Status))
	}
	if q.ErrorCode != "" {
		add(`error_code = ?`, q.ErrorCode)
	}
	if q.Text != "" && q.EventsOnly {
		add(`(positionCaseInsensitiveUTF8(url, ?) > 0 OR positionCaseInsensitiveUTF8(text, ?) > 0
			OR positionCaseInsensitiveUTF8(error_code, ?) > 0)`, q.Text, q.Text, q.Text)
	} else if q.Text != "" {
		add(`(positionCaseInsensitiveUTF8(url, ?) > 0 OR positionCaseInsensitiveUTF8(text, ?) > 0
			OR positionCaseInsensitiveUTF8(error_code, ?) > 0
			OR recording IN (`+latestWhere(`positionCaseInsensitiveUTF8(r_failure_signature, ?) > 0`)+`))`,
			q.Text, q.Text, q.Text, q.Text)
	}
	s := `SELECT recording, ` + eventCols + ` FROM events`
	if len(where) > 0 {
		s += ` WHERE ` + strings.Join(where, ` AND `)
	}
	s += ` ORDER BY recording, seq LIMIT 1 BY recording, seq LIMIT ?`
	args = append(args, store.PageSize(q.Limit, store.DefaultSearchPage, store.MaxSearchPage))
	out, err := db.queryEvents(ctx, s, args, "")
	if err != nil {
		return nil, fmt.Errorf("clickhouse index: search: %w", err)
	}
	return out, nil
}

// Expired lists up to limit finished recordings created before before
// (unix ns), oldest first: the candidates a retention sweep considers.
func (db *DB) Expired(ctx context.Context, before int64, limit int) ([]string, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = store.MaxRecordingsPage
	}
	rows, err := db.conn.Query(ctx, `SELECT id FROM (SELECT `+latest+` FROM recordings_meta
		WHERE id IN (SELECT id FROM recordings_list WHERE created_at < ?) GROUP BY id)
		WHERE r_state = ? AND r_created_at < ? ORDER BY r_created_at, id LIMIT ?`,
		clampTS(before), store.StateFinished, clampTS(before), limit)
	if err != nil {
		return nil, fmt.Errorf("clickhouse index: expired: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("clickhouse index: expired: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse index: expired: %w", err)
	}
	return out, nil
}
