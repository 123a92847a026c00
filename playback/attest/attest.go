// Package attest signs and verifies evidence that a recording is what its
// manifest says: a DSSE envelope (payload type
// application/vnd.in-toto+json) around an in-toto Statement v1 whose one
// subject is the recording's manifest, signed with ed25519.
//
//	{"payloadType": "application/vnd.in-toto+json",
//	 "payload": base64(statement),
//	 "signatures": [{"keyid": KEYID, "sig": base64(ed25519(PAE(payloadType, payload)))}]}
//
// PAE is DSSE v1's pre-authentication encoding:
//
//	"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
//
// with the lengths in ASCII decimal. The statement is
//
//	{"_type": "https://in-toto.io/Statement/v1",
//	 "subject": [{"name": "recording/<id>",
//	              "digest": {"sha256": "<hex sha2-256 of the manifest's bytes>"},
//	              "annotations": {"root_cid": "<root CID>"}}],
//	 "predicateType": "https://flightrec.dev/attestation/recording/v1",
//	 "predicate": Predicate}
//
// The subject's sha256 is the digest inside the root CID (CIDv1, raw,
// sha2-256 of the same bytes), so the statement names the recording's
// root either way. A key id is the hex sha2-256 of the public key's PKIX
// DER encoding, first 16 bytes (32 hex digits).
package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flightrec/flightrec/store"
)

// Media and schema types.
const (
	PayloadType   = "application/vnd.in-toto+json"
	StatementType = "https://in-toto.io/Statement/v1"
	PredicateType = "https://flightrec.dev/attestation/recording/v1"
)

// maxEnvelope bounds an envelope Verify parses; maxSignatures the
// signatures it tries.
const (
	maxEnvelope   = 16 << 20
	maxSignatures = 16
)

// Verification failures, each wrapped with details by Verify.
var (
	// ErrMalformed: not a DSSE envelope (JSON, base64, sizes).
	ErrMalformed = errors.New("attestation is not a well-formed DSSE envelope")
	// ErrPayloadType: the envelope does not carry an in-toto statement.
	ErrPayloadType = errors.New("attestation payload type is not " + PayloadType)
	// ErrSignature: no signature verifies under the given key (another
	// key signed it, or the payload was changed after signing).
	ErrSignature = errors.New("attestation signature does not verify with this key")
	// ErrStatement: the signed payload is not a flightrec recording
	// statement (statement type, predicate type, shape).
	ErrStatement = errors.New("attestation is not a flightrec recording statement")
	// ErrSubject: the statement is about another manifest.
	ErrSubject = errors.New("attestation subject does not match the manifest")
	// ErrPredicate: the predicate does not describe the manifest it is
	// about, or not under this key's id.
	ErrPredicate = errors.New("attestation predicate does not describe the manifest")
)

// Envelope is a DSSE envelope. Payload and Sig are base64 (standard
// alphabet, padded, as written; Verify also accepts URL-safe and
// unpadded).
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// Statement is an in-toto Statement v1 about one recording.
type Statement struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     Predicate `json:"predicate"`
}

// Subject is an in-toto resource descriptor: the recording's manifest.
type Subject struct {
	Name        string            `json:"name"`
	Digest      map[string]string `json:"digest"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Predicate is what flightrec attests about a finished recording, all of
// it read from the manifest.
type Predicate struct {
	Recording string `json:"recording"`
	Root      string `json:"root"` // the manifest's CID
	Project   string `json:"project"`
	Flow      string `json:"flow,omitempty"`
	Executor  string `json:"executor,omitempty"`
	// Versions is RecordingMeta.Versions as is: engine build, app build
	// digests, preview, data branch, persona, flow revision — whatever
	// the executor declared. Labels likewise.
	Versions            map[string]string `json:"versions,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Verdict             string            `json:"verdict,omitempty"`
	FailureSignature    string            `json:"failure_signature,omitempty"`
	Steps               int               `json:"steps"`
	Events              int64             `json:"events"`
	RedactionPlanDigest string            `json:"redaction_plan_digest,omitempty"`
	CreatedAt           string            `json:"created_at"`            // RFC 3339, UTC
	FinishedAt          string            `json:"finished_at,omitempty"` // RFC 3339, UTC
	KeyID               string            `json:"key_id"`                // the signer's
	// Gaps are the seqs a repair found lost to damage, as the manifest
	// declares them: the statement covers the recording with them.
	Gaps []store.Gap `json:"gaps,omitempty"`
}

