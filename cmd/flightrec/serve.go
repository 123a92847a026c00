package main

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/flightrec/flightrec/internal/apierr"
	"github.com/flightrec/flightrec/internal/app"
)

func runServe(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("serve", "serve [flags]", errOut)
	var cfg app.Config
	cfg.RegisterFlags(fs)
	logLevel := fs.String("log-level", envOr("FLIGHTREC_LOG_LEVEL", "info"), "debug, info, warn or error (env FLIGHTREC_LOG_LEVEL)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	log := newLogger(errOut, *logLevel)
	// No tokens exist yet in this version: anonymous access is the only
	// mode, so it is allowed only where nobody else can reach it.
	if !app.IsLoopback(cfg.Addr) && !cfg.InsecureAnonymous {
		printErr(errOut, false, apierr.New(0, "INSECURE_ADDRESS",
			"listen on 127.0.0.1 or [::1], or pass --insecure-anonymous to serve without authentication",
			"refusing to serve anonymously on non-loopback address %s", cfg.Addr))
		return exitUsage
	}
	a, err := app.New(cfg, log)
	if err != nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	defer a.Close()
	err = a.Serve(ctx, cfg.Addr, func(url string) {
		fmt.Fprintf(out, "flightrec serving on %s (data %s, index %s)\n", url, cfg.Store.Data, indexName(cfg.Store.Index))
		fmt.Fprintf(out, "no tokens configured: anonymous access, loopback only\n")
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
