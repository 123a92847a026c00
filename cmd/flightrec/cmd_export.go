package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

var exportKinds = []struct{ name, what string }{
	{"bundle", "the recording's manifest and every blob it references as one CARv1 file (default ID.car); flightrec verify FILE checks it offline, flightrec import bundle FILE installs it elsewhere under the same root"},
	{"flow", "the recording as a flow file (default ID.flow.yaml): each step's action with a role and name target, its waits and checks, values typed into masked fields as {{params}}; flightrec record runs it"},
	{"playwright", "the recording as a Playwright Test spec (default ID.spec.ts): getByRole locators, expect for its checks, masked values from environment variables; it fails where the recording failed until the bug is fixed"},
	{"attestation", "a DSSE envelope holding an in-toto statement about the recording's manifest, signed with the data directory's ed25519 key (DATA/keys/attestation.key, made on first use; default ID.intoto.json)"},
}

func exportUsage(w io.Writer, synopsis string) {
	fmt.Fprintf(w, "Usage: flightrec %s\n\nWhat:\n", synopsis)
	for _, k := range exportKinds {
		fmt.Fprintf(w, "  %-12s %s\n", k.name, k.what)
	}
	fmt.Fprintf(w, "\nA bundle or an attestation needs a finished recording. A bundle only reads --data DIR, beside a running server too; an attestation does as well\n"+
		"once the key exists (DATA/keys), and otherwise takes the directory's lock to make it.\n")
	fmt.Fprintf(w, "A flow or a Playwright spec reads --data DIR (read-only) or --server URL, open recordings too.\n")
	fmt.Fprintf(w, "flightrec export bundle|attestation|flow|playwright --help lists the flags.\n")
}

func runExport(ctx context.Context, args []string, out, errOut io.Writer) int {
	synopsis := "export bundle|attestation|flow|playwright [flags] ID"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs := newFlags("export", synopsis, errOut)
		fs.Usage = func() { exportUsage(errOut, synopsis) }
		if code := parse(fs, args); code >= 0 {
			return code
		}
		exportUsage(errOut, synopsis)
		return exitUsage
	}
	kind := args[0]
	if kind == "flow" || kind == "playwright" {
		return runExportFlow(ctx, kind, args[1:], out, errOut)
	}
	if kind != "bundle" && kind != "attestation" {
		printErr(errOut, false, wire.New(0, "UNKNOWN_FORMAT", "run flightrec export --help",
			"unknown export %q (want bundle, attestation, flow or playwright)", kind))
		return exitUsage
	}
	def := "ID.car"
	if kind == "attestation" {
		def = "ID.intoto.json"
	}
	fs := newFlags("export "+kind, "export "+kind+" [--data DIR] [-o FILE] [--json] ID", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	outFile := fs.String("o", "", "output file, - for stdout (default "+def+")")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	id, code := parseOne(fs, args[1:])
	if code >= 0 {
		return code
	}
	if !store.ValidRecordingID(id) {
		printErr(errOut, *asJSON, wire.New(0, "NOT_FOUND", "check the recording id", "%q is not a recording id", id))
		return exitFailure
	}
	path := *outFile
	if path == "" {
		path = strings.Replace(def, "ID", id, 1)
	}
	res := map[string]any{"recording": id, "file": path}
	switch kind {
	case "bundle":
		// A bundle reads only: no lock, beside a running server too.
		st, err := sc.OpenReadOnly()
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		defer st.Close()
		var root string
		n, err := writeOutput(path, out, func(w io.Writer) error {
			var err error
			root, err = st.WriteBundle(w, id)
			return err
		})
		if err != nil {
			printErr(errOut, *asJSON, recordingErr(id, err))
			return exitFailure
		}
		res["root"], res["bytes"] = root, n
	case "attestation":
		env, signer, root, err := attestation(ctx, sc, id)
		if err != nil {
			printErr(errOut, *asJSON, recordingErr(id, err))
			return exitFailure
		}
		if _, err := writeOutput(path, out, func(w io.Writer) error { _, err := w.Write(env); return err }); err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		res["root"], res["key_id"], res["public_key"] = root, signer.KeyID(), signer.PublicKeyPath()
	}
	report := out
	if path == "-" {
		report = errOut // stdout holds the export
	}
	if *asJSON {
		printJSON(report, res)
		return exitOK
	}
	if kind == "bundle" {
		fmt.Fprintf(report, "wrote %s: recording %s root %s, %d bytes\n", path, id, res["root"], res["bytes"])
	} else {
		fmt.Fprintf(report, "wrote %s: recording %s root %s, signed by key %s\npublic key: %s\n",
			path, id, res["root"], res["key_id"], res["public_key"])
	}
	return exitOK
}

// recordingErr turns a store error about recording id into the envelope.
func recordingErr(id string, err error) error {
	switch {
	case errors.Is(err, store.ErrOpen):
		return wire.New(0, "RECORDING_OPEN", "finish the recording first; only finished recordings are sealed",
			"recording %s is still open", id)
	case errors.Is(err, store.ErrNotFound):
		return wire.New(0, "NOT_FOUND", "check the recording id and --data DIR", "no finished recording %s", id)
	}
	return err
}

// writeOutput writes a file whole: to a temporary file in its directory,
// synced, then renamed over path; "-" is out. fill writes the content.
func writeOutput(path string, out io.Writer, fill func(w io.Writer) error) (n int64, err error) {
	if path == "-" {
		cw := &countWriter{w: out}
		return cw.n, fill(cw)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	cw := &countWriter{w: f}
	if err := fill(cw); err != nil {
		return 0, err
	}
	if err := f.Chmod(0o644); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return 0, err
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// attestation signs finished recording id's attestation and returns it
// with its signer and the recording's root. With the key made, the
// recording indexed and its failure signature recorded, it only reads
// (no lock, beside a running server too). Otherwise something must be
// written (the key, the index, the signature), and that happens only
// under the data directory's lock.
func attestation(ctx context.Context, sc app.StoreConfig, id string) ([]byte, *attest.Signer, string, error) {
	if signer, err := sc.Signer(false); err == nil {
		st, err := sc.OpenReadOnly()
		if err != nil {
			return nil, nil, "", err
		}
		defer st.Close()
		if idx, err := app.OpenIndexReadOnly(sc.Index, sc.Data); err == nil {
			defer idx.Close()
			env, err := playback.Attest(ctx, st, idx, signer, id)
			switch {
			case err == nil:
				root, _ := st.Root(id)
				return env, signer, root, nil
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrOpen):
				return nil, nil, "", err
			}
		}
	}
	st, idx, closeAll, err := openForWrite(sc, "export attestation")
	if err != nil {
		return nil, nil, "", err
	}
	defer closeAll()
	signer, err := sc.Signer(true)
	if err != nil {
		return nil, nil, "", err
	}
	// The failure signature comes from the indexed events (diffrun).
	env, err := playback.Attest(ctx, st, idx, signer, id)
	if errors.Is(err, playback.ErrIndexBehind) {
		// No server is projecting this data directory (we hold its
		// lock): index the recording here, then sign.
		if err = st.IndexRecording(ctx, idx, id); err == nil {
			env, err = playback.Attest(ctx, st, idx, signer, id)
		}
	}
	if err != nil {
		return nil, nil, "", err
	}
	root, _ := st.Root(id)
	return env, signer, root, nil
}
