package app

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/retention"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/store/statedoc"
	"github.com/flightrec/flightrec/wire"
)

// KeyFiles name the key material every node of a shared deployment is
// given by the operator (serve --attestation-key, --pseudonym-key): one
// attestation key and one pseudonym key per deployment, so that an
// attestation made by any node verifies with the key every node
// publishes, and a value is pseudonymized alike whichever node ingests it.
// A single node (no --blobs) makes its own under DATA/keys instead.
type KeyFiles struct {
	Attestation string // PKCS#8 PEM ed25519 key, as DATA/keys/attestation.key
	Pseudonym   string // 32 random bytes, as DATA/keys/redact-pseudonym.key
}

// loadedKeys are a shared deployment's keys, read from its key files.
type loadedKeys struct {
	signer    *attest.Signer
	pseudonym []byte
}

// deploymentKeys reads the key files in shared mode (nil, nil on a single
// node, whose keys are its data directory's). Both files are required in
// shared mode, and refused on a single node, so that no process of a
// deployment ever signs or pseudonymizes with a key of its own.
func (c StoreConfig) deploymentKeys() (*loadedKeys, error) {
	if c.Blobs == "" {
		if c.Keys != (KeyFiles{}) {
			return nil, wire.New(http.StatusBadRequest, "KEYS_WITHOUT_SHARED_MODE",
				"drop --attestation-key and --pseudonym-key, or pass --blobs s3://… (shared mode)",
				"key files are given only to nodes sharing an object store; a single node keeps its own under %s", layout.Of(c.Data).Keys())
		}
		return nil, nil
	}
	var missing []string
	if c.Keys.Attestation == "" {
		missing = append(missing, "--attestation-key")
	}
	if c.Keys.Pseudonym == "" {
		missing = append(missing, "--pseudonym-key")
	}
	if len(missing) > 0 {
		return nil, wire.New(http.StatusBadRequest, "SHARED_KEYS_REQUIRED", keysNext,
			"a node sharing an object store (--blobs) needs the deployment's keys: %v not given", missing)
	}
	signer, err := attest.LoadKeyFile(c.Keys.Attestation)
	if err != nil {
		return nil, wire.New(http.StatusBadRequest, "SHARED_KEYS_REQUIRED", keysNext, "--attestation-key: %v", err)
	}
	pk, err := readPseudonymKey(c.Keys.Pseudonym)
	if err != nil {
		return nil, wire.New(http.StatusBadRequest, "SHARED_KEYS_REQUIRED", keysNext, "--pseudonym-key: %v", err)
	}
	return &loadedKeys{signer: signer, pseudonym: pk}, nil
}

// PseudonymKey is the key pseudonyms are made with, for a command that
// rewrites or compares redacted events as ingest would (audit scan --fix,
// rerun): the deployment's key file in shared mode, else st's own (made on
// first use only where st is writable).
func (c StoreConfig) PseudonymKey(st *store.Store) ([]byte, error) {
	keys, err := c.deploymentKeys()
	if err != nil {
		return nil, err
	}
	if keys != nil {
		return keys.pseudonym, nil
	}
	return st.Key(layout.PseudonymKeyName)
}

// Signer is the attestation signer of a command: the deployment's key file
// in shared mode; else the data directory's, made on first use when create
// is set (attest.LoadKey's error when it is not, and the key is missing).
func (c StoreConfig) Signer(create bool) (*attest.Signer, error) {
	keys, err := c.deploymentKeys()
	switch {
	case err != nil:
		return nil, err
	case keys != nil:
		return keys.signer, nil
	case create:
		return attest.LoadOrCreateKey(c.Data)
	}
	return attest.LoadKey(c.Data)
}

// Object keys of shared state, beside the blobs in the --blobs bucket
// and prefix (objblobs keeps loose/, packs/ and recordings/).
const (
	tokensObject = "state/tokens.json"
	pinsPrefix   = "state/pins/"
	policyObject = "state/policy.digest"
)

// PolicyDigest opens the document the policy digest serve runs with is
// recorded in (retention.RecordPolicy, CheckPolicy): DATA/policy.digest,
// or in shared mode (Blobs set) one object beside the blobs, so that a
// sweep from any node's command line is checked against the policy the
// deployment's servers run. close releases what it opened.
func (c StoreConfig) PolicyDigest() (doc statedoc.Doc, close func() error, err error) {
	return c.stateDoc(policyObject, retention.PolicyFile(c.Data))
}

