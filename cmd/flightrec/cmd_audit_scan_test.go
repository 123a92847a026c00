package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
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
	id, _ := jwtRecording(t, st)
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

// jwt is a token no detector knew when the recordings below were stored.
const jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"

// jwtRecording writes an open recording straight into st, past
// redaction: a console line carrying jwt (seq 1), then a clean one.
func jwtRecording(t *testing.T, st *store.Store) (string, store.RecordingMeta) {
	t.Helper()
	meta := store.RecordingMeta{ID: store.NewRecordingID(time.Now()), Project: "shop", CreatedAt: time.Now().UnixNano()}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := st.OpenLog(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	data1, _ := json.Marshal(event.Console{Level: "log", Text: "session " + jwt})
	data2, _ := json.Marshal(event.Console{Level: "log", Text: "all fine"})
	if _, err := lg.Append([]store.Record{
		{Seq: 1, TS: 1, Step: 1, Kind: event.KindConsole, Data: data1},
		{Seq: 2, TS: 2, Step: 1, Kind: event.KindConsole, Data: data2},
	}); err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	return meta.ID, meta
}

// scanReport is audit scan's --json output.
type scanReport struct {
	Recordings int
	Findings   []struct {
		Recording, Rule string
		Seq             uint64
	}
	Fixed []struct {
		Recording string
		NewRoot   string `json:"new_root"`
	}
	Unreadable []struct{ Recording, Error string }
}

// TestAuditScanShared: in shared mode audit scan reads every recording
// of the deployment, not only its data directory's. Node A stored and
// published recording X; node C holds recording L. A read-only scan on
// C counts and scans both (X through a scratch directory, since C's is
// opened read-only), and names the published recording it could not
// read (its published meta is damaged) instead of leaving it out
// silently. audit scan --fix then rewrites X (published anew, so every
// node reads the new root), rebuilds the shared index's rows of X alone
// (the rows of O, a recording open on another node, stay), and its audit
// entry reaches the bucket, as a server's do.
func TestAuditScanShared(t *testing.T) {
	ctx := context.Background()
	srv := testenv.S3(t)
	dsn := testenv.ClickHouse(t)
	keys, err := app.GenerateKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blobsURL := srv.URL("deploy")
	openShared := func(data string) *store.Store {
		b, err := app.OpenBlobs(ctx, blobsURL, srv.Credentials(), objblobs.Options{Refs: store.ManifestRefs})
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.OpenStoreWithBlobs(data, store.LogOptions{}, b)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	stA := openShared(t.TempDir())
	x, xMeta := jwtRecording(t, stA)
	if _, err := stA.Seal(xMeta); err != nil {
		t.Fatal(err)
	}
	// A published recording whose meta.json is damaged.
	bad := store.NewRecordingID(time.Now().Add(time.Millisecond))
	sh := stA.Blobs.(store.SharedBlobs)
	if err := sh.PutRecordingFile(bad, "meta.json", []byte("{damaged")); err != nil {
		t.Fatal(err)
	}
	if err := sh.PutRecordingFile(bad, "ROOT", []byte(xRoot(t, stA, x)+"\n")); err != nil {
		t.Fatal(err)
	}
	stA.Close()
	dataC := t.TempDir()
	stC := openShared(dataC)
	l, _ := jwtRecording(t, stC)
	stC.Close()

	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey}
	shared := []string{"--data", dataC, "--blobs", blobsURL, "--index", dsn,
		"--attestation-key", keys.Attestation, "--pseudonym-key", keys.Pseudonym, "--json"}
	scan := func(args ...string) (scanReport, int) {
		out, errOut, code := flightrecEnv(t, env, 5*time.Minute, append([]string{"audit", "scan"}, append(shared, args...)...)...)
		var rep scanReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("audit scan %v: exit %d %s %s", args, code, out, errOut)
		}
		return rep, code
	}
	rep, code := scan()
	found := map[string]bool{}
	for _, f := range rep.Findings {
		found[f.Recording] = f.Seq == 1 && strings.Contains(f.Rule, "jwt")
	}
	if code != exitFound || rep.Recordings != 2 || !found[x] || !found[l] {
		t.Fatalf("a scan on C: exit %d, %+v; want recordings %s (A's) and %s (C's) scanned, each with its token found", code, rep, x, l)
	}
	if len(rep.Unreadable) != 1 || rep.Unreadable[0].Recording != bad || !strings.Contains(rep.Unreadable[0].Error, "damaged") {
		t.Fatalf("unreadable: %+v, want %s named", rep.Unreadable, bad)
	}

	// O: open on another node, indexed there.
	idx, err := app.OpenIndex(dsn, "")
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	o := store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: store.NewRecordingID(time.Now().Add(2 * time.Millisecond)), Project: "shop"}, State: store.StateOpen}
	if err := idx.PutRecording(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := idx.IndexEvents(ctx, o.ID, []store.EventRow{{Seq: 1, Step: 1, Kind: event.KindConsole}}, 1); err != nil {
		t.Fatal(err)
	}
	rep, code = scan("--fix")
	if code != exitFailure || len(rep.Fixed) != 1 || rep.Fixed[0].Recording != x || len(rep.Unreadable) != 1 {
		t.Fatalf("audit scan --fix on C: exit %d, %+v; want %s rewritten and %s named unreadable", code, rep, x, bad)
	}
	if row, err := idx.Recording(ctx, o.ID); err != nil || row.Events != 1 || row.IndexedTo != 1 {
		t.Fatalf("the row of a recording open on another node after --fix: %+v %v", row, err)
	}
	if row, err := idx.Recording(ctx, x); err != nil || row.Root != rep.Fixed[0].NewRoot || row.Events != 2 {
		t.Fatalf("the rewritten recording's row: %+v %v, want root %s and 2 events", row, err, rep.Fixed[0].NewRoot)
	}
	stA = openShared(t.TempDir())
	defer stA.Close()
	if root, err := stA.PublishedRoot(x); err != nil || root != rep.Fixed[0].NewRoot {
		t.Fatalf("the published root of %s: %q %v, want the new one", x, root, err)
	}
	// The re_redact entry is in C's chain in the bucket, where audit
	// verify from any node reads it.
	chains, err := audit.VerifyChains(ctx, srv.Store(t, "deploy"))
	if err != nil || !chains.OK || len(chains.Chains) != 1 || chains.Entries != 1 {
		t.Fatalf("the deployment's audit chains after --fix: %+v %v, want C's one re_redact entry", chains, err)
	}
}

// xRoot is the root recording id is sealed under in st.
func xRoot(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	root, err := st.Root(id)
	if err != nil || root == "" {
		t.Fatalf("root of %s: %q %v", id, root, err)
	}
	return root
}
