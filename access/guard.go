package access

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/wire"
)

// Projects tells which project a recording or a group belongs to.
type Projects interface {
	// RecordingProject returns a recording's project (ok false when there
	// is no such recording).
	RecordingProject(ctx context.Context, id string) (project string, ok bool)
	// GroupProject returns a group's project (ok false when there is no
	// such group).
	GroupProject(id string) (project string, ok bool)
}

// Guard decides every request to a protected route: it resolves the
// bearer token, finds the project the request is about, and asks the
// access policy. Decisions are cached per grant, route and project for
// CacheFor, so a read pays a map lookup, not an evaluation.
type Guard struct {
	Tokens *Tokens
	Policy *policy.Engine
	// Projects tells the project of a recording or a group a request is
	// about. The guard remembers recordings' answers: a project never
	// changes.
	Projects Projects
	// Router finds a request's route pattern and parameters.
	Router *chi.Mux
	// Anonymous allows requests without a token while no grant exists
	// (serve on loopback, or --insecure-anonymous).
	Anonymous bool
	// Public routes need no token (health, readiness, the API document).
	Public map[string]bool
	// CacheFor is how long a decision is reused (default 5s).
	CacheFor time.Duration
	Log      *slog.Logger
	// Edge answers refusals (and counts and logs them as every error
	// reply is).
	Edge *httpx.Edge
	// Denied counts refusals by reason; nil counts nothing.
	Denied *prometheus.CounterVec
	// Shares checks share links presented as bearer credentials and keeps
	// the viewer audit; nil knows no links and counts no views.
	Shares *Shares

	mu       sync.Mutex
	cache    map[decisionKey]cachedDecision
	projects map[string]string
}

type decisionKey struct{ grant, method, route, project string }

type cachedDecision struct {
	d     policy.Decision
	until time.Time
}

// maxCache bounds the decision and project caches; a full cache is
// emptied (a burst of distinct keys costs evaluations, not memory).
const maxCache = 1 << 14

// Middleware is the guard as chi middleware.
func (gd *Guard) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		rctx := chi.NewRouteContext()
		route := gd.Router.Find(rctx, r.Method, path)
		if route == "" || gd.Public[route] {
			next.ServeHTTP(w, r) // the router answers 404 or 405 itself
			return
		}
		if secret, ok := gd.shareSecret(r); ok {
			gd.shared(w, r, route, rctx, secret, next)
			return
		}
		if gd.Anonymous && gd.Tokens.Empty() {
			gd.pass(w, r, route, rctx, Viewer{}, next)
			return
		}
		grant, err := gd.authenticate(r)
		if err != nil {
			gd.deny(w, r, route, err)
			return
		}
		projects, hidden, err := gd.projectsOf(r, route, rctx, grant)
		if err != nil {
			gd.Edge.Fail(w, r, err, "route", route)
			return
		}
		// A request about several recordings (a diff) needs the route on
		// every one of their projects.
		for _, project := range projects {
			d, err := gd.decide(r.Context(), grant, r.Method, route, project)
			if err != nil {
				gd.log().Error("access policy failed; request refused", "route", route, "err", err)
				gd.Edge.Fail(w, r, wire.New(http.StatusServiceUnavailable, "ACCESS_POLICY_ERROR",
					"fix the access policy (flightrec policy test DIR)", "the access policy could not decide"), "route", route)
				return
			}
			if !d.Allow {
				gd.refuse(w, r, route, grant, d, hidden)
				return
			}
		}
		admin := grant.Project == policy.AllProjects && slices.Contains(grant.Scopes, policy.ScopeAdmin)
		gd.pass(w, r, route, rctx, Viewer{Token: grant.ID, Admin: admin}, next)
	})
}

// readLike says whether a request's "no such recording" is a read's (its
// next lists recordings) rather than a write's (its next opens one): a
// GET, making a group (it reads its members) and commenting (about a
// recording that exists, not a new one) are reads.
func readLike(r *http.Request, route string) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead || route == wire.RouteGroups ||
		strings.HasPrefix(route, wire.RouteComments)
}

// shareSecret returns a share link's secret sent as the bearer credential.
func (gd *Guard) shareSecret(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && gd.Shares != nil && strings.EqualFold(scheme, "Bearer") && IsShareSecret(tok)
}

