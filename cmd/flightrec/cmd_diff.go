package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// runDiff compares two recordings (or, with --group, finds the failure
// signature several share) through the read API. Its exit codes are the
// diff's own: 0 no material divergence (every run of a group shares the
// signature), 1 the runs diverge (a group has odd ones out), 2 an error.
func runDiff(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("diff", "diff A B | diff --group (REC… | GROUP) [--server URL | --data DIR] [--json]", errOut)
	server := fs.String("server", envOr("FLIGHTREC_SERVER", "http://127.0.0.1:8480"), "server URL (env FLIGHTREC_SERVER)")
	var sc app.StoreConfig
	sc.RegisterFlags(fs)
	group := fs.Bool("group", false, "report which failure signature the recordings (or a stored group's members) share: reproduced k of n")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	ids := fs.Args()
	groupID := ""
	if *group && len(ids) == 1 && store.ValidGroupID(ids[0]) {
		groupID = ids[0]
	}
	if (!*group && len(ids) != 2) || (*group && len(ids) < 2 && groupID == "") {
		fs.Usage()
		return exitUsage
	}
	local, ok := oneTarget(fs, errOut, *asJSON, "diff")
	if !ok {
		return exitUsage
	}
	base, stop, err := *server, func() error { return nil }, error(nil)
	if local {
		base, stop, err = serveDiffReadOnly(sc, errOut)
	}
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitUsage
	}
	defer stop()
	if groupID != "" {
		// A stored group: its members are compared, and its own verdict
		// (against the seed's signature, for a rerun) is printed first.
		body, err := getAPI(ctx, base+"/v1/groups/"+groupID)
		var g store.Group
		if err == nil {
			err = json.Unmarshal(body, &g)
		}
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitUsage
		}
		if !*asJSON {
			fmt.Fprintf(out, "group %s (%s, %d members): %s\n", g.ID, g.Purpose, len(g.Members), g.Summary)
		}
		if ids = g.Members; len(ids) < 2 {
			if *asJSON {
				printJSON(out, g)
			}
			return exitOK
		}
	}
	q := url.Values{}
	path := "/v1/diff"
	if *group {
		path += "/group"
		q["id"] = ids
	} else {
		q.Set("a", ids[0])
		q.Set("b", ids[1])
	}
	body, err := getAPI(ctx, base+path+"?"+q.Encode())
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitUsage
	}
	if *group {
		var g diffrun.GroupReport
		if err := json.Unmarshal(body, &g); err != nil {
			printErr(errOut, *asJSON, err)
			return exitUsage
		}
		if *asJSON {
			printJSON(out, g)
		} else {
			printGroup(out, g)
		}
		if g.Reproduced == g.Of && g.Of > 0 {
			return exitOK
		}
		return exitFound
	}
	var rep diffrun.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		printErr(errOut, *asJSON, err)
		return exitUsage
	}
	if *asJSON {
		printJSON(out, rep)
	} else {
		fmt.Fprint(out, rep.Table())
	}
	if rep.FirstDivergence != nil {
		return exitFound
	}
	return exitOK
}

// serveDiffReadOnly serves the read API's diff and group routes on a
// loopback port over the data directory of sc opened read-only (store and
// index): a diff only reads, so it takes no lock and runs beside a live
// server, and no byte of the directory changes. The index may lag a live
// server's log by design; a diff reads what it holds. stop shuts the
// server down and closes both.
func serveDiffReadOnly(sc app.StoreConfig, errOut io.Writer) (url string, stop func() error, err error) {
	st, err := sc.OpenReadOnly()
	if err != nil {
		return "", nil, err
	}
	idx, err := app.OpenIndexReadOnly(sc.Index, sc.Data)
	if err != nil {
		st.Close()
		return "", nil, wire.New(0, "INDEX_UNAVAILABLE", "run flightrec reindex (under the lock), or diff through a server: --server URL",
			"the index cannot be read: %v", err)
	}
	log := newLogger(errOut, "warn")
	// No /metrics here: the edge counts without exporting.
	svc := playback.New(st, idx, log, httpx.NewEdge(nil, log))
	r := chi.NewRouter()
	svc.Routes(r)
	// Only the routes a diff asks for: the others (a video build, say)
	// may write, and nothing but this process should be served anyway.
	h := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		if p := q.URL.Path; p != "/v1/diff" && p != "/v1/diff/group" && !strings.HasPrefix(p, "/v1/groups/") {
			http.NotFound(w, q)
			return
		}
		r.ServeHTTP(w, q)
	})
	return serveOnLoopback(h, func() error { return errors.Join(svc.Close(), idx.Close(), st.Close()) })
}

func printGroup(out io.Writer, g diffrun.GroupReport) {
	if g.Signature == "" {
		fmt.Fprintf(out, "no failure signature: %d of %d runs have none\n", g.Reproduced, g.Of)
	} else {
		fmt.Fprintf(out, "reproduced %d of %d: %s\n", g.Reproduced, g.Of, g.Signature)
	}
	for _, id := range g.Members {
		fmt.Fprintf(out, "  %s\n", id)
	}
	for _, o := range g.Odd {
		sig := o.Signature
		if sig == "" {
			sig = "(no failure)"
		}
		fmt.Fprintf(out, "odd one out: %s  %s\n", o.ID, sig)
	}
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
	if tok := os.Getenv("FLIGHTREC_TOKEN"); tok != "" {
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
