package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// Where a command works: a store under --data (opened under the data
// directory's lock to write), or a server: the one --server names, or one
// started in-process over --data so that what is sent goes through the
// same API, and the API calls that carry $FLIGHTREC_TOKEN.

// openForWrite is sc.OpenForWrite for a command that closes everything
// when it returns: closeAll closes the index and the store, then releases
// the lock, so no other writer opens the directory while they still write.
func openForWrite(sc app.StoreConfig, command string) (st *store.Store, idx store.Index, closeAll func(), err error) {
	st, idx, lock, err := sc.OpenForWrite(command)
	if err != nil {
		return nil, nil, nil, err
	}
	return st, idx, func() {
		idx.Close()
		st.Close()
		lock.Close()
	}, nil
}

// oneTarget checks that --server and --data were not both given; local
// is --data.
func oneTarget(fs *flag.FlagSet, errOut io.Writer, asJSON bool, verb string) (local, ok bool) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["server"] && set["data"] {
		printErr(errOut, asJSON, wire.New(0, "USAGE", "give --server URL to send to a running server, or --data DIR to "+verb+" into a store directly",
			"--server and --data are exclusive"))
		return false, false
	}
	return set["data"], true
}

// sendTarget is where a command that sends a recording sends it: the
// server at url, or with local (--data) an in-process server on a loopback
// port over the store of sc, so the events go through the same ingest API,
// redaction included, as over the network. stop shuts that one down.
// That server writes, so it holds the data directory's lock for command.
func sendTarget(local bool, url string, sc app.StoreConfig, policyDir, command string, errOut io.Writer) (string, func() error, error) {
	if !local {
		return url, func() error { return nil }, nil
	}
	stop, u, err := serveLocal(sc, policyDir, command, errOut)
	return u, stop, err
}

// openTarget is sendTarget whose stop, deferred by the caller as done,
// prints a failure to stop rather than lose it.
func openTarget(local bool, url string, sc app.StoreConfig, policyDir, command string, errOut io.Writer, asJSON bool) (string, func(), error) {
	u, stop, err := sendTarget(local, url, sc, policyDir, command, errOut)
	if err != nil {
		return "", nil, err
	}
	return u, func() {
		if err := stop(); err != nil {
			printErr(errOut, asJSON, err)
		}
	}, nil
}

// newClient is an ingest client for base with the token from
// $FLIGHTREC_TOKEN, which reports its retries on errOut.
func newClient(base string, gz bool, retryFor time.Duration, errOut io.Writer) *client.Client {
	c := client.New(base)
	c.Gzip, c.RetryFor = gz, retryFor
	c.Token = serverToken()
	c.OnRetry = func(err error, wait time.Duration) {
		fmt.Fprintf(errOut, "retrying in %s: %v\n", wait.Round(time.Millisecond), err)
	}
	return c
}

// serveLocal starts the server over the store of sc on a loopback port,
// for commands that take --data. stop shuts it down and closes the store.
func serveLocal(sc app.StoreConfig, policyDir, command string, errOut io.Writer) (stop func() error, url string, err error) {
	cfg := app.Config{Store: sc, Policy: policyDir, Command: command}
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, newLogger(errOut, "warn"))
	if err != nil {
		return nil, "", err
	}
	url, stop, err = serveOnLoopback(a.Handler(), a.Close)
	return stop, url, err
}

// readOnlyPlayback opens sc's store and index read-only (no lock: it runs
// beside a live server, and no byte of the directory changes) and builds
// the read API's service over them. done closes all three. elsewhere is
// the second way the refusal offers when the index cannot be read (to ask
// a server instead).
func readOnlyPlayback(sc app.StoreConfig, elsewhere string, errOut io.Writer) (svc *playback.Service, done func() error, err error) {
	st, err := sc.OpenReadOnly()
	if err != nil {
		return nil, nil, err
	}
	idx, err := app.OpenIndexReadOnly(sc.Index, sc.Data)
	if err != nil {
		st.Close()
		return nil, nil, wire.New(0, "INDEX_UNAVAILABLE", "run flightrec reindex (under the lock), or "+elsewhere,
			"the index cannot be read: %v", err)
	}
	log := newLogger(errOut, "warn")
	// No /metrics here: the edge counts without exporting.
	svc = playback.New(playback.Config{}, playback.Deps{Store: st, Index: idx, Log: log, Edge: httpx.NewEdge(nil, log)})
	return svc, func() error { return errors.Join(svc.Close(), idx.Close(), st.Close()) }, nil
}

// serveOnLoopback serves h on a loopback port until stop, which shuts the
// server down and then calls closeAll (closeAll also runs if the port
// cannot be had).
func serveOnLoopback(h http.Handler, closeAll func() error) (url string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, errors.Join(err, closeAll())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		<-done
		return errors.Join(err, closeAll())
	}, nil
}

// getAPI GETs an API URL with $FLIGHTREC_TOKEN and returns the body, or
// the server's error envelope as an error.
func getAPI(ctx context.Context, u string) ([]byte, error) { return callAPI(ctx, "GET", u, nil) }

// callAPI makes one API request with $FLIGHTREC_TOKEN.
func callAPI(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if tok := serverToken(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		base := u
		if i := strings.Index(u, "/v1/"); i > 0 {
			base = u[:i]
		}
		return nil, wire.New(0, "UNREACHABLE", "check that flightrec serve runs at "+base+", or use --data DIR", "%v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var env wire.Envelope
		if json.Unmarshal(got, &env) == nil && env.Error != nil {
			return nil, env.Error
		}
		return nil, errors.New(resp.Status)
	}
	return got, nil
}

func getAPIJSON(ctx context.Context, u string, v any) error {
	body, err := getAPI(ctx, u)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}
