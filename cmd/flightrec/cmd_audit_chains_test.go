package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/store/objstore"
)

// TestAuditVerifyChains: `audit verify --blobs` verifies every node's
// chain in the object store and their union, and names the chain and
// entry an edit breaks.
func TestAuditVerifyChains(t *testing.T) {
	bucket := t.TempDir()
	obj, err := objstore.NewLocal(bucket)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // two nodes
		l, err := audit.OpenWith(t.TempDir(), audit.Options{Replica: obj})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := l.Append(audit.Plan("rec", "digest")); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	obj.Close()
	out, errOut, code := flightrec(t, "audit", "verify", "--blobs", bucket)
	if code != exitOK || !strings.Contains(out, "2 chains, 6 entries") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var key string
	filepath.WalkDir(filepath.Join(bucket, "audit"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "000000000002" && key == "" {
			key = p
		}
		return nil
	})
	b, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, bytes.Replace(b, []byte(`"rec"`), []byte(`"other"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	chain := filepath.Base(filepath.Dir(key))
	_, errOut, code = flightrec(t, "audit", "verify", "--blobs", bucket)
	if code != exitFound || !strings.Contains(errOut, "AUDIT_BROKEN") || !strings.Contains(errOut, "chain "+chain+", entry 2") {
		t.Fatalf("an edited entry: exit %d: %s", code, errOut)
	}
}
