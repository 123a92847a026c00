package access

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// ShareRoutes mounts share links and the viewer audit (scopes by the
// access policy):
//
//	POST   /v1/recordings/{id}/shares        {"expires_in": "7d", "what": "player"} → 201 {"share", "url"}; the url is shown once (share)
//	GET    /v1/recordings/{id}/shares        the recording's links, without secrets (share)
//	DELETE /v1/recordings/{id}/shares/{sid}  revoke (share)
//	GET    /v1/recordings/{id}/views         the viewer audit (admin)
//	GET    /s/{secret}                       a video or evidence link: the video or the card; a player link: the player
//
// publicURL is the base of the links made ("" takes the request's host).
// top is the whole server: a /s/ link is answered by the route it opens,
// through the guard, with the link as its credential.
func ShareRoutes(r chi.Router, s *Shares, edge *httpx.Edge, publicURL string, top http.Handler) {
	r.Post(wire.RouteShares, func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		var req struct {
			ExpiresIn string `json:"expires_in"`
			What      string `json:"what"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		err := dec.Decode(&req)
		if errors.Is(err, io.EOF) {
			err = nil // no body: the defaults
		}
		var d time.Duration
		if err == nil {
			d, err = ParseExpiresIn(req.ExpiresIn)
		}
		if err != nil {
			edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST",
				`send {"expires_in": "7d", "what": "player"}: expires_in up to 90d, what one of player, evidence, video`,
				"the body is not a share request"))
			return
		}
		m, err := s.st.Meta(id)
		if err != nil {
			edge.Fail(w, r, wire.RecordingNotFound(false))
			return
		}
		sh, secret, err := s.Create(id, m.Project, req.What, d, ViewerOf(r.Context()).Name())
		if errors.Is(err, ErrBadShare) {
			edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST",
				"send expires_in up to 90d and what as one of player, evidence, video", "%v", err))
			return
		}
		if err != nil {
			edge.Fail(w, r, notFoundOr(err))
			return
		}
		w.Header().Set("Referrer-Policy", "no-referrer")
		httpx.JSON(w, http.StatusCreated, map[string]any{"share": sh, "url": ShareURL(publicURL, r, id, sh.What, secret)},
			httpx.NoStore)
	})
	r.Get(wire.RouteShares, func(w http.ResponseWriter, r *http.Request) {
		list, err := s.List(chi.URLParam(r, "id"))
		if err != nil {
			edge.Fail(w, r, notFoundOr(err))
			return
		}
		httpx.JSON(w, http.StatusOK, map[string]any{"shares": list})
	})
	r.Delete(wire.RouteShare, func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		m, err := s.st.Meta(id)
		if err != nil {
			edge.Fail(w, r, wire.RecordingNotFound(false))
			return
		}
		sh, err := s.Revoke(id, m.Project, chi.URLParam(r, "sid"), ViewerOf(r.Context()).Name())
		if errors.Is(err, ErrNoShare) {
			edge.Fail(w, r, wire.New(http.StatusNotFound, "SHARE_NOT_FOUND",
				"list the recording's links with GET /v1/recordings/{id}/shares", "no such share link"))
			return
		}
		if err != nil {
			edge.Fail(w, r, notFoundOr(err))
			return
		}
		httpx.JSON(w, http.StatusOK, sh)
	})
	r.Get(wire.RouteViews, func(w http.ResponseWriter, r *http.Request) {
		views, err := s.Views(chi.URLParam(r, "id"))
		if err != nil {
			edge.Fail(w, r, notFoundOr(err))
			return
		}
		httpx.JSON(w, http.StatusOK, map[string]any{"views": views})
	})
	r.Get(wire.RouteShareLink, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Referrer-Policy", "no-referrer")
		secret := chi.URLParam(r, "secret")
		id, sh, ok := s.Check(secret)
		if !ok {
			edge.Fail(w, r, wire.RecordingNotFound(true))
			return
		}
		var path string
		switch sh.What {
		case SharePlayer:
			// The secret goes on in the fragment, which no request,
			// log or Referer carries.
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, "/r/"+id+"#share="+secret, http.StatusSeeOther)
			return
		case ShareVideo:
			path = wire.Path(wire.RouteVideo, id)
		default:
			path = wire.Path(wire.RouteEvidence, id)
		}
		in := r.Clone(r.Context())
		in.URL = &url.URL{Path: path, RawQuery: r.URL.RawQuery}
		in.RequestURI = in.URL.RequestURI()
		in.Header.Set("Authorization", "Bearer "+secret)
		top.ServeHTTP(w, in)
	})
}

// ShareURL is a link's address: the player's page with the secret in the
// fragment, or /s/SECRET for a video or a card (fetched by plain GETs, an
// issue's image or a video element).
func ShareURL(base string, r *http.Request, id, what, secret string) string {
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	base = strings.TrimRight(base, "/")
	if what == SharePlayer {
		return base + "/r/" + id + "#share=" + secret
	}
	return base + wire.Path(wire.RouteShareLink, secret)
}

func notFoundOr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return wire.RecordingNotFound(true)
	}
	return err
}
