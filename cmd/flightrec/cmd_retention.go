package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
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
	server := fs.String("server", envOr("FLIGHTREC_SERVER", "http://127.0.0.1:8480"), "server URL (env FLIGHTREC_SERVER)")
	var sc app.StoreConfig
	sc.RegisterFlags(fs)
	dry := fs.Bool("dry-run", false, "only report what would be removed (with --data: reads the directory without its lock, beside a live server)")
	now := fs.String("now", "", "with --dry-run: answer what would go at this time (RFC 3339)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	policyDir := fs.String("policy", envOr("FLIGHTREC_POLICY", ""),
		"with --data: directory of Rego the sweep's retention classes come from, as serve's --policy (env FLIGHTREC_POLICY)")
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
			err = retention.CheckPolicy(sc.Data, pol.Digest(), *policyChanged)
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
	body, err := callAPI(ctx, "POST", base+"/v1/retention/sweep?"+q.Encode(), nil)
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

// redactionHere reads recording id's redaction report from the data
// directory opened read-only.
func redactionHere(sc app.StoreConfig, id string) (*store.RedactionReport, error) {
	st, err := sc.OpenReadOnly()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	notFound := wire.New(0, "RECORDING_NOT_FOUND", "check the id: the data directory's recordings are the directories under "+layout.Of(sc.Data).Recordings(),
		"no such recording in %s", sc.Data)
	if !store.ValidRecordingID(id) {
		return nil, notFound
	}
	rep, err := st.Redaction(id)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil, notFound
	}
	return rep, err
}

// runAudit verifies the audit log, or prints a recording's redaction
// report.
func runAudit(ctx context.Context, args []string, out, errOut io.Writer) int {
	usage := "Usage: flightrec audit verify [--data DIR | FILE]\n       flightrec audit redaction REC [--server URL | --data DIR]\n       flightrec audit scan [--data DIR] [--project P] [--policy DIR]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(errOut, usage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitUsage
	}
	switch args[0] {
	case "scan":
		return runAuditScan(ctx, args[1:], out, errOut)
	case "verify":
		fs := newFlags("audit verify", "audit verify [--data DIR | FILE]", errOut)
		data := fs.String("data", envOr("FLIGHTREC_DATA", "./flightrec-data"), "data directory (env FLIGHTREC_DATA)")
		asJSON := fs.Bool("json", false, "print the report as JSON")
		if code := parse(fs, args[1:]); code >= 0 {
			return code
		}
		path := layout.Of(*data).AuditLog()
		if fs.NArg() == 1 {
			path = fs.Arg(0)
		}
		f, err := os.Open(path)
		if err != nil {
			printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the path", "%v", err))
			return exitFailure
		}
		defer f.Close()
		rep, err := audit.Verify(f)
		if err != nil {
			printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the file", "%v", err))
			return exitFailure
		}
		if *asJSON {
			printJSON(out, rep)
		}
		if !rep.OK {
			printErr(errOut, *asJSON, wire.New(0, "AUDIT_BROKEN", "the audit log was edited, truncated or reordered: keep this copy as evidence", "%v", rep.Problem))
			return exitFound
		}
		if !*asJSON {
			fmt.Fprintf(out, "audit log %s: %d entries, chain intact, head %s\n", path, rep.Entries, rep.Head.Hash)
		}
		return exitOK
	case "redaction":
		fs := newFlags("audit redaction", "audit redaction REC [--server URL | --data DIR]", errOut)
		server := fs.String("server", envOr("FLIGHTREC_SERVER", "http://127.0.0.1:8480"), "server URL (env FLIGHTREC_SERVER)")
		var sc app.StoreConfig
		sc.RegisterFlags(fs)
		if code := parse(fs, args[1:]); code >= 0 {
			return code
		}
		if fs.NArg() != 1 {
			fs.Usage()
			return exitUsage
		}
		local, ok := oneTarget(fs, errOut, false, "read")
		if !ok {
			return exitUsage
		}
		if local {
			// A report only reads: the store read-only, no lock, so it
			// runs beside a live server.
			rep, err := redactionHere(sc, fs.Arg(0))
			if err != nil {
				printErr(errOut, false, err)
				return exitFailure
			}
			printJSON(out, rep)
			return exitOK
		}
		base, stop, err := sendTarget(local, *server, sc, "", fs.Name(), errOut)
		if err != nil {
			printErr(errOut, false, err)
			return exitFailure
		}
		defer stop()
		body, err := getAPI(ctx, base+"/v1/recordings/"+url.PathEscape(fs.Arg(0))+"/redaction")
		if err != nil {
			printErr(errOut, false, err)
			return exitFailure
		}
		var v any
		_ = json.Unmarshal(body, &v)
		printJSON(out, v)
		return exitOK
	}
	printErr(errOut, false, wire.New(0, "USAGE", "flightrec audit verify|redaction|scan", "unknown audit command %q", args[0]))
	return exitUsage
}
