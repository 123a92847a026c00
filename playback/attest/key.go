package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
)

// Key files in a data directory, by name (store/layout names their paths).
var (
	KeyDir  = filepath.Base(layout.Of("").Keys())
	KeyFile = filepath.Base(layout.Of("").AttestationKey()) // PKCS#8 PEM, mode 0600
	PubFile = filepath.Base(layout.Of("").AttestationPub()) // PKIX PEM
)

const (
	pemPrivate  = "PRIVATE KEY"
	pemPublic   = "PUBLIC KEY"
	keyFileMode = 0o600
)

// Signer signs attestations with one ed25519 key.
type Signer struct {
	key     ed25519.PrivateKey
	pub     ed25519.PublicKey
	keyID   string
	pubPath string
}

// NewSigner returns a signer of key (not kept on disk).
func NewSigner(key ed25519.PrivateKey) *Signer {
	pub := key.Public().(ed25519.PublicKey)
	return &Signer{key: key, pub: pub, keyID: KeyID(pub)}
}

// KeyID is the signer's key id (see KeyID).
func (s *Signer) KeyID() string { return s.keyID }

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.pub }

// PublicKeyPEM is the public key as PKIX PEM, what verifiers are given.
func (s *Signer) PublicKeyPEM() []byte { return publicPEM(s.pub) }

// PublicKeyPath is DATA/keys/attestation.pub for a signer LoadOrCreateKey
// returned, "" otherwise.
func (s *Signer) PublicKeyPath() string { return s.pubPath }

// KeyID returns the id of a public key: the hex sha2-256 of its PKIX DER
// encoding, first 16 bytes (32 hex digits).
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:16])
}

func publicPEM(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err) // an ed25519 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublic, Bytes: der})
}

// ParsePublicKey parses an ed25519 public key from PKIX PEM ("PUBLIC KEY").
func ParsePublicKey(pemBytes []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || blk.Type != pemPublic {
		return nil, errors.New("attest: not a PEM public key (want -----BEGIN PUBLIC KEY-----)")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("attest: public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("attest: public key is a %T, want ed25519", k)
	}
	return pub, nil
}

func parsePrivateKey(pemBytes []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || blk.Type != pemPrivate {
		return nil, errors.New("not a PKCS#8 PEM private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, want ed25519", k)
	}
	return key, nil
}

// LoadOrCreateKey returns the data directory's attestation signer: the
// ed25519 key in DATA/keys/attestation.key (PKCS#8 PEM, mode 0600, in a
// directory of mode 0700), made on first use. The key file is written
// whole under a temporary name and linked into place only if none exists,
// so concurrent first uses agree on one key. DATA/keys/attestation.pub
// (PKIX PEM) is (re)written from the key whenever it is missing or
// differs.
func LoadOrCreateKey(dataDir string) (*Signer, error) {
	l := layout.Of(dataDir)
	dir, path := l.Keys(), l.AttestationKey()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("attest: %w", err)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = createKey(dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("attest: key %s: %w", path, err)
	}
	s, err := signerOf(l, b)
	if err != nil {
		return nil, err
	}
	want := s.PublicKeyPEM()
	if have, err := os.ReadFile(s.pubPath); err != nil || !bytes.Equal(have, want) {
		if err := store.WriteFileAtomic(s.pubPath, want, 0o644); err != nil {
			return nil, fmt.Errorf("attest: %w", err)
		}
	}
	return s, nil
}

// LoadKey returns the data directory's attestation signer if its key
// exists (an error wrapping fs.ErrNotExist if not), writing nothing: for
// commands that only read the data directory.
func LoadKey(dataDir string) (*Signer, error) {
	l := layout.Of(dataDir)
	b, err := os.ReadFile(l.AttestationKey())
	if err != nil {
		return nil, fmt.Errorf("attest: key %s: %w", l.AttestationKey(), err)
	}
	return signerOf(l, b)
}

// signerOf is the signer of data directory l's key file (read as b).
func signerOf(l layout.Layout, b []byte) (*Signer, error) {
	key, err := parsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("attest: key %s: %w", l.AttestationKey(), err)
	}
	s := NewSigner(key)
	s.pubPath = l.AttestationPub()
	return s, nil
}

// createKey makes a key file at path unless one appears first, and
// returns the file's contents either way.
func createKey(dir, path string) ([]byte, error) {
	data, _, err := GenerateKeyPEM()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "."+KeyFile+".tmp-*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(keyFileMode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return os.ReadFile(path) // another process made it first
		}
		return nil, err
	}
	os.Remove(tmp) // before the sync, so no copy of the key outlives a crash
	if err := store.SyncDir(dir); err != nil {
		return nil, err
	}
	return data, nil
}

// LoadKeyFile returns the signer of the key in path (PKCS#8 PEM, as
// GenerateKeyPEM makes and DATA/keys/attestation.key holds): the one key
// an operator gives every node of a shared deployment, so an attestation
// made by any node verifies with the key any node publishes.
func LoadKeyFile(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("attest: key %s: %w", path, err)
	}
	key, err := parsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("attest: key %s: %w", path, err)
	}
	return NewSigner(key), nil
}

// GenerateKeyPEM makes a new ed25519 key as PKCS#8 PEM, and its public
// key as PKIX PEM.
func GenerateKeyPEM() (private, public []byte, err error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivate, Bytes: der}), publicPEM(pub), nil
}
