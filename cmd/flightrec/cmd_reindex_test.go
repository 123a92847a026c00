package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/store"
)

// TestReindexBesideLiveServer: reindex --data on a running server's
// directory is refused (it would reset the index behind the projector's
// back); reindex --server rebuilds the server's index during ongoing
// ingest, and afterwards the index holds every acknowledged event and the
// lag metric says 0 only when that is true.
func TestReindexBesideLiveServer(t *testing.T) {
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	f := startFeeder(base, 400, 20)
	f.waitAcked(t, 1500)

	_, errOut, code := flightrec(t, "reindex", "--data", p.data)
	if code != exitFailure || !strings.Contains(errOut, "DATA_DIR_LOCKED") || !strings.Contains(errOut, "--server http://"+p.addr) {
		t.Fatalf("reindex --data beside a server: exit %d %q, want DATA_DIR_LOCKED pointing to --server", code, errOut)
	}
	for i := 0; i < 3; i++ {
		out, errOut, code := flightrec(t, "reindex", "--server", base, "--json")
		var res struct{ Recordings int }
		if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Recordings == 0 {
			t.Fatalf("reindex --server: exit %d %q %q", code, out, errOut)
		}
		f.waitAcked(t, f.ackedSoFar()+800) // ingest goes on between rebuilds
	}
	acked := f.halt(t)
	events, _ := checkServed(t, base, acked)
	if lag := indexLag(t, base); lag != 0 {
		t.Errorf("flightrec_index_lag_events = %v once every event is indexed", lag)
	}
	var list struct{ Recordings []store.RecordingRow }
	getJSON(t, base+"/v1/recordings?limit=1000", &list)
	if len(list.Recordings) != len(acked) {
		t.Errorf("the index lists %d recordings, %d were ingested", len(list.Recordings), len(acked))
	}
	t.Logf("%d acknowledged events in %d recordings, all indexed after 3 rebuilds during ingest", events, len(acked))
}
