// Package app assembles flightrec's modules into one server: the store, the
// index and its projector, ingest, playback, health, metrics and the OpenAPI
// document. cmd/flightrec runs it; tests start it on loopback.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
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
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/clickhouse"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/store/sqlite"
	"github.com/flightrec/flightrec/ui"
	"github.com/flightrec/flightrec/wire"
)

// StoreConfig names the data directory and the index; every command that
// opens a store takes these same flags.
type StoreConfig struct {
	Data  string
	Index string
	// Blobs is where blobs are kept: "" for the data directory's blobs/
	// (the single-node default), or an object store, s3://BUCKET/PREFIX?…
	// (objstore.Open), signed with BlobCredentials.
	Blobs           string
	BlobCredentials objstore.Credentials
	// BlobGCGrace is, on shared blobs, how long a sweep waits between
	// condemning blobs and deleting them (objblobs.DefaultGrace when 0).
	// Every node of a deployment is given the same.
	BlobGCGrace time.Duration
	// SegmentBytes is the log segment size.
	SegmentBytes int64
	// LogsDurableElsewhere: appends to open recordings' logs are not
	// fsynced, since each batch is an object in the shared store before
	// it is acknowledged and a restart discards the local copy (cluster
	// mode; New sets it from Config.Cluster).
	LogsDurableElsewhere bool
	// LockTimeout is how long a command waits for the data directory's
	// lock while another short command holds it (a server's lock is not
	// waited for).
	LockTimeout time.Duration
	// Keys are the deployment's key files, required in shared mode (Blobs
	// set) wherever a key is used, and refused without it (KeyFiles).
	Keys KeyFiles
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
	// FFmpeg is the ffmpeg binary that masks video (ingest) and encodes
	// frames' video (playback), a path or a name looked up on $PATH; ""
	// is "ffmpeg".
	FFmpeg string
	// PublicURL is the base of absolute links the server hands out (share
	// links); "" takes the request's own host.
	PublicURL string
	// Cluster, with Node set, is cluster mode (ClusterConfig).
	Cluster ClusterConfig
}

