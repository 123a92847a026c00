// capture made this directory: it records what the pre-house executor
// client (client.Client, ingest.OpenRequest and policy.AppMap at tag
// house-before) sends to the pre-house server and what it gets back. It
// builds against that tree only, so it lives in testdata (never compiled
// here). To make the exchange again:
//
//	git archive house-before | tar -x -C /tmp/before
//	mkdir /tmp/before/cmd/capture && cp capture.go /tmp/before/cmd/capture/main.go
//	cd /tmp/before && go run ./cmd/capture $OLDPWD
//
// wire/compat_test.go replays it against today's server.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/policy"
)

type step struct {
	Method          string          `json:"method"`
	Path            string          `json:"path"`
	ContentType     string          `json:"content_type"`
	ContentEncoding string          `json:"content_encoding,omitempty"`
	Body            string          `json:"body"`
	Status          int             `json:"status"`
	Reply           json.RawMessage `json:"reply"`
}

func main() {
	out := os.Args[1]
	data, _ := os.MkdirTemp("", "capture")
	defer os.RemoveAll(data)
	var cfg app.Config
	cfg.Store.Data = data
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	var steps []step
	var id string
	h := a.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		n := len(steps)
		name := "open.json"
		switch {
		case strings.HasSuffix(r.URL.Path, "/events"):
			name = fmt.Sprintf("append-%d.ndjson", n)
			if r.Header.Get("Content-Encoding") == "gzip" {
				name += ".gz"
			}
		case strings.HasSuffix(r.URL.Path, "/finish"):
			name = "finish.json"
		}
		if err := os.WriteFile(filepath.Join(out, name), body, 0o644); err != nil {
			log.Fatal(err)
		}
		path := r.URL.Path
		if id != "" {
			path = strings.Replace(path, id, "{id}", 1)
		}
		steps = append(steps, step{Method: r.Method, Path: path, ContentType: r.Header.Get("Content-Type"),
			ContentEncoding: r.Header.Get("Content-Encoding"), Body: name, Status: rec.Code,
			Reply: bytes.TrimSpace(rec.Body.Bytes())})
	}))
	defer hs.Close()

	ctx := context.Background()
	c := client.New(hs.URL)
	c.Gzip = true
	rep, err := c.Open(ctx, ingest.OpenRequest{Project: "compat", Flow: "checkout",
		Labels: map[string]string{"branch": "main", "ci": "true"}, Executor: "old-executor 0.9",
		Versions: map[string]string{"engine": "chromium 156", "app": "sha256:1111"},
		AppMap:   &policy.AppMap{MaskedSelectors: []string{"#gift-code"}, MaskTextSelectors: []string{".account-balance"}}})
	if err != nil {
		log.Fatal(err)
	}
	id = rep.ID
	steps[0].Path = "/v1/recordings"
	evs := testgen.Recording(testgen.Options{Seed: 18, Steps: 3, EventsPerStep: 5, FrameBytes: 400})
	lines, err := client.ParseLines(testgen.NDJSON(evs))
	if err != nil {
		log.Fatal(err)
	}
	acked, err := c.Send(ctx, id, lines, 8, 1<<20, nil)
	if err != nil {
		log.Fatal(err)
	}
	// What the client does after a restart that lost a reply: the same
	// batch again, acknowledged again and stored once.
	var again bytes.Buffer
	for _, l := range lines[len(lines)-3:] {
		again.Write(l.JSON)
		again.WriteByte('\n')
	}
	if _, err := c.Append(ctx, id, again.Bytes()); err != nil {
		log.Fatal(err)
	}
	// A batch past a gap: refused with SEQ_GAP and the seq the server
	// expects, which the client's Send rewinds to.
	gap := evs[len(evs)-1]
	gap.Seq = uint64(len(evs)) + 8
	if _, err := c.Append(ctx, id, testgen.NDJSON([]event.Envelope{gap})); err == nil {
		log.Fatal("a batch past a gap was accepted")
	}
	fin, err := c.Finish(ctx, id, "fail")
	if err != nil {
		log.Fatal(err)
	}
	b, _ := json.MarshalIndent(map[string]any{"events": len(lines), "acked": acked, "root": fin.Root, "steps": steps}, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "exchange.json"), append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
}
