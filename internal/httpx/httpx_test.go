package httpx_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/wire"
)

// records keeps every log record, at every level.
type records struct {
	mu sync.Mutex
	rs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rs = append(h.rs, r.Clone())
	return nil
}

// last is the last record, its attributes by key.
func (h *records) last(t *testing.T) (slog.Record, map[string]string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rs) == 0 {
		t.Fatal("nothing was logged")
	}
	r := h.rs[len(h.rs)-1]
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	return r, attrs
}

type reply struct {
	status int
	header http.Header
	body   string
}

func serve(h http.Handler, method, path string) reply {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return reply{rec.Code, rec.Header(), rec.Body.String()}
}

// The secret a client might paste where an id goes, and the cause of a
// failure that the reply must not show.
const (
	pasted = "frt_0123456789ab_Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eHF1dXg"
	cause  = "open /data/blobs/ab/cd: input/output error"
)

// TestEdgeCountsAndLogs: every error reply is counted by code in
// flightrec_errors_total and logged once: a refusal (4xx) at debug, a
// failure (5xx) at error with its cause, which the envelope does not show;
// the line names the route and its ids, never a parameter that is not an
// id.
func TestEdgeCountsAndLogs(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &records{}
	edge := httpx.NewEdge(reg, slog.New(logs))
	r := chi.NewRouter()
	r.Get("/v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		edge.Fail(w, r, wire.New(http.StatusNotFound, "THING_NOT_FOUND", "list things", "no such thing"), "reason", "test")
	})
	r.Get("/v1/things/{id}/broken", func(w http.ResponseWriter, r *http.Request) {
		edge.Fail(w, r, httpx.Because(wire.New(http.StatusInternalServerError, "THING_BROKEN", "see the server log",
			"the thing could not be read"), errors.New(cause)))
	})
	r.Get("/v1/plain", func(w http.ResponseWriter, r *http.Request) {
		edge.Fail(w, r, errors.New(cause))
	})
	r.Get("/v1/busy", func(w http.ResponseWriter, r *http.Request) {
		e := wire.New(http.StatusServiceUnavailable, "BUSY", "retry", "busy")
		e.RetryAfter = 2
		edge.Fail(w, r, e)
	})

	got := serve(r, "GET", "/v1/things/00t4ay0000000000000000000a")
	if got.status != 404 || !strings.Contains(got.body, `"code":"THING_NOT_FOUND"`) {
		t.Fatalf("refusal: %d %s", got.status, got.body)
	}
	rec, attrs := logs.last(t)
	if rec.Level != slog.LevelDebug || attrs["code"] != "THING_NOT_FOUND" || attrs["route"] != "/v1/things/{id}" ||
		attrs["id"] != "00t4ay0000000000000000000a" || attrs["status"] != "404" || attrs["reason"] != "test" || attrs["err"] != "" {
		t.Errorf("refusal logged as %s %q %v", rec.Level, rec.Message, attrs)
	}

	serve(r, "GET", "/v1/things/"+pasted)
	if _, attrs := logs.last(t); attrs["id"] != "" || attrs["route"] != "/v1/things/{id}" {
		t.Errorf("a parameter that is not an id was logged: %v", attrs)
	}

	for _, path := range []string{"/v1/things/x1/broken", "/v1/plain"} {
		got := serve(r, "GET", path)
		if got.status != 500 || strings.Contains(got.body, "input/output") {
			t.Errorf("%s: %d %s", path, got.status, got.body)
		}
		rec, attrs := logs.last(t)
		if rec.Level != slog.LevelError || !strings.Contains(attrs["err"], cause) {
			t.Errorf("%s: failure logged as %s %q %v", path, rec.Level, rec.Message, attrs)
		}
	}

	got = serve(r, "GET", "/v1/busy")
	if got.status != 503 || got.header.Get("Retry-After") != "2" {
		t.Errorf("busy: %d %v", got.status, got.header)
	}

	want := map[string]float64{"BUSY": 1, "INTERNAL": 1, "THING_BROKEN": 1, "THING_NOT_FOUND": 2}
	if got := errorCounts(t, reg); !maps.Equal(got, want) {
		t.Errorf("flightrec_errors_total is %v, want %v", got, want)
	}
}

// errorCounts reads flightrec_errors_total from reg, by its one label,
// code.
func errorCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "flightrec_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "code" {
				t.Fatalf("labels %v, want code alone", m.GetLabel())
			}
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestEdgeQuietAboveDebug: at the server's default level a refusal is
// not logged; a failure is.
func TestEdgeQuietAboveDebug(t *testing.T) {
	var b strings.Builder
	edge := httpx.NewEdge(nil, slog.New(slog.NewTextHandler(&b, nil)))
	req := httptest.NewRequest("GET", "/x", nil)
	edge.Fail(httptest.NewRecorder(), req, wire.New(http.StatusBadRequest, "BAD", "fix it", "bad"))
	if b.Len() != 0 {
		t.Errorf("a refusal was logged at info: %s", b.String())
	}
	edge.Fail(httptest.NewRecorder(), req, errors.New(cause))
	if !strings.Contains(b.String(), "level=ERROR") || !strings.Contains(b.String(), "code=INTERNAL") {
		t.Errorf("a failure was not logged at error: %s", b.String())
	}
}

// TestReplyHeaders: each room's replies keep the headers they had: an
// error reply Content-Type and nosniff (and Retry-After when set), a JSON
// reply Content-Type and what its options add, nothing else.
func TestReplyHeaders(t *testing.T) {
	edge := httpx.NewEdge(nil, slog.New(slog.DiscardHandler))
	for _, c := range []struct {
		name   string
		write  func(w http.ResponseWriter, r *http.Request)
		status int
		header map[string]string
		body   string
	}{
		{"error", func(w http.ResponseWriter, r *http.Request) {
			edge.Fail(w, r, wire.New(http.StatusConflict, "C", "n", "m <b>"))
		}, 409, map[string]string{"Content-Type": "application/json", "X-Content-Type-Options": "nosniff"},
			`{"error":{"code":"C","message":"m \u003cb\u003e","next":"n"}}` + "\n"},
		{"json", func(w http.ResponseWriter, _ *http.Request) {
			httpx.JSON(w, http.StatusCreated, map[string]string{"a": "<&>"})
		}, 201, map[string]string{"Content-Type": "application/json"}, `{"a":"\u003c\u0026\u003e"}` + "\n"},
		{"json verbatim, no-store, nosniff", func(w http.ResponseWriter, _ *http.Request) {
			httpx.JSON(w, http.StatusOK, map[string]string{"a": "<&>"}, httpx.NoStore, httpx.NoSniff, httpx.Verbatim)
		}, 200, map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
			`{"a":"<&>"}` + "\n"},
	} {
		got := serve(http.HandlerFunc(c.write), "GET", "/")
		if got.status != c.status || got.body != c.body {
			t.Errorf("%s: %d %q", c.name, got.status, got.body)
		}
		if len(got.header) != len(c.header) {
			t.Errorf("%s: headers %v, want %v", c.name, got.header, c.header)
		}
		for k, v := range c.header {
			if got.header.Get(k) != v {
				t.Errorf("%s: %s is %q, want %q", c.name, k, got.header.Get(k), v)
			}
		}
	}
}
