package main

import (
	"context"
	"io"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flightrec/flightrec/mcp"
	"github.com/flightrec/flightrec/wire"
)

// runMCP serves the recordings of a flightrec server to an agent over the
// Model Context Protocol on stdin and stdout (package mcp). The token is
// FLIGHTREC_TOKEN's: the agent sees what that token reads, redacted as
// stored. Stdout is the protocol's, so everything else goes to errOut.
func runMCP(ctx context.Context, args []string, _, errOut io.Writer) int {
	fs := newFlags("mcp", "mcp [--server URL] [--max-reply-bytes N]   (stdio; FLIGHTREC_TOKEN: a read token)", errOut)
	server := serverFlag(fs, serverByDefault, "the flightrec server to read (FLIGHTREC_TOKEN: a read token)")
	var maxReply int
	envFlag(fs, &maxReply, "max-reply-bytes", mcp.DefaultMaxReplyBytes, "the most bytes one tool reply holds; longer ones are paged with a cursor")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	srv, err := mcp.NewServer(mcp.Config{Server: *server, Token: serverToken(), MaxReplyBytes: maxReply})
	if err != nil {
		printErr(errOut, false, wire.New(0, "USAGE", "give --server URL and a --max-reply-bytes of at least 2048", "%v", err))
		return exitUsage
	}
	if err := srv.Run(ctx, &sdk.StdioTransport{}); err != nil && ctx.Err() == nil {
		printErr(errOut, false, err)
		return exitFailure
	}
	return exitOK
}
