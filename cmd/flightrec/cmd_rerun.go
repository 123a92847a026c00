package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/flowexport"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// pinNames are the pins rerun --pin knows.
var pinNames = []string{"clock", "random", "network"}

// RerunResult is what flightrec rerun --json prints.
type RerunResult struct {
	Source string            `json:"source"` // the recording or flow file run again
	Group  store.Group       `json:"group"`
	Runs   []recorder.Result `json:"runs"`
	Wall   time.Duration     `json:"wall_ns"`
}

// runRerun records a recording (exported as a flow) or a flow file N
// times through the reference recorder, with the pins asked for, makes
// the runs a group (purpose rerun) and prints its verdict. Exit 0 when
// the runs agree (reproduced n of n, or not reproduced at all), 1 when
// they are flaky, 2 on a usage error, 3 on a failure.
func runRerun(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("rerun", "rerun (REC | FLOW.yaml) --times N [--pin clock,random,network] --base URL [--param name=value …] [--persona FILE] [--server URL | --data DIR]", errOut)
	var rf recordFlags
	rf.register(fs, "server URL (env FLIGHTREC_SERVER; FLIGHTREC_TOKEN: a token with ingest and read)")
	rc, asJSON, server := &rf.rc, &rf.asJSON, rf.server
	base := fs.String("base", "", "the app under test: pages and static assets come from it (and, without the network pin, its API)")
	times := fs.Int("times", 3, "how many runs")
	pins := fs.String("pin", "", "what to pin, comma-separated: clock, random, network (network needs a recording)")
	seed := fs.Uint("seed", 0, "the random pin's seed (default: derived from the recording or flow, the same for every run)")
	src, code := parseOne(fs, args)
	if code >= 0 {
		return code
	}
	usage := func(next, format string, a ...any) int {
		printErr(errOut, *asJSON, wire.New(0, "USAGE", next, format, a...))
		return exitUsage
	}
	if *times < 1 || *times > 100 {
		return usage("pass --times between 1 and 100", "--times %d is out of range", *times)
	}
	if *base == "" {
		return usage("pass --base http://HOST:PORT, the app the runs go against", "rerun needs --base")
	}
	want := map[string]bool{}
	for _, p := range strings.Split(*pins, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(pinNames, p) {
			return usage("pin some of clock, random, network", "unknown pin %q", p)
		}
		want[p] = true
	}
	local, ok := oneTarget(fs, errOut, *asJSON, "rerun")
	if !ok {
		return exitUsage
	}

	// The source: a flow file, or a recording exported as one.
	var fl *flow.Flow
	var rec *flowexport.Recording
	var redactor func(event.HARRequest) event.HARRequest
	if _, statErr := os.Stat(src); statErr == nil || !store.ValidRecordingID(src) {
		f, err := flow.ParseFile(src)
		if err != nil {
			printErr(errOut, *asJSON, wire.New(0, "BAD_FLOW", "name a recording id or a flow file", "%v", err))
			return exitUsage
		}
		fl = f
		if want["network"] {
			return usage("rerun a recording (its id) to pin the network, or drop network from --pin",
				"the network pin answers from a recording, and %s is a flow file", src)
		}
	} else {
		var err error
		if local {
			rec, redactor, err = rerunFromStore(rf.sc, src)
		} else {
			rec, err = exportFromServer(ctx, strings.TrimRight(*server, "/"), src)
		}
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		x, err := flowexport.Build(rec)
		if err != nil {
			printErr(errOut, *asJSON, wire.New(0, "NOT_EXPORTABLE", "rerun a recording with steps: one made by flightrec record, or an imported trace or HAR", "%v", err))
			return exitFailure
		}
		if fl, err = flow.Parse(src+".flow.yaml", x.Flow()); err != nil {
			printErr(errOut, *asJSON, fmt.Errorf("the recording's flow does not parse: %w", err))
			return exitFailure
		}
	}
	fl, err := bindFlow(fl, &rf.params, rf.persona, *base)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitUsage
	}
	rc.Pins, err = rerunPins(want, rec, fl.Name, uint32(*seed), *base, redactor)
	if err != nil {
		return usage("pass --base as http://HOST:PORT", "%v", err)
	}
	rc.Labels = map[string]string{"rerun_of": src}
	if names := rc.Pins.Names(); len(names) > 0 {
		rc.Labels["pins"] = strings.Join(names, "+")
	}
	target, c, done, code := rf.start(local, out, errOut, fs.Name())
	if code >= 0 {
		return code
	}
	defer done()
	res := RerunResult{Source: src}
	start := time.Now()
	ids := make([]string, 0, *times)
	for i := 0; i < *times; i++ {
		if rc.Log != nil {
			fmt.Fprintf(out, "run %d of %d\n", i+1, *times)
		}
		r, err := recorder.Record(ctx, *rc, fl, c)
		if err != nil {
			printErr(errOut, *asJSON, recordError(err, target, r.ID))
			return exitFailure
		}
		if !*asJSON {
			printRecordResult(out, r, "")
		}
		res.Runs = append(res.Runs, r)
		ids = append(ids, r.ID)
	}
	res.Wall = time.Since(start)
	// The group's verdict reads the runs from the index: wait until it
	// holds every event of each.
	for _, r := range res.Runs {
		if err := waitIndexedAPI(ctx, target, r.ID, r.Total); err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	req := map[string]any{"ids": ids, "purpose": store.GroupRerun, "pins": rc.Pins.Names(), "base": *base}
	if rec != nil {
		req["seed"] = src
	}
	body, _ := json.Marshal(req)
	reply, err := callAPI(ctx, "POST", target+wire.RouteGroups, body)
	if err == nil {
		err = json.Unmarshal(reply, &res.Group)
	}
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	if *asJSON {
		printJSON(out, res)
	} else {
		fmt.Fprintf(out, "group %s (rerun of %s, %d runs in %s): %s\n", res.Group.ID, src, len(ids), res.Wall.Round(time.Millisecond), res.Group.Summary)
		for _, o := range res.Group.Odd {
			sig := o.Signature
			if sig == "" {
				sig = "(no failure)"
			}
			fmt.Fprintf(out, "  odd one out: %s  %s\n", o.ID, sig)
		}
	}
	if res.Group.Verdict == store.GroupFlaky {
		return exitFound
	}
	return exitOK
}

