package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/testgen"
)

// TestRetentionAndAuditCLI: a dry sweep as of a later date names the
// recording that would go and removes nothing; the real sweep removes it;
// audit verify passes, then catches one flipped byte.
func TestRetentionAndAuditCLI(t *testing.T) {
	data := t.TempDir()
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	id := ingestGenerated(t, p.addr, "cli", "pass", testgen.Options{Seed: 3, Steps: 2, EventsPerStep: 2})
	later := time.Now().Add(15 * 24 * time.Hour).UTC().Format(time.RFC3339)
	out, errOut, code := flightrec(t, "retention", "sweep", "--server", "http://"+p.addr, "--dry-run", "--now", later)
	if code != exitOK || !strings.Contains(out, "would remove 1") || !strings.Contains(out, id) {
		t.Fatalf("dry sweep as of day 15: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = flightrec(t, "retention", "sweep", "--server", "http://"+p.addr)
	if code != exitOK || !strings.Contains(out, "removed 0") {
		t.Fatalf("sweep today: exit %d\n%s", code, out)
	}
	p.stop()
	out, errOut, code = flightrec(t, "audit", "verify", "--data", data)
	if code != exitOK || !strings.Contains(out, "chain intact") {
		t.Fatalf("audit verify: exit %d %s %s", code, out, errOut)
	}
	log := filepath.Join(data, audit.FileName)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), id)
	if i < 0 {
		t.Fatal("the audit log does not name the recording's plan")
	}
	b[i] ^= 1
	if err := os.WriteFile(log, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = flightrec(t, "audit", "verify", "--data", data)
	if code != exitFound || !strings.Contains(errOut, "AUDIT_BROKEN") {
		t.Errorf("audit verify of a flipped byte: exit %d %s", code, errOut)
	}
}
