package playback

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// GroupRequest is the body of POST /v1/groups.
type GroupRequest struct {
	IDs     []string `json:"ids"`
	Purpose string   `json:"purpose,omitempty"` // rerun or manual (the default)
	Seed    string   `json:"seed,omitempty"`    // the recording a rerun ran again
	Pins    []string `json:"pins,omitempty"`
	Base    string   `json:"base,omitempty"`
}

// badGroup is the refusal of a malformed group request.
func badGroup(format string, args ...any) error {
	return wire.New(http.StatusBadRequest, "BAD_GROUP",
		`send {"ids": ["REC", …], "purpose": "manual"} with 1 to 100 recordings of one project`, format, args...)
}

// handleCreateGroup serves POST /v1/groups: the members are loaded as a
// diff loads them, the verdict reached over them (against the seed's
// signature when a seed is named) and the group stored.
func (s *Service) handleCreateGroup(w http.ResponseWriter, r *http.Request) {
	var req GroupRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.edge.Fail(w, r, badGroup("the body is not a group request"))
		return
	}
	if req.Purpose == "" {
		req.Purpose = store.GroupManual
	}
	if req.Purpose != store.GroupRerun && req.Purpose != store.GroupManual {
		s.edge.Fail(w, r, badGroup("purpose must be rerun or manual"))
		return
	}
	if len(req.IDs) == 0 || len(req.IDs) > maxGroup {
		s.edge.Fail(w, r, badGroup("a group needs 1 to %d recordings, got %d", maxGroup, len(req.IDs)))
		return
	}
	g := store.Group{ID: store.NewGroupID(time.Now()), Purpose: req.Purpose, Seed: req.Seed,
		Pins: req.Pins, Base: req.Base, Created: time.Now().UTC()}
	runs := make([]*diffrun.Run, 0, len(req.IDs))
	for _, id := range req.IDs {
		if slices.Contains(g.Members, id) {
			continue
		}
		run, err := s.run(r.Context(), id)
		if err != nil {
			s.edge.Fail(w, r, err)
			return
		}
		if g.Project == "" {
			g.Project = run.Project
		} else if run.Project != g.Project {
			s.edge.Fail(w, r, badGroup("the recordings belong to more than one project"))
			return
		}
		g.Members = append(g.Members, id)
		runs = append(runs, run)
	}
	want := ""
	if req.Seed != "" {
		seed, err := s.run(r.Context(), req.Seed)
		if err != nil {
			s.edge.Fail(w, r, err)
			return
		}
		if seed.Project != g.Project {
			s.edge.Fail(w, r, badGroup("the seed belongs to another project than the recordings"))
			return
		}
		// A passing seed has no signature: the members' most common
		// failure is counted instead.
		want = diffrun.Signature(seed)
	}
	rep := diffrun.GroupAgainst(runs, want)
	g.Verdict, g.Signature, g.Reproduced, g.Of, g.Summary = rep.Verdict(), rep.Signature, rep.Reproduced, rep.Of, rep.Summary()
	for _, o := range rep.Odd {
		g.Odd = append(g.Odd, store.GroupOdd{ID: o.ID, Signature: o.Signature})
	}
	if err := s.st.PutGroup(g); err != nil {
		s.log.Error("storing a group failed", "group", g.ID, "err", err)
		s.edge.Fail(w, r, wire.New(http.StatusInternalServerError, "STORE_WRITE_FAILED", "try again; see the server log", "the group could not be stored"))
		return
	}
	w.Header().Set("Location", wire.Path(wire.RouteGroup, g.ID))
	httpx.JSON(w, http.StatusCreated, g)
}

// handleGroup serves GET /v1/groups/{id}.
func (s *Service) handleGroup(w http.ResponseWriter, r *http.Request) {
	g, err := s.st.Group(chi.URLParam(r, "id"))
	if errors.Is(err, store.ErrNotFound) {
		s.edge.Fail(w, r, wire.GroupNotFound())
		return
	}
	if err != nil {
		s.log.Error("reading a group failed", "err", err)
		s.edge.Fail(w, r, storeReadFailed("the group could not be read"))
		return
	}
	httpx.JSON(w, http.StatusOK, g)
}

// GroupProject is the project of group id, for access control.
func (s *Service) GroupProject(id string) (string, bool) {
	g, err := s.st.Group(id)
	return g.Project, err == nil
}

// RecordingProject is the project of recording id, for access control:
// read from its meta.json, so a recording not yet indexed has one too.
func (s *Service) RecordingProject(_ context.Context, id string) (string, bool) {
	m, err := s.st.Meta(id)
	return m.Project, err == nil
}
