package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/importer"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/wire"
)

// importRead reads a whole input file into events.
type importRead func(r io.ReaderAt, size int64) ([]event.Envelope, error)

// streamed adapts an importer that reads a stream.
func streamed(read func(io.Reader) ([]event.Envelope, error)) importRead {
	return func(r io.ReaderAt, size int64) ([]event.Envelope, error) {
		return read(io.NewSectionReader(r, 0, size))
	}
}

// importFormats are the formats flightrec import reads.
var importFormats = []struct {
	name, what string
	read       importRead
}{
	{"har", "a HAR 1.2 file (Chrome DevTools: Save all as HAR); each page becomes a step", streamed(importer.HAR)},
	{"cdp", "a DevTools protocol log: a JSON array of {method, params}, or ChromeDriver's performance log", streamed(importer.CDP)},
	{"playwright", "a Playwright trace .zip (context.tracing.stop({path})); each action becomes a step", importer.Playwright},
}

func runImport(ctx context.Context, args []string, out, errOut io.Writer) int {
	synopsis := "import har|cdp|playwright|bundle [flags] FILE"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs := newFlags("import", synopsis, errOut)
		fs.Usage = func() { importUsage(errOut, synopsis) }
		if code := parse(fs, args); code >= 0 {
			return code
		}
		importUsage(errOut, synopsis)
		return exitUsage
	}
	format := args[0]
	if format == "bundle" {
		return runImportBundle(ctx, args[1:], out, errOut)
	}
	var read importRead
	for _, f := range importFormats {
		if f.name == format {
			read = f.read
		}
	}
	if read == nil {
		printErr(errOut, false, wire.New(0, "UNKNOWN_FORMAT", "run flightrec import --help",
			"unknown import format %q (want har, cdp, playwright or bundle)", format))
		return exitUsage
	}
	fs := newFlags("import "+format, "import "+format+" [--server URL | --data DIR] [flags] FILE", errOut)
	server := serverFlag(fs, serverByDefault, "server URL")
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	policyDir := policyFlag(fs, "with --data: directory of Rego that extends the default redaction policy")
	project := fs.String("project", "default", "project of the new recording")
	flow := fs.String("flow", "", "flow of the new recording")
	labels := fs.String("labels", "", "labels as k=v,k=v")
	verdict := fs.String("verdict", "pass", "verdict at finish: pass, fail, flaky, blocked or not_run")
	retryFor := fs.Duration("retry-for", 2*time.Minute, "keep retrying one request this long")
	withFrames := fs.Bool("unmasked-frames", false,
		"also import screencast frames: the frames of a DevTools log or a Playwright trace carry no mask rectangles, so nothing in them can be masked; by default they are left out (fail closed)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code := parse(fs, args[1:]); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	local, ok := oneTarget(fs, errOut, *asJSON, "import")
	if !ok {
		return exitUsage
	}
	file := fs.Arg(0)
	fh, err := os.Open(file)
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the file path", "%v", err))
		return exitFailure
	}
	var src io.ReaderAt = fh
	var size int64
	st, err := fh.Stat()
	if err == nil {
		size = st.Size()
	}
	if err == nil && !st.Mode().IsRegular() {
		// A pipe (/dev/stdin, <(…)): read it whole for random access.
		var data []byte
		data, err = io.ReadAll(fh)
		src, size = bytes.NewReader(data), int64(len(data))
	}
	if err != nil {
		fh.Close()
		printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the file", "%s: %v", file, err))
		return exitFailure
	}
	evs, err := read(src, size)
	fh.Close()
	if err != nil {
		var ie *importer.InputError
		if errors.As(err, &ie) {
			printErr(errOut, *asJSON, wire.New(0, "MALFORMED_INPUT", "fix the file; nothing was stored", "%s: %s", file, ie.Error()))
			return exitUsage
		}
		printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the file", "%s: %v", file, err))
		return exitFailure
	}

	if !*withFrames {
		evs = importer.Without(evs, event.KindFrame)
	}
	open := wire.OpenRequest{Project: *project, Flow: *flow, Executor: "flightrec import " + format}
	if *labels != "" {
		open.Labels = map[string]string{}
		for _, kv := range strings.Split(*labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			open.Labels[k] = v
		}
	}
	base, done, err := openTarget(local, *server, sc, *policyDir, fs.Name(), errOut, *asJSON)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer done()
	c := newClient(base, true, *retryFor, errOut)
	res, err := importer.Send(ctx, c, open, evs, *verdict)
	if err != nil {
		e := &wire.Error{Code: "IMPORT_FAILED", Message: err.Error(),
			Next: "check that flightrec serve runs at " + base + ", or import with --data DIR"}
		var ae *wire.Error
		if errors.As(err, &ae) {
			c := *ae
			e = &c
		}
		if res.ID != "" {
			e.Message = fmt.Sprintf("recording %s is left open and incomplete: %s", res.ID, e.Message)
		}
		printErr(errOut, *asJSON, e)
		return exitFailure
	}
	if *asJSON {
		printJSON(out, res)
		return exitOK
	}
	fmt.Fprintf(out, "recording %s: %d events in %d steps\nfinished %s: root %s\n", res.ID, res.Events, res.Steps, res.Verdict, res.Root)
	return exitOK
}

func importUsage(w io.Writer, synopsis string) {
	fmt.Fprintf(w, "Usage: flightrec %s\n\nFormats:\n", synopsis)
	for _, f := range importFormats {
		fmt.Fprintf(w, "  %-10s %s\n", f.name, f.what)
	}
	fmt.Fprintf(w, "  %-10s %s\n", "bundle", "a bundle flightrec export bundle wrote: the recording is installed as it was (same id and root) into --data DIR and indexed")
	fmt.Fprintf(w, "\nScreencast frames (cdp, playwright) are left out unless --unmasked-frames: they carry\n"+
		"no mask rectangles, so redaction could mask nothing in them.\n")
	fmt.Fprintf(w, "\nflightrec import FORMAT --help lists the flags.\n")
}
