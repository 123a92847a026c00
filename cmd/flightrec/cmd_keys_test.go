package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/playback/attest"
)

// TestKeysGenerate: keys generate writes a deployment's attestation key
// (a loadable signer, with its public key beside it) and a 32-byte
// pseudonym key, both readable by the owner only, prints the serve flags
// that use them, and refuses to overwrite them.
func TestKeysGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	out, errOut, code := flightrec(t, "keys", "generate", dir)
	if code != exitOK || !strings.Contains(out, "--attestation-key "+filepath.Join(dir, "attestation.key")) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	s, err := attest.LoadKeyFile(filepath.Join(dir, "attestation.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(dir, "attestation.pub"))
	if err != nil || string(pub) != string(s.PublicKeyPEM()) {
		t.Fatalf("attestation.pub is not the key's public half: %v", err)
	}
	for name, size := range map[string]int{"attestation.key": -1, "redact-pseudonym.key": 32} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 || size > 0 && fi.Size() != int64(size) {
			t.Errorf("%s: %v %v", name, fi, err)
		}
	}
	_, errOut, code = flightrec(t, "keys", "generate", dir)
	if code != exitFailure || !strings.Contains(errOut, "KEY_EXISTS") {
		t.Fatalf("a second generate into the same directory: exit %d %s", code, errOut)
	}
}
