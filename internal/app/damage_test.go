package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
)

// TestFinishFindsDamage: a log damaged while its recording is open (a bit
// flipped on disk under the running server) is found at finish: finish
// answers RECORDING_DAMAGED with its way out, the recording is reported on
// /readyz, later appends are refused the same way, and nothing is cut.
// Repaired, it has no verdict, and retention keeps it like a failure
// (damaged evidence), not for a passing run's 14 days.
func TestFinishFindsDamage(t *testing.T) {
	a, base := server(t, ingest.DefaultLimits)
	id := openRec(t, base)
	evs := testgen.Recording(testgen.Options{Seed: 4, Steps: 5, EventsPerStep: 6})
	acked(t, appendBatch(t, base, id, evs))
	seg := filepath.Join(a.Store.Dir(), "recordings", id, "log", "00000001.seg")
	var mid store.Locator
	_ = store.ScanLog(filepath.Dir(seg), func(r store.Record, loc store.Locator) error {
		if r.Seq == uint64(len(evs)/2) {
			mid = loc
		}
		return nil
	})
	b, err := os.ReadFile(seg)
	if err != nil || mid.Length == 0 {
		t.Fatalf("the log: %v", err)
	}
	b[mid.Offset+int64(mid.Length)-2] ^= 0x01
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`))
	if r.status != 409 || !strings.Contains(string(r.body), "RECORDING_DAMAGED") || !strings.Contains(string(r.body), "flightrec repair "+id) {
		t.Fatalf("finish of a damaged log: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", base+"/readyz", nil); r.status != 200 || !strings.Contains(string(r.body), "damaged recording "+id) {
		t.Fatalf("/readyz: %d %s", r.status, r.body)
	}
	more := testgen.Recording(testgen.Options{Seed: 4, Steps: 6, EventsPerStep: 6})[len(evs):]
	if r := appendBatch(t, base, id, more); r.status != 409 || !strings.Contains(string(r.body), "RECORDING_DAMAGED") {
		t.Fatalf("append after: %d %s", r.status, r.body)
	}
	if after, _ := os.ReadFile(seg); len(after) != len(b) {
		t.Fatalf("the damaged log went from %d to %d bytes", len(b), len(after))
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/repair", nil); r.status != 200 {
		t.Fatalf("repair: %d %s", r.status, r.body)
	}
	var ret struct {
		Class string
		Days  int
	}
	do(t, "GET", base+"/v1/recordings/"+id+"/retention", nil).decode(t, &ret)
	if ret.Class != "failing" || ret.Days != 90 {
		t.Fatalf("a repaired recording's retention: %+v; want failing, 90 days", ret)
	}
}
