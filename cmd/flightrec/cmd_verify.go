package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// runVerify is flightrec verify: the store read-only (every meta.json,
// log, referenced blob and the index's counts), a bundle file, or an
// attestation.
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
