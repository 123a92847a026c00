package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
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
// by value. A scan opens the data directory read-only, so it runs beside
// a live server. With --fix it also rewrites each affected finished
// recording as today's policy would have stored it (a new manifest and
// root; Store.Reseal), under the data directory's lock, writes an audit
// entry naming the old and new roots and the rules, and rebuilds the index.
func runAuditScan(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("audit scan", "audit scan [--data DIR] [--index DSN] [--project P] [--policy DIR] [--fix] [--json]", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	project := fs.String("project", "", "scan only this project's recordings")
	policyDir := policyFlag(fs, "directory of Rego that extends the default redaction policy")
	fix := fs.Bool("fix", false, "rewrite each affected finished recording redacted by today's policy (a new root; the old blobs are left to garbage collection)")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	var st *store.Store
	var idx store.Index
	var err error
	if *fix {
		// The blobs where --blobs says, so that a rewritten recording's
		// go where every node reads them; the index its rows are rebuilt in.
		var lock *store.DirLock
		if st, idx, lock, err = sc.OpenForWrite("audit scan --fix"); err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		defer lock.Close()
		defer idx.Close()
	} else {
		// A scan reads only: beside a running server too, changing nothing.
		st, err = sc.OpenReadOnly()
	}
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
	// In shared mode, the recordings other nodes published too.
	ids, err := st.KnownIDs()
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	readerOf, closeReaders, err := scanReaders(st)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer closeReaders()
	// Pseudonyms matter only when fixing: the rewritten events must carry
	// the ones ingest would have written. A scan makes no key.
	key := bytes.Repeat([]byte{1}, 32)
	if *fix {
		if key, err = sc.PseudonymKey(st); err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	findings := []scanFinding{}
	fixed := []fixedRecording{}
	unreadable := []unreadableRecording{}
	cannot := func(id string, err error) {
		unreadable = append(unreadable, unreadableRecording{Recording: id, Error: err.Error()})
	}
	scanned, events := 0, 0
	for _, id := range ids {
		rd := readerOf(id)
		meta, err := rd.Meta(id)
		if err != nil {
			cannot(id, err)
			continue
		}
		if *project != "" && meta.Project != *project {
			continue
		}
		root, err := rd.Root(id)
		if err != nil {
			cannot(id, err)
			continue
		}
		if root != "" {
			if m, err := rd.ReadManifest(root); err == nil {
				meta = m.Recording // the finished metadata (verdict, earlier re-redactions)
			}
		}
		in := policy.Input{Recording: policy.RecordingInput{Project: meta.Project, Flow: meta.Flow,
			Labels: meta.Labels, Executor: meta.Executor, Versions: meta.Versions}}
		if len(meta.AppMap) > 0 {
			_ = json.Unmarshal(meta.AppMap, &in.AppMap)
		}
		plan, err := pol.Plan(ctx, in)
		if err != nil {
			printErr(errOut, *asJSON, wire.New(0, "POLICY_ERROR", "fix the redaction policy (flightrec policy test DIR)", "%v", err))
			return exitFailure
		}
		red, err := redact.New(plan, key)
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		scanned++
		a, err := auditRecording(rd, red, meta)
		events += a.events
		findings = append(findings, a.findings...)
		if err != nil {
			cannot(id, err)
			continue
		}
		if !*fix || !a.changed {
			continue
		}
		if root == "" {
			fmt.Fprintf(errOut, "recording %s is open: finish it, then run audit scan --fix again\n", id)
			continue
		}
		f, err := reseal(st, a, root)
		if err != nil {
			printErr(errOut, *asJSON, fmt.Errorf("re-redacting %s: %w", id, err))
			return exitFailure
		}
		fixed = append(fixed, f)
	}
	if len(fixed) > 0 {
		if err := recordFixes(ctx, st, idx, sc, fixed); err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	if *asJSON {
		printJSON(out, map[string]any{"recordings": scanned, "events": events, "findings": findings, "fixed": fixed, "unreadable": unreadable})
	} else {
		fmt.Fprintf(out, "scanned %d recordings, %d events: %d findings\n", scanned, events, len(findings))
		if len(unreadable) > 0 {
			fmt.Fprintf(out, "could not read %d recordings (not scanned):\n", len(unreadable))
			for _, u := range unreadable {
				fmt.Fprintf(out, "  %s: %s\n", u.Recording, u.Error)
			}
		}
		for _, f := range findings {
			fmt.Fprintf(out, "  %s seq %d (step %d, %s): %s at %s %s\n", f.Recording, f.Seq, f.Step, f.Kind, f.Rule, f.Channel, f.Pointer)
		}
		for _, f := range fixed {
			fmt.Fprintf(out, "re-redacted %s: root %s → %s (%s)\n", f.Recording, f.OldRoot, f.NewRoot, strings.Join(f.Rules, ", "))
		}
	}
	switch {
	case len(findings) > 0 && !*fix:
		return exitFound
	case len(unreadable) > 0:
		return exitFailure // "no findings" is not true of what was not read
	}
	return exitOK
}

// unreadableRecording is a recording audit scan could not read, and why.
type unreadableRecording struct {
	Recording string `json:"recording"`
	Error     string `json:"error"`
}

// scanReaders returns the store audit scan reads each recording through:
// st, except that a read-only scan in shared mode reads the recordings
// other nodes published (not in this data directory) through a private
// scratch directory, since fetching them writes their meta.json and ROOT
// (store.Store.Scratch). done removes the scratch directory.
func scanReaders(st *store.Store) (readerOf func(id string) *store.Store, done func(), err error) {
	if !st.Shared() || !st.ReadOnly() {
		return func(string) *store.Store { return st }, func() {}, nil
	}
	local, err := st.IDs()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "flightrec-audit-scan-")
	if err != nil {
		return nil, nil, err
	}
	scratch, err := st.Scratch(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	readerOf = func(id string) *store.Store {
		if _, here := slices.BinarySearch(local, id); here {
			return st
		}
		return scratch
	}
	return readerOf, func() { scratch.Close(); os.RemoveAll(dir) }, nil
}

// fixedRecording is one recording audit scan --fix rewrote.
type fixedRecording struct {
	Recording string   `json:"recording"`
	Project   string   `json:"project"`
	OldRoot   string   `json:"old_root"`
	NewRoot   string   `json:"new_root"`
	Rules     []string `json:"rules"`
}

// reseal stores a's records and metadata as the recording's new root,
// noting the re-redaction in the metadata.
func reseal(st *store.Store, a audited, root string) (fixedRecording, error) {
	rules := map[string]bool{}
	for _, f := range a.findings {
		rules[f.Rule] = true
	}
	f := fixedRecording{Recording: a.meta.ID, Project: a.meta.Project, OldRoot: root, Rules: slices.Sorted(maps.Keys(rules))}
	meta := a.meta
	meta.ReRedacted = append(slices.Clone(meta.ReRedacted), store.ReRedaction{At: time.Now().UnixNano(), OldRoot: root, Rules: f.Rules})
	old, nr, err := st.Reseal(meta, a.records)
	if err != nil {
		return f, err
	}
	f.OldRoot, f.NewRoot = old, nr
	return f, nil
}

// recordFixes writes an audit entry per rewritten recording and rebuilds
// the index, whose rows still hold what was erased (the index's
// secure_delete overwrites the freed pages): store.ReindexRewritten.
func recordFixes(ctx context.Context, st *store.Store, idx store.Index, sc app.StoreConfig, fixed []fixedRecording) error {
	lg, closeLog, err := sc.OpenAuditLog()
	if err != nil {
		return err
	}
	defer closeLog()
	for _, f := range fixed {
		if _, err := lg.Append(audit.ReRedact(f.Recording, f.Project, f.OldRoot, f.NewRoot, f.Rules)); err != nil {
			return err
		}
	}
	ids := make([]string, len(fixed))
	for i, f := range fixed {
		ids[i] = f.Recording
	}
	return st.ReindexRewritten(ctx, idx, ids)
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
				rec.Data, rec.CID, rec.BlobSize, rec.Summary = droppedData("frame:undecodable"), "", 0, event.Summary{}
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
		if rec.Data != nil {
			resummarize(&rec)
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
			resummarize(rec)
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

// resummarize makes a record's summary from its (redacted) data, as ingest
// does; the stored one may quote what was erased.
func resummarize(rec *store.Record) {
	if d, err := event.Decode(event.Envelope{Seq: rec.Seq, TS: rec.TS, Step: rec.Step, Kind: rec.Kind, Data: rec.Data}, event.Limits{}); err == nil {
		rec.Summary = event.Summarize(d)
	}
}
