package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/apierr"
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
// by value. It reads the data directory; run it on a stopped server's
// directory or a snapshot of it.
func runAuditScan(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("audit scan", "audit scan [--data DIR] [--project P] [--policy DIR] [--json]", errOut)
	data := fs.String("data", envOr("FLIGHTREC_DATA", "./flightrec-data"), "data directory (env FLIGHTREC_DATA)")
	project := fs.String("project", "", "scan only this project's recordings")
	policyDir := fs.String("policy", envOr("FLIGHTREC_POLICY", ""), "directory of Rego that extends the default redaction policy (env FLIGHTREC_POLICY)")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	st, err := store.OpenStore(*data, store.LogOptions{})
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
		a, err := auditRecording(st, red, meta)
		events += a.events
		findings = append(findings, a.findings...)
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

// audited is what today's policy would change in one stored recording:
// the findings, and each event as it would be stored now (records, in seq
// order; Changed says whether any differs from what is stored).
type audited struct {
	findings []scanFinding
	events   int
	records  []store.Record
	meta     store.RecordingMeta
	changed  bool
}

// auditRecording redacts a stored recording again with red (a redactor
// from today's plan for it): its metadata, every event in order (so state
// that spans events — the DOM, refs, known values — is what ingest would
// have built), then every event once more with the known values as they
// stand at the end (an echo stored before the value was learned), and
// every frame's and screenshot's blob as an image. It never reads a value
// into a finding.
func auditRecording(st *store.Store, red *redact.Redactor, meta store.RecordingMeta) (audited, error) {
	id := meta.ID
	a := audited{meta: meta}
	find := func(rec *store.Record, fs []redact.Finding) {
		for _, f := range fs {
			a.findings = append(a.findings, scanFinding{Recording: id, Project: meta.Project, Seq: rec.Seq, Step: rec.Step,
				Kind: string(rec.Kind), Rule: f.Rule, Channel: f.Channel, Pointer: f.Pointer})
			rec.Redactions = append(rec.Redactions, store.Redaction{Rule: f.Rule, Channel: f.Channel, Pointer: f.Pointer})
		}
		a.changed = a.changed || len(fs) > 0
	}
	m, mf, err := red.RedactMeta(redact.Meta{Labels: meta.Labels, Executor: meta.Executor, Versions: meta.Versions})
	if err != nil {
		return a, err
	}
	if len(mf) > 0 {
		a.meta.Labels, a.meta.Executor, a.meta.Versions = m.Labels, m.Executor, m.Versions
		mrec := store.Record{Kind: "recording"}
		find(&mrec, mf)
		a.meta.Redactions = append(a.meta.Redactions, mrec.Redactions...)
	}
	_, err = st.Scan(id, store.Pos{}, 0, func(rec store.Record, _ store.Locator) error {
		a.events++
		switch rec.Kind {
		case event.KindFrame, event.KindScreenshot:
			if rec.CID != "" && !imageOK(st, rec.CID) {
				find(&rec, []redact.Finding{{Rule: "frame:undecodable", Channel: string(rec.Kind), Pointer: "/image"}})
				rec.Data, rec.CID, rec.BlobSize = droppedData("frame:undecodable"), "", 0
			}
			a.records = append(a.records, rec)
			return nil
		case event.KindVideo:
			a.records = append(a.records, rec) // GOPs were painted at ingest; there is no text
			return nil
		}
		if clean, n := redact.SanitizeJSON(rec.Data); n > 0 {
			rec.Data = clean
			find(&rec, []redact.Finding{{Rule: redact.RuleUTF8, Channel: string(rec.Kind)}})
		}
		d, err := event.Decode(event.Envelope{Seq: rec.Seq, TS: rec.TS, Step: rec.Step, Kind: rec.Kind, Data: rec.Data}, event.Limits{})
		if err == nil {
			res, rerr := red.Redact(d)
			if rerr == nil && res.Data != nil && !bytes.Equal(res.Data, rec.Data) {
				rec.Data = res.Data
				find(&rec, res.Findings)
			}
		}
		a.records = append(a.records, rec)
		return nil
	})
	if err != nil {
		return a, err
	}
	for i := range a.records {
		rec := &a.records[i]
		switch rec.Kind {
		case event.KindFrame, event.KindScreenshot, event.KindVideo:
			continue
		}
		data, fs, err := red.RescrubKnown(rec.Kind, rec.Data)
		if err == nil && data != nil {
			rec.Data = data
			find(rec, fs)
		}
	}
	return a, nil
}

// imageOK reads a stored frame's blob and checks it is an image.
func imageOK(st *store.Store, c string) bool {
	id, err := cid.Decode(c)
	if err != nil {
		return false
	}
	r, err := st.Blobs.Open(id)
	if err != nil {
		return true // a missing blob is verify's to report, not redaction's
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	return err == nil && redact.CheckImage(b) == nil
}

// droppedData is what a dropped event's data becomes (as ingest stores it).
func droppedData(rules ...string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"redacted": "dropped", "rules": rules})
	return b
}
