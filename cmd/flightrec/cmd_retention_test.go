package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
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

// TestAuditScan: a recording stored before a detector knew a JWT (written
// here straight into the store, past redaction) is found by audit scan,
// by place and rule, and the token itself is never printed.
func TestAuditScan(t *testing.T) {
	data := t.TempDir()
	st, err := store.OpenStore(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := store.NewRecordingID(time.Now())
	if err := st.Create(store.RecordingMeta{ID: id, Project: "shop", CreatedAt: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	lg, err := st.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	jwt := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	data1, _ := json.Marshal(event.Console{Level: "log", Text: "session " + jwt})
	data2, _ := json.Marshal(event.Console{Level: "log", Text: "all fine"})
	if _, err := lg.Append([]store.Record{
		{Seq: 1, TS: 1, Step: 1, Kind: event.KindConsole, Data: data1},
		{Seq: 2, TS: 2, Step: 1, Kind: event.KindConsole, Data: data2},
	}); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	st.Close()
	out, errOut, code := flightrec(t, "audit", "scan", "--data", data, "--json")
	if code != exitFound {
		t.Fatalf("audit scan: exit %d %s %s", code, out, errOut)
	}
	var rep struct {
		Findings []struct {
			Recording, Rule, Pointer string
			Seq                      uint64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) == 0 || rep.Findings[0].Recording != id || rep.Findings[0].Seq != 1 || !strings.Contains(rep.Findings[0].Rule, "jwt") {
		t.Errorf("findings %+v", rep.Findings)
	}
	if strings.Contains(out+errOut, jwt[:30]) {
		t.Error("audit scan printed the secret")
	}
}
