package retention

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// Routes mounts retention's API:
//
//	GET    /v1/recordings/{id}/retention     class, expiry, pins (read)
//	POST   /v1/recordings/{id}/pins          {"reason", "ref", "until"} → 201 the pin (pin)
//	DELETE /v1/recordings/{id}/pins/{pin}    remove a pin (pin)
//	POST   /v1/retention/sweep               ?dry_run=true&now=RFC3339 → the report (admin)
//
// Error replies go through edge.
func (s *Sweeper) Routes(r chi.Router, edge *httpx.Edge) {
	h := routes{s, edge}
	r.Get(wire.RouteRetention, h.handleStatus)
	r.Post(wire.RoutePins, h.handlePin)
	r.Delete(wire.RoutePin, h.handleUnpin)
	r.Post(wire.RouteSweep, h.handleSweep)
}

// routes are the Sweeper's handlers and the edge that answers their errors.
type routes struct {
	*Sweeper
	edge *httpx.Edge
}

// row is a recording's index row, or its stored metadata when the index
// does not have it yet.
func (s *Sweeper) row(r *http.Request, id string) (store.RecordingRow, error) {
	if !store.ValidRecordingID(id) {
		return store.RecordingRow{}, wire.RecordingNotFound(r.Method == http.MethodGet)
	}
	row, err := s.Index.Recording(r.Context(), id)
	if err == nil {
		return row, nil
	}
	meta, merr := s.Store.Meta(id)
	if merr != nil {
		return row, wire.RecordingNotFound(r.Method == http.MethodGet)
	}
	return store.RecordingRow{RecordingMeta: meta, State: store.StateOpen}, nil
}

func (s routes) handleStatus(w http.ResponseWriter, r *http.Request) {
	row, err := s.row(r, chi.URLParam(r, "id"))
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	httpx.JSON(w, http.StatusOK, s.Status(r.Context(), row, s.now()))
}

func (s routes) handlePin(w http.ResponseWriter, r *http.Request) {
	row, err := s.row(r, chi.URLParam(r, "id"))
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	var req struct {
		Reason string `json:"reason"`
		Ref    string `json:"ref"`
		Until  string `json:"until"` // RFC 3339
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST",
			`send {"reason": "evidence", "ref": "acme/storefront#4711", "until": "2027-01-01T00:00:00Z"}`, "the body is not a pin"))
		return
	}
	var until int64
	if req.Until != "" {
		t, err := time.Parse(time.RFC3339, req.Until)
		if err != nil {
			s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST", "send until as RFC 3339", "until is not a time"))
			return
		}
		until = t.UnixNano()
	}
	pin, err := s.Pins.Add(row.ID, req.Reason, req.Ref, until)
	if errors.Is(err, ErrBadPin) {
		s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_PIN", "reason is evidence or legal_hold; until, when given, is in the future", "%v", err))
		return
	}
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	s.audit(audit.Entry{Kind: "pin", Recording: row.ID, Project: row.Project, Why: pin.Reason,
		Details: map[string]any{"pin": pin.ID, "ref": pin.Ref, "until": pin.Until}})
	httpx.JSON(w, http.StatusCreated, pin)
}

func (s routes) handleUnpin(w http.ResponseWriter, r *http.Request) {
	row, err := s.row(r, chi.URLParam(r, "id"))
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	pin, err := s.Pins.Remove(row.ID, chi.URLParam(r, "pin"))
	if errors.Is(err, ErrNoSuchPin) {
		s.edge.Fail(w, r, wire.New(http.StatusNotFound, "PIN_NOT_FOUND", "list pins with GET /v1/recordings/{id}/retention", "no such pin"))
		return
	}
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	s.audit(audit.Entry{Kind: "unpin", Recording: row.ID, Project: row.Project, Why: pin.Reason,
		Details: map[string]any{"pin": pin.ID, "ref": pin.Ref}})
	httpx.JSON(w, http.StatusOK, pin)
}

func (s routes) handleSweep(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dry := q.Get("dry_run") == "true" || q.Get("dry_run") == "1"
	var (
		rep Report
		err error
	)
	if at := q.Get("now"); at != "" {
		if !dry {
			s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_PARAMETER", "add dry_run=true", "now is only for a dry run"))
			return
		}
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_PARAMETER", "send now as RFC 3339", "now is not a time"))
			return
		}
		rep, err = s.DryRunAt(r.Context(), t)
	} else {
		rep, err = s.Sweep(r.Context(), dry, s.LogProgress())
	}
	if err != nil {
		s.edge.Fail(w, r, wire.New(http.StatusInternalServerError, "SWEEP_FAILED", "see the server log; run flightrec verify", "%v", err))
		return
	}
	httpx.JSON(w, http.StatusOK, rep)
}