// ClusterConfig is serve's cluster mode (--cluster-node, --advertise,
// --lease-ttl): open recordings owned by lease and acknowledged in the
// shared object store (ingest.Cluster). Zero: a single node.
type ClusterConfig struct {
	Node      string
	Advertise string
	LeaseTTL  time.Duration
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

// OpenIndex opens the index a DSN names.
func OpenIndex(dsn, dataDir string) (store.Index, error) {
	switch {
	case dsn == "":
		return sqlite.Open(layout.Of(dataDir).Index())
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

// Open opens the data directory and the index of a StoreConfig; on error
// nothing stays open.
func (c StoreConfig) Open() (*store.Store, store.Index, error) {
	st, err := c.openStore()
	if err != nil {
		return nil, nil, err
	}
	idx, err := OpenIndex(c.Index, c.Data)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, idx, nil
}

// openStore opens the data directory with its blobs where c.Blobs says.
func (c StoreConfig) openStore() (*store.Store, error) {
	lo := store.LogOptions{SegmentBytes: c.SegmentBytes, DurableElsewhere: c.LogsDurableElsewhere}
	if c.Blobs == "" {
		return store.OpenStore(c.Data, lo)
	}
	b, err := OpenBlobs(context.Background(), c.Blobs, c.BlobCredentials, c.blobOptions())
	if err != nil {
		return nil, err
	}
	return store.OpenStoreWithBlobs(c.Data, lo, b)
}

// blobOptions are the shared blob store's options.
func (c StoreConfig) blobOptions() objblobs.Options {
	return objblobs.Options{Grace: c.BlobGCGrace, Refs: store.ManifestRefs, RecordingObjects: ingest.ClusterObjects}
}

// OpenBlobs opens the blob store on the object store target names
// (objstore.Open), refusing at once a server it cannot reach or whose
// bucket or credentials are wrong.
func OpenBlobs(ctx context.Context, target string, creds objstore.Credentials, opts objblobs.Options) (*objblobs.Store, error) {
	obj, err := objstore.Open(target, creds)
	if err != nil {
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	closeObj := func() {
		if c, ok := obj.(io.Closer); ok {
			c.Close()
		}
	}
	if s3, ok := obj.(*objstore.S3); ok {
		if err := s3.Check(ctx); err != nil {
			return nil, fmt.Errorf("--blobs %s: %w", obj, err)
		}
	}
	b, err := objblobs.OpenWith(ctx, obj, opts)
	if err != nil {
		closeObj()
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	return b, nil
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
	Shares   *access.Shares
	Audit    *audit.Log
	Sweeper  *retention.Sweeper
	Registry *prometheus.Registry
	lock     *store.DirLock // the data directory's, held until Close
	cfg      Config
	log      *slog.Logger
	edge     *httpx.Edge // answers, counts and logs every error reply
	router   *chi.Mux
	// stopping is closed when Close begins: an index rebuild in flight
	// stops, so that shutdown does not wait for it.
	stopping chan struct{}
	// opened closes everything New opened, newest first.
	opened   closer
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
	var opened closer
	lock, err := cfg.Store.Lock(command, addr)
	if err != nil {
		return nil, err
	}
	opened.add(lock.Close) // last: everything it guards is closed
	// In cluster mode an acknowledgement waits for the batch's object,
	// and a restarted node rebuilds an open recording from the objects
	// (ingest.Service.recover): an fsync of the local copy buys nothing.
	cfg.Store.LogsDurableElsewhere = cfg.Cluster.Node != ""
	st, idx, err := cfg.Store.Open()
	if err != nil {
		opened.close()
		return nil, startError(cfg.Store.Data, err)
	}
	a, err := assemble(cfg, log, st, idx, lock, opened)
	if err != nil {
		return nil, startError(cfg.Store.Data, err)
	}
	return a, nil
}

// NewWith is New over a store and index the caller opened (tests wrap the
// index to inject faults), without the data directory's lock. The App
// owns and closes both.
func NewWith(cfg Config, log *slog.Logger, st *store.Store, idx store.Index) (*App, error) {
	return assemble(cfg, log, st, idx, nil, closer{})
}

// assemble builds the server's modules over st and idx (and lock, the
// data directory's, when New took it), each given what it depends on when
// it is made, in dependency order; opened (what the caller opened before)
// gets what each opens, and closes all of it if one fails.
func assemble(cfg Config, log *slog.Logger, st *store.Store, idx store.Index, lock *store.DirLock, opened closer) (a *App, err error) {
	opened.add(st.Close)
	opened.add(idx.Close)
	defer func() {
		if err != nil {
			opened.close()
		}
	}()
	// Shared state first: a shared-mode node without the deployment's keys
	// refuses before it changes anything.
	shared, err := openShared(cfg, st)
	if err != nil {
		return nil, err
	}
	opened.add(shared.close)
	pol, err := policy.Load(context.Background(), cfg.Policy)
	if err != nil {
		return nil, err
	}
	if cfg.RecordPolicy {
		if err := retention.RecordPolicy(shared.policy, pol.Digest()); err != nil {
			return nil, err
		}
	}
	// Ingest writes every recording's plan to the audit log.
	auditLog, err := audit.OpenWith(st.Dir(), audit.Options{Replica: shared.auditReplica})
	if err != nil {
		return nil, err
	}
	opened.add(auditLog.Close)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// One edge answers, counts and logs every room's error replies.
	edge := httpx.NewEdge(reg, log)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_policy_evaluations_total", Help: "Redaction plans evaluated (one per recording)."},
		func() float64 { return float64(pol.Evaluations()) }))

	// A finished recording's failure signature needs it whole in the
	// index, so the projector records it once it has indexed the end.
	proj := store.NewProjector(st, idx, log, func(ctx context.Context, id string) error {
		return diffrun.RecordSignature(ctx, st, idx, id)
	})
	icfg := cfg.Ingest
	icfg.FFmpeg = cfg.FFmpeg
	cl, err := openCluster(cfg)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		opened.add(closerOf(cl.Objects))
	}
	ing, err := ingest.New(icfg, ingest.Deps{Store: st, Projector: proj, Policy: pol, Registry: reg, Log: log, Edge: edge,
		PseudonymKey: shared.pseudonymKey, Cluster: cl,
		// Every recording's redaction plan is on the audit record.
		OnOpen: func(m store.RecordingMeta) {
			if _, err := auditLog.Append(audit.Plan(m.ID, m.PlanDigest)); err != nil {
				log.Error("writing the audit log failed", "kind", "plan", "recording", m.ID, "err", err)
			}
		}})
	if err != nil {
		return nil, err
	}
	// The projector runs once ingest has recovered what it is to index.
	ctx, cancel := context.WithCancel(context.Background())
	go proj.Run(ctx)
	opened.add(func() error {
		// It indexes what is pending before it stops (ingest, closed
		// before it, sends nothing more).
		fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer fcancel()
		err := proj.Flush(fctx)
		cancel() // the projector's and the sweeper's context
		proj.Close()
		return err
	})
	opened.add(func() error { ing.Close(); return nil })
	signer, err := shared.signerOf(st.Dir())
	if err != nil {
		return nil, err
	}
	tokens, pins, err := shared.tokensAndPins(st)
	if err != nil {
		return nil, err
	}
	sweeper := &retention.Sweeper{Store: st, Index: idx, Policy: pol, Pins: pins, Audit: auditLog, Log: log}
	if cfg.RetentionInterval > 0 {
		go sweeper.Run(ctx, cfg.RetentionInterval)
	}
	shareKey, err := shared.shareKeyOf(st)
	if err != nil {
		return nil, err
	}
	shares := access.NewShares(st, shareKey, auditLog)
	pb := playback.New(playback.Config{MaxVideoDuration: cfg.MaxVideoDuration, FFmpeg: cfg.FFmpeg, PublicURL: cfg.PublicURL},
		playback.Deps{Store: st, Index: idx, Log: log, Edge: edge, Signer: signer, Audit: auditLog, Shares: shares,
			PseudonymKey: shared.pseudonymKey,
			Retention: func(ctx context.Context, row store.RecordingRow) wire.Retention {
				return sweeper.Status(ctx, row, time.Now())
			}})
	opened.add(func() error { _ = pb.Close(); return nil })
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_dom_sets_loaded_total", Help: "DOM checkpoint sets read from the store (kept by an earlier run)."},
		func() float64 { l, _ := pb.DOMSetCounts(); return float64(l) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_dom_sets_built_total", Help: "DOM checkpoint sets built by replaying a recording from its first event."},
		func() float64 { _, b := pb.DOMSetCounts(); return float64(b) }))
	denied := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flightrec_access_denied_total",
		Help: "Requests refused by access control, by reason."}, []string{"reason"})
	reg.MustRegister(denied)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flightrec_access_evaluations_total", Help: "Access decisions evaluated by the policy (cache misses)."},
		func() float64 { return float64(pol.AccessEvaluations()) }))
	// The guard finds each request's route in the router it guards: the
	// router is made first, its routes mounted once the guard exists.
	router := chi.NewRouter()
	guard := &access.Guard{Tokens: tokens, Policy: pol, Anonymous: !cfg.RequireTokens, Log: log, Edge: edge, Denied: denied,
		Public: publicRoutes(), Projects: pb, Router: router, Shares: shares}
	// An index rebuild in flight stops first, so shutdown does not wait
	// for it.
	stopping := make(chan struct{})
	opened.add(func() error { close(stopping); return nil })
	a = &App{Store: st, Index: idx, Proj: proj, Ingest: ing, Playback: pb, Policy: pol, Tokens: tokens, Guard: guard,
		Shares: shares, Audit: auditLog, Sweeper: sweeper, Registry: reg, lock: lock, log: log, edge: edge, cfg: cfg, router: router,
		stopping: stopping, opened: opened}
	a.routes(router)
	return a, nil
}

