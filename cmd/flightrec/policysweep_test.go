package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/retention"
)

// decadePolicy keeps project "keep" ten years, the rest as the default does.
const decadePolicy = `package flightrec.retention

failing := {"fail", "flaky", "blocked", "aborted"}

default class := {"name": "passing", "days": 14}

class := {"name": "decade", "days": 3650} if {
	input.recording.project == "keep"
} else := {"name": "failing", "days": 90} if {
	input.recording.verdict in failing
}
`

// TestRetentionSweepUnderServePolicy: serve records its policy's digest; a
// sweep from the command line under another policy (no --policy: the
// default, which keeps a passing run 14 days) refuses with POLICY_MISMATCH
// naming both digests, dry run too, and deletes nothing; under the same
// policy (--policy or FLIGHTREC_POLICY) it keeps the recording; with
// --policy-changed it proceeds.
func TestRetentionSweepUnderServePolicy(t *testing.T) {
	p, data, pol, id := serveDecade(t)
	res := struct{ ID string }{id}
	p.stop()
	served, err := retention.RecordedPolicy(retention.PolicyFile(data))
	if err != nil || !strings.HasPrefix(served, "sha256:") {
		t.Fatalf("serve recorded policy digest %q, %v", served, err)
	}
	recDir := filepath.Join(data, "recordings", res.ID)
	later := time.Now().Add(15 * 24 * time.Hour).UTC().Format(time.RFC3339)

	for _, args := range [][]string{{"--dry-run", "--now", later}, {}} {
		out, errOut, code := flightrec(t, append([]string{"retention", "sweep", "--data", data}, args...)...)
		if code == exitOK || !strings.Contains(errOut, "POLICY_MISMATCH") || !strings.Contains(errOut, served) ||
			strings.Count(errOut, "sha256:") < 2 || !strings.Contains(errOut, "--policy-changed") {
			t.Fatalf("sweep %v without --policy: exit %d\n%s%s", args, code, out, errOut)
		}
		if _, err := os.Stat(recDir); err != nil {
			t.Fatalf("a refused sweep touched the recording: %v", err)
		}
	}
	out, errOut, code := flightrec(t, "retention", "sweep", "--data", data, "--policy", pol, "--dry-run", "--now", later)
	if code != exitOK || !strings.Contains(out, "would remove 0") {
		t.Fatalf("dry sweep under serve's policy: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = flightrecEnv(t, []string{"FLIGHTREC_POLICY=" + pol}, time.Minute, "retention", "sweep", "--data", data)
	if code != exitOK || !strings.Contains(out, "removed 0") {
		t.Fatalf("sweep under FLIGHTREC_POLICY: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = flightrec(t, "retention", "sweep", "--data", data, "--policy-changed", "--dry-run", "--now", later)
	if code != exitOK || !strings.Contains(out, "would remove 1") || !strings.Contains(out, res.ID) {
		t.Fatalf("dry sweep with --policy-changed: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(recDir); err != nil {
		t.Fatalf("the recording is gone: %v", err)
	}
}

// serveDecade starts a server under decadePolicy and records one passing
// recording of project keep through it; it returns the running server,
// its data and policy directories and the recording's id.
func serveDecade(t *testing.T) (p *serverProc, data, pol, id string) {
	t.Helper()
	data, pol = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(pol, "retention.rego"), []byte(decadePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	p = &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data, args: []string{"--policy", pol}}
	p.start()
	id = ingestGenerated(t, p.addr, "keep", "pass", testgen.Options{Seed: 5, Steps: 1, EventsPerStep: 2, StartTS: time.Now().UnixNano()})
	return p, data, pol, id
}

// unchangedButIndex fails the test if a file of the data directory differs
// from before (a hashTree), what naming what ran meanwhile. The live
// server's own index checkpoints may land in index.sqlite at any time (a
// read-only open cannot write it: mode=ro), and hashTree skips -wal and
// -shm; every other file is compared.
func unchangedButIndex(t *testing.T, data string, before map[string][32]byte, what string) {
	t.Helper()
	after := hashTree(t, data)
	for _, tree := range []map[string][32]byte{before, after} {
		delete(tree, "/index.sqlite")
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the data directory", what)
	}
}

// ingestGenerated ingests the recording testgen makes of o into the server
// at addr with flightrec ingest, and returns its id.
func ingestGenerated(t *testing.T, addr, project, verdict string, o testgen.Options) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "rec.ndjson")
	if err := os.WriteFile(file, testgen.NDJSON(testgen.Recording(o)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := flightrec(t, "ingest", "--server", "http://"+addr, "--project", project, "--verdict", verdict, "--json", file)
	var res struct{ ID string }
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.ID == "" {
		t.Fatalf("ingest: exit %d %s %s", code, out, errOut)
	}
	return res.ID
}

// TestDryRunBesideLiveServer: retention sweep --dry-run --data and audit
// redaction --data on a running server's directory read it without the
// lock (an operator previews a sweep beside a live server) and changes no byte of it (SQLite's -shm
// and -wal aside); a real sweep --data is refused with DATA_DIR_LOCKED
// naming --server; the recording is still served afterwards.
func TestDryRunBesideLiveServer(t *testing.T) {
	p, data, pol, id := serveDecade(t)
	defer p.stop()
	waitIndexed(t, "http://"+p.addr, id)
	var stored struct{ Events int64 }
	getJSON(t, "http://"+p.addr+"/v1/recordings/"+id, &stored)
	before := quietTree(t, data)
	later := time.Now().Add(15 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", pol}, "would remove 0"},
		{[]string{"--policy-changed"}, "would remove 1"}, // the default policy: 14 days
	} {
		out, errOut, code := flightrec(t, append([]string{"retention", "sweep", "--data", data, "--dry-run", "--now", later}, c.args...)...)
		if code != exitOK || !strings.Contains(out, c.want) {
			t.Fatalf("dry run %v beside a live server: exit %d\n%s%s", c.args, code, out, errOut)
		}
	}
	out, errOut, code := flightrec(t, "audit", "redaction", id, "--data", data)
	if code != exitOK || !strings.Contains(out, id) {
		t.Fatalf("audit redaction --data beside a live server: exit %d\n%s%s", code, out, errOut)
	}
	unchangedButIndex(t, data, before, "a dry run or a redaction report")
	out, errOut, code = flightrec(t, "retention", "sweep", "--data", data, "--policy", pol)
	if code == exitOK || !strings.Contains(errOut, "DATA_DIR_LOCKED") || !strings.Contains(errOut, "--server") {
		t.Fatalf("a real sweep --data beside a live server: exit %d\n%s%s", code, out, errOut)
	}
	var row struct{ Events int64 }
	getJSON(t, "http://"+p.addr+"/v1/recordings/"+id, &row)
	if row.Events != stored.Events || row.Events == 0 {
		t.Fatalf("the recording after: %+v; %d events before", row, stored.Events)
	}
}
