package playback

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// Snapshot pages. A snapshot event keeps its text whole up to the event
// limit (a page of 50,000 controls makes megabytes); a reader, a model
// above all, takes it in pages of a bounded size, each with the handle of
// the next.
const (
	DefaultSnapshotPage = 256 << 10 // the size the recorder once cut snapshots at
	MaxSnapshotPage     = 1 << 20
)

// SnapshotPage answers GET /v1/recordings/{id}/snapshots/{seq}: one page
// of a snapshot event's text, from the byte offset the cursor names, cut
// at a line end (or, for a longer line, a rune boundary). Truncated says
// more follows; Next is the cursor of the rest ("" on the last page).
// StoredTruncated says the recorder cut the text to fit the event limit.
type SnapshotPage struct {
	Recording       string `json:"recording"`
	Seq             uint64 `json:"seq"`
	Step            int    `json:"step"`
	View            string `json:"view"`
	When            string `json:"when,omitempty"`
	Origin          string `json:"origin,omitempty"`
	Page            string `json:"page,omitempty"`
	Nonce           string `json:"nonce,omitempty"`
	Offset          int    `json:"offset"`
	TotalBytes      int    `json:"total_bytes"`
	Text            string `json:"text"`
	Truncated       bool   `json:"truncated"`
	Next            string `json:"next_cursor,omitempty"`
	StoredTruncated bool   `json:"stored_truncated,omitempty"`
}

func (s *Service) handleSnapshotPage(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	seq, err := strconv.ParseUint(chi.URLParam(r, "seq"), 10, 64)
	if err != nil || seq == 0 {
		s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_PARAMETER", "take the seq of a snapshot event from …/events?kind=snapshot",
			"seq is not a number ≥ 1"))
		return
	}
	limit, err := intParam(r.URL.Query().Get("limit"), DefaultSnapshotPage, 1<<10, MaxSnapshotPage)
	if err != nil {
		s.edge.Fail(w, r, badParam("limit", "a byte count from 1024 to 1048576"))
		return
	}
	offset := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(c, "o"))
		if err != nil || !strings.HasPrefix(c, "o") || n < 0 {
			s.edge.Fail(w, r, badParam("cursor", "the next_cursor of the page before"))
			return
		}
		offset = n
	}
	_, evs, err := s.events(r.Context(), store.EventQuery{Recording: row.ID, Kind: event.KindSnapshot, AfterSeq: seq - 1, Limit: 1})
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	if len(evs) == 0 || evs[0].Seq != seq {
		s.edge.Fail(w, r, wire.New(http.StatusNotFound, "SNAPSHOT_NOT_FOUND", "list the recording's snapshots with …/events?kind=snapshot",
			"event %d of recording %s is not a snapshot", seq, row.ID))
		return
	}
	var snap event.Snapshot
	if err := json.Unmarshal(evs[0].Data, &snap); err != nil {
		s.edge.Fail(w, r, storeReadFailed("the snapshot event could not be read"))
		return
	}
	if offset > len(snap.Text) || (offset < len(snap.Text) && !utf8.RuneStart(snap.Text[offset])) {
		s.edge.Fail(w, r, badParam("cursor", "the next_cursor of the page before"))
		return
	}
	text, next := pageOf(snap.Text, offset, limit)
	out := SnapshotPage{Recording: row.ID, Seq: seq, Step: evs[0].Step, View: snap.View, When: snap.When, Origin: snap.Origin,
		Page: snap.Page, Nonce: snap.Nonce, Offset: offset, TotalBytes: len(snap.Text), Text: text, Truncated: next >= 0,
		StoredTruncated: snap.Truncated}
	if next >= 0 {
		out.Next = "o" + strconv.Itoa(next)
	}
	httpx.JSON(w, http.StatusOK, out)
}

// pageOf is at most limit bytes of text from offset, ending after a line
// where one ends in the page (else at a rune boundary), and the offset of
// the rest (-1 when none is left).
func pageOf(text string, offset, limit int) (string, int) {
	rest := text[offset:]
	if len(rest) <= limit {
		return rest, -1
	}
	cut := strings.LastIndexByte(rest[:limit], '\n') + 1
	if cut == 0 {
		cut = limit
		for cut > 0 && !utf8.RuneStart(rest[cut]) {
			cut--
		}
	}
	return rest[:cut], offset + cut
}
