package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/wire"
)

// tokenStore is where token create|revoke|list act: the token file of a
// data directory (access.Tokens, under the directory's lock), or a running
// server's /v1/tokens.
type tokenStore interface {
	Create(project string, scopes []string, ttl time.Duration, note string) (string, access.Grant, error)
	Revoke(id string) (access.Grant, error)
	List() ([]access.Grant, error)
}

// localTokens is the token file of a data directory.
type localTokens struct{ *access.Tokens }

func (l localTokens) List() ([]access.Grant, error) { return l.Tokens.List(), nil }

// serverTokens is a running server's token routes (an admin token in
// $FLIGHTREC_TOKEN).
type serverTokens struct {
	ctx  context.Context
	base string
}

func (s serverTokens) Create(project string, scopes []string, ttl time.Duration, note string) (string, access.Grant, error) {
	req := map[string]any{"project": project, "scopes": scopes, "note": note}
	if ttl > 0 {
		req["ttl"] = ttl.String()
	}
	b, _ := json.Marshal(req)
	body, err := callAPI(s.ctx, "POST", s.base+wire.RouteTokens, b)
	if err != nil {
		return "", access.Grant{}, err
	}
	var res struct {
		Token string       `json:"token"`
		Grant access.Grant `json:"grant"`
	}
	err = json.Unmarshal(body, &res)
	return res.Token, res.Grant, err
}

func (s serverTokens) Revoke(id string) (access.Grant, error) {
	// Only the id travels, in the path: a token's secret stays here.
	body, err := callAPI(s.ctx, "DELETE", s.base+wire.Path(wire.RouteToken, access.TokenID(id)), nil)
	var g access.Grant
	if err == nil {
		err = json.Unmarshal(body, &g)
	}
	return g, err
}

func (s serverTokens) List() ([]access.Grant, error) {
	body, err := getAPI(s.ctx, s.base+wire.RouteTokens)
	var res struct {
		Tokens []access.Grant `json:"tokens"`
	}
	if err == nil {
		err = json.Unmarshal(body, &res)
	}
	return res.Tokens, err
}

