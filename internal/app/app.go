// Package app assembles flightrec's modules into one server: the store, the
// index and its projector, ingest, playback, health, metrics and the OpenAPI
// document. cmd/flightrec runs it; tests start it on loopback.
package app

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/clickhouse"
	"github.com/flightrec/flightrec/store/sqlite"
	"github.com/flightrec/flightrec/ui"
	"github.com/flightrec/flightrec/wire"
)

// StoreConfig names the data directory and the index; every command that
// opens a store takes these same flags.
type StoreConfig struct {
	Data  string
	Index string
	// SegmentBytes is the log segment size.
	SegmentBytes int64
	// LockTimeout is how long a command waits for the data directory's
	// lock while another short command holds it (a server's lock is not
	// waited for).
	LockTimeout time.Duration
}

// RegisterFlags adds --data and --index.
func (c *StoreConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Data = envOr("FLIGHTREC_DATA", "./flightrec-data")
	c.Index = envOr("FLIGHTREC_INDEX", "")
	fs.StringVar(&c.Data, "data", c.Data, "data directory (env FLIGHTREC_DATA)")
	fs.StringVar(&c.Index, "index", c.Index,
		"index DSN: empty or sqlite:PATH for the embedded index (default DATA/index.sqlite), "+
			"or clickhouse://USER:PASS@HOST:9000/DB for ClickHouse (env FLIGHTREC_INDEX)")
	c.LockTimeout = 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FLIGHTREC_LOCK_TIMEOUT")); err == nil {
		c.LockTimeout = d
	}
	fs.DurationVar(&c.LockTimeout, "lock-timeout", c.LockTimeout,
		"how long to wait for the data directory's lock while another command holds it (env FLIGHTREC_LOCK_TIMEOUT)")
}

// Config configures the server.
type Config struct {
	Store  StoreConfig
	Policy string // directory of user Rego; "" for the default policy only
	Addr   string
	// Command names who holds the data directory's lock ("serve",
	// "demo", or a command serving its --data in-process); "" is "serve".
	Command           string
	Ingest            ingest.Config
	InsecureAnonymous bool
	// RequireTokens refuses requests without a token even while no token
	// exists (serve sets it on a non-loopback address); otherwise a data
	// directory without tokens is served anonymously, and one with tokens
	// needs them.
	RequireTokens bool
	// RecordPolicy writes the policy's digest into the data directory
	// (retention.RecordPolicy): serve sets it, since the policy serve runs
	// with is the one every retention sweep must use; a command's
	// in-process server does not.
	RecordPolicy bool
	// RetentionInterval is how often the retention sweeper runs; 0 never
	// (flightrec retention sweep runs it on demand).
	RetentionInterval time.Duration
	HTTP              HTTPLimits
	// MaxVideoDuration bounds a video's span (playback.Service); 0 is
	// playback's default.
	MaxVideoDuration time.Duration
}

// HTTPLimits bound how long a client may take to send a request, so a
// body trickled a byte a second cannot hold a connection (and an append's
// buffers) forever.
type HTTPLimits struct {
	// HeaderTimeout bounds reading a request's headers.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a whole request, headers and body; a body
	// not in by then is cut (408 BODY_TIMEOUT where the client still
	// listens). 0 is DefaultHTTPLimits'.
	BodyTimeout time.Duration
}

// DefaultHTTPLimits: a 64 MiB batch still arrives at 256 KiB/s.
var DefaultHTTPLimits = HTTPLimits{HeaderTimeout: 10 * time.Second, BodyTimeout: 5 * time.Minute}

func (l HTTPLimits) apply(srv *http.Server) {
	d := DefaultHTTPLimits
	srv.ReadHeaderTimeout = cmp.Or(l.HeaderTimeout, d.HeaderTimeout)
	srv.ReadTimeout = cmp.Or(l.BodyTimeout, d.BodyTimeout)
}

