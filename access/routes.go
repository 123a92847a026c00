package access

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/wire"
)

// Routes mounts token management (admin scope, by the access policy):
//
//	GET    /v1/tokens        every grant, without secrets or hashes
//	POST   /v1/tokens        {"project", "scopes", "ttl", "note"} → 201 {"token", "grant"}; the token is shown once
//	DELETE /v1/tokens/{id}   revoke
//
// Error replies go through edge.
func Routes(r chi.Router, t *Tokens, edge *httpx.Edge) {
	r.Get(wire.RouteTokens, func(w http.ResponseWriter, _ *http.Request) {
		list := t.List()
		for i := range list {
			list[i].Hash = ""
		}
		httpx.JSON(w, http.StatusOK, map[string]any{"tokens": list})
	})
	r.Post(wire.RouteTokens, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Project string   `json:"project"`
			Scopes  []string `json:"scopes"`
			TTL     string   `json:"ttl"`
			Note    string   `json:"note"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST",
				`send {"project": "P", "scopes": ["read"], "ttl": "720h"}`, "the body is not a token request"))
			return
		}
		var ttl time.Duration
		if req.TTL != "" {
			d, err := time.ParseDuration(req.TTL)
			if err != nil || d <= 0 {
				edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST", `send ttl as a Go duration, e.g. "720h"`, "ttl is not a positive duration"))
				return
			}
			ttl = d
		}
		tok, g, err := t.Create(req.Project, req.Scopes, ttl, req.Note)
		if err != nil && !errors.Is(err, ErrBadRequest) {
			edge.Fail(w, r, err)
			return
		}
		if err != nil {
			edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST", "name a project (or *) and scopes of ingest, read, pin, admin, share, comment", "%v", err))
			return
		}
		g.Hash = ""
		httpx.JSON(w, http.StatusCreated, map[string]any{"token": tok, "grant": g})
	})
	r.Delete(wire.RouteToken, func(w http.ResponseWriter, r *http.Request) {
		g, err := t.Revoke(chi.URLParam(r, "id"))
		if err != nil {
			if errors.Is(err, ErrNoGrant) {
				edge.Fail(w, r, wire.New(http.StatusNotFound, "TOKEN_NOT_FOUND", "list tokens with GET /v1/tokens", "no such token"))
				return
			}
			edge.Fail(w, r, err)
			return
		}
		g.Hash = ""
		httpx.JSON(w, http.StatusOK, g)
	})
}