// PAE is DSSE v1's pre-authentication encoding of a payload: what is
// signed.
func PAE(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

func rfc3339(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// predicateOf is the predicate a signer with key id keyID makes for man.
func predicateOf(man *store.Manifest, root, keyID string) Predicate {
	r := &man.Recording
	planDigest := r.PlanDigest
	if planDigest == "" && man.Redaction != nil {
		planDigest = man.Redaction.PlanDigest
	}
	return Predicate{
		Recording: r.ID, Root: root, Project: r.Project, Flow: r.Flow, Executor: r.Executor,
		Versions: r.Versions, Labels: r.Labels, Verdict: r.Verdict, FailureSignature: r.FailureSignature,
		Steps: man.Steps, Events: man.Events, RedactionPlanDigest: planDigest,
		CreatedAt: rfc3339(r.CreatedAt), FinishedAt: rfc3339(r.FinishedAt), KeyID: keyID,
		Gaps: man.Gaps,
	}
}

// Attest signs a statement that manifestBytes, whose CID is root, is
// recording man's manifest, and returns the DSSE envelope as JSON. man may
// be nil: it is then parsed from manifestBytes. It refuses a root that is
// not the CID of manifestBytes and a man of another recording than the
// bytes'.
func (s *Signer) Attest(man *store.Manifest, manifestBytes []byte, root string) ([]byte, error) {
	if got := store.SumString(manifestBytes); got != root {
		return nil, fmt.Errorf("attest: root %s is not the manifest's CID (%s)", root, got)
	}
	var parsed store.Manifest
	if err := json.Unmarshal(manifestBytes, &parsed); err != nil {
		return nil, fmt.Errorf("attest: manifest %s: %w", root, err)
	}
	if man == nil {
		man = &parsed
	} else if man.Recording.ID != parsed.Recording.ID {
		return nil, fmt.Errorf("attest: the manifest is recording %s's, not %s's", parsed.Recording.ID, man.Recording.ID)
	}
	if !store.ValidRecordingID(man.Recording.ID) {
		return nil, fmt.Errorf("attest: manifest %s has no valid recording id", root)
	}
	sum := sha256.Sum256(manifestBytes)
	st := Statement{
		Type: StatementType,
		Subject: []Subject{{
			Name:        "recording/" + man.Recording.ID,
			Digest:      map[string]string{"sha256": hex.EncodeToString(sum[:])},
			Annotations: map[string]string{"root_cid": root},
		}},
		PredicateType: PredicateType,
		Predicate:     predicateOf(man, root, s.keyID),
	}
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	sig := ed25519.Sign(s.key, PAE(PayloadType, payload))
	env := Envelope{
		PayloadType: PayloadType,
		Payload:     base64.StdEncoding.EncodeToString(payload),
		Signatures:  []Signature{{KeyID: s.keyID, Sig: base64.StdEncoding.EncodeToString(sig)}},
	}
	out, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// decodeB64 accepts standard or URL-safe base64, padded or not.
func decodeB64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("invalid base64")
}

// Verify checks an attestation against a public key and a manifest's
// bytes, and returns its statement. Each failure is its own error:
// ErrMalformed, ErrPayloadType, ErrSignature (checked before anything
// in the payload is believed), ErrStatement, ErrSubject (the statement is
// about other bytes than manifestBytes), ErrPredicate (a field of the
// predicate says other than manifestBytes do, or names another key; see
// checkPredicate).
func Verify(envelopeJSON []byte, pub ed25519.PublicKey, manifestBytes []byte) (*Statement, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("attest: verify: public key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	if len(envelopeJSON) > maxEnvelope {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrMalformed, len(envelopeJSON), maxEnvelope)
	}
	var env Envelope
	if err := json.Unmarshal(envelopeJSON, &env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("%w (it is %q)", ErrPayloadType, env.PayloadType)
	}
	payload, err := decodeB64(env.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	if len(env.Signatures) == 0 {
		return nil, fmt.Errorf("%w: no signatures", ErrMalformed)
	}
	pae := PAE(env.PayloadType, payload)
	signed := false
	for i, sg := range env.Signatures {
		if i == maxSignatures {
			break
		}
		sig, err := decodeB64(sg.Sig)
		if err != nil || len(sig) != ed25519.SignatureSize {
			continue
		}
		if ed25519.Verify(pub, pae, sig) {
			signed = true
			break
		}
	}
	if !signed {
		return nil, fmt.Errorf("%w (key %s)", ErrSignature, KeyID(pub))
	}

	var st Statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStatement, err)
	}
	switch {
	case st.Type != StatementType:
		return nil, fmt.Errorf("%w: _type %q", ErrStatement, st.Type)
	case st.PredicateType != PredicateType:
		return nil, fmt.Errorf("%w: predicateType %q", ErrStatement, st.PredicateType)
	case len(st.Subject) != 1:
		return nil, fmt.Errorf("%w: %d subjects, want one", ErrStatement, len(st.Subject))
	}
	sum := sha256.Sum256(manifestBytes)
	want := hex.EncodeToString(sum[:])
	subj := st.Subject[0]
	if got := subj.Digest["sha256"]; got != want {
		return nil, fmt.Errorf("%w: it is about sha256 %s, the manifest's is %s", ErrSubject, orNone(got), want)
	}
	root := store.SumString(manifestBytes)
	var man store.Manifest
	if err := json.Unmarshal(manifestBytes, &man); err != nil {
		return nil, fmt.Errorf("%w: the manifest does not parse: %v", ErrPredicate, err)
	}
	if subj.Name != "recording/"+man.Recording.ID {
		return nil, fmt.Errorf("%w: subject %q, the manifest is recording %s's", ErrPredicate, subj.Name, man.Recording.ID)
	}
	if r, ok := subj.Annotations["root_cid"]; ok && r != root {
		return nil, fmt.Errorf("%w: subject root %s, the manifest's CID is %s", ErrPredicate, r, root)
	}
	if err := checkPredicate(payload, &st.Predicate, predicateOf(&man, root, KeyID(pub))); err != nil {
		return nil, err
	}
	return &st, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// predicateKeys are the predicate's fields, in the order checkPredicate
// reports them.
var predicateKeys = []string{"recording", "root", "key_id", "project", "flow", "executor", "verdict",
	"failure_signature", "steps", "events", "redaction_plan_digest", "created_at", "finished_at", "versions", "labels", "gaps"}

// checkPredicate checks that every claim the signed predicate makes holds
// of the manifest (want): each field it carries must equal the manifest's
// (an empty one the manifest's absence); recording, root and key_id must
// be there. A field it leaves out is no claim, and a field this version
// does not know is not checked, so attestations of older and newer
// writers of this predicate type verify on what they say.
func checkPredicate(payload []byte, got *Predicate, want Predicate) error {
	var raw struct {
		Predicate map[string]json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &raw); err != nil || raw.Predicate == nil {
		return fmt.Errorf("%w: no predicate object", ErrStatement)
	}
	for _, k := range []string{"recording", "root", "key_id"} {
		if _, ok := raw.Predicate[k]; !ok {
			return fmt.Errorf("%w: it has no %q", ErrPredicate, k)
		}
	}
	var g, w map[string]json.RawMessage
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	json.Unmarshal(gb, &g)
	json.Unmarshal(wb, &w)
	for _, k := range predicateKeys {
		if _, claimed := raw.Predicate[k]; !claimed {
			continue
		}
		if _, inManifest := w[k]; !inManifest && k == "failure_signature" {
			continue // derived after the seal: nothing in the manifest to check it against
		}
		if !bytes.Equal(g[k], w[k]) {
			return fmt.Errorf("%w: %s is %s, the manifest says %s", ErrPredicate, k, orNone(string(g[k])), orNone(string(w[k])))
		}
	}
	return nil
}