// shared decides a request made with a share link: the link's own
// recording, a route its kind opens, GET only. Every refusal is the bytes
// of an unknown recording's 404, so a link cannot tell an expired,
// revoked or forged link, another recording or another route apart.
func (gd *Guard) shared(w http.ResponseWriter, r *http.Request, route string, rctx *chi.Context, secret string, next http.Handler) {
	id, sh, ok := gd.Shares.Check(secret)
	if !ok || rctx.URLParam("id") != id || !sh.Opens(r.Method, route) {
		gd.count("share")
		gd.log().Info("request denied", "method", r.Method, "route", route, "reason", "share link")
		gd.Edge.Fail(w, r, wire.RecordingNotFound(readLike(r, route)), "route", route)
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	gd.pass(w, r, route, rctx, Viewer{Share: sh.ID}, next)
}

// pass serves an allowed request as v, adding a view to the recording's
// viewer audit when the route is one (viewOf) and the reply a success.
func (gd *Guard) pass(w http.ResponseWriter, r *http.Request, route string, rctx *chi.Context, v Viewer, next http.Handler) {
	r = r.WithContext(WithViewer(r.Context(), v))
	what := ""
	if gd.Shares != nil && r.Method == http.MethodGet {
		what = viewOf(route, r.URL.Query().Get("via"))
	}
	if what == "" {
		next.ServeHTTP(w, r)
		return
	}
	ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
	next.ServeHTTP(ww, r)
	if st := ww.Status(); st >= 200 && st < 300 {
		if err := gd.Shares.RecordView(rctx.URLParam("id"), v, what); err != nil {
			gd.log().Error("writing the viewer audit failed", "route", route, "err", err)
		}
	}
}

func (gd *Guard) log() *slog.Logger {
	if gd.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return gd.Log
}

// authenticate reads the bearer token and checks it.
func (gd *Guard) authenticate(r *http.Request) (Grant, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Grant{}, errNoToken
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Grant{}, errNotBearer
	}
	return gd.Tokens.Verify(strings.TrimSpace(tok))
}

var (
	errNoToken   = errors.New("this route needs a token")
	errNotBearer = errors.New("send the token as Authorization: Bearer TOKEN")
)

// projectsOf finds the projects a request is about: a recording's (from
// the {id} in its path), the recordings' of a diff (?a=&b=, or every ?id=
// of a group), the body's for an open, the ?project= of a list or a search
// (set to the token's own project when a project's token asks without
// one), or none
// ("": admin routes). hidden says the request names recordings, whose
// refusal must look like "no such recording".
func (gd *Guard) projectsOf(r *http.Request, route string, rctx *chi.Context, g Grant) (projects []string, hidden bool, err error) {
	switch {
	case strings.HasPrefix(route, wire.RouteRecording):
		p, _ := gd.recordingProject(r.Context(), rctx.URLParam("id"))
		return []string{p}, true, nil
	case strings.HasPrefix(route, wire.RouteDiff):
		q := r.URL.Query()
		ids := append(q["id"], q["a"]...)
		ids = append(ids, q["b"]...)
		if len(ids) == 0 {
			return []string{""}, true, nil
		}
		for _, id := range ids {
			p, _ := gd.recordingProject(r.Context(), id)
			projects = append(projects, p)
		}
		return projects, true, nil
	case route == wire.RouteGroup:
		p, _ := gd.Projects.GroupProject(rctx.URLParam("id"))
		return []string{p}, true, nil
	case route == wire.RouteGroups && r.Method == http.MethodPost:
		// Making a group needs the route on every member's project.
		ids, err := peekGroupIDs(r)
		if err != nil || len(ids) == 0 {
			return []string{""}, true, err
		}
		for _, id := range ids {
			p, _ := gd.recordingProject(r.Context(), id)
			projects = append(projects, p)
		}
		return projects, true, nil
	case route == wire.RouteRecordings && r.Method == http.MethodPost:
		p, err := peekProject(r)
		return []string{p}, false, err
	case (route == wire.RouteRecordings || route == wire.RouteSearch) && r.Method == http.MethodGet:
		q := r.URL.Query()
		p := q.Get("project")
		if p == "" && g.Project != policy.AllProjects {
			q.Set("project", g.Project)
			r.URL.RawQuery = q.Encode()
			p = g.Project
		}
		return []string{p}, false, nil
	}
	return []string{""}, false, nil
}

// recordingProject asks Projects once per recording.
func (gd *Guard) recordingProject(ctx context.Context, id string) (string, bool) {
	gd.mu.Lock()
	p, ok := gd.projects[id]
	gd.mu.Unlock()
	if ok {
		return p, true
	}
	p, ok = gd.Projects.RecordingProject(ctx, id)
	if !ok {
		return "", false
	}
	gd.mu.Lock()
	if gd.projects == nil || len(gd.projects) >= maxCache {
		gd.projects = map[string]string{}
	}
	gd.projects[id] = p
	gd.mu.Unlock()
	return p, true
}

// maxOpenBody bounds the body read to find an open's project; the ingest
// handler applies its own limits after.
const maxOpenBody = 1 << 20

// peekProject reads the project of an open request's JSON body and puts
// the body back for the handler.
func peekProject(r *http.Request) (string, error) {
	var v struct {
		Project string `json:"project"`
	}
	err := peekBody(r, "open a recording", &v)
	return v.Project, err
}

