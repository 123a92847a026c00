package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/store"
)

// runCLI runs flightrec in process and returns stdout, stderr and the
// exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

var bundleClock = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// sealedRecording stores a finished recording with n frames (each with
// its own blob) straight into the data directory and returns its id and
// root; finish false leaves it open.
func sealedRecording(t *testing.T, data string, n int, verdict string, finish bool) (string, string) {
	t.Helper()
	st, err := store.OpenStore(data, store.LogOptions{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bundleClock = bundleClock.Add(time.Second)
	id := store.NewRecordingID(bundleClock)
	meta := store.RecordingMeta{ID: id, Project: "shop", Flow: "checkout", Executor: "test",
		Versions: map[string]string{"engine": "chromium", "app": "sha256:feed"}, CreatedAt: bundleClock.UnixNano()}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := st.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	var blobs [][]byte
	for i := range n {
		blobs = append(blobs, fmt.Appendf(nil, "frame %d of %s %0300d", i, id, i))
	}
	cids, err := st.Blobs.PutMany(blobs)
	if err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	for i, c := range cids {
		recs = append(recs, store.Record{Seq: uint64(i + 1), TS: int64(i), Step: 1 + i/4, Kind: event.KindFrame,
			CID: c.String(), BlobSize: int64(len(blobs[i])), Data: json.RawMessage(fmt.Sprintf(`{"cid":%q,"pad":"%0200d"}`, c, 0))})
	}
	if _, err := lg.Append(recs); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	if !finish {
		return id, ""
	}
	meta.Verdict, meta.FinishedAt = verdict, bundleClock.Add(time.Second).UnixNano()
	root, err := st.Seal(meta)
	if err != nil {
		t.Fatal(err)
	}
	return id, root
}

// TestBundleCLI: export bundle, verify it (and catch a flipped byte),
// import it into another data directory under the same root, indexed and
// verifying.
func TestBundleCLI(t *testing.T) {
	data := t.TempDir()
	id, root := sealedRecording(t, data, 12, "pass", true)
	openID, _ := sealedRecording(t, data, 2, "", false)
	dir := t.TempDir()
	car := filepath.Join(dir, "rec.car")

	out, errOut, code := runCLI(t, "export", "bundle", "--data", data, "-o", car, id)
	if code != exitOK || !strings.Contains(out, "wrote "+car) || !strings.Contains(out, root) {
		t.Fatalf("export bundle: exit %d: %s %s", code, out, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("export left %d files", len(ents))
	}
	out, errOut, code = runCLI(t, "verify", car)
	if code != exitOK || !strings.Contains(out, "recording "+id+" root "+root) || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify bundle: exit %d: %s %s", code, out, errOut)
	}
	out, _, code = runCLI(t, "verify", car, "--json")
	var rep store.BundleReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || !rep.OK() || rep.Root != root || rep.Events != 12 {
		t.Fatalf("verify --json: exit %d %v: %s", code, err, out)
	}

	// The default file name, and the refusals.
	wd, _ := os.Getwd()
	os.Chdir(dir)
	_, errOut, code = runCLI(t, "export", "bundle", "--data", data, id)
	os.Chdir(wd)
	if b, err := os.ReadFile(filepath.Join(dir, id+".car")); code != exitOK || err != nil || !bytes.Equal(b, mustRead(t, car)) {
		t.Fatalf("export to ID.car: exit %d %v %s", code, err, errOut)
	}
	if _, errOut, code := runCLI(t, "export", "bundle", "--data", data, "-o", filepath.Join(dir, "open.car"), openID); code != exitFailure || !strings.Contains(errOut, "RECORDING_OPEN") {
		t.Errorf("export of an open recording: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "export", "bundle", "--data", data, store.NewRecordingID(time.Now())); code != exitFailure || !strings.Contains(errOut, "NOT_FOUND") {
		t.Errorf("export of a missing recording: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "export", "zip", id); code != exitUsage || !strings.Contains(errOut, "UNKNOWN_FORMAT") {
		t.Errorf("export zip: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "export", "--help"); code != exitOK || !strings.Contains(errOut, "Usage: flightrec export") {
		t.Errorf("export --help: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "open.car")); err == nil {
		t.Error("a failed export left its file")
	}

	// One flipped byte: exit 1, the problem named.
	good := mustRead(t, car)
	bad := filepath.Join(dir, "bad.car")
	b := bytes.Clone(good)
	b[len(b)*2/3] ^= 0x20
	os.WriteFile(bad, b, 0o644)
	out, _, code = runCLI(t, "verify", bad)
	if code != exitFound || !strings.Contains(out, "PROBLEM") || strings.Contains(out, "\nok") {
		t.Fatalf("verify of a flipped byte: exit %d: %s", code, out)
	}

	// Import into another data directory: the same root, indexed.
	data2 := filepath.Join(t.TempDir(), "data2")
	out, errOut, code = runCLI(t, "import", "bundle", "--data", data2, car)
	if code != exitOK || out != "imported "+id+" root "+root+"\n" {
		t.Fatalf("import bundle: exit %d: %q %s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "verify", "--data", data2)
	if code != exitOK || !strings.HasSuffix(out, "ok\n") || !strings.Contains(out, "1 recordings (1 finished)") {
		t.Fatalf("verify --data after import: exit %d: %s %s", code, out, errOut)
	}
	idx, err := app.OpenIndex("", data2)
	if err != nil {
		t.Fatal(err)
	}
	row, err := idx.Recording(context.Background(), id)
	idx.Close()
	if err != nil || row.State != store.StateFinished || row.Root != root || row.Events != 12 || row.Verdict != "pass" {
		t.Fatalf("indexed row %+v %v", row, err)
	}
	// Again: the same, nothing changes.
	if out, errOut, code = runCLI(t, "import", "bundle", "--data", data2, "--json", car); code != exitOK || !strings.Contains(out, `"root": "`+root+`"`) {
		t.Fatalf("second import: exit %d: %s %s", code, out, errOut)
	}
	// Re-exported from there: byte for byte the bundle imported.
	car2 := filepath.Join(dir, "again.car")
	if _, errOut, code := runCLI(t, "export", "bundle", "--data", data2, "-o", car2, id); code != exitOK || !bytes.Equal(mustRead(t, car2), good) {
		t.Fatalf("re-export: exit %d %s", code, errOut)
	}
	// The damaged bundle installs nothing.
	data3 := t.TempDir()
	_, errOut, code = runCLI(t, "import", "bundle", "--data", data3, bad)
	if code != exitUsage || !strings.Contains(errOut, "MALFORMED_INPUT") || !strings.Contains(errOut, "nothing was installed") {
		t.Fatalf("import of a damaged bundle: exit %d: %s", code, errOut)
	}
	if ents, _ := os.ReadDir(filepath.Join(data3, "recordings")); len(ents) != 0 {
		t.Fatalf("a damaged import left %d entries", len(ents))
	}
	// Into the data directory it came from: already there, success.
	if _, errOut, code := runCLI(t, "import", "bundle", "--data", data, car); code != exitOK {
		t.Fatalf("import into its own data directory: exit %d: %s", code, errOut)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttestationCLI: export attestation signs with the data directory's
// key; verify --attestation accepts it against the bundle and against the
// store, and refuses a tampered predicate, another recording and another
// key.
func TestAttestationCLI(t *testing.T) {
	data := t.TempDir()
	id, root := sealedRecording(t, data, 5, "fail", true)
	other, _ := sealedRecording(t, data, 5, "fail", true)
	dir := t.TempDir()
	att := filepath.Join(dir, "rec.intoto.json")
	car := filepath.Join(dir, "rec.car")
	otherCar := filepath.Join(dir, "other.car")
	pub := filepath.Join(data, "keys", "attestation.pub")

	out, errOut, code := runCLI(t, "export", "attestation", "--data", data, "-o", att, id)
	if code != exitOK || !strings.Contains(out, "public key: "+pub) || !strings.Contains(out, root) {
		t.Fatalf("export attestation: exit %d: %s %s", code, out, errOut)
	}
	if fi, err := os.Stat(filepath.Join(data, "keys", "attestation.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	for _, c := range [][]string{{"export", "bundle", "--data", data, "-o", car, id}, {"export", "bundle", "--data", data, "-o", otherCar, other}} {
		if _, errOut, code := runCLI(t, c...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", c, code, errOut)
		}
	}

	out, errOut, code = runCLI(t, "verify", "--attestation", att, "--key", pub, car)
	if code != exitOK || !strings.Contains(out, "recording "+id+" root "+root) || !strings.Contains(out, "verdict fail") || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify --attestation BUNDLE: exit %d: %s %s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "verify", "--attestation", att, "--key", pub, "--data", data, "--recording", id)
	if code != exitOK || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify --attestation --data: exit %d: %s %s", code, out, errOut)
	}
	// Imported elsewhere, the recording still matches its attestation.
	data2 := t.TempDir()
	if _, errOut, code := runCLI(t, "import", "bundle", "--data", data2, car); code != exitOK {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	if out, errOut, code := runCLI(t, "verify", "--attestation", att, "--key", pub, "--data", data2, "--recording", id); code != exitOK {
		t.Fatalf("verify against the imported copy: exit %d: %s %s", code, out, errOut)
	}

	// Another recording: its bundle or its manifest in the store.
	_, errOut, code = runCLI(t, "verify", "--attestation", att, "--key", pub, otherCar)
	if code != exitFound || !strings.Contains(errOut, "ATTESTATION_MISMATCH") || !strings.Contains(errOut, "subject does not match") {
		t.Errorf("against another recording's bundle: exit %d: %s", code, errOut)
	}
	_, errOut, code = runCLI(t, "verify", "--attestation", att, "--key", pub, "--data", data, "--recording", other)
	if code != exitFound || !strings.Contains(errOut, "ATTESTATION_MISMATCH") {
		t.Errorf("against another recording in the store: exit %d: %s", code, errOut)
	}

	// The predicate changed after signing (the verdict), the signature kept.
	var env attest.Envelope
	json.Unmarshal(mustRead(t, att), &env)
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	var stmt map[string]any
	json.Unmarshal(payload, &stmt)
	stmt["predicate"].(map[string]any)["verdict"] = "pass"
	payload, _ = json.Marshal(stmt)
	env.Payload = base64.StdEncoding.EncodeToString(payload)
	tampered := filepath.Join(dir, "tampered.json")
	b, _ := json.Marshal(env)
	os.WriteFile(tampered, b, 0o644)
	_, errOut, code = runCLI(t, "verify", "--attestation", tampered, "--key", pub, car)
	if code != exitFound || !strings.Contains(errOut, "BAD_SIGNATURE") {
		t.Errorf("tampered predicate: exit %d: %s", code, errOut)
	}

	// Another key.
	otherKey := filepath.Join(dir, "other.pub")
	k, _, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(k)
	os.WriteFile(otherKey, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	_, errOut, code = runCLI(t, "verify", "--attestation", att, "--key", otherKey, car)
	if code != exitFound || !strings.Contains(errOut, "BAD_SIGNATURE") {
		t.Errorf("another key: exit %d: %s", code, errOut)
	}

	// A damaged bundle is reported before the attestation is looked at.
	bad := filepath.Join(dir, "bad.car")
	cb := mustRead(t, car)
	cb[len(cb)-3] ^= 1
	os.WriteFile(bad, cb, 0o644)
	_, errOut, code = runCLI(t, "verify", "--attestation", att, "--key", pub, bad)
	if code != exitFound || !strings.Contains(errOut, "BAD_BUNDLE") {
		t.Errorf("damaged bundle: exit %d: %s", code, errOut)
	}

	// Usage errors.
	for _, args := range [][]string{
		{"verify", "--attestation", att, car},
		{"verify", "--attestation", att, "--key", pub},
		{"verify", "--attestation", att, "--key", pub, "--recording", id, car},
		{"verify", "--key", pub, car},
		{"verify", car, otherCar},
	} {
		if _, errOut, code := runCLI(t, args...); code != exitUsage || !strings.Contains(errOut, "USAGE") {
			t.Errorf("%v: exit %d: %s", args[1:], code, errOut)
		}
	}

	// A second export signs with the same key.
	att2 := filepath.Join(dir, "again.json")
	if out, _, code := runCLI(t, "export", "attestation", "--data", data, "-o", att2, id); code != exitOK || !bytes.Equal(mustRead(t, att2), mustRead(t, att)) {
		t.Errorf("second export: exit %d: %s", code, out)
	}
}

// TestBundleOfIngestedRecording: a recording stored through the ingest API
// (in process, over --data) — frames as packed blobs, redaction applied —
// bundles, verifies, imports and attests like any other.
func TestBundleOfIngestedRecording(t *testing.T) {
	data := t.TempDir()
	var errBuf bytes.Buffer
	stop, url, err := serveLocal(app.StoreConfig{Data: data}, "", "test", &errBuf)
	if err != nil {
		t.Fatal(err)
	}
	evs := testgen.Recording(testgen.Options{Seed: 9, Steps: 6, EventsPerStep: 8, FrameBytes: 2000})
	file := filepath.Join(t.TempDir(), "rec.ndjson")
	os.WriteFile(file, testgen.NDJSON(evs), 0o644)
	out, errOut, code := runCLI(t, "ingest", "--server", url, "--batch", "7", "--json", file)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var res struct{ ID, Root string }
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Root == "" {
		t.Fatalf("ingest: exit %d: %s %s", code, out, errOut)
	}
	car := filepath.Join(t.TempDir(), "rec.car")
	if _, errOut, code := runCLI(t, "export", "bundle", "--data", data, "-o", car, res.ID); code != exitOK {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	out, _, code = runCLI(t, "verify", "--json", car)
	var rep store.BundleReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || rep.Events != int64(len(evs)) || rep.Blobs < 6 {
		t.Fatalf("verify: exit %d %v: %s", code, err, out)
	}
	data2 := t.TempDir()
	out, errOut, code = runCLI(t, "import", "bundle", "--data", data2, car)
	if code != exitOK || !strings.Contains(out, res.Root) {
		t.Fatalf("import: exit %d: %s %s", code, out, errOut)
	}
	if out, _, code := runCLI(t, "verify", "--data", data2); code != exitOK {
		t.Fatalf("verify --data: exit %d: %s", code, out)
	}
	att := filepath.Join(t.TempDir(), "att.json")
	if _, errOut, code := runCLI(t, "export", "attestation", "--data", data, "-o", att, res.ID); code != exitOK {
		t.Fatalf("export attestation: exit %d: %s", code, errOut)
	}
	pub := filepath.Join(data, "keys", "attestation.pub")
	if out, errOut, code := runCLI(t, "verify", "--attestation", att, "--key", pub, "--data", data2, "--recording", res.ID); code != exitOK {
		t.Fatalf("verify --attestation: exit %d: %s %s", code, out, errOut)
	}
}
