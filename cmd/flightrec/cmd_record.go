package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/wire"
)

func runRecord(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("record", "record FLOW.yaml --base URL [--param name=value …] [--persona FILE] [--server URL | --data DIR] [flags]\n"+
		"       flightrec record --attach CDP_URL [--target-url-prefix P] [--flow NAME] [--verdict V] [--server URL | --data DIR] [flags]", errOut)
	var rf recordFlags
	rf.register(fs, "server URL (env FLIGHTREC_SERVER)")
	base := fs.String("base", "", "the app's base URL, for {{base}} and /paths in the flow")
	labels := fs.String("labels", "", "labels as k=v,k=v")
	var af attachFlags
	af.register(fs)
	rc, asJSON := &rf.rc, &rf.asJSON
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if af.url != "" {
		return runRecordAttach(ctx, fs, &rf, &af, parseLabels(*labels), out, errOut)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	local, ok := oneTarget(fs, errOut, *asJSON, "record")
	if !ok {
		return exitUsage
	}
	fl, err := flow.ParseFile(fs.Arg(0))
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "BAD_FLOW", "fix the flow file at the line named", "%v", err))
		return exitUsage
	}
	if *base == "" && flowNeedsBase(fl) {
		printErr(errOut, *asJSON, wire.New(0, "USAGE", "pass --base http://HOST:PORT, the app the flow runs against",
			"the flow uses {{base}} or paths, and no --base was given"))
		return exitUsage
	}
	if fl, err = bindFlow(fl, &rf.params, rf.persona, *base); err != nil {
		printErr(errOut, *asJSON, err)
		return exitUsage
	}
	rc.Labels = parseLabels(*labels)
	url, c, done, code := rf.start(local, out, errOut, fs.Name())
	if code >= 0 {
		return code
	}
	defer done()
	res, err := recorder.Record(ctx, *rc, fl, c)
	if err != nil {
		printErr(errOut, *asJSON, recordError(err, url, res.ID))
		return exitFailure
	}
	if *asJSON {
		printJSON(out, res)
		return exitOK
	}
	printRecordResult(out, res, "")
	return exitOK
}

// recordFlags are the flags of the commands that record a flow (record,
// rerun): where recordings go, the flow's parameters, the recorder's own.
type recordFlags struct {
	server    *string
	sc        app.StoreConfig
	policyDir *string
	params    paramFlag
	persona   string
	rc        recorder.Config
	quiet     bool
	asJSON    bool
}

func (f *recordFlags) register(fs *flag.FlagSet, serverHelp string) {
	f.server = serverFlag(fs, serverByDefault, serverHelp)
	storeFlags(fs, &f.sc)
	f.policyDir = policyFlag(fs, "with --data: directory of Rego that extends the default redaction policy")
	fs.Var(&f.params, "param", "a flow parameter as name=value (repeatable); also env FLIGHTREC_PARAM_NAME, or --persona")
	fs.StringVar(&f.persona, "persona", "", "a YAML file of parameter values (name: value); --param and FLIGHTREC_PARAM_… override it")
	recorderFlags(fs, &f.rc)
	fs.BoolVar(&f.quiet, "quiet", false, "print no line per step")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
}

// start points the recorder's progress lines at out (unless quiet or
// JSON), checks for the browser, then opens where recordings go (the
// server, or one over --data) and a client for it; code is -1 when both
// are ready, else the exit code, the error printed.
func (f *recordFlags) start(local bool, out, errOut io.Writer, command string) (string, *client.Client, func(), int) {
	if !f.quiet && !f.asJSON {
		f.rc.Log = out
	}
	if _, err := recorder.Browser(f.rc.Chromium); err != nil {
		printErr(errOut, f.asJSON, recordError(err, "", ""))
		return "", nil, nil, exitFailure
	}
	url, done, err := openTarget(local, *f.server, f.sc, *f.policyDir, command, errOut, f.asJSON)
	if err != nil {
		printErr(errOut, f.asJSON, err)
		return "", nil, nil, exitFailure
	}
	return url, newClient(url, true, time.Minute, errOut), done, -1
}

