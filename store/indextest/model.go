package indextest

import (
	"cmp"
	"slices"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// The reference model: what an index must answer, computed directly from
// the rows a test sent, with no storage involved. Each function states one
// clause of the store.Index contract.

// Page sizes of the contract.
const (
	recordingsDefault, recordingsMax = 100, 1000
	eventsDefault, eventsMax         = 1000, 10000
	searchDefault                    = 100
)

func limitOf(n, def, max int) int {
	switch {
	case n <= 0:
		return def
	case n > max:
		return max
	}
	return n
}

// indexed returns what an index holds after the batches: one row per seq
// (a replay carries the same row again), ascending.
func indexed(batches ...[]store.EventRow) []store.EventRow {
	seen := map[uint64]bool{}
	var out []store.EventRow
	for _, b := range batches {
		for _, r := range b {
			if !seen[r.Seq] {
				seen[r.Seq] = true
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b store.EventRow) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// counters are a recording's event counters as RecordingRow reports them.
type counters struct {
	Events, Bytes   int64
	Steps           int
	FirstTS, LastTS int64
}

func wantCounters(rows []store.EventRow) counters {
	var c counters
	steps := map[int]bool{}
	for i, r := range rows {
		c.Events++
		c.Bytes += r.Size
		steps[r.Step] = true
		if i == 0 || r.TS < c.FirstTS {
			c.FirstTS = r.TS
		}
		if i == 0 || r.TS > c.LastTS {
			c.LastTS = r.TS
		}
	}
	c.Steps = len(steps)
	return c
}

func countersOf(r store.RecordingRow) counters {
	return counters{r.Events, r.Bytes, r.Steps, r.FirstTS, r.LastTS}
}

// wantTimeline is one entry per step, in step order: time range, counts,
// seq range, and the summary of the step's receipt with the highest seq.
func wantTimeline(rows []store.EventRow) []store.StepRow {
	byStep := map[int]*store.StepRow{}
	receiptSeq := map[int]uint64{}
	for _, r := range rows {
		s := byStep[r.Step]
		if s == nil {
			s = &store.StepRow{Step: r.Step, StartTS: r.TS, EndTS: r.TS,
				FirstSeq: r.Seq, LastSeq: r.Seq, Counts: map[event.Kind]int64{}}
			byStep[r.Step] = s
		}
		s.StartTS, s.EndTS = min(s.StartTS, r.TS), max(s.EndTS, r.TS)
		s.FirstSeq, s.LastSeq = min(s.FirstSeq, r.Seq), max(s.LastSeq, r.Seq)
		s.Events++
		s.Counts[r.Kind]++
		if r.Kind == event.KindReceipt && r.Seq > receiptSeq[r.Step] {
			receiptSeq[r.Step] = r.Seq
			s.Action, s.Target, s.Outcome, s.ErrorCode = r.Action, r.Text, r.Outcome, r.ErrorCode
		}
	}
	out := make([]store.StepRow, 0, len(byStep))
	for _, s := range byStep {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b store.StepRow) int { return cmp.Compare(a.Step, b.Step) })
	return out
}

// wantEvents filters one recording's indexed rows as EventQuery says.
func wantEvents(rows []store.EventRow, q store.EventQuery) []store.EventRow {
	out := []store.EventRow{}
	for _, r := range rows {
		if r.Recording != q.Recording ||
			(q.Kind != "" && r.Kind != q.Kind) ||
			(q.Step != nil && r.Step != *q.Step) ||
			r.Seq <= q.AfterSeq {
			continue
		}
		out = append(out, r)
	}
	return head(out, limitOf(q.Limit, eventsDefault, eventsMax))
}

// wantSearch filters rows (of any recordings, described by recs) as
// SearchQuery says, ordered by recording id and seq. Text folds case,
// ErrorCode is an exact match, URL a substring as given (the suite's URLs
// are lower case, so a backend that folds case there too agrees).
func wantSearch(recs []store.RecordingRow, rows []store.EventRow, q store.SearchQuery) []store.EventRow {
	meta := map[string]store.RecordingRow{}
	for _, r := range recs {
		meta[r.ID] = r
	}
	has := func(s, sub string) bool { return strings.Contains(strings.ToLower(s), strings.ToLower(sub)) }
	out := []store.EventRow{}
	for _, r := range rows {
		m := meta[r.Recording]
		switch {
		case q.Recordings != nil && !slices.Contains(q.Recordings, r.Recording),
			q.Project != "" && m.Project != q.Project,
			q.URL != "" && !strings.Contains(r.URL, q.URL),
			q.Status != 0 && r.Status != q.Status,
			q.ErrorCode != "" && r.ErrorCode != q.ErrorCode,
			q.Text != "" && !(has(r.URL, q.Text) || has(r.Text, q.Text) ||
				has(r.ErrorCode, q.Text) || !q.EventsOnly && has(m.FailureSignature, q.Text)):
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b store.EventRow) int {
		return cmp.Or(cmp.Compare(a.Recording, b.Recording), cmp.Compare(a.Seq, b.Seq))
	})
	n := q.Limit
	if n <= 0 {
		n = searchDefault
	}
	return head(out, n)
}

// wantHasBlob: an indexed event of the recording carries the blob. No
// event carries the empty CID, though most carry no blob.
func wantHasBlob(rows []store.EventRow, rec, cid string) bool {
	if cid == "" {
		return false
	}
	for _, r := range rows {
		if r.Recording == rec && r.CID == cid {
			return true
		}
	}
	return false
}

// wantRecordings filters recs as RecordingFilter says (without paging),
// newest first, ties by id descending.
func wantRecordings(recs []store.RecordingRow, f store.RecordingFilter) []store.RecordingRow {
	out := []store.RecordingRow{}
	for _, r := range recs {
		switch {
		case f.Project != "" && r.Project != f.Project,
			f.Flow != "" && r.Flow != f.Flow,
			f.Verdict != "" && r.Verdict != f.Verdict,
			f.State != "" && r.State != f.State,
			f.Signature != "" && !strings.Contains(strings.ToLower(r.FailureSignature), strings.ToLower(f.Signature)),
			f.Since != 0 && r.CreatedAt < f.Since,
			f.Until != 0 && r.CreatedAt >= f.Until:
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b store.RecordingRow) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	return out
}

func head[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}