// peekGroupIDs reads the members of a group request's JSON body and puts
// the body back for the handler.
func peekGroupIDs(r *http.Request) ([]string, error) {
	var v struct {
		IDs []string `json:"ids"`
	}
	err := peekBody(r, "make a group", &v)
	return v.IDs, err
}

// peekBody decodes a JSON body of at most 1 MiB into v and puts the body
// back; a malformed body is the handler's to refuse.
func peekBody(r *http.Request, what string, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxOpenBody+1))
	if err != nil {
		return wire.New(http.StatusBadRequest, "BAD_REQUEST", "send the request again", "reading the body: %v", err)
	}
	if len(b) > maxOpenBody {
		return wire.New(http.StatusRequestEntityTooLarge, "TOO_LARGE", "send at most 1 MiB to "+what, "the request to %s is too large", what)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	_ = json.Unmarshal(b, v)
	return nil
}

// decide returns the cached decision or evaluates the policy.
func (gd *Guard) decide(ctx context.Context, g Grant, method, route, project string) (policy.Decision, error) {
	k := decisionKey{g.ID, method, route, project}
	now := time.Now()
	gd.mu.Lock()
	c, ok := gd.cache[k]
	gd.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.d, nil
	}
	d, err := gd.Policy.Access(ctx, policy.AccessInput{Method: method, Route: route, Project: project, Token: g.Claims()})
	if err != nil {
		return d, err
	}
	ttl := gd.CacheFor
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	gd.mu.Lock()
	if gd.cache == nil || len(gd.cache) >= maxCache {
		gd.cache = map[decisionKey]cachedDecision{}
	}
	gd.cache[k] = cachedDecision{d, now.Add(ttl)}
	gd.mu.Unlock()
	return d, nil
}

// refuse answers a denied request. A request about a recording of another
// project (or of none) gets the handlers' own "no such recording", so it
// cannot tell the two apart; a missing scope is 403 naming the scope.
func (gd *Guard) refuse(w http.ResponseWriter, r *http.Request, route string, g Grant, d policy.Decision, hidden bool) {
	var e *wire.Error
	switch {
	case d.Reason == policy.ReasonMissingScope:
		e = wire.New(http.StatusForbidden, "FORBIDDEN", "ask for a token with the "+d.Need+" scope",
			"this token lacks the %s scope", d.Need)
		e.Extra = map[string]any{"missing_scope": d.Need}
	case hidden && route == wire.RouteGroup:
		e = wire.GroupNotFound()
	case hidden:
		// Making a group reads its members: its 404 is a read's.
		e = wire.RecordingNotFound(readLike(r, route))
	case d.Need == policy.ScopeAdmin:
		e = wire.New(http.StatusForbidden, "FORBIDDEN", "use an admin token for every project (--project '*')",
			"this route needs an admin token for every project")
	case d.Reason == policy.ReasonOtherProject:
		e = wire.New(http.StatusForbidden, "FORBIDDEN", "use a token for that project",
			"this token does not cover that project")
	default:
		e = wire.New(http.StatusForbidden, "FORBIDDEN", "see the access policy", "no access rule allows this route")
	}
	gd.count(d.Reason)
	gd.log().Info("request denied", "method", r.Method, "route", route, "token_id", g.ID, "reason", d.Reason, "status", e.Status)
	gd.Edge.Fail(w, r, e, "route", route)
}

// deny answers a request without a valid token: 401 with the envelope and
// a WWW-Authenticate challenge.
func (gd *Guard) deny(w http.ResponseWriter, r *http.Request, route string, err error) {
	if errors.Is(err, ErrStateUnavailable) {
		// Not the client's fault: the shared token list is out of reach.
		gd.count("state_unavailable")
		w.Header().Set("Retry-After", "2")
		gd.Edge.Fail(w, r, wire.New(http.StatusServiceUnavailable, "STATE_UNAVAILABLE",
			"retry in a few seconds; if it persists, check the object store named by --blobs", "%s", err.Error()), "route", route)
		return
	}
	gd.count("unauthenticated")
	gd.log().Info("request denied", "method", r.Method, "route", route, "reason", "unauthenticated", "why", err.Error())
	challenge := `Bearer realm="flightrec"`
	if !errors.Is(err, errNoToken) {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	gd.Edge.Fail(w, r, wire.New(http.StatusUnauthorized, "UNAUTHENTICATED",
		"send Authorization: Bearer TOKEN (flightrec token create issues one)", "%s", err.Error()), "route", route)
}

func (gd *Guard) count(reason string) {
	if gd.Denied != nil {
		gd.Denied.WithLabelValues(reason).Inc()
	}
}
