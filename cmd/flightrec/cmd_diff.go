package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// runDiff compares two recordings (or, with --group, finds the failure
// signature several share) through the read API. Its exit codes are the
// diff's own: 0 no material divergence (every run of a group shares the
// signature), 1 the runs diverge (a group has odd ones out), 2 an error.
func runDiff(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("diff", "diff A B | diff --group (REC… | GROUP) [--server URL | --data DIR] [--json]", errOut)
	server := serverFlag(fs, serverByDefault, "server URL")
	var sc app.StoreConfig
	storeFlags(fs, &sc)
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
		body, err := getAPI(ctx, base+wire.Path(wire.RouteGroup, groupID))
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
	path := wire.RouteDiff
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
	svc, done, err := readOnlyPlayback(sc, "diff through a server: --server URL", errOut)
	if err != nil {
		return "", nil, err
	}
	r := chi.NewRouter()
	svc.Routes(r)
	// Only the routes a diff asks for: the others (a video build, say)
	// may write, and nothing but this process should be served anyway.
	h := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		if p := q.URL.Path; p != wire.RouteDiff && p != wire.RouteDiffGroup && !strings.HasPrefix(p, wire.RouteGroups+"/") {
			http.NotFound(w, q)
			return
		}
		r.ServeHTTP(w, q)
	})
	return serveOnLoopback(h, done)
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
