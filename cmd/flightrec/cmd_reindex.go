package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/wire"
)

// runReindex is flightrec reindex: the index rebuilt from the logs and
// manifests, of --data under its lock or of a running --server.
func runReindex(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("reindex", "reindex [--data DIR] [--index DSN] | reindex --server URL", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	server := serverFlag(fs, serverWhenTold, "rebuild the index of the server at URL, while it serves (env FLIGHTREC_TOKEN: an admin token)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	if _, ok := oneTarget(fs, errOut, *asJSON, "reindex"); !ok {
		return exitUsage
	}
	start := time.Now()
	var res app.RebuildResult
	if *server != "" {
		// The server rebuilds its own index, in step with its projector,
		// so nothing it acknowledges meanwhile is lost.
		body, err := callAPI(ctx, "POST", strings.TrimRight(*server, "/")+wire.RouteIndexRebuild, nil)
		if err == nil {
			err = json.Unmarshal(body, &res)
		}
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	} else {
		lock, err := sc.Lock("reindex", "")
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		defer lock.Close()
		// A damaged embedded index is moved aside and made anew.
		st, idx, err := sc.OpenForReindex(ctx)
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		defer st.Close()
		defer idx.Close()
		report := progress(errOut, "reindexed")
		err = st.Reindex(ctx, idx, func(done, total int) { res.Recordings = done; report(done, total) })
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	if *asJSON {
		printJSON(out, res)
		return exitOK
	}
	fmt.Fprintf(out, "reindexed %d recordings in %s\n", res.Recordings, time.Since(start).Round(time.Millisecond))
	return exitOK
}
