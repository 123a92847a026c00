package playback

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// A search query is words and field terms:
//
//	status:500   the response status (a query of one 3-digit word 100-599 means the same)
//	code:APP_ERROR  a receipt's error code, exactly
//	url:/api/checkout  a substring of a request URL
//	kind:console  only events of that kind
//	anything else  a case-insensitive substring of a URL, an event's text
//	               (console message, receipt target), an error code, or
//	               the recording's failure signature
//
// Every term must hold (AND). Words are joined with single spaces into one
// phrase, so "cannot read" finds that phrase.
type searchTerms struct {
	q    store.SearchQuery
	kind event.Kind
}

// maxQuery bounds q: a search term longer than any URL the index keeps is
// a mistake, and the phrase is echoed in no log.
const maxQuery = 1024

func parseSearch(q string) (searchTerms, error) {
	var t searchTerms
	if strings.TrimSpace(q) == "" {
		return t, badParam("q", "a non-empty search (words, status:500, code:APP_ERROR, url:/path, kind:console)")
	}
	if len(q) > maxQuery {
		return t, badParam("q", "at most 1024 bytes")
	}
	var words []string
	for _, w := range strings.Fields(q) {
		key, val, ok := strings.Cut(w, ":")
		switch {
		case ok && key == "status":
			n, err := strconv.Atoi(val)
			if err != nil || n < 100 || n > 599 {
				return t, badParam("q", "status:N with N an HTTP status 100-599")
			}
			t.q.Status = n
		case ok && key == "code":
			if val == "" {
				return t, badParam("q", "code:CODE with a receipt error code such as APP_ERROR")
			}
			t.q.ErrorCode = val
		case ok && key == "url":
			if val == "" {
				return t, badParam("q", "url:TEXT with part of a URL")
			}
			t.q.URL = val
		case ok && key == "kind":
			if !event.Kind(val).Valid() {
				return t, badParam("q", "kind:K with K one of "+strings.Join(kindNames, ", "))
			}
			t.kind = event.Kind(val)
		default:
			words = append(words, w)
		}
	}
	// A query that is one three-digit word 100-599 is a status; among
	// other words it is part of the phrase ("POST /api/checkout 500
	// GIFT_CARD_STATE", a failure signature).
	if len(words) == 1 && t.q.Status == 0 {
		if n, err := strconv.Atoi(words[0]); err == nil && len(words[0]) == 3 && n >= 100 && n <= 599 {
			t.q.Status, words = n, nil
		}
	}
	t.q.Text = strings.Join(words, " ")
	return t, nil
}

// handleSearch serves GET /v1/search?q=&project=&limit=: events across
// the recordings the caller may read. The access guard pins ?project= to a
// project token's own project, so the index never returns another
// project's rows.
func (s *Service) handleSearch(w http.ResponseWriter, r *http.Request) {
	terms, limit, err := searchParams(r)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	terms.q.Project = r.URL.Query().Get("project")
	s.search(w, r, terms, limit, nil)
}

// handleRecordingSearch serves GET /v1/recordings/{id}/search?q=: the
// matching events of one recording, and their steps.
func (s *Service) handleRecordingSearch(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	terms, limit, err := searchParams(r)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	terms.q.Recordings = []string{row.ID}
	s.search(w, r, terms, limit, &row)
}

func searchParams(r *http.Request) (searchTerms, int, error) {
	q := r.URL.Query()
	terms, err := parseSearch(q.Get("q"))
	if err != nil {
		return terms, 0, err
	}
	limit, err := intParam(q.Get("limit"), store.DefaultSearchPage, 1, store.MaxSearchPage)
	if err != nil {
		return terms, 0, badParam("limit", "an integer 1-1000")
	}
	return terms, limit, nil
}

