// Package httpx is flightrec's one HTTP edge: every room's JSON replies go
// through JSON, and every error reply through an Edge, which counts it in
// flightrec_errors_total and logs it. The server builds one Edge
// (internal/app) and passes it to each room.
package httpx

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightrec/flightrec/wire"
)

// Opt adds to a JSON reply; a reply without any has only Content-Type.
type Opt uint8

const (
	// NoSniff sets X-Content-Type-Options: nosniff.
	NoSniff Opt = 1 << iota
	// NoStore sets Cache-Control: no-store.
	NoStore
	// Verbatim leaves <, > and & as they are rather than as \u003c …, so a
	// string keeps its bytes (the audit log's canonical entries).
	Verbatim
)

// JSON writes v as a reply with status, Content-Type application/json and
// the headers of opts.
func JSON(w http.ResponseWriter, status int, v any, opts ...Opt) {
	var o Opt
	for _, x := range opts {
		o |= x
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if o&NoSniff != 0 {
		h.Set("X-Content-Type-Options", "nosniff")
	}
	if o&NoStore != 0 {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(o&Verbatim == 0)
	_ = enc.Encode(v)
}

// Edge answers every error reply of the server.
type Edge struct {
	errors *prometheus.CounterVec
	log    *slog.Logger
}

// NewEdge returns an edge logging to log whose counter,
// flightrec_errors_total{code}, is registered with reg. A nil reg counts
// without exporting (a command's in-process server that has no /metrics).
func NewEdge(reg prometheus.Registerer, log *slog.Logger) *Edge {
	e := &Edge{log: log, errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flightrec_errors_total", Help: "Error replies by code."}, []string{"code"})}
	if reg != nil {
		reg.MustRegister(e.errors)
	}
	return e
}

// Fail answers err as the error envelope (wire.From: an error that is not
// a *wire.Error is a 500 INTERNAL that does not repeat it), counts it by
// code and logs it: a 5xx at error with err itself, the cause the envelope
// does not show; any other at debug, since a refusal is the client's to
// fix. The line names the code, the method, the route pattern and the
// route's ids, never a value of the request; attrs add to it (key, value
// pairs, as slog takes them).
func (e *Edge) Fail(w http.ResponseWriter, r *http.Request, err error, attrs ...any) {
	we := wire.From(err)
	e.errors.WithLabelValues(we.Code).Inc()
	e.logFailure(r, we, err, attrs)
	h := w.Header()
	if we.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(we.RetryAfter))
	}
	JSON(w, we.Status, wire.Envelope{Error: we}, NoSniff)
}

func (e *Edge) logFailure(r *http.Request, we *wire.Error, cause error, extra []any) {
	level, msg := slog.LevelDebug, "request refused"
	if we.Status >= 500 {
		level, msg = slog.LevelError, "request failed"
	}
	ctx := r.Context()
	if !e.log.Enabled(ctx, level) {
		return
	}
	attrs := []any{"code", we.Code, "status", we.Status, "method", r.Method}
	if rc := chi.RouteContext(ctx); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			attrs = append(attrs, "route", p)
		}
		for i, k := range rc.URLParams.Keys {
			if v := rc.URLParams.Values[i]; k != "*" && isID(v) {
				attrs = append(attrs, k, v)
			}
		}
	}
	attrs = append(attrs, extra...)
	if level == slog.LevelError {
		attrs = append(attrs, "err", cause)
	}
	e.log.Log(ctx, level, msg, attrs...)
}

// isID reports whether a route parameter has the shape of flightrec's ids
// (recordings, CIDs, tokens, pins, groups, step numbers): 1-64 lower-case
// letters and digits. Anything else is left out of the log: a parameter is
// what the client sent, and a client may paste a secret where an id goes
// (a whole token where DELETE /v1/tokens/{id} wants its id).
func isID(v string) bool {
	if len(v) == 0 || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// Because returns an error that the edge answers as reply and logs as
// cause: for a reply whose message must not repeat what went wrong
// underneath (a path, a parser's complaint), while the log still has it.
func Because(reply *wire.Error, cause error) error {
	return &because{reply: reply, cause: cause}
}

type because struct {
	reply *wire.Error
	cause error
}

func (b *because) Error() string   { return b.reply.Code + ": " + b.cause.Error() }
func (b *because) Unwrap() []error { return []error{b.reply, b.cause} }
