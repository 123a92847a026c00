package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/apierr"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/store"
)

// scanFinding is what audit scan reports: where, and which rule — never
// the value.
type scanFinding struct {
	Recording string `json:"recording"`
	Project   string `json:"project"`
	Seq       uint64 `json:"seq"`
	Step      int    `json:"step"`
	Kind      string `json:"kind"`
	Rule      string `json:"rule"`
	Channel   string `json:"channel"`
	Pointer   string `json:"pointer"`
}

// runAuditScan re-scans stored recordings with the current redaction
// policy and detectors, for the day the detectors improve: it lists what
// they would erase now that was stored before, by place and rule, never
// by value. It opens the data directory read-only, so it runs beside a
// live server.
func runAuditScan(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("audit scan", "audit scan [--data DIR] [--project P] [--policy DIR] [--json]", errOut)
	data := fs.String("data", envOr("FLIGHTREC_DATA", "./flightrec-data"), "data directory (env FLIGHTREC_DATA)")
	project := fs.String("project", "", "scan only this project's recordings")
	policyDir := fs.String("policy", envOr("FLIGHTREC_POLICY", ""), "directory of Rego that extends the default redaction policy (env FLIGHTREC_POLICY)")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	// A scan reads only: beside a running server too, changing nothing.
	st, err := app.StoreConfig{Data: *data}.OpenReadOnly()
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer st.Close()
	pol, err := policy.Load(ctx, *policyDir)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	ids, err := st.IDs()
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	findings := []scanFinding{}
	scanned, events := 0, 0
	for _, id := range ids {
		meta, err := st.Meta(id)
		if err != nil || (*project != "" && meta.Project != *project) {
			continue
		}
		in := policy.Input{Recording: policy.RecordingInput{Project: meta.Project, Flow: meta.Flow,
			Labels: meta.Labels, Executor: meta.Executor, Versions: meta.Versions}}
		if len(meta.AppMap) > 0 {
			_ = json.Unmarshal(meta.AppMap, &in.AppMap)
		}
		plan, err := pol.Plan(ctx, in)
		if err != nil {
			printErr(errOut, *asJSON, apierr.New(0, "POLICY_ERROR", "fix the redaction policy (flightrec policy test DIR)", "%v", err))
			return exitFailure
		}
		// Pseudonyms do not matter here: only where a rule fires does.
		red, err := redact.New(plan, bytes.Repeat([]byte{1}, 32))
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		scanned++
		_, err = st.Scan(id, store.Pos{}, 0, func(rec store.Record, _ store.Locator) error {
			switch rec.Kind {
			case event.KindFrame, event.KindScreenshot, event.KindVideo:
				return nil // images are painted at ingest; there is no text to scan
			}
			events++
			d, err := event.Decode(event.Envelope{Seq: rec.Seq, TS: rec.TS, Step: rec.Step, Kind: rec.Kind, Data: rec.Data}, event.Limits{})
			if err != nil {
				return nil
			}
			res, err := red.Redact(d)
			if err != nil || res.Data == nil || bytes.Equal(res.Data, rec.Data) {
				return nil // nothing would change: what fired was already erased
			}
			for _, f := range res.Findings {
				findings = append(findings, scanFinding{Recording: id, Project: meta.Project, Seq: rec.Seq, Step: rec.Step,
					Kind: string(rec.Kind), Rule: f.Rule, Channel: f.Channel, Pointer: f.Pointer})
			}
			return nil
		})
		if err != nil {
			fmt.Fprintf(errOut, "recording %s: %v\n", id, err)
		}
	}
	if *asJSON {
		printJSON(out, map[string]any{"recordings": scanned, "events": events, "findings": findings})
	} else {
		fmt.Fprintf(out, "scanned %d recordings, %d events: %d findings\n", scanned, events, len(findings))
		for _, f := range findings {
			fmt.Fprintf(out, "  %s seq %d (step %d, %s): %s at %s %s\n", f.Recording, f.Seq, f.Step, f.Kind, f.Rule, f.Channel, f.Pointer)
		}
	}
	if len(findings) > 0 {
		return exitFound
	}
	return exitOK
}
