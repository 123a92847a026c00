package wire

import "github.com/flightrec/flightrec/event"

// The read API's replies that clients decode (docs/design.md "Reads"): the
// server encodes these types and clients (mcp, the CLI, executors' tests)
// decode them, so a field is named once.

// StepRow is one entry of a recording's timeline.
type StepRow struct {
	Step    int                  `json:"step"`
	StartTS int64                `json:"start_ts"`
	EndTS   int64                `json:"end_ts"`
	Events  int64                `json:"events"`
	Counts  map[event.Kind]int64 `json:"counts"`
	// The step's receipt summary, when it has a receipt (the last one wins).
	Action    string `json:"action,omitempty"`
	Target    string `json:"target,omitempty"`
	Outcome   string `json:"outcome,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
}

// Timeline answers GET /v1/recordings/{id}/steps (form=full, the default).
type Timeline struct {
	Recording      string    `json:"recording"`
	IndexedThrough uint64    `json:"indexed_through"`
	Steps          []StepRow `json:"steps"`
}

// CompactTimeline answers GET /v1/recordings/{id}/steps?form=compact: the
// timeline as columns, entry i of each being step i's (in step order),
// with only what a list of steps shows. At 10,000 steps it is about a
// third of the full form: no per-step counts map, no seqs, times as
// microseconds from T0 rather than nanoseconds since the epoch.
type CompactTimeline struct {
	Recording      string `json:"recording"`
	IndexedThrough uint64 `json:"indexed_through"`
	Form           string `json:"form"` // "compact"
	// T0 is the first step's start_ts (ns since the epoch); Start and
	// End are each step's start_ts and end_ts as µs after it.
	T0        int64    `json:"t0"`
	Step      []int    `json:"step"`
	Start     []int64  `json:"start"`
	End       []int64  `json:"end"`
	Action    []string `json:"action"`
	Target    []string `json:"target"`
	Outcome   []string `json:"outcome"`
	ErrorCode []string `json:"error_code"`
	// HAR, Console and DOM are the step's counts of those kinds.
	HAR     []int64 `json:"har"`
	Console []int64 `json:"console"`
	DOM     []int64 `json:"dom"`
	// Failed lists the steps whose outcome is "failed", for a player to
	// open at the first without scanning; FirstDOM is the first step with
	// a DOM event, if any. Both are of the whole timeline, in a page too.
	Failed   []int `json:"failed"`
	FirstDOM *int  `json:"first_dom,omitempty"`
	// Offset is the position in the timeline of the columns' first entry,
	// and Total the number of steps in the timeline: a page (limit=N) is
	// the steps from Offset on, the whole timeline has Offset 0.
	Offset int `json:"offset"`
	Total  int `json:"total"`
}

// StepView answers GET /v1/recordings/{id}/steps/{n}: every event of the
// step in seq order, each with its payload as stored.
type StepView struct {
	Recording string           `json:"recording"`
	Step      int              `json:"step"`
	Events    []event.Envelope `json:"events"`
}

// EventPage answers GET /v1/recordings/{id}/events.
type EventPage struct {
	Recording string           `json:"recording"`
	Events    []event.Envelope `json:"events"`
	// NextAfterSeq is the value of ?after_seq= for the next page, absent on
	// the last.
	NextAfterSeq uint64 `json:"next_after_seq,omitempty"`
}

// SearchHit is one event a search found, or, with Field
// "failure_signature" and no seq, a recording whose failure signature
// matched.
type SearchHit struct {
	Recording string     `json:"recording"`
	Seq       uint64     `json:"seq,omitempty"`
	Step      int        `json:"step"`
	TS        int64      `json:"ts,omitempty"`
	Kind      event.Kind `json:"kind,omitempty"`
	// Field names what matched the phrase: url, text, error_code or
	// failure_signature ("" when only field terms were given).
	Field string `json:"field,omitempty"`
	event.Summary
}

// SearchResult answers both search routes.
type SearchResult struct {
	Query string      `json:"query"`
	Hits  []SearchHit `json:"hits"`
	// Steps are the distinct steps of the hits (one recording's search).
	Steps []int `json:"steps,omitempty"`
	// Truncated says the limit cut the hits: narrow the query.
	Truncated bool `json:"truncated,omitempty"`
}

// AtResult answers GET /v1/recordings/{id}/at?t=: the step and the frame
// on screen at an instant.
type AtResult struct {
	Recording string `json:"recording"`
	T         int64  `json:"t"`
	// Offset is t from the recording's first event: the position in the
	// recording's video (video.webm starts at the first event).
	OffsetNS int64   `json:"offset_ns"`
	Step     StepRow `json:"step"`
	// Frame is the newest frame at or before t, absent when none was
	// captured yet.
	Frame *AtFrame `json:"frame,omitempty"`
}

// AtFrame is the frame on screen at an instant.
type AtFrame struct {
	Seq  uint64 `json:"seq"`
	Step int    `json:"step"`
	TS   int64  `json:"ts"`
	CID  string `json:"cid"`
	URL  string `json:"url"` // the image, through the recording's blob route
}
