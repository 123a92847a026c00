package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/wire"
)

// runDemo starts the service on the embedded default, serves the demo
// storefront (with its gift-card bug on), records both shipped flows in
// headless Chromium and prints where to play them back. It serves until
// interrupted, unless --exit.
func runDemo(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) > 0 && args[0] == "storefront" {
		return runStorefront(ctx, args[1:], out, errOut)
	}
	fs := newFlags("demo", "demo [--data DIR] [--addr HOST:PORT] [--exit]\n       flightrec demo storefront [--bug] [--frontend-only] [--addr HOST:PORT]", errOut)
	var cfg app.Config
	serveFlags(fs, &cfg)
	var rc recorder.Config
	recorderFlags(fs, &rc)
	exit := fs.Bool("exit", false, "stop after recording instead of serving the recordings")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if !app.IsLoopback(cfg.Addr) {
		printErr(errOut, false, wire.New(0, "INSECURE_ADDRESS", "run the demo on 127.0.0.1 or [::1]",
			"the demo serves anonymously and listens on loopback only, not %s", cfg.Addr))
		return exitUsage
	}
	// Check for the browser before anything starts, so a machine without
	// one gets the answer at once.
	if _, err := recorder.Browser(rc.Chromium); err != nil {
		printErr(errOut, false, wire.New(0, "NO_CHROMIUM", recorder.InstallHint,
			"flightrec demo records real runs in headless Chromium: %v", err))
		return exitFailure
	}
	cfg.Command = "demo"
	a, err := app.New(cfg, newLogger(errOut, "warn"))
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	defer a.Close()
	sctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx, cfg.Addr, func(url string) { ready <- url }) }()
	var base string
	select {
	case base = <-ready:
	case err := <-served:
		printErr(errOut, false, wire.New(0, "LISTEN_FAILED", "pick a free port with --addr 127.0.0.1:PORT", "%v", err))
		return exitFailure
	}
	shop, err := demoapp.Start(demoapp.Options{GiftCardBug: true})
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	defer shop.Close()
	fmt.Fprintf(out, "flightrec serving on %s (data %s)\ndemo storefront on %s (gift-card bug on)\n\n", base, cfg.Store.Data, shop.URL())

	c := client.New(base)
	c.RetryFor = 30 * time.Second
	c.Token = serverToken()
	if c.Token == "" && !a.Tokens.Empty() {
		// The store has tokens, so ingest needs one: the demo issues itself
		// a short-lived one for its project and revokes it when done.
		tok, g, err := a.Tokens.Create(rc.Project, []string{"ingest"}, 15*time.Minute, "flightrec demo")
		if err != nil {
			printErr(errOut, false, err)
			return exitFailure
		}
		defer a.Tokens.Revoke(g.ID)
		c.Token = tok
	}
	rc.Log = out
	rc.Labels = map[string]string{"demo": "true"}
	failed := false
	var ids []string
	for _, name := range demoapp.FlowNames() {
		file, data, err := demoapp.FlowFile(name)
		if err != nil {
			printErr(errOut, false, err)
			return exitFailure
		}
		fl, err := flow.Parse(file, data)
		if err != nil {
			printErr(errOut, false, err)
			return exitFailure
		}
		fmt.Fprintf(out, "recording %s\n", name)
		res, err := recorder.Record(ctx, rc, fl.Expand(shop.URL()), c)
		if err != nil {
			printErr(errOut, false, recordError(err, base, res.ID))
			failed = true
			continue
		}
		rec := base + wire.Path(wire.RouteRecording, res.ID)
		printRecordResult(out, res, rec+"/steps")
		fmt.Fprintf(out, "player: %s/r/%s\nvideo: %s/video.webm\nevidence: %s/bundle, %s/attestation\n", base, res.ID, rec, rec, rec)
		for _, f := range res.Failed {
			fmt.Fprintf(out, "page before the failed step: %s/steps/%d/dom?at=before\n", rec, f.Step)
		}
		fmt.Fprintln(out)
		ids = append(ids, res.ID)
	}
	if failed {
		return exitFailure
	}
	fmt.Fprintf(out, "recordings: %s/ (API: %s/v1/recordings)\n", base, base)
	// The two runs compared: where the failing one first diverges.
	if len(ids) == 2 && a.Proj.Flush(ctx) == nil {
		ra, errA := diffrun.Load(ctx, a.Store, a.Index, ids[0])
		rb, errB := diffrun.Load(ctx, a.Store, a.Index, ids[1])
		if errA == nil && errB == nil {
			fmt.Fprintf(out, "compare: %s/compare?a=%s&b=%s (API: %s/v1/diff?a=%s&b=%s)\n", base, ids[0], ids[1], base, ids[0], ids[1])
			if fd := diffrun.Diff(ra, rb, diffrun.Options{}).FirstDivergence; fd != nil {
				fmt.Fprintf(out, "  %s\n", fd.Explanation)
			}
		}
	}
	if *exit {
		return exitOK
	}
	fmt.Fprintln(out, "serving until interrupted (Ctrl-C)")
	if err := <-served; err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	return exitOK
}
