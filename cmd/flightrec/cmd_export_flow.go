package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/flowexport"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// exportReadKinds are the kinds an export to a flow or a test reads.
var exportReadKinds = map[event.Kind]bool{event.KindMeta: true, event.KindReceipt: true, event.KindCheck: true,
	event.KindHAR: true, event.KindSnapshot: true}

// runExportFlow writes a recording as a flow file (kind "flow") or a
// Playwright Test spec (kind "playwright"), read from --data DIR
// (read-only, no lock) or from a server's step reads (--server URL).
func runExportFlow(ctx context.Context, kind string, args []string, out, errOut io.Writer) int {
	def := "ID.flow.yaml"
	if kind == "playwright" {
		def = "ID.spec.ts"
	}
	fs := newFlags("export "+kind, "export "+kind+" [--data DIR | --server URL] [-o FILE] [--json] REC", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	server := serverFlag(fs, serverFromEnv, "read the recording from the server at URL instead of --data (FLIGHTREC_TOKEN: a read token)")
	outFile := fs.String("o", "", "output file, - for stdout (default "+def+")")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	id, code := parseOne(fs, args)
	if code >= 0 {
		return code
	}
	local, ok := oneTarget(fs, errOut, *asJSON, "read")
	if !ok {
		return exitUsage
	}
	if !store.ValidRecordingID(id) {
		printErr(errOut, *asJSON, wire.New(0, "NOT_FOUND", "check the recording id", "%q is not a recording id", id))
		return exitFailure
	}
	var rec *flowexport.Recording
	var err error
	if *server != "" && !local {
		rec, err = exportFromServer(ctx, strings.TrimRight(*server, "/"), id)
	} else {
		rec, err = exportFromStore(sc, id)
	}
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	x, err := flowexport.Build(rec)
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "NOT_EXPORTABLE", "export a recording with steps: one made by flightrec record, or an imported trace or HAR", "%v", err))
		return exitFailure
	}
	var body []byte
	if kind == "flow" {
		body = x.Flow()
		// What is written must run: a flow the parser refuses is a bug here.
		if _, err := flow.Parse(id+".flow.yaml", body); err != nil {
			printErr(errOut, *asJSON, fmt.Errorf("the exported flow does not parse: %w", err))
			return exitFailure
		}
	} else {
		body = x.Playwright()
	}
	path := *outFile
	if path == "" {
		path = strings.Replace(def, "ID", id, 1)
	}
	if _, err := writeOutput(path, out, func(w io.Writer) error { _, err := w.Write(body); return err }); err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	report := out
	if path == "-" {
		report = errOut
	}
	params := make([]string, len(x.Params))
	for i, p := range x.Params {
		params[i] = p.Name
		if kind == "playwright" {
			params[i] = p.Env
		}
	}
	steps := 0
	for _, s := range x.Steps {
		if s.Flow != nil {
			steps++
		}
	}
	if *asJSON {
		printJSON(report, map[string]any{"recording": id, "file": path, "steps": steps, "params": params, "signature": rec.Signature})
		return exitOK
	}
	fmt.Fprintf(report, "wrote %s: recording %s, %d steps", path, id, steps)
	if len(params) > 0 {
		fmt.Fprintf(report, ", parameters %s", strings.Join(params, ", "))
	}
	fmt.Fprintln(report)
	return exitOK
}

// exportFromStore reads a recording from a data directory, read-only.
func exportFromStore(sc app.StoreConfig, id string) (*flowexport.Recording, error) {
	st, err := sc.OpenReadOnly()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	row, _, err := st.RowOf(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, wire.New(0, "NOT_FOUND", "check the recording id and --data DIR", "no recording %s", id)
	}
	if err != nil {
		return nil, err
	}
	rec := &flowexport.Recording{ID: id, Flow: row.Flow, Verdict: row.Verdict, Signature: row.FailureSignature}
	_, err = st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		if exportReadKinds[r.Kind] {
			rec.Events = append(rec.Events, event.Envelope{Seq: r.Seq, TS: r.TS, Step: r.Step, Kind: r.Kind, Data: r.Data})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep, err := st.Redaction(id)
	if err != nil {
		return nil, err
	}
	rec.Redacted = redactedPlaces(rep)
	return rec, nil
}

// exportFromServer reads a recording through the read API: the recording,
// its timeline, each step's events and the redaction report.
func exportFromServer(ctx context.Context, base, id string) (*flowexport.Recording, error) {
	recURL := base + wire.Path(wire.RouteRecording, id)
	var row store.RecordingRow
	if err := getAPIJSON(ctx, recURL, &row); err != nil {
		return nil, err
	}
	rec := &flowexport.Recording{ID: id, Flow: row.Flow, Verdict: row.Verdict, Signature: row.FailureSignature}
	var tl wire.Timeline
	if err := getAPIJSON(ctx, recURL+"/steps", &tl); err != nil {
		return nil, err
	}
	for _, s := range tl.Steps {
		var sv wire.StepView
		if err := getAPIJSON(ctx, fmt.Sprintf("%s/steps/%d", recURL, s.Step), &sv); err != nil {
			return nil, err
		}
		for _, e := range sv.Events {
			if exportReadKinds[e.Kind] {
				rec.Events = append(rec.Events, e)
			}
		}
	}
	var rep store.RedactionReport
	if err := getAPIJSON(ctx, recURL+"/redaction", &rep); err != nil {
		return nil, err
	}
	rec.Redacted = redactedPlaces(&rep)
	return rec, nil
}

// redactedPlaces indexes a redaction report's locations by event seq.
func redactedPlaces(rep *store.RedactionReport) map[uint64][]string {
	out := map[uint64][]string{}
	for _, rc := range rep.Rules {
		for _, l := range rc.Locations {
			out[l.Seq] = append(out[l.Seq], l.Pointer)
		}
	}
	return out
}
