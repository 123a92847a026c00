package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/wire"
)

// runAudit verifies the audit log, or prints a recording's redaction
// report.
func runAudit(ctx context.Context, args []string, out, errOut io.Writer) int {
	usage := "Usage: flightrec audit verify [--data DIR | FILE | --blobs s3://…]\n       flightrec audit redaction REC [--server URL | --data DIR]\n       flightrec audit scan [--data DIR] [--project P] [--policy DIR]"
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
		fs := newFlags("audit verify", "audit verify [--data DIR | FILE | --blobs s3://…]", errOut)
		var sc app.StoreConfig
		storeFlags(fs, &sc)
		asJSON := fs.Bool("json", false, "print the report as JSON")
		if code := parse(fs, args[1:]); code >= 0 {
			return code
		}
		if sc.Blobs != "" && fs.NArg() == 0 {
			return verifyChains(ctx, sc, *asJSON, out, errOut)
		}
		path := layout.Of(sc.Data).AuditLog()
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
		server := serverFlag(fs, serverByDefault, "server URL")
		var sc app.StoreConfig
		storeFlags(fs, &sc)
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
		body, err := getAPI(ctx, base+wire.Path(wire.RouteRedaction, fs.Arg(0)))
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

// verifyChains verifies every node's audit chain in a shared deployment's
// object store, and their union.
func verifyChains(ctx context.Context, sc app.StoreConfig, asJSON bool, out, errOut io.Writer) int {
	obj, err := objstore.Open(sc.Blobs, sc.BlobCredentials)
	if err != nil {
		printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check --blobs and the AWS_* credentials", "--blobs: %v", err))
		return exitFailure
	}
	if c, ok := obj.(io.Closer); ok {
		defer c.Close()
	}
	rep, err := audit.VerifyChains(ctx, obj)
	if err != nil {
		printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check that the object store is reachable", "%v", err))
		return exitFailure
	}
	if asJSON {
		printJSON(out, rep)
	}
	if !rep.OK {
		printErr(errOut, asJSON, wire.New(0, "AUDIT_BROKEN",
			"an audit chain was edited, truncated or reordered, or copied into another: keep the objects as evidence", "%s", rep.Broken()))
		return exitFound
	}
	if !asJSON {
		for _, c := range rep.Chains {
			fmt.Fprintf(out, "audit chain %s: %d entries, intact, head %s\n", c.Chain, c.Entries, c.Head.Hash)
		}
		fmt.Fprintf(out, "%d chains, %d entries, union digest %s\n", len(rep.Chains), rep.Entries, rep.Digest)
	}
	return exitOK
}
