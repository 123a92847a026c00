// Command flightrec is the one binary: the server and every tool that works
// on a store or talks to a server.
//
// Exit codes: 0 success; 1 the check found something (verify found a
// mismatch); 2 usage error; 3 the operation failed (server unreachable,
// storage error).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/flightrec/flightrec/wire"
)

// Exit codes.
const (
	exitOK       = 0
	exitFound    = 1
	exitUsage    = 2
	exitFailure  = 3
	usageNextMsg = "run flightrec help"
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, out, errOut io.Writer) int
}

var commands = []command{
	{"serve", "run the service (ingest, playback, metrics) on the embedded default", runServe},
	{"demo", "serve, start the demo storefront, record its two flows in Chromium, print where to play them; demo storefront serves the shop alone", runDemo},
	{"record", "run a flow file in headless Chromium and stream the recording to a server (or --data DIR)", runRecord},
	{"ingest", "send an NDJSON recording to a server, resuming across restarts", runIngest},
	{"import", "import a HAR file, a DevTools protocol log or a Playwright trace as a recording (har, cdp, playwright), or a bundle (bundle)", runImport},
	{"export", "write a finished recording as a bundle (CARv1: manifest and blobs) or a signed attestation (DSSE, in-toto)", runExport},
	{"verify", "check every meta.json, log, referenced blob and the index's counts, listing every problem (read-only); or check a bundle, or an attestation", runVerify},
	{"reindex", "rebuild the index from the logs and manifests (of --data DIR, or of a running --server URL)", runReindex},
	{"repair", "seal a recording whose log is damaged: quarantine the damaged bytes, declare the lost seqs as gaps", runRepair},
	{"clickhouse", "print the ClickHouse index schema (ddl), for one server or a cluster", runClickHouse},
	{"policy", "run the redaction policy's Rego tests, or print the plan it makes", runPolicy},
	{"rerun", "record a recording (as its flow) or a flow N times with the clock, randomness or network pinned; group the runs: reproduced k of n, not_reproduced or flaky", runRerun},
	{"evidence", "print a recording's evidence card (Markdown for an issue or pull request, or JSON): failing step, console, failed requests, links, how to verify", runEvidence},
	{"mcp", "serve a flightrec server's recordings to an agent over the Model Context Protocol (stdio; FLIGHTREC_TOKEN)", runMCP},
	{"diff", "align two recordings step by step and name the first divergence, or --group: reproduced k of n", runDiff},
	{"retention", "sweep expired recordings and unreferenced blobs now (--dry-run [--now T]: what would go)", runRetention},
	{"audit", "verify the hash-chained audit log; print a recording's redaction report", runAudit},
	{"token", "issue, revoke and list bearer tokens (project, scopes) of a data directory or a running --server URL", runToken},
	{"keys", "generate a shared deployment's key files (attestation, pseudonyms) that every node is given", runKeys},
	{"bench", "measure ingest and step reads against this machine's sha256 and fsync limits", runBench},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, out, errOut)
		}
		usage(out)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], out, errOut)
		}
	}
	printErr(errOut, false, wire.New(0, "UNKNOWN_COMMAND", usageNextMsg, "unknown command %q", args[0]))
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "flightrec records and plays back what browser-automation executors do.")
	fmt.Fprintln(w, "\nUsage: flightrec COMMAND [flags]   (flightrec COMMAND --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = fmt.Sprintf("  %-10s %s", c.name, c.summary)
	}
	sort.Strings(names)
	fmt.Fprintln(w, strings.Join(names, "\n"))
	fmt.Fprintln(w, "\nExit codes: 0 ok; 1 a check found a problem; 2 usage error; 3 the operation failed.")
}

// newFlags returns a flag set whose --help prints a summary and the flags.
func newFlags(name, synopsis string, errOut io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "Usage: flightrec %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may come before, between or after positional
// arguments (as git and kubectl take them): every command parses through
// it. Afterwards fs.Args() holds the positionals in order; "--" ends the
// flags, so what follows it is positional even if it starts with "-". It
// returns a non-negative exit code when the command should stop (help or
// a usage error).
func parse(fs *flag.FlagSet, args []string) int {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...) // flag stopped at "--" and consumed it
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Parse again with only the positionals after "--", so that fs.Args,
	// fs.Arg and fs.NArg answer them; flags already set keep their values.
	_ = fs.Parse(append([]string{"--"}, pos...))
	return -1
}

// printErr prints an error as the envelope (--json) or as two lines.
func printErr(w io.Writer, asJSON bool, err error) {
	var e *wire.Error
	if !errors.As(err, &e) {
		e = &wire.Error{Code: "FAILED", Message: err.Error(), Next: usageNextMsg}
	}
	if asJSON {
		_ = json.NewEncoder(w).Encode(wire.Envelope{Error: e})
		return
	}
	fmt.Fprintf(w, "flightrec: %s: %s\n  next: %s\n", e.Code, e.Message, e.Next)
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

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

// progress reports long work on stderr at most once a second.
func progress(w io.Writer, verb string) func(done, total int) {
	last := time.Now()
	return func(done, total int) {
		if done == total || time.Since(last) > time.Second {
			last = time.Now()
			fmt.Fprintf(w, "%s %d/%d recordings\n", verb, done, total)
		}
	}
}
