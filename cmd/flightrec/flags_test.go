package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
)

func newTestFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// TestFlagEnvFallbacks: every flag with a fallback takes its variable's
// value as its default (an empty or unparsable one is ignored), the flag
// wins over it, and the values reach the configs the libraries get.
func TestFlagEnvFallbacks(t *testing.T) {
	t.Setenv("FLIGHTREC_DATA", "/env/data")
	t.Setenv("FLIGHTREC_INDEX", "")                  // empty: the default
	t.Setenv("FLIGHTREC_LOCK_TIMEOUT", "3s")         // a duration
	t.Setenv("FLIGHTREC_MAX_EVENT_BYTES", "1234")    // an int, by convention
	t.Setenv("FLIGHTREC_MAX_BATCH_BYTES", "lots")    // unparsable: the default
	t.Setenv("FLIGHTREC_MAX_RECORDING_BYTES", "999") // an int64
	t.Setenv("FLIGHTREC_ADDR", "127.0.0.1:9")
	t.Setenv("FFMPEG", "/env/ffmpeg")
	t.Setenv("CHROMIUM", "/env/chromium")

	var cfg app.Config
	var rc recorder.Config
	fs := newTestFlags()
	serveFlags(fs, &cfg)
	recorderFlags(fs, &rc)
	if err := fs.Parse([]string{"--addr", "127.0.0.1:7", "--max-clock-skew", "1m"}); err != nil {
		t.Fatal(err)
	}
	d := ingest.DefaultLimits
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"--data from FLIGHTREC_DATA", cfg.Store.Data, "/env/data"},
		{"--index with FLIGHTREC_INDEX empty", cfg.Store.Index, ""},
		{"--lock-timeout from FLIGHTREC_LOCK_TIMEOUT", cfg.Store.LockTimeout, 3 * time.Second},
		{"--max-event-bytes from FLIGHTREC_MAX_EVENT_BYTES", cfg.Ingest.MaxEventBytes, 1234},
		{"--max-batch-bytes with an unparsable variable", cfg.Ingest.MaxBatchBytes, d.MaxBatchBytes},
		{"--max-recording-bytes from FLIGHTREC_MAX_RECORDING_BYTES", cfg.Ingest.MaxRecordingBytes, int64(999)},
		{"--max-clock-skew from the flag", cfg.Ingest.MaxClockSkew, time.Minute},
		{"MaxStep, which has no flag", cfg.Ingest.MaxStep, d.MaxStep},
		{"--addr: the flag over FLIGHTREC_ADDR", cfg.Addr, "127.0.0.1:7"},
		{"--ffmpeg from FFMPEG", cfg.FFmpeg, "/env/ffmpeg"},
		{"--chromium from CHROMIUM", rc.Chromium, "/env/chromium"},
		{"--max-video-duration's default", cfg.MaxVideoDuration, time.Hour},
		{"--body-timeout's default", cfg.HTTP.BodyTimeout, app.DefaultHTTPLimits.BodyTimeout},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	// The help names each variable.
	for name, env := range map[string]string{"data": "FLIGHTREC_DATA", "max-event-bytes": "FLIGHTREC_MAX_EVENT_BYTES",
		"ffmpeg": "FFMPEG", "chromium": "CHROMIUM", "lock-timeout": "FLIGHTREC_LOCK_TIMEOUT"} {
		if u := fs.Lookup(name).Usage; !strings.Contains(u, "(env "+env+")") {
			t.Errorf("--%s's help %q does not name %s", name, u, env)
		}
	}
}

// TestFlagServer: --server is one flag three ways: a command whose target
// is a server takes $FLIGHTREC_SERVER or the default server; export-flow
// takes $FLIGHTREC_SERVER or reads --data; token, repair and reindex go
// through a server only when the flag says so.
func TestFlagServer(t *testing.T) {
	get := func(target serverTarget, args ...string) string {
		fs := newTestFlags()
		s := serverFlag(fs, target, "server")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return *s
	}
	if got := get(serverByDefault); got != defaultServer {
		t.Errorf("by default, no variable: %q", got)
	}
	if got := get(serverFromEnv); got != "" {
		t.Errorf("from the environment, no variable: %q", got)
	}
	t.Setenv("FLIGHTREC_SERVER", "http://env:1")
	t.Setenv("FLIGHTREC_TOKEN", "frt_env")
	for _, c := range []struct {
		target serverTarget
		args   []string
		want   string
	}{
		{serverByDefault, nil, "http://env:1"},
		{serverFromEnv, nil, "http://env:1"},
		{serverWhenTold, nil, ""},
		{serverByDefault, []string{"--server", "http://flag:2"}, "http://flag:2"},
		{serverWhenTold, []string{"--server", "http://flag:2"}, "http://flag:2"},
	} {
		if got := get(c.target, c.args...); got != c.want {
			t.Errorf("target %d %v: %q, want %q", c.target, c.args, got, c.want)
		}
	}
	if serverToken() != "frt_env" {
		t.Errorf("serverToken: %q", serverToken())
	}
}
