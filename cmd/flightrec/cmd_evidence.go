package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/playback/card"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// runEvidence prints a recording's evidence card (GitHub-flavoured
// Markdown, or --format json) from a server's GET …/evidence, or built
// from --data DIR opened read-only (no lock, no attestation: reading
// changes no byte, and a signature is the server's to make). --share D
// asks the server for the card with share links living D (POST …/evidence,
// scope share), for readers without a token.
func runEvidence(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("evidence", "evidence REC [--format markdown|json] [--server URL [--share 7d] | --data DIR [--base URL]]", errOut)
	server := serverFlag(fs, serverByDefault, "server URL (FLIGHTREC_TOKEN: a read token)")
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	format := fs.String("format", "markdown", "markdown (for an issue or pull request comment) or json")
	base := fs.String("base", defaultServer, "with --data: the server URL the card's links point to")
	share := fs.String("share", "", "with --server: links that open without a token for this long (\"7d\", at most 90d; a share token)")
	id, code := parseOne(fs, args)
	if code >= 0 {
		return code
	}
	asJSON := *format == "json"
	if *format != "markdown" && !asJSON {
		printErr(errOut, false, wire.New(0, "USAGE", "give --format markdown or --format json", "unknown format %q", *format))
		return exitUsage
	}
	local, ok := oneTarget(fs, errOut, asJSON, "read")
	if !ok {
		return exitUsage
	}
	if local && *share != "" {
		printErr(errOut, asJSON, wire.New(0, "USAGE", "give --server URL with --share: share links are the server's to make",
			"--share needs a server"))
		return exitUsage
	}
	if !store.ValidRecordingID(id) {
		printErr(errOut, asJSON, wire.New(0, "NOT_FOUND", "check the recording id", "%q is not a recording id", id))
		return exitFailure
	}
	var body []byte
	var err error
	if local {
		body, err = evidenceFromStore(ctx, sc, id, *base, asJSON, errOut)
	} else {
		u := strings.TrimRight(*server, "/") + wire.Path(wire.RouteEvidence, id) + "?format=" + *format
		if *share != "" {
			req, _ := json.Marshal(map[string]string{"share": *share})
			body, err = callAPI(ctx, "POST", u, req)
		} else {
			body, err = getAPI(ctx, u)
		}
	}
	if err != nil {
		printErr(errOut, asJSON, err)
		return exitFailure
	}
	_, _ = out.Write(body)
	return exitOK
}

// evidenceFromStore builds the card from a data directory's store and
// index, both opened read-only.
func evidenceFromStore(ctx context.Context, sc app.StoreConfig, id, base string, asJSON bool, errOut io.Writer) ([]byte, error) {
	svc, done, err := readOnlyPlayback(sc, "ask a server: --server URL", errOut)
	if err != nil {
		return nil, err
	}
	defer done()
	c, err := svc.EvidenceCard(ctx, id, base)
	var we *wire.Error
	if errors.As(err, &we) && we.Code == "RECORDING_NOT_FOUND" {
		return nil, wire.New(0, "NOT_FOUND", "check the recording id and --data DIR", "no recording %s", id)
	}
	if err != nil {
		return nil, err
	}
	if asJSON {
		var b strings.Builder
		printJSON(&b, c)
		return []byte(b.String()), nil
	}
	return []byte(card.Markdown(c)), nil
}
