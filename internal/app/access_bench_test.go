package app_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// BenchmarkReadAccess measures authorized reads (GET …/steps/1 of a
// recording, and GET of its metadata, the cheapest read) through the whole app with a project token (guard: token
// verification, the cached policy decision, the recording's project),
// and through the same playback handlers mounted without the guard,
// interleaved in one run. It reports both rates and the
// access check's cost as a share of the bare read's time.
//
//	go test -run '^$' -bench ReadAccess -benchtime 2000x ./internal/app/
func BenchmarkReadAccess(b *testing.B) {
	var cfg app.Config
	cfg.Store.Data = b.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	id := recordVia(b, a.Handler(), testgen.Recording(testgen.Options{Steps: 5, EventsPerStep: 40, Seed: 1}))
	tok, _, err := a.Tokens.Create("shop", []string{"read"}, 0, "bench")
	if err != nil {
		b.Fatal(err)
	}
	// The same handlers twice, alike but for the guard: what the guard
	// costs is all that differs.
	bare := chi.NewRouter()
	bare.Use(middleware.Recoverer)
	a.Playback.Routes(bare)
	mux := chi.NewRouter()
	g := &access.Guard{Tokens: a.Tokens, Policy: a.Policy, Projects: a.Guard.Projects, Public: a.Guard.Public, Router: mux}
	mux.Use(middleware.Recoverer, g.Middleware)
	a.Playback.Routes(mux)
	var guarded http.Handler = mux
	for _, c := range []struct{ name, path string }{
		{"step", "/v1/recordings/" + id + "/steps/1"},
		{"recording", "/v1/recordings/" + id},
	} {
		b.Run(c.name, func(b *testing.B) { benchGuard(b, guarded, bare, c.path, tok) })
	}
}

func benchGuard(b *testing.B, guarded, bare http.Handler, path, tok string) {
	call := func(h http.Handler, token string) {
		req := httptest.NewRequest("GET", path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
		}
	}
	call(guarded, tok) // warm the caches both ways
	call(bare, "")
	// Short alternating rounds, so a disturbance (GC, another process)
	// falls on both sides alike; the cost is the median of the rounds'
	// paired ratios.
	const rounds = 21
	var withCheck, without, cost []float64
	per := max(b.N/rounds, 1)
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		for i := 0; i < per; i++ {
			call(bare, "")
		}
		bareRate := float64(per) / time.Since(t0).Seconds()
		t0 = time.Now()
		for i := 0; i < per; i++ {
			call(guarded, tok)
		}
		guardedRate := float64(per) / time.Since(t0).Seconds()
		without, withCheck = append(without, bareRate), append(withCheck, guardedRate)
		cost = append(cost, (bareRate/guardedRate-1)*100)
	}
	b.StopTimer()
	b.ReportMetric(median(withCheck), "guarded-req/s")
	b.ReportMetric(median(without), "bare-req/s")
	b.ReportMetric(median(cost), "check-cost-%")
}

// recordVia opens, fills and finishes a recording through h (anonymous:
// no token exists yet) and waits until it is indexed.
func recordVia(b *testing.B, h http.Handler, evs []event.Envelope) string {
	b.Helper()
	serve := func(method, path string, body []byte) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, bytes.NewReader(body)))
		return w
	}
	w := serve("POST", "/v1/recordings", []byte(`{"project":"shop"}`))
	var open wire.OpenReply
	if err := json.Unmarshal(w.Body.Bytes(), &open); err != nil || open.ID == "" {
		b.Fatalf("open: %d %s", w.Code, w.Body.String())
	}
	if w := serve("POST", "/v1/recordings/"+open.ID+"/events", testgen.NDJSON(evs)); w.Code != http.StatusOK {
		b.Fatalf("append: %d %s", w.Code, w.Body.String())
	}
	if w := serve("POST", "/v1/recordings/"+open.ID+"/finish", []byte(`{"verdict":"pass"}`)); w.Code != http.StatusOK {
		b.Fatalf("finish: %d %s", w.Code, w.Body.String())
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var row store.RecordingRow
		_ = json.Unmarshal(serve("GET", "/v1/recordings/"+open.ID, nil).Body.Bytes(), &row)
		if row.IndexedTo >= uint64(len(evs)) {
			return open.ID
		}
		if time.Now().After(deadline) {
			b.Fatalf("not indexed: %+v", row)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
