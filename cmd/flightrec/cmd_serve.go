package main

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/gcheadroom"
	"github.com/flightrec/flightrec/wire"
)

func runServe(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("serve", "serve [flags]", errOut)
	var cfg app.Config
	serveFlags(fs, &cfg)
	var logLevel string
	envFlag(fs, &logLevel, "log-level", "info", "debug, info, warn or error")
	cpuProfile := cpuProfileFlag(fs)
	var gcHeadroom int64
	envFlag(fs, &gcHeadroom, "gc-headroom", 64<<20,
		"bytes the heap may grow by between garbage collections when little is live (0: Go's own pacing, GOGC)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	// A node keeps little live, so Go would collect every 4 MB: the
	// headroom spends memory to spare that CPU (internal/gcheadroom).
	defer gcheadroom.Start(gcHeadroom)()
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	defer stopProfile()
	log := newLogger(errOut, logLevel)
	tokens, closeTokens, err := cfg.Store.OpenTokens()
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	haveTokens := !tokens.Empty()
	closeTokens()
	loopback := app.IsLoopback(cfg.Addr)
	// Anonymous access is for loopback only: elsewhere the server needs
	// tokens to exist, unless told otherwise.
	if !loopback && !haveTokens && !cfg.InsecureAnonymous {
		printErr(errOut, false, wire.New(0, "INSECURE_ADDRESS",
			"create a token first (flightrec token create --data DIR --project '*' --scope admin), listen on 127.0.0.1, or pass --insecure-anonymous",
			"refusing to serve anonymously on non-loopback address %s: no tokens exist", cfg.Addr))
		return exitUsage
	}
	cfg.RequireTokens = !loopback && !cfg.InsecureAnonymous
	cfg.RecordPolicy = true
	a, err := app.New(cfg, log)
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	defer a.Close()
	err = a.Serve(ctx, cfg.Addr, func(url string) {
		fmt.Fprintf(out, "flightrec serving on %s (data %s, index %s)\nplayer: %s/\n", url, cfg.Store.Data, indexName(cfg.Store.Index), url)
		switch {
		case haveTokens || cfg.RequireTokens:
			fmt.Fprintf(out, "access: bearer tokens required (flightrec token list --data %s)\n", cfg.Store.Data)
		case cfg.InsecureAnonymous && !loopback:
			fmt.Fprintf(out, "access: ANONYMOUS on a non-loopback address (--insecure-anonymous): anyone who reaches it can read and write\n")
		default:
			fmt.Fprintf(out, "access: no tokens configured: anonymous access, loopback only (flightrec token create starts requiring them)\n")
		}
	})
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	return exitOK
}

// indexName names the index for humans without any password in its DSN.
func indexName(dsn string) string {
	if dsn == "" {
		return "embedded sqlite"
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		u.User = url.User(u.User.Username())
		return u.String()
	}
	return dsn
}
