package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// sealed makes a finished recording in a fresh store and returns the
// store and its id.
func sealed(t testing.TB, st *store.Store, verdict string) string {
	t.Helper()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	id := store.NewRecordingID(now)
	meta := store.RecordingMeta{ID: id, Project: "shop", Flow: "checkout", Executor: "test",
		Labels:     map[string]string{"persona": "guest", "data_branch": "main"},
		Versions:   map[string]string{"engine": "chromium 140", "app": "sha256:abc", "flow_revision": "7"},
		PlanDigest: "sha256:0123", CreatedAt: now.UnixNano()}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := st.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Append([]store.Record{
		{Seq: 1, TS: 1, Step: 1, Kind: event.KindConsole, Data: json.RawMessage(`{"level":"log","text":"a"}`)},
		{Seq: 2, TS: 2, Step: 2, Kind: event.KindConsole, Data: json.RawMessage(`{"level":"log","text":"b"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	meta.Verdict, meta.FinishedAt = verdict, now.Add(time.Second).UnixNano()
	if _, err := st.Seal(meta); err != nil {
		t.Fatal(err)
	}
	return id
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.OpenStore(t.TempDir(), store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newSigner(t testing.TB) *Signer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return NewSigner(key)
}

func manifestOf(t testing.TB, st *store.Store, id string) []byte {
	t.Helper()
	raw, _, _, err := st.ManifestBytes(id)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestDerivedFailureSignature: the failure signature, derived after the
// seal, is signed and verifies; changing it breaks the signature.
func TestDerivedFailureSignature(t *testing.T) {
	st := openStore(t)
	id := sealed(t, st, "fail")
	s := newSigner(t)
	const sig = "POST /api/checkout 500 GIFT_CARD_STATE"
	env, err := attestRecording(s, st, id, sig)
	if err != nil {
		t.Fatal(err)
	}
	man := manifestOf(t, st, id)
	stmt, err := Verify(env, s.PublicKey(), man)
	if err != nil || stmt.Predicate.FailureSignature != sig {
		t.Fatalf("verify: %v %+v", err, stmt)
	}
	var e Envelope
	json.Unmarshal(env, &e)
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	e.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte("GIFT_CARD_STATE"), []byte("TIMEOUT"), 1))
	forged, _ := json.Marshal(e)
	if _, err := Verify(forged, s.PublicKey(), man); !errors.Is(err, ErrSignature) {
		t.Fatalf("a changed failure signature: %v, want ErrSignature", err)
	}
}

// attestRecording attests finished recording id of st, with a failure
// signature derived after the seal (as playback.Attest does).
func attestRecording(s *Signer, st *store.Store, id, failureSignature string) ([]byte, error) {
	raw, man, root, err := st.ManifestBytes(id)
	if err != nil {
		return nil, err
	}
	man.Recording.FailureSignature = failureSignature
	return s.Attest(man, raw, root)
}

func TestAttestVerify(t *testing.T) {
	st := openStore(t)
	id := sealed(t, st, "fail")
	s := newSigner(t)
	env, err := attestRecording(s, st, id, "")
	if err != nil {
		t.Fatal(err)
	}
	man := manifestOf(t, st, id)
	stmt, err := Verify(env, s.PublicKey(), man)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := st.Root(id)
	p := stmt.Predicate
	if stmt.Subject[0].Name != "recording/"+id || stmt.Subject[0].Annotations["root_cid"] != root ||
		p.Recording != id || p.Root != root || p.Project != "shop" || p.Flow != "checkout" || p.Verdict != "fail" ||
		p.Steps != 2 || p.Events != 2 || p.RedactionPlanDigest != "sha256:0123" || p.KeyID != s.KeyID() ||
		p.Versions["engine"] != "chromium 140" || p.Labels["persona"] != "guest" ||
		p.CreatedAt != "2026-03-01T10:00:00Z" || p.FinishedAt != "2026-03-01T10:00:01Z" {
		t.Fatalf("statement %+v", stmt)
	}
	var e Envelope
	if err := json.Unmarshal(env, &e); err != nil || e.PayloadType != PayloadType || len(e.Signatures) != 1 || e.Signatures[0].KeyID != s.KeyID() {
		t.Fatalf("envelope %s: %v", env, err)
	}
	if len(s.KeyID()) != 32 {
		t.Fatalf("key id %q", s.KeyID())
	}
	// The signature is over PAE, as DSSE says.
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	sig, _ := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	if !ed25519.Verify(s.PublicKey(), PAE(PayloadType, payload), sig) {
		t.Fatal("signature is not over PAE")
	}
	if got := string(PAE("a", []byte("hello"))); got != "DSSEv1 1 a 5 hello" {
		t.Fatalf("PAE %q", got)
	}
	// Attest refuses a root that is not the bytes' CID.
	if _, err := s.Attest(nil, man, store.SumString([]byte("x"))); err == nil {
		t.Fatal("wrong root accepted")
	}
}

// TestVerifyRefuses: each way an attestation can fail has its own error.
func TestVerifyRefuses(t *testing.T) {
	st := openStore(t)
	id := sealed(t, st, "pass")
	other := sealed(t, st, "pass")
	s := newSigner(t)
	env, err := attestRecording(s, st, id, "")
	if err != nil {
		t.Fatal(err)
	}
	man := manifestOf(t, st, id)

	var e Envelope
	json.Unmarshal(env, &e)
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	repack := func(edit func(stmt map[string]any), pt string) []byte {
		var stmt map[string]any
		json.Unmarshal(payload, &stmt)
		if edit != nil {
			edit(stmt)
		}
		p, _ := json.Marshal(stmt)
		e2 := e
		e2.Payload = base64.StdEncoding.EncodeToString(p)
		if pt != "" {
			e2.PayloadType = pt
		}
		out, _ := json.Marshal(e2)
		return out
	}
	// A statement re-signed by s but lying about the verdict.
	lie := func() []byte {
		var stmt Statement
		json.Unmarshal(payload, &stmt)
		stmt.Predicate.Verdict = "fail"
		p, _ := json.Marshal(stmt)
		e2 := Envelope{PayloadType: PayloadType, Payload: base64.StdEncoding.EncodeToString(p),
			Signatures: []Signature{{KeyID: s.KeyID(), Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, PAE(PayloadType, p)))}}}
		out, _ := json.Marshal(e2)
		return out
	}()
	cases := []struct {
		name string
		env  []byte
		pub  ed25519.PublicKey
		man  []byte
		want error
	}{
		{"changed verdict", repack(func(m map[string]any) { m["predicate"].(map[string]any)["verdict"] = "fail" }, ""), s.PublicKey(), man, ErrSignature},
		{"wrong key", env, newSigner(t).PublicKey(), man, ErrSignature},
		{"another recording", env, s.PublicKey(), manifestOf(t, st, other), ErrSubject},
		{"payload type", repack(nil, "application/json"), s.PublicKey(), man, ErrPayloadType},
		{"not json", []byte("{"), s.PublicKey(), man, ErrMalformed},
		{"no signatures", []byte(`{"payloadType":"` + PayloadType + `","payload":"e30=","signatures":[]}`), s.PublicKey(), man, ErrMalformed},
		{"signed lie", lie, s.PublicKey(), man, ErrPredicate},
	}
	for _, c := range cases {
		if _, err := Verify(c.env, c.pub, c.man); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A statement of another type, properly signed.
	var stmt Statement
	json.Unmarshal(payload, &stmt)
	stmt.PredicateType = "https://slsa.dev/provenance/v1"
	p, _ := json.Marshal(stmt)
	e2 := Envelope{PayloadType: PayloadType, Payload: base64.RawURLEncoding.EncodeToString(p),
		Signatures: []Signature{{Sig: base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.key, PAE(PayloadType, p)))}}}
	b, _ := json.Marshal(e2)
	if _, err := Verify(b, s.PublicKey(), man); !errors.Is(err, ErrStatement) {
		t.Errorf("other predicate type: %v", err)
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	s1, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyDir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	di, err := os.Stat(filepath.Join(dir, KeyDir))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("key dir: %v %v", di, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, KeyDir)); len(ents) != 2 {
		t.Fatalf("key dir holds %d files", len(ents))
	}
	os.Remove(s1.PublicKeyPath())
	s2, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s1.KeyID() != s2.KeyID() || !s1.PublicKey().Equal(s2.PublicKey()) {
		t.Fatal("the key changed across loads")
	}
	pemBytes, err := os.ReadFile(s2.PublicKeyPath())
	if err != nil || !strings.Contains(string(pemBytes), "BEGIN PUBLIC KEY") {
		t.Fatalf("public key file: %v", err)
	}
	pub, err := ParsePublicKey(pemBytes)
	if err != nil || !pub.Equal(s1.PublicKey()) || KeyID(pub) != s1.KeyID() {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	if _, err := ParsePublicKey([]byte("nope")); err == nil {
		t.Fatal("garbage parsed as a key")
	}
	priv, _ := os.ReadFile(filepath.Join(dir, KeyDir, KeyFile))
	if _, err := ParsePublicKey(priv); err == nil {
		t.Fatal("a private key parsed as a public key")
	}
	// A damaged key file is an error, never silently replaced.
	os.WriteFile(filepath.Join(dir, KeyDir, KeyFile), []byte("damaged"), 0o600)
	if _, err := LoadOrCreateKey(dir); err == nil {
		t.Fatal("damaged key accepted")
	}
}

// TestAttestAcrossKeyLoads: an attestation made with the stored key
// verifies with the public key file written next to it.
func TestAttestAcrossKeyLoads(t *testing.T) {
	st := openStore(t)
	id := sealed(t, st, "pass")
	s, err := LoadOrCreateKey(st.Dir())
	if err != nil {
		t.Fatal(err)
	}
	env, err := attestRecording(s, st, id, "")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := LoadOrCreateKey(st.Dir())
	pemBytes, _ := os.ReadFile(s2.PublicKeyPath())
	pub, err := ParsePublicKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(env, pub, manifestOf(t, st, id)); err != nil {
		t.Fatal(err)
	}
	open := store.NewRecordingID(time.Now())
	st.Create(store.RecordingMeta{ID: open, Project: "p"})
	if _, err := attestRecording(s, st, open, ""); !errors.Is(err, store.ErrOpen) {
		t.Fatalf("open recording: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	st := openStore(f)
	id := sealed(f, st, "pass")
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	s := NewSigner(key)
	env, err := attestRecording(s, st, id, "")
	if err != nil {
		f.Fatal(err)
	}
	man := manifestOf(f, st, id)
	f.Add(env, man)
	f.Add(env[:len(env)/2], man)
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"","signatures":[{"sig":""}]}`), []byte{})
	f.Fuzz(func(t *testing.T, env, man []byte) {
		stmt, err := Verify(env, s.PublicKey(), man)
		if err == nil && (stmt == nil || len(stmt.Subject) != 1) {
			t.Fatal("verified without a statement")
		}
		if err == nil && !bytes.Equal(man, manifestOf(t, st, id)) {
			t.Fatal("verified against another manifest")
		}
	})
}

// TestVerifyPartialPredicate: a signed predicate is checked on what it
// says: a field left out is no claim, an unknown field (a newer writer) is
// not checked, but recording, root and key_id must be there.
func TestVerifyPartialPredicate(t *testing.T) {
	st := openStore(t)
	id := sealed(t, st, "fail")
	s := newSigner(t)
	env, _ := attestRecording(s, st, id, "")
	man := manifestOf(t, st, id)
	var e Envelope
	json.Unmarshal(env, &e)
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	resign := func(edit func(p map[string]any)) []byte {
		var stmt map[string]any
		json.Unmarshal(payload, &stmt)
		edit(stmt["predicate"].(map[string]any))
		p, _ := json.Marshal(stmt)
		out, _ := json.Marshal(Envelope{PayloadType: PayloadType, Payload: base64.StdEncoding.EncodeToString(p),
			Signatures: []Signature{{KeyID: s.KeyID(), Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, PAE(PayloadType, p)))}}})
		return out
	}
	ok := resign(func(p map[string]any) { delete(p, "verdict"); delete(p, "labels"); p["browser_build"] = "x" })
	if _, err := Verify(ok, s.PublicKey(), man); err != nil {
		t.Fatalf("partial predicate: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(p map[string]any)
	}{
		{"no root", func(p map[string]any) { delete(p, "root") }},
		{"other key id", func(p map[string]any) { p["key_id"] = "00" }},
		{"empty flow claimed", func(p map[string]any) { p["flow"] = "" }},
		{"label changed", func(p map[string]any) { p["labels"].(map[string]any)["persona"] = "admin" }},
		{"events", func(p map[string]any) { p["events"] = 3 }},
	} {
		if _, err := Verify(resign(c.edit), s.PublicKey(), man); !errors.Is(err, ErrPredicate) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
