package main

import (
	"context"
	"fmt"
	"io"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/wire"
)

// runStorefront serves the demo storefront alone (flightrec demo
// storefront), until interrupted: the app a flow or an exported test runs
// against, with its gift-card bug on or off, or its frontend alone.
func runStorefront(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("demo storefront", "demo storefront [--bug] [--frontend-only] [--addr HOST:PORT] [--json]", errOut)
	addr := new(string)
	envFlagFrom(fs, addr, "addr", "FLIGHTREC_STOREFRONT_ADDR", "127.0.0.1:0", "loopback address to listen on; port 0 picks a free one")
	bug := fs.Bool("bug", false, "switch the gift-card bug on: a checkout with a gift card applied answers 500 GIFT_CARD_STATE")
	frontendOnly := fs.Bool("frontend-only", false, "serve the pages and static assets alone: every /api/ route answers 503 FRONTEND_ONLY")
	asJSON := fs.Bool("json", false, "print where it listens as JSON")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	if !app.IsLoopback(*addr) {
		printErr(errOut, *asJSON, wire.New(0, "INSECURE_ADDRESS", "run the storefront on 127.0.0.1 or [::1]",
			"the demo storefront listens on loopback only, not %s", *addr))
		return exitUsage
	}
	shop, err := demoapp.Start(demoapp.Options{Addr: *addr, GiftCardBug: *bug, FrontendOnly: *frontendOnly})
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "LISTEN_FAILED", "give a free loopback address with --addr 127.0.0.1:PORT", "%v", err))
		return exitFailure
	}
	defer shop.Close()
	if *asJSON {
		printJSON(out, map[string]any{"url": shop.URL(), "bug": *bug, "frontend_only": *frontendOnly})
	} else {
		mode := "gift-card bug off"
		if *bug {
			mode = "gift-card bug on"
		}
		if *frontendOnly {
			mode += ", frontend only: every /api/ route answers 503"
		}
		fmt.Fprintf(out, "demo storefront on %s (%s)\nserving until interrupted (Ctrl-C)\n", shop.URL(), mode)
	}
	<-ctx.Done()
	return exitOK
}
