package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/store"
)

func runVerify(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("verify", "verify [--data DIR] [--json]\n"+
		"       flightrec verify [--json] BUNDLE\n"+
		"       flightrec verify --attestation FILE --key PUB (BUNDLE | --data DIR --recording ID)", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	extra := registerVerifyFlags(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if code, done := extra.run(fs.Args(), sc, *asJSON, out, errOut); done {
		return code
	}
	// A check reads only: no lock, so it runs beside a live server, and
	// it changes no byte of the directory it checks.
	st, err := sc.OpenReadOnly()
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer st.Close()
	rep, err := st.Verify(ctx, progress(errOut, "verified"))
	if err == nil {
		// The index read-only too; one that cannot be opened is a
		// problem to list (reindex rebuilds it), not a reason to stop.
		idx, ierr := app.OpenIndexReadOnly(sc.Index, sc.Data)
		if ierr != nil {
			rep.Problems = append(rep.Problems, store.Problem{What: fmt.Sprintf("index: %v (next: flightrec reindex)", ierr)})
		} else {
			err = st.VerifyIndex(ctx, idx, rep)
			idx.Close()
		}
	}
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	if *asJSON {
		printJSON(out, rep)
	} else {
		fmt.Fprintf(out, "%d recordings (%d finished), %d blobs, %d bytes re-hashed\n",
			rep.Recordings, rep.Finished, rep.Blobs, rep.Bytes)
		for _, p := range rep.Problems {
			fmt.Fprintf(out, "PROBLEM recording=%s cid=%s: %s\n", p.Recording, p.CID, p.What)
		}
		if rep.OK() {
			fmt.Fprintln(out, "ok")
		}
	}
	if !rep.OK() {
		return exitFound
	}
	return exitOK
}

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
		body, err := callAPI(ctx, "POST", strings.TrimRight(*server, "/")+"/v1/index/rebuild", nil)
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

// progress reports long work on stderr at most once a second.
func progress(w io.Writer, verb string) func(done, total int) {
	last := time.Now()
	return func(done, total int) {
		if done == total || time.Since(last) > time.Second {
			last = time.Now()
			fmt.Fprintf(w, "%s %d/%d recordings\n", verb, done, total)
		}
	}
}
