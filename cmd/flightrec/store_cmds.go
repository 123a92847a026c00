package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/flightrec/flightrec/internal/app"
)

func runVerify(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("verify", "verify [--data DIR] [--json]\n"+
		"       flightrec verify [--json] BUNDLE\n"+
		"       flightrec verify --attestation FILE --key PUB (BUNDLE | --data DIR --recording ID)", errOut)
	var sc app.StoreConfig
	sc.RegisterFlags(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	extra := registerVerifyFlags(fs)
	files, code := parseInterleaved(fs, args)
	if code >= 0 {
		return code
	}
	if code, done := extra.run(files, sc, *asJSON, out, errOut); done {
		return code
	}
	st, idx, err := sc.Open()
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer idx.Close()
	rep, err := st.Verify(ctx, progress(errOut, "verified"))
	if err == nil {
		err = st.VerifyIndex(ctx, idx, rep)
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
	fs := newFlags("reindex", "reindex [--data DIR] [--index DSN]", errOut)
	var sc app.StoreConfig
	sc.RegisterFlags(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	st, idx, err := sc.OpenForReindex(ctx)
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	defer idx.Close()
	start := time.Now()
	if err := st.Reindex(ctx, idx, progress(errOut, "reindexed")); err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	fmt.Fprintf(out, "reindexed in %s\n", time.Since(start).Round(time.Millisecond))
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
