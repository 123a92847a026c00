package audit_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/store/objstore"
)

// TestChainsAcrossNodes: two nodes' logs copy their entries to one object
// store, each as its own chain, with no lock between them; VerifyChains
// verifies both and their union, and names the chain and entry of an
// edited or missing object.
func TestChainsAcrossNodes(t *testing.T) {
	ctx := context.Background()
	obj, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	// Node A appended before it had a replica: its entries are copied
	// when it opens with one.
	dirA := t.TempDir()
	a, err := audit.Open(dirA)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, audit.Plan("rec-a1", "d1"))
	a.Close()
	if a, err = audit.OpenWith(dirA, audit.Options{Replica: obj}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := audit.OpenWith(t.TempDir(), audit.Options{Replica: obj})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 5 {
		mustAppend(t, a, audit.Sweep(i, i, 0))
		mustAppend(t, b, audit.Plan("rec-b", "d"))
	}
	for _, l := range []*audit.Log{a, b} {
		if err := l.ReplicaErr(); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := audit.VerifyChains(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Chains) != 2 || rep.Entries != 11 || rep.Digest == "" {
		t.Fatalf("two intact chains: %+v", rep)
	}
	digest := rep.Digest

	// Tamper with entry 3 of one chain.
	var key string
	for info, err := range obj.List(ctx, audit.ChainPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(info.Key, "/000000000003") && key == "" {
			key = info.Key
		}
	}
	orig, _, err := objstore.ReadAll(ctx, obj, key)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(orig, []byte(`"kind":"`), []byte(`"kind":"x`), 1)
	if _, err := obj.Put(ctx, key, bytes.NewReader(edited), int64(len(edited)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	chain := strings.Split(key, "/")[1]
	rep, err = audit.VerifyChains(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(rep.Broken(), "chain "+chain+", entry 3: edited") {
		t.Fatalf("an edited entry: %q %+v", rep.Broken(), rep)
	}
	// Put back, then remove it: entry 3 is missing.
	if _, err := obj.Put(ctx, key, bytes.NewReader(orig), int64(len(orig)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if rep, _ = audit.VerifyChains(ctx, obj); !rep.OK || rep.Digest != digest {
		t.Fatalf("restored: %+v", rep)
	}
	if err := obj.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	rep, err = audit.VerifyChains(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(rep.Broken(), "chain "+chain+", entry 3: missing") {
		t.Fatalf("a missing entry: %q", rep.Broken())
	}
}

func mustAppend(t *testing.T, l *audit.Log, e audit.Entry) {
	t.Helper()
	if _, err := l.Append(e); err != nil {
		t.Fatal(err)
	}
}
