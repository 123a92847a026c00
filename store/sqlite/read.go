package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// ridOf is a scalar subquery resolving a recording id to its rid inside the
// query that needs it, so the lookup and the read share one snapshot.
const ridOf = `(SELECT rid FROM recordings WHERE id = ?)`

// Cursor returns the highest seq indexed for recording, 0 if it is unknown.
func (db *DB) Cursor(ctx context.Context, recording string) (uint64, error) {
	var c int64
	err := db.r.QueryRowContext(ctx, `SELECT indexed_through FROM recordings WHERE id = ?`, recording).Scan(&c)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("sqlite index: cursor of %s: %w", recording, err)
	}
	return uint64(c), nil
}

const recordingCols = `id, project, flow, labels, executor, versions, plan_digest,
	created_at, finished_at, verdict, failure_signature, state, root,
	events, bytes, steps, first_ts, last_ts, indexed_through`

func scanRecording(sc interface{ Scan(...any) error }) (store.RecordingRow, error) {
	var (
		r                store.RecordingRow
		labels, versions string
		through          int64
	)
	err := sc.Scan(&r.ID, &r.Project, &r.Flow, &labels, &r.Executor, &versions, &r.PlanDigest,
		&r.CreatedAt, &r.FinishedAt, &r.Verdict, &r.FailureSignature, &r.State, &r.Root,
		&r.Events, &r.Bytes, &r.Steps, &r.FirstTS, &r.LastTS, &through)
	if err != nil {
		return r, err
	}
	r.IndexedTo = uint64(through)
	if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
		return r, fmt.Errorf("labels of %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(versions), &r.Versions); err != nil {
		return r, fmt.Errorf("versions of %s: %w", r.ID, err)
	}
	return r, nil
}

// Recording returns one recording; an unknown id is store.ErrNotFound.
func (db *DB) Recording(ctx context.Context, id string) (store.RecordingRow, error) {
	row := db.r.QueryRowContext(ctx, `SELECT `+recordingCols+` FROM recordings WHERE id = ?`, id)
	r, err := scanRecording(row)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.RecordingRow{}, fmt.Errorf("sqlite index: recording %s: %w", id, store.ErrNotFound)
	case err != nil:
		return store.RecordingRow{}, fmt.Errorf("sqlite index: recording %s: %w", id, err)
	}
	return r, nil
}

// Recordings lists recordings newest first (created_at, then id, both
// descending, so the order is total and pages never overlap).
func (db *DB) Recordings(ctx context.Context, f store.RecordingFilter) ([]store.RecordingRow, error) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if f.Project != "" {
		add(`project = ?`, f.Project)
	}
	if f.Flow != "" {
		add(`flow = ?`, f.Flow)
	}
	if f.Verdict != "" {
		add(`verdict = ?`, f.Verdict)
	}
	if f.State != "" {
		add(`state = ?`, f.State)
	}
	if f.Signature != "" {
		add(`failure_signature LIKE ? ESCAPE '`+likeEscape+`'`, containsPattern(f.Signature))
	}
	if f.Since != 0 {
		add(`created_at >= ?`, f.Since)
	}
	if f.Until != 0 {
		add(`created_at < ?`, f.Until)
	}
	if f.After != "" {
		// Keyset paging: strictly after the previous page's last row in
		// (created_at DESC, id DESC) order. An After that no longer exists
		// yields an empty page rather than restarting from the top.
		add(`(created_at, id) < (SELECT created_at, id FROM recordings WHERE id = ?)`, f.After)
	}
	q := `SELECT ` + recordingCols + ` FROM recordings`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, store.PageSize(f.Limit, store.DefaultRecordingsPage, store.MaxRecordingsPage))

	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite index: recordings: %w", err)
	}
	defer rows.Close()
	var out []store.RecordingRow
	for rows.Next() {
		r, err := scanRecording(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite index: recordings: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite index: recordings: %w", err)
	}
	return out, nil
}

// timelineSQL reads the steps table only: O(steps), whatever the number of
// events.
var timelineSQL = func() string {
	cols := make([]string, len(event.Kinds))
	for i, k := range event.Kinds {
		cols[i] = kindColumn(k)
	}
	return `SELECT step, start_ts, end_ts, events, first_seq, last_seq,
		action, target, outcome, error_code, ` + strings.Join(cols, ", ") + `
		FROM steps WHERE rec = ` + ridOf + ` ORDER BY step`
}()

