package main

import (
	"context"
	"fmt"
	"io"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/wire"
)

// runKeys makes a shared deployment's key files: one attestation key and
// one pseudonym key, given to every node (serve --blobs s3://…
// --attestation-key … --pseudonym-key …). A node in shared mode never
// makes its own, so that attestations and pseudonyms agree across nodes.
func runKeys(_ context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("keys", "keys generate DIR", errOut)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	rest := fs.Args()
	if len(rest) != 2 || rest[0] != "generate" {
		printErr(errOut, false, wire.New(0, "USAGE", "flightrec keys generate DIR",
			"keys takes generate and a directory to write the key files into"))
		return exitUsage
	}
	k, err := app.GenerateKeys(rest[1])
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	fmt.Fprintf(out, "wrote %s and %s (mode 0600; the public key beside them)\n"+
		"give every node of the deployment the same two files:\n"+
		"  flightrec serve --blobs s3://… --attestation-key %s --pseudonym-key %s\n", k.Attestation, k.Pseudonym, k.Attestation, k.Pseudonym)
	return exitOK
}