// bindFlow supplies fl's parameters (a persona file, then the
// environment, then --param) and expands it against base; a run missing
// any is refused before a browser starts.
func bindFlow(fl *flow.Flow, params *paramFlag, persona, base string) (*flow.Flow, error) {
	if err := params.check(); err != nil {
		return nil, err
	}
	values, err := paramValues(fl, params.values, persona, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if fl, err = fl.Bind(values); err != nil {
		return nil, missingParams(err)
	}
	return fl.Expand(base), nil
}

// parseLabels reads --labels k=v,k=v; "" is none.
func parseLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// paramFlag collects --param name=value, the last of a name winning.
// Values may be secrets: a malformed one is noted, not refused, because
// the flag package would quote it in its error; check reports it later
// by its position alone.
type paramFlag struct {
	values map[string]string
	bad    []int // 1-based positions of malformed --param values
	n      int
}

func (p *paramFlag) String() string { return "" } // never prints a value

func (p *paramFlag) Set(kv string) error {
	p.n++
	k, v, ok := strings.Cut(kv, "=")
	if !ok || !flow.ValidParamName(k) {
		p.bad = append(p.bad, p.n)
		return nil
	}
	if p.values == nil {
		p.values = map[string]string{}
	}
	p.values[k] = v
	return nil
}

// check refuses malformed --param values, naming their positions only.
func (p *paramFlag) check() error {
	if len(p.bad) == 0 {
		return nil
	}
	return wire.New(0, "USAGE", "write --param name=value, the name in lower-case letters, digits and _ (card_number)",
		"--param number %v is not name=value", p.bad)
}

// paramValues gathers the values of fl's parameters: a persona file's,
// overridden by FLIGHTREC_PARAM_<NAME> from the environment (lookup),
// overridden by --param. Errors never quote a value.
func paramValues(fl *flow.Flow, params map[string]string, persona string, lookup func(string) (string, bool)) (map[string]string, error) {
	values := map[string]string{}
	if persona != "" {
		data, err := os.ReadFile(persona)
		if err != nil {
			return nil, wire.New(0, "BAD_PERSONA", "give --persona a readable YAML file of name: value", "%v", err)
		}
		if values, err = flow.ParsePersona(persona, data); err != nil {
			return nil, wire.New(0, "BAD_PERSONA", "fix the persona file at the line named", "%v", err)
		}
	}
	for _, pr := range fl.Params {
		if v, ok := lookup(flow.ParamEnv(pr.Name)); ok {
			values[pr.Name] = v
		}
	}
	for k, v := range params {
		values[k] = v
	}
	return values, nil
}

// missingParams is the refusal of a flow run without all its parameters.
func missingParams(err error) error {
	var me *flow.MissingParamsError
	if !errors.As(err, &me) {
		return err
	}
	var ways []string
	for _, n := range me.Names {
		ways = append(ways, fmt.Sprintf("--param %s=… or %s", n, flow.ParamEnv(n)))
	}
	return wire.New(0, "MISSING_PARAM", "supply "+strings.Join(ways, "; ")+", or a --persona FILE with them", "%v", err)
}

// flowNeedsBase says whether a flow has URLs to expand.
func flowNeedsBase(fl *flow.Flow) bool {
	needs := func(u string) bool { return strings.Contains(u, "{{") || strings.HasPrefix(u, "/") }
	if needs(fl.StartURL) {
		return true
	}
	for _, s := range fl.Steps {
		if needs(s.URL) || (s.Wait != nil && needs(s.Wait.URL)) || (s.Expect != nil && s.Expect.State != nil && needs(s.Expect.State.URL)) {
			return true
		}
	}
	return false
}

func recordError(err error, url, id string) *wire.Error {
	var ae *wire.Error
	e := &wire.Error{Code: "RECORD_FAILED", Message: err.Error(), Next: "check that flightrec serve runs at " + url + ", or record with --data DIR"}
	switch {
	case errors.Is(err, recorder.ErrNoChromium):
		e = &wire.Error{Code: "NO_CHROMIUM", Message: err.Error(), Next: recorder.InstallHint}
	case errors.As(err, &ae):
		c := *ae
		e = &c
	}
	if id != "" {
		e.Message = fmt.Sprintf("recording %s: %s", id, e.Message)
	}
	return e
}

// printRecordResult prints a run's outcome; playURL, when set, is where
// the recording plays back.
func printRecordResult(out io.Writer, res recorder.Result, playURL string) {
	fmt.Fprintf(out, "recording %s (%s): %s, %d steps, %d events in %s\n", res.ID, res.Flow, res.Verdict, res.Steps, res.Total, res.Wall.Round(time.Millisecond))
	for _, f := range res.Failed {
		fmt.Fprintf(out, "  step %d failed: %s: %s\n", f.Step, f.Code, f.Message)
	}
	fmt.Fprintf(out, "  root %s\n", res.Root)
	if playURL != "" {
		fmt.Fprintf(out, "  %s\n", playURL)
	}
}