// Timeline returns a recording's steps in order; an unknown recording has
// none.
func (db *DB) Timeline(ctx context.Context, recording string) ([]store.StepRow, error) {
	rows, err := db.r.QueryContext(ctx, timelineSQL, recording)
	if err != nil {
		return nil, fmt.Errorf("sqlite index: timeline of %s: %w", recording, err)
	}
	defer rows.Close()
	var out []store.StepRow
	counts := make([]int64, len(event.Kinds))
	dst := make([]any, 0, 10+len(event.Kinds))
	for rows.Next() {
		var (
			s           store.StepRow
			first, last int64
		)
		dst = append(dst[:0], &s.Step, &s.StartTS, &s.EndTS, &s.Events, &first, &last,
			&s.Action, &s.Target, &s.Outcome, &s.ErrorCode)
		for i := range counts {
			dst = append(dst, &counts[i])
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, fmt.Errorf("sqlite index: timeline of %s: %w", recording, err)
		}
		s.FirstSeq, s.LastSeq = uint64(first), uint64(last)
		// Only the kinds the step has: a zero count says nothing.
		s.Counts = make(map[event.Kind]int64)
		for i, n := range counts {
			if n != 0 {
				s.Counts[event.Kinds[i]] = n
			}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite index: timeline of %s: %w", recording, err)
	}
	return out, nil
}

const eventCols = `e.seq, e.step, e.ts, e.kind, e.cid, e.size, e.seg, e.off, e.len,
	e.url, e.method, e.status, e.level, e.text, e.action, e.outcome, e.error_code`

// queryEvents runs an events query. Search selects the recording id ahead
// of eventCols; Events knows it already (recording != "") and saves the
// join.
func (db *DB) queryEvents(ctx context.Context, q string, args []any, recording string) ([]store.EventRow, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.EventRow
	for rows.Next() {
		var (
			e    store.EventRow
			seq  int64
			kind string
		)
		dst := []any{&seq, &e.Step, &e.TS, &kind, &e.CID, &e.Size,
			&e.Loc.Segment, &e.Loc.Offset, &e.Loc.Length,
			&e.URL, &e.Method, &e.Status, &e.Level, &e.Text, &e.Action, &e.Outcome, &e.ErrorCode}
		if recording == "" {
			dst = append([]any{&e.Recording}, dst...)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		if recording != "" {
			e.Recording = recording
		}
		e.Seq, e.Kind = uint64(seq), event.Kind(kind)
		out = append(out, e)
	}
	return out, rows.Err()
}

// eventsQuery builds Events' SQL.
//
// The index is named, not left to the planner: without it SQLite (even
// after ANALYZE) prefers walking the primary key range of the whole
// recording, rating a secondary-index lookup into a WITHOUT ROWID table as
// dearer, which makes a step lookup O(events of the recording) instead of
// O(events of the step). INDEXED BY also makes a query that could not use
// the index fail loudly rather than scan. The seq bound is always present,
// so the (rec, step, seq) and (rec, kind, seq) indexes return rows in seq
// order with no sort.
func eventsQuery(q store.EventQuery) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT ` + eventCols + ` FROM events e`)
	switch {
	case q.Step != nil:
		b.WriteString(` INDEXED BY events_step`)
	case q.Kind != "":
		b.WriteString(` INDEXED BY events_kind`)
	}
	b.WriteString(` WHERE e.rec = ` + ridOf)
	args := []any{q.Recording}
	if q.Step != nil {
		b.WriteString(` AND e.step = ?`)
		args = append(args, *q.Step)
	}
	if q.Kind != "" {
		b.WriteString(` AND e.kind = ?`)
		args = append(args, string(q.Kind))
	}
	b.WriteString(` AND e.seq > ? ORDER BY e.seq LIMIT ?`)
	args = append(args, clampSeq(q.AfterSeq), store.PageSize(q.Limit, store.DefaultEventsPage, store.MaxEventsPage))
	return b.String(), args
}

// clampSeq maps a uint64 seq onto SQLite's int64 integers; no stored seq
// exceeds MaxInt64 (IndexEvents refuses them), so clamping keeps the
// comparison's meaning.
func clampSeq(s uint64) int64 {
	const maxInt64 = 1<<63 - 1
	if s > maxInt64 {
		return maxInt64
	}
	return int64(s)
}

// Events returns one recording's events in seq order, with their locators.
func (db *DB) Events(ctx context.Context, q store.EventQuery) ([]store.EventRow, error) {
	sqlText, args := eventsQuery(q)
	if q.Recording == "" {
		return nil, nil // no recording has an empty id
	}
	out, err := db.queryEvents(ctx, sqlText, args, q.Recording)
	if err != nil {
		return nil, fmt.Errorf("sqlite index: events of %s: %w", q.Recording, err)
	}
	return out, nil
}

// likeEscape is the escape character of every LIKE pattern built here.
const likeEscape = `\`

// containsPattern is a LIKE pattern matching s anywhere, with s's own
// wildcards and escape character taken literally.
func containsPattern(s string) string {
	r := strings.NewReplacer(likeEscape, likeEscape+likeEscape, "%", likeEscape+"%", "_", likeEscape+"_")
	return "%" + r.Replace(s) + "%"
}

// searchWhere is the condition of a search, in SQL over events e joined to
// recordings r. SQLite's LIKE folds ASCII case only, so "case-insensitive"
// holds for ASCII letters; other scripts match exactly. The text index
// path (search.go) narrows the rows first and then applies this same
// condition, so both paths give the same answer.
func searchWhere(q store.SearchQuery) ([]string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if q.Recordings != nil {
		add(`r.id IN (?`+strings.Repeat(`, ?`, len(q.Recordings)-1)+`)`, anys(q.Recordings)...)
	}
	if q.Project != "" {
		add(`r.project = ?`, q.Project)
	}
	if q.URL != "" {
		add(`e.url LIKE ? ESCAPE '`+likeEscape+`'`, containsPattern(q.URL))
	}
	if q.Status != 0 {
		add(`e.status = ?`, q.Status)
	}
	if q.ErrorCode != "" {
		add(`e.error_code = ?`, q.ErrorCode)
	}
	if q.Text != "" {
		p := containsPattern(q.Text)
		esc := ` LIKE ? ESCAPE '` + likeEscape + `'`
		if q.EventsOnly {
			add(`(e.url`+esc+` OR e.text`+esc+` OR e.error_code`+esc+`)`, p, p, p)
		} else {
			add(`(e.url`+esc+` OR e.text`+esc+` OR e.error_code`+esc+` OR r.failure_signature`+esc+`)`, p, p, p, p)
		}
	}
	return where, args
}

// searchTail closes a search query: its condition, order and page.
func searchTail(q store.SearchQuery, s string, args []any) (string, []any) {
	where, wargs := searchWhere(q)
	if len(where) > 0 {
		s += ` WHERE ` + strings.Join(where, ` AND `)
	}
	s += ` ORDER BY r.id, e.seq LIMIT ?`
	args = append(args, wargs...)
	return s, append(args, store.PageSize(q.Limit, store.DefaultSearchPage, store.MaxSearchPage))
}

// searchQuery builds the scanning search: it narrows by recording and
// project through indexes, then reads every row in scope, in (r.id, e.seq)
// order, until the page is full.
func searchQuery(q store.SearchQuery) (string, []any) {
	return searchTail(q, `SELECT r.id, `+eventCols+` FROM events e JOIN recordings r ON r.rid = e.rec`, nil)
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// hasBlobSQL finds one event of a recording carrying a blob. The partial
// index events_cid is named for the reason eventsQuery names its indexes:
// a lookup by (rec, cid) must never become a walk of the recording's
// events, and INDEXED BY fails loudly if it could not be used. The query
// repeats the index's condition (a non-empty cid), since the planner uses
// a partial index only when the WHERE clause implies its condition, which
// a bound parameter alone does not.
const hasBlobSQL = `SELECT 1 FROM events INDEXED BY events_cid
	WHERE rec = ` + ridOf + ` AND cid = ? AND cid != '' LIMIT 1`

// HasBlob reports whether an indexed event of recording carries the blob
// cid. An empty cid, or an unknown recording, is false.
func (db *DB) HasBlob(ctx context.Context, recording, cid string) (bool, error) {
	if recording == "" || cid == "" {
		return false, nil // no event carries the empty CID
	}
	var one int
	switch err := db.r.QueryRowContext(ctx, hasBlobSQL, recording, cid).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sqlite index: blob of %s: %w", recording, err)
	}
	return true, nil
}
