package main

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	data, pol := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(pol, "retention.rego"), []byte(decadePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data, args: []string{"--policy", pol}}
	p.start()
	file := filepath.Join(t.TempDir(), "rec.ndjson")
	evs := testgen.Recording(testgen.Options{Seed: 5, Steps: 1, EventsPerStep: 2, StartTS: time.Now().UnixNano()})
	if err := os.WriteFile(file, testgen.NDJSON(evs), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := flightrec(t, "ingest", "--server", "http://"+p.addr, "--project", "keep", "--verdict", "pass", "--json", file)
	if code != exitOK {
		t.Fatalf("ingest: exit %d %s %s", code, out, errOut)
	}
	var res struct{ ID string }
	_ = json.Unmarshal([]byte(out), &res)
	p.stop()
	served, err := retention.RecordedPolicy(data)
	if err != nil || !strings.HasPrefix(served, "sha256:") {
		t.Fatalf("serve recorded policy digest %q, %v", served, err)
	}
	recDir := filepath.Join(data, "recordings", res.ID)
	later := time.Now().Add(15 * 24 * time.Hour).UTC().Format(time.RFC3339)

	for _, args := range [][]string{{"--dry-run", "--now", later}, {}} {
		out, errOut, code = flightrec(t, append([]string{"retention", "sweep", "--data", data}, args...)...)
		if code == exitOK || !strings.Contains(errOut, "POLICY_MISMATCH") || !strings.Contains(errOut, served) ||
			strings.Count(errOut, "sha256:") < 2 || !strings.Contains(errOut, "--policy-changed") {
			t.Fatalf("sweep %v without --policy: exit %d\n%s%s", args, code, out, errOut)
		}
		if _, err := os.Stat(recDir); err != nil {
			t.Fatalf("a refused sweep touched the recording: %v", err)
		}
	}
	out, errOut, code = flightrec(t, "retention", "sweep", "--data", data, "--policy", pol, "--dry-run", "--now", later)
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
