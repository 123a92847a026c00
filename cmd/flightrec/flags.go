package main

import (
	"flag"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/objstore"
)

// Configuration comes from flags, each of which may fall back on an
// environment variable. This file is the only place that reads the
// environment for configuration (library packages read none: what they
// need arrives in their configs), and envFlag the only way a flag gets a
// fallback.

// envName is the environment variable that backs a flag by convention:
// FLIGHTREC_ and the flag's name in upper case, '-' as '_'
// (--max-event-bytes: FLIGHTREC_MAX_EVENT_BYTES).
func envName(flagName string) string {
	b := []byte("FLIGHTREC_")
	for i := 0; i < len(flagName); i++ {
		c := flagName[i]
		switch {
		case c == '-':
			c = '_'
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// flagValue is what envFlag registers.
type flagValue interface {
	string | int | int64 | time.Duration
}

// envFlag registers flag name on fs, backed by the environment variable
// envName(name): its default is def, or the variable's value where it is
// set, not empty and parses (one that does not is ignored, as before).
func envFlag[T flagValue](fs *flag.FlagSet, p *T, name string, def T, usage string) {
	envFlagFrom(fs, p, name, envName(name), def, usage)
}

// envFlagFrom is envFlag backed by the variable env, for the variables
// named otherwise (CHROMIUM, FFMPEG, FLIGHTREC_STOREFRONT_ADDR).
func envFlagFrom[T flagValue](fs *flag.FlagSet, p *T, name, env string, def T, usage string) {
	*p = def
	if s := os.Getenv(env); s != "" {
		if v, err := parseAs[T](s); err == nil {
			*p = v
		}
	}
	usage += " (env " + env + ")"
	switch q := any(p).(type) {
	case *string:
		fs.StringVar(q, name, *q, usage)
	case *int:
		fs.IntVar(q, name, *q, usage)
	case *int64:
		fs.Int64Var(q, name, *q, usage)
	case *time.Duration:
		fs.DurationVar(q, name, *q, usage)
	}
}

func parseAs[T flagValue](s string) (T, error) {
	var v T
	var err error
	switch q := any(&v).(type) {
	case *string:
		*q = s
	case *int:
		*q, err = strconv.Atoi(s)
	case *int64:
		*q, err = strconv.ParseInt(s, 10, 64)
	case *time.Duration:
		*q, err = time.ParseDuration(s)
	}
	return v, err
}

// defaultServer is where the commands that talk to a server find it
// unless told otherwise.
const defaultServer = "http://127.0.0.1:8480"

// serverFlag registers --server, the running server a command works
// through. A command whose target is a server (record, import, diff, …)
// takes $FLIGHTREC_SERVER as its default, else defaultServer; one that
// works on --data and goes through a server only when told (token,
// repair, reindex) has no default and no fallback, so a FLIGHTREC_SERVER
// set for the others does not redirect it. usage says what the server is
// for; the token it sends is serverToken's.
func serverFlag(fs *flag.FlagSet, target serverTarget, usage string) *string {
	server := new(string)
	switch target {
	case serverByDefault:
		envFlag(fs, server, "server", defaultServer, usage)
	case serverFromEnv:
		envFlag(fs, server, "server", "", usage)
	default:
		fs.StringVar(server, "server", "", usage)
	}
	return server
}

// serverTarget says where a command's --server comes from.
type serverTarget int

const (
	// serverByDefault: the command talks to a server, $FLIGHTREC_SERVER
	// or defaultServer.
	serverByDefault serverTarget = iota
	// serverFromEnv: the command reads --data unless --server or
	// $FLIGHTREC_SERVER names a server.
	serverFromEnv
	// serverWhenTold: the command works on --data unless --server names a
	// server; the environment does not.
	serverWhenTold
)

// serverToken is the bearer token every request to a server carries:
// $FLIGHTREC_TOKEN (empty: none), read here and nowhere else.
func serverToken() string { return os.Getenv("FLIGHTREC_TOKEN") }

// storeFlags adds --data, --index and --lock-timeout: every command that
// opens a store takes them.
func storeFlags(fs *flag.FlagSet, c *app.StoreConfig) {
	envFlag(fs, &c.Data, "data", defaultData, "data directory")
	envFlag(fs, &c.Index, "index", "",
		"index DSN: empty or sqlite:PATH for the embedded index (default DATA/index.sqlite), "+
			"or clickhouse://USER:PASS@HOST:9000/DB for ClickHouse")
	envFlag(fs, &c.Blobs, "blobs", "",
		"where blobs and sealed logs are kept: empty for DATA/blobs, or s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R "+
			"(credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)")
	c.BlobCredentials = objstore.CredentialsFromEnv(os.Getenv)
	envFlag(fs, &c.BlobGCGrace, "blobs-gc-grace", objblobs.DefaultGrace,
		"with --blobs: how long a sweep waits between condemning unreferenced blobs and deleting them; "+
			"the same on every node (a writer rechecks the condemned set twice per grace)")
	envFlag(fs, &c.LockTimeout, "lock-timeout", 10*time.Second,
		"how long to wait for the data directory's lock while another command holds it")
	// Every command that opens a store takes the deployment's keys: one
	// that signs (export attestation) or pseudonymizes (audit scan --fix,
	// rerun) a shared deployment's recordings must use its keys, never
	// make its own.
	envFlag(fs, &c.Keys.Attestation, "attestation-key", "",
		"with --blobs (shared mode): the deployment's attestation key file, the same on every node (flightrec keys generate DIR)")
	envFlag(fs, &c.Keys.Pseudonym, "pseudonym-key", "",
		"with --blobs (shared mode): the deployment's pseudonym key file, the same on every node (flightrec keys generate DIR)")
}

// defaultData is the data directory unless --data or $FLIGHTREC_DATA
// names another.
const defaultData = "./flightrec-data"

// dataFlag adds --data alone, for a command that reads one file of the
// data directory and opens no store.
func dataFlag(fs *flag.FlagSet) *string {
	data := new(string)
	envFlag(fs, data, "data", defaultData, "data directory")
	return data
}

// policyFlag adds --policy, the directory of Rego that extends the
// default policy.
func policyFlag(fs *flag.FlagSet, usage string) *string {
	dir := new(string)
	envFlag(fs, dir, "policy", "", usage)
	return dir
}

// ffmpegFlag adds --ffmpeg, the ffmpeg binary a server masks video and
// encodes frames' video with.
func ffmpegFlag(fs *flag.FlagSet, p *string) {
	envFlagFrom(fs, p, "ffmpeg", "FFMPEG", "", "ffmpeg binary, a path or a name on $PATH (default: ffmpeg)")
}

// serveFlags adds serve's flags (demo's too).
func serveFlags(fs *flag.FlagSet, c *app.Config) {
	storeFlags(fs, &c.Store)
	envFlag(fs, &c.Addr, "addr", "127.0.0.1:8480", "listen address")
	envFlag(fs, &c.Policy, "policy", "", "directory of Rego that extends the default redaction policy")
	fs.BoolVar(&c.InsecureAnonymous, "insecure-anonymous", false,
		"serve without authentication on a non-loopback address")
	ingestFlags(fs, &c.Ingest)
	ffmpegFlag(fs, &c.FFmpeg)
	fs.DurationVar(&c.RetentionInterval, "retention-interval", time.Hour,
		"how often expired recordings and unreferenced blobs are swept (0: only on demand)")
	c.HTTP = app.DefaultHTTPLimits
	fs.DurationVar(&c.HTTP.BodyTimeout, "body-timeout", c.HTTP.BodyTimeout,
		"longest time a client may take to send one request, body included; a slower body is cut")
	fs.DurationVar(&c.MaxVideoDuration, "max-video-duration", playback.DefaultMaxVideoDuration,
		"longest video.webm served; a longer recording's video is asked for as clips of steps")
	envFlag(fs, &c.PublicURL, "public-url", "",
		"base URL of the links the server hands out, e.g. https://flightrec.example.com (default: the request's host)")
	envFlag(fs, &c.Cluster.Node, "cluster-node", "",
		"cluster mode: this node's name; open recordings are owned by lease and acknowledged in the --blobs store (needs --blobs and --advertise)")
	envFlag(fs, &c.Cluster.Advertise, "advertise", "",
		"cluster mode: the base URL other nodes reach this one at (appends to recordings it owns are proxied there)")
	envFlag(fs, &c.Cluster.LeaseTTL, "lease-ttl", 10*time.Second,
		"cluster mode: how long a node's ownership of an open recording lasts unless renewed (renewed every third of it)")
}

// ingestFlags adds ingest's limits, each with its FLIGHTREC_… fallback.
func ingestFlags(fs *flag.FlagSet, c *ingest.Config) {
	d := ingest.DefaultLimits
	c.Limits = d // MaxStep has no flag
	envFlag(fs, &c.MaxBatchBytes, "max-batch-bytes", d.MaxBatchBytes, "largest decompressed append body in bytes")
	envFlag(fs, &c.MaxEventBytes, "max-event-bytes", d.MaxEventBytes, "largest single event (NDJSON line) in bytes")
	envFlag(fs, &c.MaxEventsPerBatch, "max-events-per-batch", d.MaxEventsPerBatch, "most events in one append")
	envFlag(fs, &c.MaxOpenRecordings, "max-open-recordings", d.MaxOpenRecordings, "most recordings open at once")
	envFlag(fs, &c.MaxOpenPerProject, "max-open-recordings-per-project", d.MaxOpenPerProject, "most recordings one project may have open at once")
	envFlag(fs, &c.OpenIdleTimeout, "open-idle-timeout", d.OpenIdleTimeout, "abort an open recording nothing was appended to for this long, measured from its last write on disk (0: never)")
	envFlag(fs, &c.MaxRecordingBytes, "max-recording-bytes", d.MaxRecordingBytes, "largest recording in stored bytes")
	envFlag(fs, &c.MaxVideoChunkBytes, "max-video-chunk-bytes", d.MaxVideoChunkBytes, "largest chunk of one video event in bytes")
	envFlag(fs, &c.MaxVideoBlockBytes, "max-video-block-bytes", d.MaxVideoBlockBytes, "largest encoded video frame in bytes")
	envFlag(fs, &c.MaxVideoGOPBytes, "max-video-gop-bytes", d.MaxVideoGOPBytes, "largest video GOP (keyframe to keyframe) in bytes, held in memory until complete")
	envFlag(fs, &c.MaxBodyMemory, "max-body-memory", d.MaxBodyMemory, "memory in bytes that request bodies being read take together: 32 MiB for bodies up to 4 MiB, the rest in slots of --max-batch-bytes plus 4 MiB, at least one (plus 32 MiB for four zstd decoders)")
	envFlag(fs, &c.MaxRecordingSpan, "max-recording-span", d.MaxRecordingSpan, "longest time from a recording's earliest event ts to its latest")
	envFlag(fs, &c.MaxClockSkew, "max-clock-skew", d.MaxClockSkew, "how far past the server's clock an event's ts may lie")
}

// recorderFlags adds the recorder's flags.
func recorderFlags(fs *flag.FlagSet, c *recorder.Config) {
	envFlagFrom(fs, &c.Chromium, "chromium", "CHROMIUM", "",
		"Chromium binary (default: "+recorder.DefaultChromium+", or chromium on $PATH)")
	fs.DurationVar(&c.StepTimeout, "step-timeout", 5*time.Second, "how long a step waits for its target or condition (a flow step's timeout overrides it)")
	fs.DurationVar(&c.FrameInterval, "frame-interval", 200*time.Millisecond, "least time between two screencast frames (200ms is 5 per second)")
	fs.IntVar(&c.JPEGQuality, "jpeg-quality", 70, "screencast JPEG quality, 1-100")
	fs.StringVar(&c.Project, "project", "default", "project of the recording")
}

// cpuProfileFlag adds --cpuprofile: off by default, it writes the
// process's CPU profile to a file until the command returns, and its
// allocation profile beside it (no endpoint to reach: the files are the
// operator's own).
func cpuProfileFlag(fs *flag.FlagSet) *string {
	return fs.String("cpuprofile", "", "write a CPU profile of this process to this file until it stops, and its allocation profile to the file's name + .allocs (off by default)")
}

// startCPUProfile starts the profile --cpuprofile asked for; the returned
// function stops and writes it ("": nothing to do).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		// What the process allocated since it started (sampled), for
		// the garbage collector's share of the CPU profile.
		if a, err := os.Create(path + ".allocs"); err == nil {
			pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
	}, nil
}
