package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/wire"
)

// propagation bounds how long the shared-state tests wait for a change
// made through one node to show on the other: a guard against a change
// that never arrives, not a speed check (the design's bound is a second's
// re-read; the machine is shared).
const propagation = 5 * time.Second

// eventually polls f until it holds or propagation passes.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(propagation)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, propagation)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSharedState: two nodes of one deployment (one versitygw bucket, one
// ClickHouse, the same keys) share tokens, pins, keys and the recorded
// policy digest. A token created
// through A works on B, and once revoked through A is refused by B; a pin
// made through A holds against B's sweep (and once removed, B's sweep
// removes the recording); an attestation made by B verifies with the key
// A publishes.
func TestSharedState(t *testing.T) {
	srv := testenv.S3(t)
	dsn := testenv.ClickHouse(t)
	keys := deployKeys(t)
	requireTokens := func(c *app.Config) { c.RequireTokens = true }
	appA, baseA := node(t, srv, "deploy", dsn, keys, requireTokens, func(c *app.Config) { c.RecordPolicy = true })
	appB, baseB := node(t, srv, "deploy", dsn, keys, requireTokens)
	// The first admin token, made as `flightrec token create --blobs …`
	// makes it: in the deployment's list, not a data directory's.
	cliTokens, closeTokens, err := sharedConfig(srv, "deploy", keys).Store.OpenTokens()
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := cliTokens.Create("*", []string{"admin", "ingest", "read", "pin"}, 0, "test")
	closeTokens()
	if err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer " + admin}
	for _, base := range []string{baseA, baseB} {
		eventually(t, "the CLI's token works on "+base, func() bool {
			return do(t, "GET", base+"/v1/recordings", nil, auth...).status == 200
		})
	}

	// A's policy digest is recorded in the bucket, where a sweep from any
	// node's command line checks it.
	doc, closeDoc, err := sharedConfig(srv, "deploy", keys).Store.PolicyDigest()
	if err != nil {
		t.Fatal(err)
	}
	defer closeDoc()
	if got, err := retention.RecordedPolicy(doc); err != nil || got != appA.Policy.Digest() {
		t.Fatalf("recorded policy digest in the bucket: %q %v, want %q", got, err, appA.Policy.Digest())
	}
	var mismatch *wire.Error
	if err := retention.CheckPolicy(doc, "sha256:another", false); !errors.As(err, &mismatch) || mismatch.Code != "POLICY_MISMATCH" {
		t.Fatalf("a sweep under another policy: %v", err)
	}
	if _, err := os.Stat(layout.Of(appA.Store.Dir()).PolicyDigest()); err == nil {
		t.Error("in shared mode the policy digest went to the data directory")
	}

	// A token made through A's API works on B; revoked through A, B
	// refuses it.
	r := do(t, "POST", baseA+"/v1/tokens", []byte(`{"project":"shop","scopes":["read"]}`), auth...)
	var made struct {
		Token string `json:"token"`
		Grant struct {
			ID string `json:"id"`
		} `json:"grant"`
	}
	r.decode(t, &made)
	if r.status != 201 || made.Token == "" {
		t.Fatalf("create a token on A: %d %s", r.status, r.body)
	}
	reader := []string{"Authorization", "Bearer " + made.Token}
	eventually(t, "a token made on A works on B", func() bool {
		return do(t, "GET", baseB+"/v1/recordings", nil, reader...).status == 200
	})
	if r := do(t, "DELETE", baseA+"/v1/tokens/"+made.Grant.ID, nil, auth...); r.status != 200 {
		t.Fatalf("revoke on A: %d %s", r.status, r.body)
	}
	eventually(t, "a token revoked on A is refused by B", func() bool {
		r := do(t, "GET", baseB+"/v1/recordings", nil, reader...)
		return r.status == 401 && r.errCode(t) == "UNAUTHENTICATED"
	})

	// A recording through A, finished.
	evs := testgen.Recording(testgen.Options{Seed: 7, Steps: 3, EventsPerStep: 5, FrameBytes: 2000})
	r = do(t, "POST", baseA+"/v1/recordings", []byte(`{"project":"shop","flow":"checkout"}`), auth...)
	var o wire.OpenReply
	r.decode(t, &o)
	id := o.ID
	if a := acked(t, appendBatch(t, baseA, id, evs, auth...)); a.AckedThrough != uint64(len(evs)) {
		t.Fatalf("append: %+v", a)
	}
	if r := do(t, "POST", baseA+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`), auth...); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	eventually(t, "the recording is indexed", func() bool {
		row, err := appA.Index.Recording(context.Background(), id)
		return err == nil && row.IndexedTo >= uint64(len(evs))
	})

	// B's attestation verifies with the key A publishes: one key per
	// deployment.
	checkAttestation(t, baseA, appB, baseB, id, auth...)

	// A pin made through A holds against B's sweep, long after the
	// recording's class expired.
	r = do(t, "POST", baseA+"/v1/recordings/"+id+"/pins", []byte(`{"reason":"legal_hold","ref":"case 7"}`), auth...)
	var pin wire.Pin
	r.decode(t, &pin)
	if r.status != 201 {
		t.Fatalf("pin on A: %d %s", r.status, r.body)
	}
	appB.Sweeper.Now = func() time.Time { return time.Now().AddDate(20, 0, 0) }
	rep, err := appB.Sweeper.Sweep(context.Background(), false, nil)
	if err != nil || len(rep.Deleted) != 0 || rep.Pinned != 1 {
		t.Fatalf("B's sweep with A's pin: %+v %v", rep, err)
	}
	if r := do(t, "DELETE", baseA+"/v1/recordings/"+id+"/pins/"+pin.ID, nil, auth...); r.status != 200 {
		t.Fatalf("unpin on A: %d %s", r.status, r.body)
	}
	rep, err = appB.Sweeper.Sweep(context.Background(), false, nil)
	if err != nil || len(rep.Deleted) != 1 || rep.Deleted[0].ID != id || len(rep.Errors) != 0 {
		t.Fatalf("B's sweep once A's pin is gone: %+v %v", rep, err)
	}

	// With the object store out of reach, B trusts its copy of the token
	// list for at most access.MaxStale, then answers 503 (never a revoked
	// token let through on an old copy), and recovers when it is back.
	srv.Stop()
	eventually(t, "B refuses tokens while the list cannot be read", func() bool {
		r := do(t, "GET", baseB+"/v1/recordings", nil, auth...)
		return r.status == 503 && r.errCode(t) == "STATE_UNAVAILABLE" && r.header.Get("Retry-After") != ""
	})
	srv.Start()
	eventually(t, "B accepts tokens again", func() bool {
		return do(t, "GET", baseB+"/v1/recordings", nil, auth...).status == 200
	})
}

// TestSharedModeNeedsKeys: a node sharing an object store without the
// deployment's key files refuses to start, with an envelope whose next
// says how to make them, and makes no key of its own; key files without
// shared mode are refused too (a single node keeps its own).
func TestSharedModeNeedsKeys(t *testing.T) {
	srv := testenv.S3(t)
	keys := deployKeys(t)
	for name, k := range map[string]app.KeyFiles{
		"none":           {},
		"no pseudonym":   {Attestation: keys.Attestation},
		"no attestation": {Pseudonym: keys.Pseudonym},
		"bad pseudonym":  {Attestation: keys.Attestation, Pseudonym: keys.Attestation},
	} {
		cfg := sharedConfig(srv, "nokeys", k)
		cfg.Store.Data = t.TempDir()
		a, err := app.New(cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			a.Close()
			t.Fatalf("%s: a shared-mode node started without the deployment's keys", name)
		}
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != "SHARED_KEYS_REQUIRED" || !strings.Contains(we.Next, "flightrec keys generate") {
			t.Fatalf("%s: %v (%+v)", name, err, we)
		}
		l := layout.Of(cfg.Store.Data)
		for _, p := range []string{l.AttestationKey(), l.Key(layout.PseudonymKeyName)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s: the refused node made %s", name, p)
			}
		}
	}
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Store.Keys = keys
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	var we *wire.Error
	if err == nil {
		a.Close()
	}
	if !errors.As(err, &we) || we.Code != "KEYS_WITHOUT_SHARED_MODE" {
		t.Fatalf("key files on a single node: %v", err)
	}
}

// TestCommandKeys: a command that signs or pseudonymizes (export
// attestation, audit scan --fix, rerun) uses the deployment's key files in
// shared mode, refuses to run without them (making no key of its own),
// and on a single node uses the data directory's keys, refusing key files.
func TestCommandKeys(t *testing.T) {
	keys := deployKeys(t)
	shared := app.StoreConfig{Data: t.TempDir(), Blobs: "s3://bucket/prefix?endpoint=127.0.0.1:1", Keys: keys}
	st, err := store.OpenStore(shared.Data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pk, err := shared.PseudonymKey(st)
	want, _ := os.ReadFile(keys.Pseudonym)
	if err != nil || !bytes.Equal(pk, want) {
		t.Fatalf("shared mode's pseudonym key: %v (the deployment's: %v)", err, bytes.Equal(pk, want))
	}
	signer, err := shared.Signer(true)
	deployed, _ := attest.LoadKeyFile(keys.Attestation)
	if err != nil || signer.KeyID() != deployed.KeyID() {
		t.Fatalf("shared mode's signer: %v", err)
	}
	shared.Keys.Pseudonym = ""
	for what, f := range map[string]func() error{
		"pseudonym": func() error { _, err := shared.PseudonymKey(st); return err },
		"signer":    func() error { _, err := shared.Signer(true); return err },
	} {
		var we *wire.Error
		if err := f(); !errors.As(err, &we) || we.Code != "SHARED_KEYS_REQUIRED" {
			t.Errorf("%s without the key files in shared mode: %v", what, err)
		}
	}
	l := layout.Of(shared.Data)
	for _, p := range []string{l.AttestationKey(), l.Key(layout.PseudonymKeyName)} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("shared mode made %s", p)
		}
	}
	single := app.StoreConfig{Data: shared.Data}
	if _, err := single.Signer(false); err == nil {
		t.Error("a single node's signer was loaded before any was made")
	}
	s1, err := single.Signer(true)
	s2, err2 := single.Signer(false)
	if err != nil || err2 != nil || s1.KeyID() != s2.KeyID() || s1.KeyID() == deployed.KeyID() {
		t.Fatalf("a single node's signer: %v, %v", err, err2)
	}
	if pk, err := single.PseudonymKey(st); err != nil || bytes.Equal(pk, want) || len(pk) != 32 {
		t.Fatalf("a single node's pseudonym key: %v", err)
	}
	single.Keys = keys
	var we *wire.Error
	if _, err := single.PseudonymKey(st); !errors.As(err, &we) || we.Code != "KEYS_WITHOUT_SHARED_MODE" {
		t.Fatalf("key files on a single node: %v", err)
	}
}
