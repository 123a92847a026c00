package bundle

import (
	"encoding/json"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/log"
)

// The manifest: a finished recording's metadata, its log segments (as
// blobs) and every blob its events reference. Its CID is the recording's
// root and the unit of evidence; a bundle carries it and what it lists.

// RecordingMeta is what a recording is: set at open, completed at finish.
// It is the JSON stored in a recording's meta file and in its manifest.
type RecordingMeta struct {
	ID         string            `json:"id"`
	Project    string            `json:"project"`
	Flow       string            `json:"flow,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Executor   string            `json:"executor,omitempty"`
	Versions   map[string]string `json:"versions,omitempty"`
	PlanDigest string            `json:"plan_digest,omitempty"`
	// AppMap is what the app said about itself at open (masked selectors),
	// kept as the policy saw it.
	AppMap     json.RawMessage `json:"app_map,omitempty"`
	CreatedAt  int64           `json:"created_at"` // unix ns, server clock
	FinishedAt int64           `json:"finished_at,omitempty"`
	Verdict    string          `json:"verdict,omitempty"`
	// FailureSignature is set by diffrun; empty until then.
	FailureSignature string `json:"failure_signature,omitempty"`
	// Redactions is what redaction erased in the metadata itself (labels,
	// executor, versions) at open: rule and pointer, never the value.
	Redactions []log.Redaction `json:"redactions,omitempty"`
	// ReRedacted lists the times a finished recording was redacted again
	// with a newer policy (flightrec audit scan --fix), oldest first.
	ReRedacted []ReRedaction `json:"re_redacted,omitempty"`
}

// ReRedaction is one retroactive redaction of a finished recording: when,
// the root it replaced and the one it made, and the rules that fired
// (never the values).
type ReRedaction struct {
	At      int64    `json:"at"` // unix ns
	OldRoot string   `json:"old_root"`
	NewRoot string   `json:"new_root,omitempty"` // in the audit log; the manifest cannot name its own CID
	Rules   []string `json:"rules"`
}

// SegmentRef is one log segment in a manifest.
type SegmentRef struct {
	CID      string `json:"cid"`
	Bytes    int64  `json:"bytes"`
	Records  int64  `json:"records"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// Manifest is a finished recording: its metadata, its log segments (as
// blobs, in order) and every blob its events reference. Its CID is the
// recording's root and the unit of evidence.
type Manifest struct {
	Version   int                  `json:"version"`
	Recording RecordingMeta        `json:"recording"`
	Segments  []SegmentRef         `json:"segments"`
	Events    int64                `json:"events"`
	LastSeq   uint64               `json:"last_seq"`
	Steps     int                  `json:"steps"`
	Counts    map[event.Kind]int64 `json:"counts"`
	Bytes     int64                `json:"bytes"` // segments plus distinct referenced blobs
	Blobs     []string             `json:"blobs"` // sorted, distinct
	// Redaction is the recording's redaction report (the plan digest is in
	// Recording.PlanDigest and here).
	Redaction *RedactionReport `json:"redaction,omitempty"`
	// Gaps lists the seqs a repair found lost to damage (repair.go);
	// empty for every recording sealed by finish.
	Gaps []Gap `json:"gaps,omitempty"`
}

// Gap is a run of seqs a repaired recording lost to damage. A manifest
// lists its gaps; every other seq from 1 to its last is present. Exports,
// bundles and attestations of the recording state them, and verification
// accepts a declared gap and no other.
type Gap struct {
	From uint64 `json:"from"`
	// To is the last seq lost, inclusive; 0 when the damage ran to the end
	// of the log, so how many seqs it held is not known.
	To uint64 `json:"to,omitempty"`
	// Quarantine is the file, under the recording's directory, that keeps
	// the damaged bytes; Bytes is its size.
	Quarantine string `json:"quarantine,omitempty"`
	Bytes      int64  `json:"bytes"`
	Why        string `json:"why,omitempty"`
}

// GapsCover reports whether every seq in from..to (inclusive) lies in a
// gap.
func GapsCover(gaps []Gap, from, to uint64) bool {
	for from <= to {
		moved := false
		for _, g := range gaps {
			if g.From <= from && (g.To == 0 || from <= g.To) {
				if g.To == 0 || g.To >= to {
					return true
				}
				from, moved = g.To+1, true
			}
		}
		if !moved {
			return false
		}
	}
	return true
}

// SeqsFollow reports whether seq may follow prev (0: none yet) in a
// recording with gaps: it is the next seq, or the seqs between are gaps.
func SeqsFollow(gaps []Gap, prev, seq uint64) bool {
	return seq == prev+1 || seq > prev+1 && GapsCover(gaps, prev+1, seq-1)
}

// RedactionReport is what redaction did to one recording: per rule and
// channel, how many values it erased or masked and where (event seq and
// JSON pointer). It never holds a value. It is derived from the records'
// redactions, so it is exactly as durable as the events.
type RedactionReport struct {
	Recording  string      `json:"recording"`
	PlanDigest string      `json:"plan_digest"`
	Events     int64       `json:"events"`          // events read
	Redacted   int64       `json:"redacted_events"` // events with at least one redaction
	Total      int64       `json:"total"`           // redactions in all
	Rules      []RuleCount `json:"rules"`
}

// RuleCount is one rule's redactions in one channel.
type RuleCount struct {
	Rule      string     `json:"rule"`
	Channel   string     `json:"channel"`
	Count     int64      `json:"count"`
	Locations []Location `json:"locations"`
	// Omitted counts locations left out past MaxReportLocations.
	Omitted int64 `json:"omitted_locations,omitempty"`
}

// Location is where one redaction happened.
type Location struct {
	Seq     uint64 `json:"seq"`
	Pointer string `json:"pointer"`
}

// Problem is one thing verify found wrong.
type Problem struct {
	Recording string `json:"recording,omitempty"`
	CID       string `json:"cid,omitempty"`
	What      string `json:"what"`
}

// MaxReportLocations bounds the locations listed per rule and channel.
const MaxReportLocations = 1000
