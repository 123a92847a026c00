package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flightrec/flightrec/internal/apierr"
	"github.com/flightrec/flightrec/internal/auth"
)

// runToken manages the bearer tokens of a data directory. It works on the
// token file directly (a running server sees changes within a second), so
// the first admin token can be made before any server runs.
func runToken(_ context.Context, args []string, out, errOut io.Writer) int {
	synopsis := "token create|revoke|list --data DIR [flags]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(errOut, "Usage: flightrec %s\n\n  create --project P --scope read,ingest [--ttl 720h] [--note TEXT]\n"+
			"         issue a token; it is printed once, only its hash is kept\n"+
			"  revoke ID|TOKEN   revoke a token\n  list              list tokens (never their secrets)\n", synopsis)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitUsage
	}
	sub := args[0]
	fs := newFlags("token "+sub, "token "+sub+" --data DIR [flags]", errOut)
	data := fs.String("data", envOr("FLIGHTREC_DATA", "./flightrec-data"), "data directory (env FLIGHTREC_DATA)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var project, scopes, note *string
	var ttl *time.Duration
	if sub == "create" {
		project = fs.String("project", "", "the project the token reaches, or * for every project")
		scopes = fs.String("scope", "", "comma-separated scopes: ingest, read, pin, admin")
		ttl = fs.Duration("ttl", 0, "how long the token is valid (0: until revoked)")
		note = fs.String("note", "", "what the token is for (shown by list)")
	}
	if code := parse(fs, args[1:]); code >= 0 {
		return code
	}
	tokens, err := auth.OpenTokens(*data)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	switch sub {
	case "create":
		if fs.NArg() != 0 || *project == "" || *scopes == "" {
			printErr(errOut, *asJSON, apierr.New(0, "USAGE", "flightrec token create --project P --scope read,ingest", "--project and --scope are required"))
			return exitUsage
		}
		tok, g, err := tokens.Create(*project, strings.Split(*scopes, ","), *ttl, *note)
		if errors.Is(err, auth.ErrBadRequest) {
			printErr(errOut, *asJSON, apierr.New(0, "USAGE", "scopes are ingest, read, pin, admin; a project is a name or *", "%v", err))
			return exitUsage
		}
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		if *asJSON {
			g.Hash = ""
			printJSON(out, map[string]any{"token": tok, "grant": g})
			return exitOK
		}
		fmt.Fprintln(out, tok)
		fmt.Fprintf(errOut, "token %s for project %s, scopes %s%s: shown once, keep it secret\n",
			g.ID, g.Project, strings.Join(g.Scopes, ","), expiry(g))
		return exitOK
	case "revoke":
		if fs.NArg() != 1 {
			fs.Usage()
			return exitUsage
		}
		g, err := tokens.Revoke(fs.Arg(0))
		if err != nil {
			printErr(errOut, *asJSON, apierr.New(0, "TOKEN_NOT_FOUND", "list tokens with flightrec token list", "no such token"))
			return exitFailure
		}
		if *asJSON {
			g.Hash = ""
			printJSON(out, g)
			return exitOK
		}
		fmt.Fprintf(out, "revoked token %s (project %s)\n", g.ID, g.Project)
		return exitOK
	case "list":
		list := tokens.List()
		if *asJSON {
			for i := range list {
				list[i].Hash = ""
			}
			printJSON(out, map[string]any{"tokens": list})
			return exitOK
		}
		now := time.Now()
		for _, g := range list {
			state := "active"
			switch {
			case g.RevokedAt != 0:
				state = "revoked"
			case !g.Active(now):
				state = "expired"
			}
			fmt.Fprintf(out, "%s  %-8s project %-12s scopes %-20s created %s%s  %s\n", g.ID, state, g.Project,
				strings.Join(g.Scopes, ","), time.Unix(0, g.CreatedAt).UTC().Format(time.RFC3339), expiry(g), g.Note)
		}
		return exitOK
	}
	printErr(errOut, false, apierr.New(0, "USAGE", "flightrec token create|revoke|list", "unknown token command %q", sub))
	return exitUsage
}

func expiry(g auth.Grant) string {
	if g.ExpiresAt == 0 {
		return ""
	}
	return ", expires " + time.Unix(0, g.ExpiresAt).UTC().Format(time.RFC3339)
}