// OpenTokens opens the token list commands change (flightrec token
// create --data, and serve's check that tokens exist): DATA/tokens.json,
// or in shared mode the deployment's, in the object store. close
// releases what it opened.
func (c StoreConfig) OpenTokens() (tokens *access.Tokens, close func() error, err error) {
	doc, close, err := c.stateDoc(tokensObject, statedoc.File(layout.Of(c.Data).Tokens(), 0o600))
	if err != nil {
		return nil, nil, err
	}
	if tokens, err = access.NewTokens(doc); err != nil {
		close()
		return nil, nil, err
	}
	return tokens, close, nil
}

// stateDoc is one document of state: file on a single node, the object
// key beside the blobs in shared mode.
func (c StoreConfig) stateDoc(key string, file statedoc.Doc) (statedoc.Doc, func() error, error) {
	if c.Blobs == "" {
		return file, func() error { return nil }, nil
	}
	obj, err := objstore.Open(c.Blobs, c.BlobCredentials)
	if err != nil {
		return nil, nil, fmt.Errorf("--blobs: %w", err)
	}
	return statedoc.Object(obj, key), closerOf(obj), nil
}

// OpenAuditLog opens the data directory's audit log for a command that
// appends to it (audit scan --fix): in shared mode its entries are
// copied to the deployment's object store as a server's are, so that
// audit verify from any node sees them. close closes the log and what
// else it opened.
func (c StoreConfig) OpenAuditLog() (lg *audit.Log, close func() error, err error) {
	var replica objstore.Store
	closeReplica := func() error { return nil }
	if c.Blobs != "" {
		if replica, err = objstore.Open(c.Blobs, c.BlobCredentials); err != nil {
			return nil, nil, fmt.Errorf("--blobs: %w", err)
		}
		closeReplica = closerOf(replica)
	}
	if lg, err = audit.OpenWith(c.Data, audit.Options{Replica: replica}); err != nil {
		closeReplica()
		return nil, nil, err
	}
	return lg, func() error { return errors.Join(lg.Close(), closeReplica()) }, nil
}

// closerOf is obj's Close, or nothing to do.
func closerOf(obj objstore.Store) func() error {
	if cl, ok := obj.(io.Closer); ok {
		return cl.Close
	}
	return func() error { return nil }
}

// sharedState is where a server keeps tokens, pins and keys: the data
// directory (single node) or the object store and the operator's key
// files (shared mode).
type sharedState struct {
	tokens       statedoc.Doc
	pins         func(id string) statedoc.Doc
	policy       statedoc.Doc   // the recorded policy digest
	signer       *attest.Signer // nil: the data directory's, made on first use
	pseudonymKey []byte         // nil: the data directory's
	// auditReplica is where this node's audit chain is copied (the
	// deployment's object store); nil on a single node.
	auditReplica objstore.Store
	close        func() error
}

// keysNext is how an operator makes the keys a shared deployment needs.
const keysNext = "make them once with `flightrec keys generate DIR` and give every node the same files: " +
	"--attestation-key DIR/attestation.key --pseudonym-key DIR/" + layout.PseudonymKeyName +
	" (or FLIGHTREC_ATTESTATION_KEY, FLIGHTREC_PSEUDONYM_KEY)"

// openShared opens a server's shared state. In shared mode (c.Store.Blobs
// set) it refuses to start without both key files: a node never makes
// its own, which would split attestations and pseudonyms by node.
func openShared(c Config, st *store.Store) (*sharedState, error) {
	dir := st.Dir()
	keys, err := c.Store.deploymentKeys()
	if err != nil {
		return nil, err
	}
	if keys == nil {
		return &sharedState{
			tokens: statedoc.File(layout.Of(dir).Tokens(), 0o600),
			pins:   func(id string) statedoc.Doc { return statedoc.File(st.Layout().Pins(id), 0o644) },
			policy: retention.PolicyFile(dir),
			close:  func() error { return nil },
		}, nil
	}
	signer, pk := keys.signer, keys.pseudonym
	obj, err := objstore.Open(c.Store.Blobs, c.Store.BlobCredentials)
	if err != nil {
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	return &sharedState{
		tokens:       statedoc.Object(obj, tokensObject),
		pins:         func(id string) statedoc.Doc { return statedoc.Object(obj, pinsPrefix+id+".json") },
		policy:       statedoc.Object(obj, policyObject),
		signer:       signer,
		pseudonymKey: pk,
		auditReplica: obj,
		close:        closerOf(obj),
	}, nil
}

// readPseudonymKey reads a pseudonym key file: 32 bytes, as Store.Key
// makes (so a single node's DATA/keys/redact-pseudonym.key can become a
// deployment's, keeping its pseudonyms).
func readPseudonymKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("%s holds %d bytes, want 32", path, len(b))
	}
	return b, nil
}

