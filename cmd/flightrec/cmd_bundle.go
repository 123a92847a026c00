package main

import (
	"context"
	"errors"
	"flag"
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

// parseOne is parse for a command of exactly one argument: a missing or
// extra one is a usage error (code exitUsage).
func parseOne(fs *flag.FlagSet, args []string) (string, int) {
	if code := parse(fs, args); code >= 0 {
		return "", code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return "", exitUsage
	}
	return fs.Arg(0), -1
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

// attestation signs finished recording id's attestation and returns it
// with its signer and the recording's root. With the key made, the
// recording indexed and its failure signature recorded, it only reads
// (no lock, beside a running server too). Otherwise something must be
// written (the key, the index, the signature), and that happens only
// under the data directory's lock.
func attestation(ctx context.Context, sc app.StoreConfig, id string) ([]byte, *attest.Signer, string, error) {
	if signer, err := attest.LoadKey(sc.Data); err == nil {
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
	signer, err := attest.LoadOrCreateKey(sc.Data)
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

// verifyExtra are verify's flags for bundles and attestations.
type verifyExtra struct {
	attestation, key, recording *string
}

func registerVerifyFlags(fs *flag.FlagSet) verifyExtra {
	return verifyExtra{
		attestation: fs.String("attestation", "", "check this attestation (flightrec export attestation) against BUNDLE, or --data DIR --recording ID"),
		key:         fs.String("key", "", "with --attestation: the signer's public key, PEM (DATA/keys/attestation.pub where it was made)"),
		recording:   fs.String("recording", "", "with --attestation and --data: the recording the attestation is about"),
	}
}

// run handles verify BUNDLE and verify --attestation; done is false for
// verify of the store.
func (v verifyExtra) run(files []string, sc app.StoreConfig, asJSON bool, out, errOut io.Writer) (code int, done bool) {
	usage := func(format string, args ...any) (int, bool) {
		printErr(errOut, asJSON, wire.New(0, "USAGE", "run flightrec verify --help", format, args...))
		return exitUsage, true
	}
	switch {
	case len(files) > 1:
		return usage("verify takes one bundle file, got %d arguments", len(files))
	case *v.attestation != "":
		if *v.key == "" {
			return usage("--attestation needs --key PUB, the signer's public key")
		}
		if (len(files) == 1) == (*v.recording != "") {
			return usage("give the attestation's recording as a BUNDLE file or as --data DIR --recording ID (one of them)")
		}
		return verifyAttestation(*v.attestation, *v.key, files, *v.recording, sc, asJSON, out, errOut), true
	case *v.key != "" || *v.recording != "":
		return usage("--key and --recording go with --attestation FILE")
	case len(files) == 1:
		return verifyBundleFile(files[0], asJSON, out, errOut), true
	}
	return 0, false
}

func verifyBundleFile(path string, asJSON bool, out, errOut io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check the file path", "%v", err))
		return exitFailure
	}
	defer f.Close()
	rep, err := store.VerifyBundle(f)
	if err != nil {
		printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check the file", "%s: %v", path, err))
		return exitFailure
	}
	if asJSON {
		printJSON(out, rep)
	} else {
		printBundleReport(out, path, rep)
	}
	if !rep.OK() {
		return exitFound
	}
	return exitOK
}

func printBundleReport(out io.Writer, path string, rep *store.BundleReport) {
	fmt.Fprintf(out, "bundle %s: recording %s root %s\n", path, orDash(rep.Recording), orDash(rep.Root))
	fmt.Fprintf(out, "%d blocks (%d segments, %d blobs), %d events, %d bytes read\n",
		rep.Blocks, rep.Segments, rep.Blobs, rep.Events, rep.Bytes)
	printGaps(out, rep.Gaps)
	for _, p := range rep.Problems {
		if p.CID != "" {
			fmt.Fprintf(out, "PROBLEM cid=%s: %s\n", p.CID, p.What)
		} else {
			fmt.Fprintf(out, "PROBLEM %s\n", p.What)
		}
	}
	if rep.OK() {
		fmt.Fprintln(out, "ok")
	}
}

// printGaps states the seqs a repaired recording lost (declared by its
// manifest, so accepted).
func printGaps(out io.Writer, gaps []store.Gap) {
	for _, g := range gaps {
		to := "the end of the log"
		if g.To > 0 {
			to = fmt.Sprintf("%d", g.To)
		}
		fmt.Fprintf(out, "GAP seqs %d–%s lost to damage (declared by a repair; the damaged bytes are in %s): %s\n",
			g.From, to, g.Quarantine, g.Why)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// verifyAttestation checks an attestation's signature with the key in
// keyPath and its subject against the manifest of the bundle files[0] or
// of recording rec in the data directory.
func verifyAttestation(attPath, keyPath string, files []string, rec string, sc app.StoreConfig, asJSON bool, out, errOut io.Writer) int {
	env, err := os.ReadFile(attPath)
	if err != nil {
		printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check the --attestation path", "%v", err))
		return exitFailure
	}
	pemBytes, err := os.ReadFile(keyPath)
	if err != nil {
		printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check the --key path", "%v", err))
		return exitFailure
	}
	pub, err := attest.ParsePublicKey(pemBytes)
	if err != nil {
		printErr(errOut, asJSON, wire.New(0, "BAD_KEY", "give the PEM public key (DATA/keys/attestation.pub of the signer)", "%s: %v", keyPath, err))
		return exitUsage
	}
	var manifest []byte
	var against string
	if len(files) == 1 {
		against = "bundle " + files[0]
		f, err := os.Open(files[0])
		if err != nil {
			printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check the file path", "%v", err))
			return exitFailure
		}
		defer f.Close()
		rep, err := store.VerifyBundle(f)
		if err != nil {
			printErr(errOut, asJSON, wire.New(0, "READ_FAILED", "check the file", "%s: %v", files[0], err))
			return exitFailure
		}
		if !rep.OK() {
			if !asJSON {
				printBundleReport(out, files[0], rep)
			}
			printErr(errOut, asJSON, wire.New(0, "BAD_BUNDLE", "flightrec verify "+files[0]+" lists the problems",
				"the bundle %s failed verification; the attestation was not checked", files[0]))
			return exitFound
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			printErr(errOut, asJSON, err)
			return exitFailure
		}
		if _, manifest, err = store.ReadBundleManifest(f); err != nil {
			printErr(errOut, asJSON, err)
			return exitFailure
		}
	} else {
		against = "recording " + rec + " in " + sc.Data
		st, err := sc.OpenReadOnly()
		if err != nil {
			printErr(errOut, asJSON, err)
			return exitFailure
		}
		manifest, _, _, err = st.ManifestBytes(rec)
		st.Close()
		if err != nil {
			printErr(errOut, asJSON, recordingErr(rec, err))
			return exitFailure
		}
	}
	stmt, err := attest.Verify(env, pub, manifest)
	if err != nil {
		code, next := "NOT_AN_ATTESTATION", "give a file flightrec export attestation wrote"
		switch {
		case errors.Is(err, attest.ErrSignature):
			code, next = "BAD_SIGNATURE", "the attestation was changed after signing, or another key signed it: check --key"
		case errors.Is(err, attest.ErrSubject), errors.Is(err, attest.ErrPredicate):
			code, next = "ATTESTATION_MISMATCH", "the attestation is about another recording or manifest: check which recording it was exported for"
		}
		printErr(errOut, asJSON, wire.New(0, code, next, "%s does not verify against %s: %v", attPath, against, err))
		return exitFound
	}
	p := stmt.Predicate
	if asJSON {
		printJSON(out, map[string]any{"ok": true, "key_id": attest.KeyID(pub), "statement": stmt})
		return exitOK
	}
	fmt.Fprintf(out, "attestation %s: signed by key %s\nrecording %s root %s: project %s, verdict %s, %d events in %d steps\nok\n",
		attPath, attest.KeyID(pub), p.Recording, p.Root, p.Project, orDash(p.Verdict), p.Events, p.Steps)
	return exitOK
}

// runImportBundle is flightrec import bundle FILE.
func runImportBundle(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("import bundle", "import bundle [--data DIR] [--index DSN] [--json] FILE", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	file, code := parseOne(fs, args)
	if code >= 0 {
		return code
	}
	f, err := os.Open(file)
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the file path", "%v", err))
		return exitFailure
	}
	defer f.Close()
	st, idx, closeAll, err := openForWrite(sc, "import bundle")
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer closeAll()
	id, root, err := st.ImportBundle(f)
	switch {
	case errors.Is(err, store.ErrBadBundle):
		printErr(errOut, *asJSON, wire.New(0, "MALFORMED_INPUT", "the bundle is damaged and nothing was installed; flightrec verify "+file+" lists the problems",
			"%s: %v", file, err))
		return exitUsage
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrOpen):
		printErr(errOut, *asJSON, wire.New(0, "RECORDING_EXISTS", "the data directory holds another recording of that id; import into another --data DIR",
			"%v", err))
		return exitFailure
	case err != nil:
		printErr(errOut, *asJSON, wire.New(0, "IMPORT_FAILED", "check the data directory", "%s: %v", file, err))
		return exitFailure
	}
	if err := st.IndexRecording(ctx, idx, id); err != nil {
		printErr(errOut, *asJSON, wire.New(0, "INDEX_FAILED", "the recording is stored; run flightrec reindex",
			"recording %s root %s was imported but not indexed: %v", id, root, err))
		return exitFailure
	}
	if *asJSON {
		printJSON(out, map[string]string{"id": id, "root": root})
		return exitOK
	}
	fmt.Fprintf(out, "imported %s root %s\n", id, root)
	return exitOK
}

// openForWrite is sc.OpenForWrite for a command that closes everything
// when it returns: closeAll closes the index and the store, then releases
// the lock, so no other writer opens the directory while they still write.
func openForWrite(sc app.StoreConfig, command string) (st *store.Store, idx store.Index, closeAll func(), err error) {
	st, idx, lock, err := sc.OpenForWrite(command)
	if err != nil {
		return nil, nil, nil, err
	}
	return st, idx, func() {
		idx.Close()
		st.Close()
		lock.Close()
	}, nil
}
