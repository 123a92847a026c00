package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/wire"
)

// flightrec runs the binary and returns stdout, stderr and the exit code.
func flightrec(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	return flightrecEnv(t, nil, 10*time.Minute, args...)
}

func TestHelpEverywhere(t *testing.T) {
	for _, c := range commands {
		_, errOut, code := flightrec(t, c.name, "--help")
		if code != exitOK || !strings.Contains(errOut, "Usage: flightrec "+c.name) {
			t.Errorf("%s --help: exit %d, %q", c.name, code, errOut)
		}
	}
	out, _, code := flightrec(t, "help")
	if code != exitOK || !strings.Contains(out, "verify") || !strings.Contains(out, "Exit codes") {
		t.Errorf("help: exit %d, %q", code, out)
	}
	_, errOut, code := flightrec(t, "frobnicate")
	if code != exitUsage || !strings.Contains(errOut, "UNKNOWN_COMMAND") || !strings.Contains(errOut, "next:") {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
	_, errOut, code = flightrec(t, "serve", "--addr", "0.0.0.0:0", "--data", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "INSECURE_ADDRESS") {
		t.Errorf("serve on all interfaces without tokens: exit %d, %q", code, errOut)
	}
}

// TestIngestVerifyReindex drives the CLI as a user would: ingest a file
// into a running server, then verify and reindex the stopped store, then
// catch a corrupted blob.
func TestIngestVerifyReindex(t *testing.T) {
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	evs := testgen.Recording(testgen.Options{Seed: 5, Steps: 20, EventsPerStep: 10, FrameBytes: 3000})
	file := filepath.Join(t.TempDir(), "rec.ndjson")
	if err := os.WriteFile(file, testgen.NDJSON(evs), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := flightrec(t, "ingest", "--server", "http://"+p.addr, "--project", "cli", "--batch", "37", "--json", file)
	if code != exitOK {
		t.Fatalf("ingest: exit %d: %s %s", code, out, errOut)
	}
	var res struct {
		ID, Root, Verdict string
		AckedThrough      uint64 `json:"acked_through"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("ingest --json: %v: %s", err, out)
	}
	wantVerdict := "pass"
	for _, e := range evs {
		if e.Kind == "receipt" && strings.Contains(string(e.Data), `"outcome":"failed"`) {
			wantVerdict = "fail"
		}
	}
	if res.AckedThrough != uint64(len(evs)) || !strings.HasPrefix(res.Root, "bafkrei") || res.Verdict != wantVerdict {
		t.Fatalf("ingest result: %+v (want verdict %s)", res, wantVerdict)
	}
	var tl wire.Timeline
	getJSON(t, "http://"+p.addr+"/v1/recordings/"+res.ID+"/steps", &tl)
	p.stop()

	out, _, code = flightrec(t, "verify", "--data", p.data)
	if code != exitOK || !strings.Contains(out, "ok") {
		t.Fatalf("verify of a sound store: exit %d: %s", code, out)
	}
	if _, errOut, code := flightrec(t, "reindex", "--data", p.data); code != exitOK {
		t.Fatalf("reindex: exit %d: %s", code, errOut)
	}
	p.start()
	var tl2 wire.Timeline
	getJSON(t, "http://"+p.addr+"/v1/recordings/"+res.ID+"/steps", &tl2)
	p.stop()
	a, _ := json.Marshal(tl.Steps)
	b, _ := json.Marshal(tl2.Steps)
	if !bytes.Equal(a, b) || len(tl.Steps) != 21 {
		t.Fatalf("timeline after reindex differs (%d steps before)", len(tl.Steps))
	}

	// Flip one byte of a log segment blob: verify names it and exits 1.
	st, err := store.OpenStore(p.data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := st.Manifest(res.ID)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	seg := m.Segments[0].CID
	// A sealed segment is kept compressed (<cid>.zst): a flipped byte in
	// a frame fails its decoding, and verify names the blob all the same.
	path := layout.Of(p.data).Blobs().LooseCompressed(seg)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = flightrec(t, "verify", "--data", p.data, "--json")
	var rep store.VerifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: %v: %s", err, out)
	}
	if code != exitFound || len(rep.Problems) != 1 || rep.Problems[0].CID != seg || rep.Problems[0].Recording != res.ID {
		t.Fatalf("verify of a corrupted segment: exit %d, %+v", code, rep.Problems)
	}
}
