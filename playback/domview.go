package playback

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/playback/dom"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// domCacheBytes bounds the DOM checkpoint sets kept in memory, across
// recordings (the 60,000-event benchmark recording's set is ~7 MB).
const domCacheBytes = 128 << 20

// handleDOM serves GET /v1/recordings/{id}/steps/{n}/dom?at=before|after:
// the page as it stood before step n's first DOM event or after its last,
// materialized from the rrweb events (playback/dom) and rendered inert —
// no script, no handler, no external fetch — under a CSP without any
// script source, for a sandboxed iframe. The recording's checkpoint set
// is built once (cached, extended as an open recording grows), so any
// step renders in bounded time however long the recording is; a finished
// recording's set is kept in the store too (domkeep.go), so a restart
// does not build it again.
func (s *Service) handleDOM(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	n, err := stepParam(r)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	at := r.URL.Query().Get("at")
	switch at {
	case "":
		at = "after"
	case "before", "after":
	default:
		s.edge.Fail(w, r, badParam("at", "before or after"))
		return
	}
	// A step is in the timeline when an event of it is indexed: one
	// indexed row says so, where reading the timeline costs as much as
	// the recording has steps, on every view.
	has, err := s.idx.Events(r.Context(), store.EventQuery{Recording: row.ID, Step: &n, Limit: 1})
	if err != nil {
		s.edge.Fail(w, r, indexError(err))
		return
	}
	if len(has) == 0 {
		s.edge.Fail(w, r, wire.New(http.StatusNotFound, "STEP_NOT_FOUND", "list steps with GET …/steps",
			"the recording has no step %d (yet)", n))
		return
	}
	upTo := row.IndexedTo
	keep := s.domKeep(row)
	if prev, ok := s.domRoots.Swap(row.ID, row.Root); ok && prev != "" && prev != row.Root {
		s.dom.Remove(row.ID)
	}
	view := func() (*dom.Doc, error) {
		cp, err := s.dom.GetKept(row.ID, upTo, s.fillDOM(r.Context(), row.ID, upTo), keep)
		if err != nil {
			return nil, errFill{err}
		}
		if at == "before" {
			return cp.BeforeStep(n)
		}
		return cp.AfterStep(n)
	}
	doc, err := view()
	if errors.Is(err, dom.ErrStored) {
		// A kept set found damaged (or its blob gone) is never trusted:
		// it is dropped and built again from the recording, and the
		// rebuilt one replaces it in the store.
		s.log.Warn("the kept DOM checkpoint set is damaged; rebuilding it", "recording", row.ID, "err", err)
		s.dropDOMSet(row.ID)
		if keep != nil {
			keep = &dom.Keep{Save: keep.Save}
		}
		doc, err = view()
	}
	var fe errFill
	if errors.As(err, &fe) {
		var ae *wire.Error
		if errors.As(err, &ae) {
			s.edge.Fail(w, r, err)
			return
		}
		s.log.Error("materializing the DOM failed", "recording", row.ID, "err", err)
		s.edge.Fail(w, r, storeReadFailed("the recording's DOM events could not be read"))
		return
	}
	if err != nil {
		s.log.Error("materializing the DOM failed", "recording", row.ID, "step", n, "err", err)
		s.edge.Fail(w, r, storeReadFailed("the recording's DOM could not be materialized"))
		return
	}
	if doc.Nodes() == 0 {
		s.edge.Fail(w, r, wire.New(http.StatusNotFound, "NO_DOM", "ask for a later step, or see the frames: GET …/events?kind=frame",
			"no DOM was recorded %s step %d", at, n))
		return
	}
	dom.SetHeaders(w.Header())
	w.Header().Set("Cache-Control", "private")
	if row.State == store.StateFinished {
		// The same state of a finished recording renders the same bytes.
		w.Header().Set("ETag", fmt.Sprintf(`"%s.%d"`, row.Root, doc.Seq()))
		if r.Header.Get("If-None-Match") == w.Header().Get("ETag") {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if err := doc.RenderInert(w); err != nil {
		s.log.Error("rendering the DOM failed", "recording", row.ID, "step", n, "err", err)
	}
}

// errFill marks an error building or extending a checkpoint set (reading
// the recording), as against one materializing a state from it.
type errFill struct{ error }

func (e errFill) Unwrap() error { return e.error }

// fillDOM adds recording id's DOM events after from, through upTo (the
// index's cursor when the request began: events indexed since are left
// for the next fill, which starts from upTo), to a checkpoint set.
func (s *Service) fillDOM(ctx context.Context, id string, upTo uint64) dom.Fill {
	return func(cp *dom.Checkpoints, from uint64) (uint64, error) {
		q := store.EventQuery{Recording: id, Kind: event.KindDOM, AfterSeq: from, Limit: exportPage}
		for {
			rows, evs, err := s.events(ctx, q)
			if err != nil {
				return q.AfterSeq, err
			}
			for _, e := range evs {
				if e.Seq > upTo {
					return upTo, nil
				}
				err := cp.Add(dom.Event{Seq: e.Seq, Step: e.Step, Data: e.Data})
				if errors.Is(err, dom.ErrMalformed) {
					// One bad event does not hide the page: it is
					// counted by the set and skipped.
					s.log.Warn("skipping a malformed rrweb event", "recording", id, "seq", e.Seq, "err", err)
					continue
				}
				if err != nil {
					return e.Seq - 1, err
				}
			}
			if len(rows) < q.Limit {
				return upTo, nil
			}
			q.AfterSeq = rows[len(rows)-1].Seq
		}
	}
}
