package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

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