// RegisterFlags adds serve's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Store.RegisterFlags(fs)
	c.Addr = envOr("FLIGHTREC_ADDR", "127.0.0.1:8480")
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env FLIGHTREC_ADDR)")
	c.Policy = envOr("FLIGHTREC_POLICY", "")
	fs.StringVar(&c.Policy, "policy", c.Policy,
		"directory of Rego that extends the default redaction policy (env FLIGHTREC_POLICY)")
	fs.BoolVar(&c.InsecureAnonymous, "insecure-anonymous", false,
		"serve without authentication on a non-loopback address")
	c.Ingest.RegisterFlags(fs)
	fs.DurationVar(&c.RetentionInterval, "retention-interval", time.Hour,
		"how often expired recordings and unreferenced blobs are swept (0: only on demand)")
	c.HTTP = DefaultHTTPLimits
	fs.DurationVar(&c.HTTP.BodyTimeout, "body-timeout", c.HTTP.BodyTimeout,
		"longest time a client may take to send one request, body included; a slower body is cut")
	c.MaxVideoDuration = playback.DefaultMaxVideoDuration
	fs.DurationVar(&c.MaxVideoDuration, "max-video-duration", c.MaxVideoDuration,
		"longest video.webm served; a longer recording's video is asked for as clips of steps")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// OpenIndex opens the index a DSN names.
