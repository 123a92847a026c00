// Package appserver starts the whole flightrec server on loopback for a
// test. It is apart from testenv because it imports internal/app, which
// imports the index backends, whose own tests import testenv.
package appserver

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
)

// LogBuffer is a log sink a test can read while the server writes.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Bytes is a copy of what was logged so far.
func (l *LogBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// Server is the whole app on loopback over a fresh data directory, its
// log captured at debug level (log lines must not carry secrets either).
type Server struct {
	App  *app.App
	Base string // http://127.0.0.1:PORT
	Log  *LogBuffer
	// Close stops the server and closes the store; a test calls it before
	// reading the files, and t.Cleanup calls it again (a no-op).
	Close func()
}

// Start starts a Server for t; each of with changes its configuration
// first (a policy directory, say).
func Start(t testing.TB, with ...func(*app.Config)) *Server {
	t.Helper()
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	for _, w := range with {
		w(&cfg)
	}
	buf := &LogBuffer{}
	a, err := app.New(cfg, slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.Handler())
	var once sync.Once
	s := &Server{App: a, Base: hs.URL, Log: buf}
	s.Close = func() {
		once.Do(func() {
			hs.Close()
			if err := a.Close(); err != nil {
				t.Errorf("closing the app: %v", err)
			}
		})
	}
	t.Cleanup(s.Close)
	return s
}
