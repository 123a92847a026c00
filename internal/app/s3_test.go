package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/wire"
)

// node starts a flightrec server on its own data directory whose blobs
// live in srv's bucket under prefix and whose index is the ClickHouse
// database dsn: one node of a deployment sharing both, and the keys
// (deployKeys).
func node(t *testing.T, srv *testenv.S3Server, prefix, dsn string, keys app.KeyFiles, opts ...func(*app.Config)) (*app.App, string) {
	t.Helper()
	cfg := sharedConfig(srv, prefix, keys)
	cfg.Store.Index = dsn
	cfg.Ingest.Limits = ingest.DefaultLimits
	cfg.Ingest.Limits.MaxBatchBytes = 1 << 20
	cfg.Ingest.Limits.MaxEventBytes = 300 << 10
	for _, o := range opts {
		o(&cfg)
	}
	return startApp(t, cfg)
}

// sharedConfig is a server's configuration in shared mode: blobs and
// state in srv's bucket under prefix, the deployment's keys.
func sharedConfig(srv *testenv.S3Server, prefix string, keys app.KeyFiles) app.Config {
	var cfg app.Config
	cfg.Store.Blobs = srv.URL(prefix)
	cfg.Store.BlobCredentials = srv.Credentials()
	cfg.Store.Keys = keys
	return cfg
}