func OpenIndex(dsn, dataDir string) (store.Index, error) {
	switch {
	case dsn == "":
		return sqlite.Open(filepath.Join(dataDir, "index.sqlite"))
	case strings.HasPrefix(dsn, "sqlite:"):
		return sqlite.Open(strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasPrefix(dsn, "clickhouse://"):
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		return clickhouse.Open(ctx, dsn)
	default:
		scheme, _, _ := strings.Cut(dsn, ":")
		return nil, wire.New(http.StatusBadRequest, "BAD_INDEX_DSN",
			"use sqlite:PATH, clickhouse://USER:PASS@HOST:9000/DB, or leave --index empty",
			"unsupported index scheme %q", scheme)
	}
}

// Stores opens the data directory and the index of a StoreConfig.
func (c StoreConfig) Open() (*store.Store, store.Index, error) {
	st, err := store.OpenStore(c.Data, store.LogOptions{SegmentBytes: c.SegmentBytes})
	if err != nil {
		return nil, nil, err
	}
	idx, err := OpenIndex(c.Index, c.Data)
	if err != nil {
		return nil, nil, err
	}
	return st, idx, nil
}

// App is a running flightrec server's modules.
type App struct {
	Store    *store.Store
	Index    store.Index
	Proj     *store.Projector
	Ingest   *ingest.Service
	Playback *playback.Service
	Policy   *policy.Engine
	Tokens   *access.Tokens
	Guard    *access.Guard
	Audit    *audit.Log
	Sweeper  *retention.Sweeper
	Registry *prometheus.Registry
	lock     *store.DirLock // the data directory's, held until Close
	cfg      Config
	log      *slog.Logger
	edge     *httpx.Edge // answers, counts and logs every error reply
	router   *chi.Mux
	cancel   context.CancelFunc
	// stopping is closed when Close begins: an index rebuild in flight
	// stops, so that shutdown does not wait for it.
	stopping chan struct{}
	closed   sync.Once
	closeErr error
}

// New takes the data directory's lock, opens the store and index,
// recovers open recordings, and starts the projector. The lock is held
// until Close: one process owns a data directory for writing.
func New(cfg Config, log *slog.Logger) (*App, error) {
	command, addr := cfg.Command, ""
	if command == "" || command == "serve" || command == "demo" {
		command, addr = cmp.Or(command, "serve"), cfg.Addr
	}
	lock, err := cfg.Store.Lock(command, addr)
	if err != nil {
		return nil, err
	}
	st, idx, err := cfg.Store.Open()
	if err != nil {
		lock.Close()
		return nil, startError(cfg.Store.Data, err)
	}
	a, err := NewWith(cfg, log, st, idx)
	if err != nil {
		lock.Close()
		return nil, startError(cfg.Store.Data, err)
	}
	a.lock = lock
	return a, nil
}

// NewWith is New over a store and index the caller opened (tests wrap the
// index to inject faults). The App owns and closes both.
func NewWith(cfg Config, log *slog.Logger, st *store.Store, idx store.Index) (*App, error) {
	pol, err := policy.Load(context.Background(), cfg.Policy)
	if err != nil {
		idx.Close()
		st.Close()
		return nil, err
	}
	if cfg.RecordPolicy {
		if err := retention.RecordPolicy(st.Dir(), pol.Digest()); err != nil {
			idx.Close()
			st.Close()
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// One edge answers, counts and logs every room's error replies.
	edge := httpx.NewEdge(reg, log)
	proj := store.NewProjector(st, idx, log)
	proj.OnComplete = func(ctx context.Context, id string) error {
		return diffrun.RecordSignature(ctx, st, idx, id)
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_policy_evaluations_total", Help: "Redaction plans evaluated (one per recording)."},
		func() float64 { return float64(pol.Evaluations()) }))
	ing, err := ingest.New(cfg.Ingest, st, proj, pol, reg, log, edge)
	if err != nil {
		idx.Close()
		st.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go proj.Run(ctx)
	pb := playback.New(st, idx, log, edge)
	if pb.Signer, err = attest.LoadOrCreateKey(st.Dir()); err != nil {
		cancel()
		ing.Close()
		idx.Close()
		st.Close()
		return nil, err
	}
	if cfg.MaxVideoDuration != 0 {
		pb.MaxVideoDuration = cfg.MaxVideoDuration
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_dom_sets_loaded_total", Help: "DOM checkpoint sets read from the store (kept by an earlier run)."},
		func() float64 { l, _ := pb.DOMSetCounts(); return float64(l) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_dom_sets_built_total", Help: "DOM checkpoint sets built by replaying a recording from its first event."},
		func() float64 { _, b := pb.DOMSetCounts(); return float64(b) }))
	tokens, err := access.OpenTokens(st.Dir())
	var auditLog *audit.Log
	if err == nil {
		auditLog, err = audit.Open(st.Dir())
	}
	if err != nil {
		cancel()
		ing.Close()
		idx.Close()
		st.Close()
		return nil, err
	}
	// Every recording's redaction plan is on the audit record.
	ing.OnOpen = func(m store.RecordingMeta) {
		if _, err := auditLog.Append(audit.Plan(m.ID, m.PlanDigest)); err != nil {
			log.Error("writing the audit log failed", "kind", "plan", "recording", m.ID, "err", err)
		}
	}
	denied := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flightrec_access_denied_total",
		Help: "Requests refused by access control, by reason."}, []string{"reason"})
	reg.MustRegister(denied)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_access_evaluations_total", Help: "Access decisions evaluated by the policy (cache misses)."},
		func() float64 { return float64(pol.AccessEvaluations()) }))
	a := &App{Store: st, Index: idx, Proj: proj, Ingest: ing, Playback: pb, Policy: pol, Tokens: tokens, stopping: make(chan struct{}),
		Audit: auditLog, Registry: reg, log: log, edge: edge, cfg: cfg, cancel: cancel}
	a.Sweeper = &retention.Sweeper{Store: st, Index: idx, Policy: pol, Pins: retention.NewPins(st, nil), Audit: auditLog, Log: log}
	pb.Decorate = func(ctx context.Context, row store.RecordingRow) any {
		return a.Sweeper.Status(ctx, row, time.Now())
	}
	if cfg.RetentionInterval > 0 {
		go a.Sweeper.Run(ctx, cfg.RetentionInterval)
	}
	a.Guard = &access.Guard{Tokens: tokens, Policy: pol, Anonymous: !cfg.RequireTokens, Log: log, Edge: edge, Denied: denied,
		Public: publicRoutes(),
		ProjectOf: func(_ context.Context, id string) (string, bool) {
			m, err := st.Meta(id)
			return m.Project, err == nil
		},
		GroupProject: pb.GroupProject}
	a.router = a.routes()
	a.Guard.Router = a.router
	return a, nil
}

// publicRoutes need no token: health, readiness, the API document, the
// attestation key, and the player's pages (they carry no data; the API
// calls they make are guarded).
func publicRoutes() map[string]bool {
	m := map[string]bool{"/healthz": true, "/readyz": true, "/v1/openapi.json": true, "/v1/attestation/key": true}
	for _, r := range ui.Public {
		m[r] = true
	}
	return m
}

// Handler is the HTTP handler of every route.
func (a *App) Handler() http.Handler { return a.router }

// Router exposes the chi router (the OpenAPI test walks it).
func (a *App) Router() chi.Router { return a.router }