// publicRoutes need no token: health, readiness, the API document, the
// attestation key, and the player's pages (they carry no data; the API
// calls they make are guarded).
func publicRoutes() map[string]bool {
	// A share link (/s/…) is checked by its own handler and again by the
	// guard on the route it opens.
	m := map[string]bool{"/healthz": true, "/readyz": true, wire.RouteOpenAPI: true, wire.RouteAttestationKey: true, wire.RouteShareLink: true}
	for _, r := range ui.Public {
		m[r] = true
	}
	return m
}

// Handler is the HTTP handler of every route.
func (a *App) Handler() http.Handler { return a.router }

// Router exposes the chi router (the OpenAPI test walks it).
func (a *App) Router() chi.Router { return a.router }

// routes mounts every route on r.
func (a *App) routes(r *chi.Mux) {
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
	r.Get(wire.RouteOpenAPI, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI)
	})
	a.Ingest.Routes(r)
	r.Post(wire.RouteRepair, a.handleRepair)
	a.Playback.Routes(r)
	access.Routes(r, a.Tokens, a.edge)
	access.ShareRoutes(r, a.Shares, a.edge, a.cfg.PublicURL, r)
	a.Sweeper.Routes(r, a.edge)
	r.Post(wire.RouteIndexRebuild, a.handleRebuild)
	audit.Routes(r, a.Audit, a.edge)
	ui.Routes(r)
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
	probe := a.Store.Layout().ReadyProbe()
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
			if route := mux.Find(rctx, r.Method, r.URL.Path); strings.HasPrefix(route, wire.RouteRecording) {
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
// open logs and the index, and then releases the data directory's lock:
// everything New opened, in reverse order. Recordings stay open on disk.
func (a *App) Close() error {
	a.closed.Do(func() { a.closeErr = a.opened.close() })
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
