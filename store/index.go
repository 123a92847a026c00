package store

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/wire"
)

// ErrNotFound is returned by an Index or a store for an unknown recording,
// event or blob.
var ErrNotFound = blobs.ErrNotFound

// Recording states.
const (
	StateOpen     = "open"
	StateFinished = "finished"
)

// Verdicts a finished recording may carry. VerdictAborted is the server's
// own: an executor finishes with one of the others, and a recording
// aborted (POST …/abort, or left idle past --open-idle-timeout) is sealed
// with it.
var Verdicts = []string{"pass", "fail", "flaky", "blocked", "not_run", VerdictAborted}

// VerdictAborted seals a recording its executor abandoned.
const VerdictAborted = "aborted"

// RecordingRow is a recording as the index holds it.
type RecordingRow struct {
	RecordingMeta
	State     string `json:"state"`
	Root      string `json:"root,omitempty"` // manifest CID once finished
	Events    int64  `json:"events"`         // events indexed
	Bytes     int64  `json:"bytes"`          // payload bytes indexed (records plus blobs)
	Steps     int    `json:"steps"`          // distinct steps indexed
	FirstTS   int64  `json:"first_ts,omitempty"`
	LastTS    int64  `json:"last_ts,omitempty"`
	IndexedTo uint64 `json:"indexed_through"` // the projection cursor: highest seq indexed
}

// EventRow is one event as the index holds it: its envelope fields, where
// its record is, the blob it references and its search summary.
type EventRow struct {
	Recording string     `json:"recording"`
	Seq       uint64     `json:"seq"`
	Step      int        `json:"step"`
	TS        int64      `json:"ts"`
	Kind      event.Kind `json:"kind"`
	CID       string     `json:"cid,omitempty"` // the blob this event carries, if any
	Size      int64      `json:"size"`          // record bytes plus blob bytes
	Loc       Locator    `json:"-"`
	event.Summary
}

// StepRow is one entry of a recording's timeline, as the read API
// returns it (the type is the wire contract's).
type StepRow = wire.StepRow

// Page sizes every backend applies: the default when a query asks for
// none (Limit 0) and the most one query returns.
const (
	DefaultRecordingsPage, MaxRecordingsPage = 100, 1000
	DefaultEventsPage, MaxEventsPage         = 1000, 10000
	DefaultSearchPage, MaxSearchPage         = 100, 1000
)

// PageSize clamps a requested limit to (0, most], defaulting non-positive
// ones to def.
func PageSize(n, def, most int) int {
	switch {
	case n <= 0:
		return def
	case n > most:
		return most
	}
	return n
}

// CheckBatch refuses IndexEvents arguments no backend may store: an empty
// recording, rows of another recording, seqs and a cursor outside the int64
// range every schema uses, unknown kinds (timelines count each kind).
// Backends add the limits of their own columns.
func CheckBatch(recording string, rows []EventRow, through uint64) error {
	if recording == "" {
		return errors.New("empty recording id")
	}
	if through > math.MaxInt64 {
		return fmt.Errorf("cursor %d exceeds the index's int64 range", through)
	}
	for i := range rows {
		r := &rows[i]
		switch {
		case r.Recording != "" && r.Recording != recording:
			return fmt.Errorf("row %d (seq %d) belongs to recording %q", i, r.Seq, r.Recording)
		case r.Seq == 0 || r.Seq > math.MaxInt64:
			return fmt.Errorf("row %d: seq %d out of range", i, r.Seq)
		case !r.Kind.Valid():
			return fmt.Errorf("row %d (seq %d): unknown kind %q", i, r.Seq, r.Kind)
		}
	}
	return nil
}

// RecordingFilter selects recordings. Zero fields do not filter.
type RecordingFilter struct {
	Project string
	Flow    string
	Verdict string
	State   string
	Since   int64 // CreatedAt ≥ Since (unix ns)
	Until   int64 // CreatedAt < Until (unix ns)
	// Signature is a case-insensitive substring of the failure signature.
	Signature string
	// Page: newest first; After is the ID of the last row of the previous
	// page (rows strictly older than it).
	After string
	Limit int
}

// EventQuery selects events of one recording in seq order.
type EventQuery struct {
	Recording string
	Kind      event.Kind // "" for all
	Step      *int       // nil for all
	AfterSeq  uint64
	Limit     int // 0 means the backend's default page (1000)
}

// SearchQuery searches events across recordings. Zero fields do not filter;
// Text matches as a case-insensitive substring of URL, text, error code and
// the recording's failure signature (of the event's own fields only with
// EventsOnly: a search that finds recordings by signature separately,
// through RecordingFilter.Signature, so that one recording's every event
// does not fill the page).
type SearchQuery struct {
	Recordings []string // restrict to these recordings; nil for all
	Project    string
	Text       string
	URL        string // substring
	Status     int
	ErrorCode  string
	EventsOnly bool
	Limit      int
}

// Index is the queryable projection of the logs and manifests. It can be
// rebuilt from them at any time (flightrec reindex), so it is never the only
// copy of anything.
//
// IndexEvents is idempotent on (recording, seq): a replayed row never counts
// twice. The rows and the cursor move together, atomically where the
// backend allows, so the projection resumes exactly where it stopped.
type Index interface {
	// PutRecording inserts or replaces a recording's metadata and state.
	// It leaves the event counters and the cursor as they are.
	PutRecording(ctx context.Context, r RecordingRow) error
	// IndexEvents adds rows (all of one recording, ascending seq) and
	// advances the recording's cursor to through.
	IndexEvents(ctx context.Context, recording string, rows []EventRow, through uint64) error
	// Cursor returns the highest seq indexed for a recording (0 if none).
	Cursor(ctx context.Context, recording string) (uint64, error)

	Recording(ctx context.Context, id string) (RecordingRow, error)
	Recordings(ctx context.Context, f RecordingFilter) ([]RecordingRow, error)
	Timeline(ctx context.Context, recording string) ([]StepRow, error)
	Events(ctx context.Context, q EventQuery) ([]EventRow, error)
	Search(ctx context.Context, q SearchQuery) ([]EventRow, error)
	// HasBlob reports whether an indexed event of recording carries the
	// blob cid (EventRow.CID). An empty cid, an unknown recording or a
	// deleted one is false, not an error. It answers from the index alone,
	// so it is false for events not indexed yet; playback also consults a
	// finished recording's manifest.
	HasBlob(ctx context.Context, recording, cid string) (bool, error)
	// Expired lists up to limit (0: 1000) finished recordings created before
	// before (unix ns), oldest first: the candidates a retention sweep
	// considers.
	Expired(ctx context.Context, before int64, limit int) ([]string, error)
	// DeleteRecording removes a recording and all its rows.
	DeleteRecording(ctx context.Context, id string) error
	// Reset drops every row (reindex starts from nothing).
	Reset(ctx context.Context) error
	Close() error
}

// Purger is an Index whose deletes may leave the deleted rows' bytes on
// disk until it is asked to purge them (the SQLite index: FTS5 keeps a
// deleted doc's terms in its segments until a merge rewrites them). A
// caller deleting a batch of recordings calls PurgeDeleted once after the
// batch, since a purge may rewrite the whole text index.
type Purger interface {
	PurgeDeleted(ctx context.Context) error
}