// rerunPins builds the pins asked for. The clock starts at the recording's
// start (else now); the seed is the one given, else derived from the
// recording or flow, so every run of the group gets the same values.
func rerunPins(want map[string]bool, rec *flowexport.Recording, name string, seed uint32, base string, redactor func(event.HARRequest) event.HARRequest) (recorder.Pins, error) {
	p := recorder.Pins{Clock: want["clock"], Random: want["random"], Start: time.Now(), Seed: seed}
	var hars []event.HAR
	var checks []event.Check
	if rec != nil {
		for i, e := range rec.Events {
			if i == 0 || time.Unix(0, e.TS).Before(p.Start) {
				p.Start = time.Unix(0, e.TS)
			}
			switch e.Kind {
			case event.KindHAR:
				var h event.HAR
				if json.Unmarshal(e.Data, &h) == nil {
					hars = append(hars, h)
				}
			case event.KindCheck:
				var c event.Check
				if json.Unmarshal(e.Data, &c) == nil {
					checks = append(checks, c)
				}
			}
		}
		name = rec.ID
	}
	if p.Seed == 0 {
		h := fnv.New32a()
		h.Write([]byte(name))
		p.Seed = h.Sum32()
	}
	if want["network"] {
		r, err := recorder.NewReplay(base, hars, checks, redactor)
		if err != nil {
			return p, err
		}
		p.Network = r
	}
	return p, nil
}

// rerunFromStore reads a recording from a data directory (read-only, no
// lock) and the redactor of its own plan, so a live request is redacted
// as the recorded one was before they are compared.
func rerunFromStore(sc app.StoreConfig, id string) (*flowexport.Recording, func(event.HARRequest) event.HARRequest, error) {
	rec, err := exportFromStore(sc, id)
	if err != nil {
		return nil, nil, err
	}
	st, err := sc.OpenReadOnly()
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	raw, err := st.Plan(id)
	if errors.Is(err, store.ErrNotFound) {
		return rec, nil, nil // an import: the recorded bodies' marks still match
	}
	if err != nil {
		return nil, nil, err
	}
	var plan policy.Plan
	if err := json.Unmarshal(raw, &plan); err != nil {
		return nil, nil, fmt.Errorf("the plan of %s: %w", id, err)
	}
	var key []byte
	if plan.Pseudonymize {
		if key, err = sc.PseudonymKey(st); err != nil {
			return nil, nil, err
		}
	}
	if _, err := redact.New(&plan, key); err != nil {
		return nil, nil, err
	}
	return rec, func(req event.HARRequest) event.HARRequest { return redactRequest(&plan, key, req) }, nil
}

// redactRequest redacts a live request as a HAR entry of the recording
// would be (a fresh redactor each time: one request's secrets are not
// another's). On any failure the request is kept as it is: it is only
// compared, never stored, and the marks in the recording still match.
func redactRequest(plan *policy.Plan, key []byte, req event.HARRequest) event.HARRequest {
	red, err := redact.New(plan, key)
	if err != nil {
		return req
	}
	data, err := json.Marshal(event.HAR{Request: req, Response: event.HARResponse{Status: 200}})
	if err != nil {
		return req
	}
	d, err := event.Decode(event.Envelope{Seq: 1, TS: 1, Kind: event.KindHAR, Data: data}, event.DefaultLimits)
	if err != nil {
		return req
	}
	r, err := red.Redact(d)
	if err != nil || r.Data == nil {
		return req
	}
	var h event.HAR
	if json.Unmarshal(r.Data, &h) != nil {
		return req
	}
	return h.Request
}

// waitIndexedAPI waits (at most a minute) until the server's index holds
// recording id through seq total.
func waitIndexedAPI(ctx context.Context, base, id string, total uint64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		body, err := getAPI(ctx, base+wire.Path(wire.RouteRecording, id))
		if err != nil {
			return err
		}
		var row store.RecordingRow
		if err := json.Unmarshal(body, &row); err != nil {
			return err
		}
		if row.State == store.StateFinished && row.IndexedTo >= total {
			return nil
		}
		if time.Now().After(deadline) {
			return wire.New(0, "NOT_INDEXED", "check the server's log; the group can be made later with POST /v1/groups",
				"recording %s is indexed through seq %d of %d after a minute", id, row.IndexedTo, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