// runToken manages the bearer tokens of a data directory, or of a running
// server with --server. On a data directory, create and revoke hold the
// directory's lock (they wait for one another, and are refused while a
// server runs there), so the first admin token can be made before any
// server runs and parallel commands lose nothing; list only reads.
func runToken(ctx context.Context, args []string, out, errOut io.Writer) int {
	synopsis := "token create|revoke|list [--data DIR | --server URL] [flags]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(errOut, "Usage: flightrec %s\n\n  create --project P --scope read,ingest [--ttl 720h] [--note TEXT]\n"+
			"         issue a token; it is printed once, only its hash is kept\n"+
			"  revoke ID|TOKEN   revoke a token\n  list              list tokens (never their secrets)\n"+
			"\nWith --server URL the server does it ($FLIGHTREC_TOKEN: an admin token); with --data DIR, the token file there.\n", synopsis)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitUsage
	}
	sub := args[0]
	if sub != "create" && sub != "revoke" && sub != "list" {
		printErr(errOut, false, wire.New(0, "USAGE", "flightrec token create|revoke|list", "unknown token command %q", sub))
		return exitUsage
	}
	fs := newFlags("token "+sub, "token "+sub+" [--data DIR | --server URL] [flags]", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	server := serverFlag(fs, serverWhenTold, "manage the tokens of the server at URL ($FLIGHTREC_TOKEN: an admin token)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var project, scopes, note *string
	var ttl *time.Duration
	if sub == "create" {
		project = fs.String("project", "", "the project the token reaches, or * for every project")
		scopes = fs.String("scope", "", "comma-separated scopes: ingest, read, pin, admin, share, comment")
		ttl = fs.Duration("ttl", 0, "how long the token is valid (0: until revoked)")
		note = fs.String("note", "", "what the token is for (shown by list)")
	}
	if code := parse(fs, args[1:]); code >= 0 {
		return code
	}
	if _, ok := oneTarget(fs, errOut, *asJSON, "change the token file"); !ok {
		return exitUsage
	}
	wantArgs := map[string]int{"create": 0, "revoke": 1, "list": 0}[sub]
	if fs.NArg() != wantArgs || sub == "create" && (*project == "" || *scopes == "") {
		printErr(errOut, *asJSON, wire.New(0, "USAGE", "run flightrec token "+sub+" --help",
			"flightrec token create needs --project and --scope; revoke needs one ID; list takes no argument"))
		return exitUsage
	}
	var tokens tokenStore
	if *server != "" {
		tokens = serverTokens{ctx: ctx, base: strings.TrimRight(*server, "/")}
	} else {
		if sub != "list" {
			lock, err := sc.Lock("token "+sub, "")
			if err != nil {
				printErr(errOut, *asJSON, err)
				return exitFailure
			}
			defer lock.Close()
		}
		// In shared mode (--blobs) the list is the deployment's, in the
		// object store: the first admin token of a fleet is made this way.
		t, closeTokens, err := sc.OpenTokens()
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		defer closeTokens()
		tokens = localTokens{t}
	}
	switch sub {
	case "create":
		return tokenCreate(tokens, *project, *scopes, *ttl, *note, *asJSON, out, errOut)
	case "revoke":
		return tokenRevoke(tokens, fs.Arg(0), *asJSON, out, errOut)
	}
	return tokenList(tokens, *asJSON, out, errOut)
}

func tokenCreate(tokens tokenStore, project, scopes string, ttl time.Duration, note string, asJSON bool, out, errOut io.Writer) int {
	tok, g, err := tokens.Create(project, strings.Split(scopes, ","), ttl, note)
	var ae *wire.Error
	switch {
	case errors.Is(err, access.ErrBadRequest), errors.As(err, &ae) && ae.Code == "BAD_REQUEST":
		printErr(errOut, asJSON, wire.New(0, "USAGE", "scopes are ingest, read, pin, admin, share, comment; a project is a name or *", "%v", err))
		return exitUsage
	case err != nil:
		printErr(errOut, asJSON, err)
		return exitFailure
	}
	if asJSON {
		g.Hash = ""
		printJSON(out, map[string]any{"token": tok, "grant": g})
		return exitOK
	}
	fmt.Fprintln(out, tok)
	fmt.Fprintf(errOut, "token %s for project %s, scopes %s%s: shown once, keep it secret\n",
		g.ID, g.Project, strings.Join(g.Scopes, ","), expiry(g))
	return exitOK
}

func tokenRevoke(tokens tokenStore, id string, asJSON bool, out, errOut io.Writer) int {
	g, err := tokens.Revoke(id)
	var ae *wire.Error
	switch {
	case errors.Is(err, access.ErrNoGrant), errors.As(err, &ae) && ae.Code == "TOKEN_NOT_FOUND":
		printErr(errOut, asJSON, wire.New(0, "TOKEN_NOT_FOUND", "list tokens with flightrec token list", "no such token"))
		return exitFailure
	case err != nil:
		printErr(errOut, asJSON, err)
		return exitFailure
	}
	if asJSON {
		g.Hash = ""
		printJSON(out, g)
		return exitOK
	}
	fmt.Fprintf(out, "revoked token %s (project %s)\n", g.ID, g.Project)
	return exitOK
}

func tokenList(tokens tokenStore, asJSON bool, out, errOut io.Writer) int {
	list, err := tokens.List()
	if err != nil {
		printErr(errOut, asJSON, err)
		return exitFailure
	}
	if asJSON {
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

func expiry(g access.Grant) string {
	if g.ExpiresAt == 0 {
		return ""
	}
	return ", expires " + time.Unix(0, g.ExpiresAt).UTC().Format(time.RFC3339)
}