func (a *App) routes() *chi.Mux {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, a.accessLog, a.Guard.Middleware, a.damageGate(r))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		a.edge.Fail(w, r, wire.New(http.StatusNotFound, "NO_ROUTE", "see GET /v1/openapi.json", "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		a.edge.Fail(w, r, wire.New(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "see GET /v1/openapi.json",
			"method not allowed on this route"))
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	r.Get("/readyz", a.handleReady)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{}))
	r.Get("/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI)
	})
	a.Ingest.Routes(r)
	r.Post("/v1/recordings/{id}/repair", a.handleRepair)
	a.Playback.Routes(r)
	access.Routes(r, a.Tokens, a.edge)
	a.Sweeper.Routes(r, a.edge)
	r.Post("/v1/index/rebuild", a.handleRebuild)
	audit.Routes(r, a.Audit, a.edge)
	ui.Routes(r)
	return r
}

func (a *App) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := a.Index.Recordings(ctx, store.RecordingFilter{Limit: 1}); err != nil {
		if sqlite.Corrupt(err) {
			a.log.Error("the index is damaged", "err", err)
			a.edge.Fail(w, r, indexCorrupt(a.Store.Dir(), err))
			return
		}
		e := wire.New(http.StatusServiceUnavailable, "INDEX_UNAVAILABLE", "check the index backend", "index not ready")
		e.RetryAfter = 1
		a.edge.Fail(w, r, e)
		return
	}
	probe := filepath.Join(a.Store.Dir(), ".ready-probe")
	if err := os.WriteFile(probe, []byte("ok"), 0o644); err != nil {
		e := wire.New(http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE", "check the data directory",
			"data directory not writable")
		e.RetryAfter = 1
		a.edge.Fail(w, r, e)
		return
	}
	_ = os.Remove(probe)
	// Damaged recordings do not make the service unready (every other
	// recording is served), but they are listed with what to do.
	var b strings.Builder
	b.WriteString("ready\n")
	for _, d := range a.Ingest.Damaged() {
		fmt.Fprintf(&b, "damaged recording %s: %s; next: %s\n", d.ID, d.What, d.Next())
	}
	_, _ = w.Write([]byte(b.String()))
}

// damageGate answers RECORDING_DAMAGED for every route of a recording that
// recovery could not read (its meta.json or manifest); a recording whose
// log is damaged is still read here (its intact records), and ingest
// refuses its appends.
func (a *App) damageGate(mux *chi.Mux) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx := chi.NewRouteContext()
			if route := mux.Find(rctx, r.Method, r.URL.Path); strings.HasPrefix(route, "/v1/recordings/{id}") {
				if d, ok := a.Ingest.DamageOf(rctx.URLParam("id")); ok && d.Unreadable {
					e := d.Error()
					a.edge.Fail(w, r, e)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// accessLog logs each request by route pattern, never by raw URL: query
// strings may carry anything.
func (a *App) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Off (the default level), it costs nothing per request.
		if !a.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := chi.RouteContext(r.Context()).RoutePattern()
		a.log.Debug("request", "method", r.Method, "route", route, "status", ww.Status(),
			"bytes", ww.BytesWritten(), "ms", time.Since(start).Milliseconds())
	})
}

// Close stops the projector after it has indexed what is pending, closes
// open logs and the index. Recordings stay open on disk.
func (a *App) Close() error {
	a.closed.Do(func() {
		close(a.stopping)
		a.Ingest.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		flushErr := a.Proj.Flush(ctx)
		a.cancel()
		a.Proj.Close()
		a.Playback.Close()
		a.closeErr = errors.Join(flushErr, a.Index.Close(), a.Store.Close(), a.Audit.Close())
		a.lock.Close() // last: everything it guards is closed
	})
	return a.closeErr
}

// Serve listens on addr until ctx ends, then shuts down gracefully.
func (a *App) Serve(ctx context.Context, addr string, ready func(url string)) error {
	// Requests run under base: a graceful shutdown lets them finish for
	// a while, then cancels what still runs (a long video build stops its
	// encoder) rather than leaving it to outlive the server.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{Addr: addr, Handler: a.Handler(), BaseContext: func(net.Listener) context.Context { return base }}
	a.cfg.HTTP.apply(srv)
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	if a.lock != nil {
		_ = a.lock.SetAddr(ln.Addr().String()) // the port, if addr asked for any
	}
	if ready != nil {
		ready(fmt.Sprintf("http://%s", ln.Addr()))
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		if err != nil {
			cancelBase()
			err = errors.Join(err, srv.Close())
		}
		return err
	}
}
