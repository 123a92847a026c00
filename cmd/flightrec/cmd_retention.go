package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/wire"
)

// runRetention runs a retention sweep on a server (or, with --data, on a
// store through an in-process server).
func runRetention(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] != "sweep" {
		fmt.Fprintln(errOut, "Usage: flightrec retention sweep [--dry-run [--now RFC3339]] [--json] [--server URL | --data DIR [--policy DIR] [--policy-changed]]")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitUsage
	}
	fs := newFlags("retention sweep", "retention sweep [--dry-run [--now RFC3339]] [--json] [--server URL | --data DIR [--policy DIR] [--policy-changed]]", errOut)
	server := serverFlag(fs, serverByDefault, "server URL")
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	dry := fs.Bool("dry-run", false, "only report what would be removed (with --data: reads the directory without its lock, beside a live server)")
	now := fs.String("now", "", "with --dry-run: answer what would go at this time (RFC 3339)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	policyDir := policyFlag(fs, "with --data: directory of Rego the sweep's retention classes come from, as serve's --policy")
	policyChanged := fs.Bool("policy-changed", false,
		"with --data: sweep even though serve last ran with another policy")
	if code := parse(fs, args[1:]); code >= 0 {
		return code
	}
	if *now != "" && !*dry {
		printErr(errOut, *asJSON, wire.New(0, "USAGE", "add --dry-run", "--now is only for a dry run"))
		return exitUsage
	}
	local, ok := oneTarget(fs, errOut, *asJSON, "sweep")
	if !ok {
		return exitUsage
	}
	var rep retention.Report
	var err error
	if local {
		// A server sweeps under its own policy; a sweep here must use the
		// same one, or it deletes what the server keeps.
		var pol *policy.Engine
		pol, err = policy.Load(ctx, *policyDir)
		if err == nil {
			err = checkPolicy(sc, pol.Digest(), *policyChanged)
		}
		if err == nil && *dry {
			rep, err = dryRunHere(ctx, sc, pol, *now)
		}
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	if !local || !*dry {
		if rep, err = sweepThrough(ctx, local, *server, sc, *policyDir, fs.Name(), *dry, *now, errOut); err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	if *asJSON {
		printJSON(out, rep)
		return exitOK
	}
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(out, "as of %s: %d recordings considered, %d kept (%d held by pins), %s %d\n",
		time.Unix(0, rep.Now).UTC().Format(time.RFC3339), rep.Considered, rep.Kept, rep.Pinned, verb, len(rep.Deleted))
	for _, d := range rep.Deleted {
		fmt.Fprintf(out, "  %s  %-10s %-10s expired %s (%s)\n", d.ID, d.Project, d.Class,
			time.Unix(0, d.ExpiresAt).UTC().Format(time.RFC3339), d.Why)
	}
	if !rep.DryRun {
		fmt.Fprintf(out, "freed %d bytes: %d of recordings, %d in %d blobs\n", rep.Freed(), rep.RecordingBytes, rep.BlobBytes, rep.BlobsRemoved)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(errOut, "error: %s\n", e)
	}
	if len(rep.Errors) > 0 {
		return exitFailure
	}
	return exitOK
}

// sweepThrough sweeps through the API of a server, or of one run here
// under the data directory's lock.
func sweepThrough(ctx context.Context, local bool, server string, sc app.StoreConfig, policyDir, name string, dry bool, now string, errOut io.Writer) (retention.Report, error) {
	var rep retention.Report
	base, stop, err := sendTarget(local, server, sc, policyDir, name, errOut)
	if err != nil {
		return rep, err
	}
	defer stop()
	q := url.Values{}
	if dry {
		q.Set("dry_run", "true")
	}
	if now != "" {
		q.Set("now", now)
	}
	body, err := callAPI(ctx, "POST", base+wire.RouteSweep+"?"+q.Encode(), nil)
	if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	return rep, err
}

// dryRunHere answers a dry run from the data directory opened read-only
// (store and index): no lock, so an operator previews a sweep beside a
// live server, and no byte of the directory changes. The index may lag a
// live server's log by design; a dry run reads what it holds.
func dryRunHere(ctx context.Context, sc app.StoreConfig, pol *policy.Engine, now string) (retention.Report, error) {
	at := time.Now()
	if now != "" {
		t, err := time.Parse(time.RFC3339, now)
		if err != nil {
			return retention.Report{}, wire.New(0, "BAD_PARAMETER", "give --now as RFC 3339, e.g. 2026-01-31T00:00:00Z", "--now %q is not RFC 3339", now)
		}
		at = t
	}
	st, err := sc.OpenReadOnly()
	if err != nil {
		return retention.Report{}, err
	}
	defer st.Close()
	idx, err := app.OpenIndexReadOnly(sc.Index, sc.Data)
	if err != nil {
		return retention.Report{}, wire.New(0, "INDEX_UNAVAILABLE", "run flightrec reindex (under the lock), or dry-run through a server: --server URL",
			"the index cannot be read: %v", err)
	}
	defer idx.Close()
	sw := &retention.Sweeper{Store: st, Index: idx, Policy: pol, Pins: retention.NewPins(st, nil)}
	return sw.DryRunAt(ctx, at)
}

// checkPolicy refuses a sweep under another policy than the one serve
// recorded (in the data directory, or in shared mode the object store).
func checkPolicy(sc app.StoreConfig, digest string, changed bool) error {
	doc, closeDoc, err := sc.PolicyDigest()
	if err != nil {
		return err
	}
	defer closeDoc()
	return retention.CheckPolicy(doc, digest, changed)
}
