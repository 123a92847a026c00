package app

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// RepairReply answers POST /v1/recordings/{id}/repair.
type RepairReply struct {
	Recording string      `json:"recording"`
	Root      string      `json:"root"`
	Gaps      []store.Gap `json:"gaps"`
}

// handleRepair serves POST /v1/recordings/{id}/repair (admin): what
// `flightrec repair ID` does, on a running server (store.Repair: the
// damaged bytes quarantined, the recording sealed with the lost seqs as
// gaps), then the recording is indexed anew, since the locators after a
// damaged region moved, and appends get RECORDING_FINISHED from then on.
func (a *App) handleRepair(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, err := a.Store.Meta(id); errors.Is(err, store.ErrNotFound) {
		a.edge.Fail(w, r, wire.RecordingNotFound(false))
		return
	}
	if _, damaged := a.Ingest.DamageOf(id); !damaged {
		a.edge.Fail(w, r, wire.New(http.StatusConflict, "RECORDING_NOT_DAMAGED",
			"nothing to repair; flightrec verify --data DIR lists what is damaged", "recording %s is not damaged", id))
		return
	}
	root, gaps, err := a.Store.Repair(id)
	if err != nil {
		a.log.Error("repair failed", "recording", id, "err", err)
		a.edge.Fail(w, r, wire.New(http.StatusInternalServerError, "REPAIR_FAILED",
			"see the server log; flightrec verify --data DIR lists what is damaged", "recording %s could not be repaired", id))
		return
	}
	m, err := a.Store.ReadManifest(root)
	if err != nil {
		a.log.Error("reading a repaired recording's manifest failed", "recording", id, "err", err)
		a.edge.Fail(w, r, wire.New(http.StatusInternalServerError, "REPAIR_FAILED",
			"run flightrec verify --data DIR", "recording %s was sealed but its manifest cannot be read", id))
		return
	}
	a.log.Warn("recording repaired: sealed with its lost seqs as gaps", "recording", id, "root", root, "gaps", len(gaps))
	a.Ingest.Repaired(id, root, m.Recording.Verdict)
	a.Playback.Forget(id)
	// Let the projector finish what it was doing, then index the recording
	// from nothing.
	_ = a.Proj.Flush(r.Context())
	a.Proj.Forget(id)
	if err := a.Index.DeleteRecording(r.Context(), id); err != nil {
		a.log.Error("dropping a repaired recording's index rows failed; run flightrec reindex", "recording", id, "err", err)
	}
	a.Proj.Put(store.RecordingRow{RecordingMeta: m.Recording, State: store.StateFinished, Root: root})
	a.Proj.Notify(id, m.LastSeq)
	// Reply once the index holds the repaired recording, so a read that
	// follows the reply (its retention, its events) sees it sealed.
	if err := a.Proj.Flush(r.Context()); err != nil {
		a.log.Warn("indexing a repaired recording is still under way", "recording", id, "err", err)
	}
	httpx.JSON(w, http.StatusOK, RepairReply{Recording: id, Root: root, Gaps: gaps})
}