// search answers both search routes. A query that is only a phrase finds
// recordings whose failure signature holds it (one hit each, first) and,
// separately, events whose own fields do: asked together, one matching
// signature would fill the page with every event of its recording. With
// field terms the phrase narrows them, and a recording's signature counts
// as any of its events' fields (one hit per recording again). rec is the
// recording of a one-recording search.
func (s *Service) search(w http.ResponseWriter, r *http.Request, t searchTerms, limit int, rec *store.RecordingRow) {
	res := wire.SearchResult{Query: r.URL.Query().Get("q"), Hits: []wire.SearchHit{}}
	signatureHit := map[string]bool{}
	phraseOnly := t.q.Text != "" && t.q.Status == 0 && t.q.ErrorCode == "" && t.q.URL == "" && t.kind == ""
	if phraseOnly {
		var recs []store.RecordingRow
		if rec != nil {
			if strings.Contains(strings.ToLower(rec.FailureSignature), strings.ToLower(t.q.Text)) {
				recs = []store.RecordingRow{*rec}
			}
		} else {
			var err error
			recs, err = s.idx.Recordings(r.Context(), store.RecordingFilter{Project: t.q.Project, Signature: t.q.Text, Limit: limit})
			if err != nil {
				s.edge.Fail(w, r, indexError(err))
				return
			}
		}
		for _, m := range recs {
			signatureHit[m.ID] = true
			res.Hits = append(res.Hits, wire.SearchHit{Recording: m.ID, Field: "failure_signature",
				Summary: event.Summary{Text: m.FailureSignature}})
		}
		t.q.EventsOnly = true
	}
	// The index has no kind filter for search; ask for more and filter
	// here, so kind:K still fills a page in the common case.
	t.q.Limit = limit
	if t.kind != "" {
		t.q.Limit = store.MaxSearchPage
	}
	rows, err := s.idx.Search(r.Context(), t.q)
	if err != nil {
		s.edge.Fail(w, r, indexError(err))
		return
	}
	steps := map[int]bool{}
	for _, row := range rows {
		if t.kind != "" && row.Kind != t.kind {
			continue
		}
		field := matchedField(t.q.Text, row)
		if t.q.Text != "" && field == "" {
			// The row matched through its recording's failure
			// signature only: one hit for the recording, not one per
			// event.
			if !signatureHit[row.Recording] {
				signatureHit[row.Recording] = true
				res.Hits = append(res.Hits, wire.SearchHit{Recording: row.Recording, Field: "failure_signature"})
			}
			continue
		}
		if len(res.Hits) >= limit {
			res.Truncated = true
			break
		}
		res.Hits = append(res.Hits, wire.SearchHit{Recording: row.Recording, Seq: row.Seq, Step: row.Step, TS: row.TS,
			Kind: row.Kind, Field: field, Summary: row.Summary})
		steps[row.Step] = true
	}
	if len(rows) == t.q.Limit {
		res.Truncated = true
	}
	if rec != nil {
		res.Steps = make([]int, 0, len(steps))
		for n := range steps {
			res.Steps = append(res.Steps, n)
		}
		sort.Ints(res.Steps)
	}
	httpx.JSON(w, http.StatusOK, res)
}

// matchedField names the first of an event's own fields the phrase is a
// case-insensitive substring of, as the index matched it.
func matchedField(phrase string, row store.EventRow) string {
	if phrase == "" {
		return ""
	}
	p := strings.ToLower(phrase)
	switch {
	case strings.Contains(strings.ToLower(row.URL), p):
		return "url"
	case strings.Contains(strings.ToLower(row.Text), p):
		return "text"
	case strings.Contains(strings.ToLower(row.ErrorCode), p):
		return "error_code"
	}
	return ""
}

// handleAt serves GET /v1/recordings/{id}/at?t=<unix ns | RFC 3339>.
// The step containing t is the one whose [start, end] holds it; between
// two steps it is the one that started last before t.
func (s *Service) handleAt(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	raw := r.URL.Query().Get("t")
	t, err := timeParam(raw)
	if err != nil || raw == "" {
		s.edge.Fail(w, r, badParam("t", "an instant: unix nanoseconds or RFC 3339"))
		return
	}
	steps, err := s.idx.Timeline(r.Context(), row.ID)
	if err != nil {
		s.edge.Fail(w, r, indexError(err))
		return
	}
	if len(steps) == 0 || t < steps[0].StartTS || t > steps[len(steps)-1].EndTS {
		e := wire.New(http.StatusNotFound, "OUT_OF_RANGE", "ask for an instant between first_ts and last_ts of GET /v1/recordings/{id}",
			"the recording has no event at that instant")
		if len(steps) > 0 {
			e = e.With("first_ts", steps[0].StartTS).With("last_ts", steps[len(steps)-1].EndTS)
		}
		s.edge.Fail(w, r, e)
		return
	}
	i := sort.Search(len(steps), func(i int) bool { return steps[i].StartTS > t }) - 1
	// Timeline rows are ordered by step number; a step may start before
	// its predecessor ends (events land late), so prefer one that holds t.
	for j := range steps {
		if steps[j].StartTS <= t && t <= steps[j].EndTS && (i < 0 || steps[i].EndTS < t) {
			i = j
			break
		}
	}
	if i < 0 {
		i = 0
	}
	res := wire.AtResult{Recording: row.ID, T: t, OffsetNS: t - steps[0].StartTS, Step: steps[i]}
	frame, err := s.frameAt(r, row.ID, steps, i, t)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	res.Frame = frame
	httpx.JSON(w, http.StatusOK, res)
}

// frameAt finds the newest frame at or before t, looking in step i and
// then in the steps before it.
func (s *Service) frameAt(r *http.Request, id string, steps []store.StepRow, i int, t int64) (*wire.AtFrame, error) {
	for ; i >= 0; i-- {
		if steps[i].Counts[event.KindFrame] == 0 {
			continue
		}
		n := steps[i].Step
		q := store.EventQuery{Recording: id, Kind: event.KindFrame, Step: &n, Limit: store.MaxEventsPage}
		var best *store.EventRow
		for {
			rows, err := s.idx.Events(r.Context(), q)
			if err != nil {
				return nil, indexError(err)
			}
			for k := range rows {
				// A frame without a blob is one redaction dropped.
				if rows[k].CID != "" && rows[k].TS <= t && (best == nil || rows[k].TS >= best.TS) {
					best = &rows[k]
				}
			}
			if len(rows) < q.Limit {
				break
			}
			q.AfterSeq = rows[len(rows)-1].Seq
		}
		if best != nil {
			return &wire.AtFrame{Seq: best.Seq, Step: best.Step, TS: best.TS, CID: best.CID,
				URL: wire.Path(wire.RouteRecordingBlob, id, best.CID)}, nil
		}
	}
	return nil, nil
}