// ingestFinished records evs through the server at base, batch events
// per append, finishes the recording, and returns its id and root.
func ingestFinished(t *testing.T, base string, evs []event.Envelope, batch int) (id, root string) {
	t.Helper()
	id = openRec(t, base)
	for from := 0; from < len(evs); from += batch {
		to := min(from+batch, len(evs))
		if a := acked(t, appendBatch(t, base, id, evs[from:to])); a.AckedThrough != uint64(to) {
			t.Fatalf("batch to %d: %+v", to, a)
		}
	}
	r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`))
	var fin wire.FinishReply
	r.decode(t, &fin)
	if r.status != 200 || fin.Root == "" {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	return id, fin.Root
}

// checkAttestation checks that the attestation node (app, base) makes of
// recording id verifies, against its manifest, with the key the node at
// keyBase publishes.
func checkAttestation(t *testing.T, keyBase string, a *app.App, base, id string, hdr ...string) {
	t.Helper()
	pub, err := attest.ParsePublicKey(do(t, "GET", keyBase+"/v1/attestation/key", nil).body)
	if err != nil {
		t.Fatal(err)
	}
	env := do(t, "GET", base+"/v1/recordings/"+id+"/attestation", nil, hdr...)
	if env.status != 200 {
		t.Fatalf("attestation on %s: %d %s", base, env.status, env.body)
	}
	manifest, _, _, err := a.Store.ManifestBytes(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attest.Verify(env.body, pub, manifest); err != nil {
		t.Fatalf("the attestation made by %s, with the key %s publishes: %v", base, keyBase, err)
	}
}

// deployKeys makes a deployment's key files (flightrec keys generate).
func deployKeys(t testing.TB) app.KeyFiles {
	t.Helper()
	k, err := app.GenerateKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAnyNodeServesAnyRecording: a recording ingested through node A (its
// blobs packed into the shared bucket, its segments and manifest sealed
// there, its meta.json and ROOT published beside them) is served by node
// B, which never saw it and has a data directory of its own: the same
// timeline, step views, DOM, events, video and bundle bytes.
func TestAnyNodeServesAnyRecording(t *testing.T) {
	testenv.RequireFFmpeg(t, "ffmpeg")
	srv := testenv.S3(t)
	dsn := testenv.ClickHouse(t)
	keys := deployKeys(t)
	appA, baseA := node(t, srv, "deploy", dsn, keys)
	appB, baseB := node(t, srv, "deploy", dsn, keys)

	evs := testgen.Recording(testgen.Options{Seed: 11, Steps: 12, EventsPerStep: 10, FrameBytes: 8000})
	id, root := ingestFinished(t, baseA, evs, 40)
	fin := wire.FinishReply{Root: root}
	waitIndexed(t, baseA, id, uint64(len(evs)))

	// B reads everything A does, byte for byte.
	checkReads(t, baseB, id, evs)
	var tl wire.Timeline
	do(t, "GET", baseB+"/v1/recordings/"+id+"/steps", nil).decode(t, &tl)
	paths := []string{"", "/steps", "/events?limit=10000", "/bundle", "/blobs/" + fin.Root, "/video.webm"}
	for _, st := range tl.Steps {
		paths = append(paths, fmt.Sprintf("/steps/%d", st.Step), fmt.Sprintf("/steps/%d/dom", st.Step))
	}
	for _, p := range paths {
		a := do(t, "GET", baseA+"/v1/recordings/"+id+p, nil)
		b := do(t, "GET", baseB+"/v1/recordings/"+id+p, nil)
		if a.status != b.status || !bytes.Equal(a.body, b.body) {
			t.Errorf("GET …%s: node A %d (%d bytes), node B %d (%d bytes) %.300s", p, a.status, len(a.body), b.status, len(b.body), b.body)
		}
		if p != "" && p != "/steps" && a.status != 200 && !bytes.HasSuffix([]byte(p), []byte("/dom")) {
			t.Errorf("GET …%s: %d %.300s", p, a.status, a.body)
		}
	}

	// verify re-hashes the recording's blobs from the bucket on both nodes.
	for name, a := range map[string]*app.App{"A": appA, "B": appB} {
		rep, err := a.Store.Verify(context.Background(), nil)
		if err != nil || !rep.OK() || rep.Finished != 1 || rep.Blobs == 0 {
			t.Errorf("verify on node %s: %+v %v", name, rep, err)
		}
	}
	// So does the read-only open of `flightrec verify --data A --blobs s3://…`.
	ro, err := app.StoreConfig{Data: appA.Store.Dir(), Blobs: srv.URL("deploy"), BlobCredentials: srv.Credentials()}.OpenReadOnly()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ro.Verify(context.Background(), nil)
	ro.Close()
	if err != nil || !rep.OK() || rep.Finished != 1 || rep.Blobs == 0 {
		t.Errorf("read-only verify with --blobs: %+v %v", rep, err)
	}
	// The video built is cached as a derived blob in the bucket, and its
	// record beside the recording there: both nodes find it.
	derived, _, err := objstore.ReadAll(context.Background(), srv.Store(t, "deploy"), "recordings/"+id+"/derived")
	if err != nil {
		t.Fatalf("no derived record in the bucket: %v", err)
	}
	if _, err := os.Stat(layout.Of(appB.Store.Dir()).Derived(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("in shared mode the derived record went to the data directory: %v", err)
	}
	var names map[string]string
	if err := json.Unmarshal(derived, &names); err != nil || len(names) == 0 {
		t.Fatalf("derived record: %s %v", derived, err)
	}
	for name, cs := range names {
		for node, a := range map[string]*app.App{"A": appA, "B": appB} {
			c, ok, err := a.Store.Derived(id, name)
			if err != nil || !ok || c.String() != cs {
				t.Errorf("node %s: derived %s: %v %v %v, want %s", node, name, c, ok, err, cs)
			}
		}
	}
	// B's attestation verifies with B's key against the manifest, and B's
	// bundle imports into a data directory of its own and verifies.
	checkAttestation(t, baseB, appB, baseB, id)
	other, err := store.OpenStore(t.TempDir(), store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	bundle := do(t, "GET", baseB+"/v1/recordings/"+id+"/bundle", nil)
	if gotID, root, err := other.ImportBundle(bytes.NewReader(bundle.body)); err != nil || gotID != id || root != fin.Root {
		t.Fatalf("import B's bundle: %s %s %v", gotID, root, err)
	}
	if rep, err := other.Verify(context.Background(), nil); err != nil || !rep.OK() {
		t.Fatalf("verify the imported bundle: %+v %v", rep, err)
	}
}

// TestS3OutageMidIngest: versitygw is stopped for 10 s in the middle of an
// executor's upload. Appends meanwhile answer 503 with Retry-After (a
// batch is acknowledged only once its blobs are in the object store), the
// client retries and resumes, and after finishing every event is there:
// nothing acknowledged was lost, and the server never asked to rewind
// below what it had acknowledged.
func TestS3OutageMidIngest(t *testing.T) {
	srv := testenv.S3(t)
	_, base := node(t, srv, "outage", "", deployKeys(t))
	evs := testgen.Recording(testgen.Options{Seed: 5, Steps: 20, EventsPerStep: 10, FrameBytes: 6000})
	id := openRec(t, base)
	lines, err := client.ParseLines(testgen.NDJSON(evs))
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base)
	var unavailable []*wire.Error
	c.OnRetry = func(err error, _ time.Duration) {
		var we *wire.Error
		if errors.As(err, &we) {
			unavailable = append(unavailable, we)
		}
	}
	var maxAcked uint64
	c.OnGap = func(expected uint64) {
		if expected <= maxAcked {
			t.Errorf("the server expects seq %d after acknowledging %d: acknowledged events were lost", expected, maxAcked)
		}
	}
	restarted := make(chan struct{})
	stopped := false
	_, err = c.Send(context.Background(), id, lines, 20, 1<<20, func(acked uint64) {
		maxAcked = max(maxAcked, acked)
		if !stopped && acked >= 40 {
			stopped = true
			srv.Stop()
			go func() {
				time.Sleep(10 * time.Second)
				srv.Start()
				close(restarted)
			}()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	<-restarted
	if _, err := c.Finish(context.Background(), id, "pass"); err != nil {
		t.Fatal(err)
	}
	if len(unavailable) == 0 {
		t.Fatal("no append was refused during the outage")
	}
	for _, we := range unavailable {
		if we.Status != 503 || we.RetryAfter <= 0 || we.Next == "" {
			t.Fatalf("a refusal during the outage: %+v, want 503 with Retry-After and a next step", we)
		}
	}
	waitIndexed(t, base, id, uint64(len(evs)))
	checkReads(t, base, id, evs)
}
