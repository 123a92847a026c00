package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/wire"
)

// attachFlags are record's flags for --attach: recording a browser that
// another client drives.
type attachFlags struct {
	url     string
	prefix  string
	flow    string
	verdict string
}

func (f *attachFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "attach", "", "record the running Chromium at this DevTools endpoint (http://host:port or ws://…/devtools/browser/…) until it closes or SIGINT/SIGTERM; no flow file")
	fs.StringVar(&f.prefix, "target-url-prefix", "", "with --attach: record only pages whose URL starts with this")
	fs.StringVar(&f.flow, "flow", "", "with --attach: the flow name to file the recording under (default attached)")
	fs.StringVar(&f.verdict, "verdict", "", "with --attach: finish with this verdict (pass, fail, flaky, blocked, not_run); default: fail when a step failed, the page threw or a document or XHR got a 5xx")
}

// runRecordAttach runs record --attach: it prints one line when the pages
// open at the start are recorded (a driver may start then), and the
// result when the browser closed or the signal came.
func runRecordAttach(ctx context.Context, fs *flag.FlagSet, rf *recordFlags, af *attachFlags, labels map[string]string, out, errOut io.Writer) int {
	if fs.NArg() != 0 {
		printErr(errOut, rf.asJSON, wire.New(0, "USAGE", "drop the flow file: --attach records what another client drives",
			"--attach takes no flow file (got %q)", fs.Arg(0)))
		return exitUsage
	}
	switch af.verdict {
	case "", "pass", "fail", "flaky", "blocked", "not_run":
	default:
		printErr(errOut, rf.asJSON, wire.New(0, "USAGE", "give --verdict pass, fail, flaky, blocked or not_run, or leave it out to infer it",
			"--verdict %q is not a verdict", af.verdict))
		return exitUsage
	}
	local, ok := oneTarget(fs, errOut, rf.asJSON, "record")
	if !ok {
		return exitUsage
	}
	url, done, err := openTarget(local, *rf.server, rf.sc, *rf.policyDir, fs.Name(), errOut, rf.asJSON)
	if err != nil {
		printErr(errOut, rf.asJSON, err)
		return exitFailure
	}
	defer done()
	cfg := recorder.AttachConfig{Config: rf.rc, Flow: af.flow, TargetURLPrefix: af.prefix, Verdict: af.verdict}
	cfg.Labels = labels
	if !rf.quiet && !rf.asJSON {
		cfg.Log = out
	}
	cfg.Ready = func(pages int) {
		// On stderr, so a driver waiting for it need not parse --json.
		fmt.Fprintf(errOut, "attached to %s: recording %d page(s); stop with SIGINT or SIGTERM, or close the browser\n", af.url, pages)
	}
	res, err := recorder.Attach(ctx, cfg, af.url, newClient(url, true, time.Minute, errOut))
	if err != nil {
		e := recordError(err, url, res.ID)
		if res.ID == "" && e.Code == "RECORD_FAILED" {
			e.Next = "check that the browser runs with --remote-debugging-port and that " + af.url + " answers (curl " + af.url + "/json/version)"
		}
		printErr(errOut, rf.asJSON, e)
		return exitFailure
	}
	if rf.asJSON {
		printJSON(out, res)
		return exitOK
	}
	printRecordResult(out, res, "")
	return exitOK
}