// signerOf is the attestation signer: the operator's in shared mode, else
// the data directory's (made on first use).
func (s *sharedState) signerOf(dir string) (*attest.Signer, error) {
	if s.signer != nil {
		return s.signer, nil
	}
	return attest.LoadOrCreateKey(dir)
}

// shareKeyOf is the key share links are signed with: in shared mode one
// per deployment, derived from the operator's pseudonym key (HMAC-SHA256
// under a label of its own), so a link made through any node opens on
// every node and no third key file is needed; else the data directory's,
// made on first use.
func (s *sharedState) shareKeyOf(st *store.Store) ([]byte, error) {
	if s.pseudonymKey == nil {
		return st.Key(layout.ShareKeyName)
	}
	m := hmac.New(sha256.New, s.pseudonymKey)
	m.Write([]byte("flightrec share-link key v1"))
	return m.Sum(nil), nil
}

// tokensAndPins opens the token list and the pins over the state.
func (s *sharedState) tokensAndPins(st *store.Store) (*access.Tokens, *retention.Pins, error) {
	tokens, err := access.NewTokens(s.tokens)
	if err != nil {
		return nil, nil, err
	}
	return tokens, retention.NewPinsIn(st, s.pins, nil), nil
}

// GenerateKeys writes a new deployment's key files into dir (made with
// mode 0700): attestation.key (mode 0600), attestation.pub, and the
// pseudonym key (mode 0600). It refuses to overwrite a key: replacing one
// splits a deployment's attestations or pseudonyms in two.
func GenerateKeys(dir string) (KeyFiles, error) {
	priv, pub, err := attest.GenerateKeyPEM()
	if err != nil {
		return KeyFiles{}, err
	}
	pk := make([]byte, 32)
	if _, err := rand.Read(pk); err != nil {
		return KeyFiles{}, err
	}
	k := KeyFiles{Attestation: filepath.Join(dir, "attestation.key"), Pseudonym: filepath.Join(dir, layout.PseudonymKeyName)}
	for _, p := range []string{k.Attestation, k.Pseudonym} {
		if _, err := os.Stat(p); err == nil {
			return KeyFiles{}, wire.New(http.StatusConflict, "KEY_EXISTS",
				"keep the existing keys (every node must have the same ones), or generate into an empty directory",
				"%s exists already", p)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return KeyFiles{}, err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{k.Attestation, priv, 0o600}, {k.Pseudonym, pk, 0o600}, {filepath.Join(dir, "attestation.pub"), pub, 0o644}} {
		if err := store.WriteFileAtomic(f.path, f.data, f.mode); err != nil {
			return KeyFiles{}, err
		}
	}
	return k, nil
}

// openCluster is ingest's cluster mode, or nil on a single node. Cluster
// mode needs the shared object store (the recordings' batches live there)
// and a URL other nodes reach this one at.
func openCluster(c Config) (*ingest.Cluster, error) {
	cc := c.Cluster
	if cc.Node == "" {
		return nil, nil
	}
	if c.Store.Blobs == "" || cc.Advertise == "" {
		return nil, wire.New(http.StatusBadRequest, "CLUSTER_NEEDS_SHARED_STORE",
			"give every node --blobs s3://… (the same store) and --advertise http://HOST:PORT (this node's URL as the others reach it)",
			"cluster mode keeps open recordings in the shared object store and proxies between nodes")
	}
	if cc.LeaseTTL < time.Second {
		return nil, wire.New(http.StatusBadRequest, "BAD_LEASE_TTL", "pass --lease-ttl of a second or more (the default is 10s)",
			"--lease-ttl %s is shorter than the nodes' clocks and pauses can be trusted with", cc.LeaseTTL)
	}
	obj, err := objstore.Open(c.Store.Blobs, c.Store.BlobCredentials)
	if err != nil {
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	return &ingest.Cluster{Objects: obj, Node: cc.Node, Advertise: cc.Advertise, TTL: cc.LeaseTTL}, nil
}
