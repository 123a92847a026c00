package playback

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
)

// exportPage is how many events an export reads at a time.
const exportPage = 5000

// eachEvent calls fn with every stored event of kind k of a recording, in
// seq order, payloads resolved from the log.
func (s *Service) eachEvent(ctx context.Context, id string, k event.Kind, fn func(event.Envelope) error) error {
	q := store.EventQuery{Recording: id, Kind: k, Limit: exportPage}
	for {
		rows, evs, err := s.events(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(rows) < q.Limit {
			return nil
		}
		q.AfterSeq = rows[len(rows)-1].Seq
	}
}

// statedGaps states, in the X-Flightrec-Gaps header, the seqs a repaired
// recording lost to damage (its manifest's gaps, "102-102,180-"; an open
// end ran to the end of the log), and returns the same text ("" for a
// recording without gaps). An export of a repaired recording says what it
// lacks.
func (s *Service) statedGaps(w http.ResponseWriter, row store.RecordingRow) string {
	if row.Root == "" {
		return ""
	}
	m, err := s.st.ReadManifest(row.Root)
	if err != nil || len(m.Gaps) == 0 {
		return ""
	}
	parts := make([]string, len(m.Gaps))
	for i, g := range m.Gaps {
		parts[i] = fmt.Sprintf("%d-", g.From)
		if g.To > 0 {
			parts[i] += fmt.Sprint(g.To)
		}
	}
	v := strings.Join(parts, ",")
	w.Header().Set("X-Flightrec-Gaps", v)
	return v
}

// harPage is a HAR 1.2 page: here, one step.
type harPage struct {
	StartedDateTime string          `json:"startedDateTime"`
	ID              string          `json:"id"`
	Title           string          `json:"title"`
	PageTimings     json.RawMessage `json:"pageTimings"`
}

// handleHAR serves GET /v1/recordings/{id}/har: the recording's network
// as one HAR 1.2 document, a page per step that made requests (pageref
// step_N), entries as stored (redacted).
func (s *Service) handleHAR(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	var entries []map[string]any
	var pages []harPage
	seen := map[int]bool{}
	err := s.eachEvent(r.Context(), row.ID, event.KindHAR, func(e event.Envelope) error {
		var m map[string]any
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return fmt.Errorf("har event %d: %w", e.Seq, err)
		}
		ref := fmt.Sprintf("step_%d", e.Step)
		// The export's pages are steps; the browser page a popup's entry
		// was made by (its stored pageref) stays, as _page.
		if p, ok := m["pageref"].(string); ok && p != "" {
			m["_page"] = p
		}
		m["pageref"] = ref
		if !seen[e.Step] {
			seen[e.Step] = true
			started, _ := m["startedDateTime"].(string)
			if started == "" {
				started = time.Unix(0, e.TS).UTC().Format(time.RFC3339Nano)
			}
			pages = append(pages, harPage{StartedDateTime: started, ID: ref, Title: fmt.Sprintf("step %d", e.Step),
				PageTimings: json.RawMessage(`{"onContentLoad":-1,"onLoad":-1}`)})
		}
		entries = append(entries, m)
		return nil
	})
	if err != nil {
		s.log.Error("exporting HAR failed", "recording", row.ID, "err", err)
		s.edge.Fail(w, r, storeReadFailed("the recording's network could not be read"))
		return
	}
	if entries == nil {
		entries = []map[string]any{}
	}
	if pages == nil {
		pages = []harPage{}
	}
	log := map[string]any{
		"version": "1.2",
		"creator": map[string]any{"name": "flightrec", "version": "1", "comment": "recording " + row.ID},
		"pages":   pages,
		"entries": entries,
	}
	if engine := row.Versions["engine"]; engine != "" {
		name, version, _ := strings.Cut(engine, "/")
		log["browser"] = map[string]any{"name": name, "version": version}
	}
	if gaps := s.statedGaps(w, row); gaps != "" {
		log["comment"] = "seqs lost to damage (declared by a repair): " + gaps
	}
	doc := map[string]any{"log": log}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.har"`, row.ID))
	httpx.JSON(w, http.StatusOK, doc)
}

// handleRRWeb serves GET /v1/recordings/{id}/rrweb[?page=ID]: the DOM
// events of one page (default the first; a popup's id from its opener's
// receipt) as the array rrweb's replayer takes, unchanged in shape. Each
// page's events are a replay of their own: mixed, a popup's full snapshot
// would replace the first page's document mid-replay.
func (s *Service) handleRRWeb(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	want := r.URL.Query().Get("page")
	out := []json.RawMessage{}
	err := s.eachEvent(r.Context(), row.ID, event.KindDOM, func(e event.Envelope) error {
		var p struct {
			Page string `json:"page"`
		}
		if json.Unmarshal(e.Data, &p) == nil && p.Page == want {
			out = append(out, e.Data)
		}
		return nil
	})
	if err != nil {
		s.log.Error("exporting rrweb events failed", "recording", row.ID, "err", err)
		s.edge.Fail(w, r, storeReadFailed("the recording's DOM events could not be read"))
		return
	}
	s.statedGaps(w, row)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.rrweb.json"`, row.ID))
	httpx.JSON(w, http.StatusOK, out)
}
