package access

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/store/statedoc"
)

// failing is an object store that can be switched off: every call then
// answers ErrUnavailable, as an S3 server out of reach does.
type failing struct {
	objstore.Store
	down bool
}

func (f *failing) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if f.down {
		return nil, objstore.Info{}, &objstore.Error{Op: "get", Key: key, Kind: objstore.ErrUnavailable}
	}
	return f.Store.Get(ctx, key)
}

// TestSharedTokenList: two servers' token lists over one object store (as
// two nodes of a shared deployment): a token made through one verifies on
// the other at once (a miss re-reads), a revocation through one is seen
// by the other at its next re-read, and a list that cannot be re-read is
// not trusted past MaxStale: Verify answers ErrStateUnavailable rather
// than accept a token that may have been revoked meanwhile.
func TestSharedTokenList(t *testing.T) {
	local, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	obj := &failing{Store: local}
	a, err := NewTokens(statedoc.Object(obj, "state/tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewTokens(statedoc.Object(obj, "state/tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Two creates through different nodes both stay (conditional puts).
	tokA, gA, err := a.Create("shop", []string{"read"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	b.checked = time.Now().Add(-200 * time.Millisecond) // read under a second ago: only the miss re-reads it
	if g, err := b.Verify(tokA); err != nil || g.ID != gA.ID {
		t.Fatalf("a token made on A, on B: %+v %v", g, err)
	}
	if _, _, err := b.Create("shop", []string{"ingest"}, 0, ""); err != nil {
		t.Fatal(err)
	}
	a.checked = time.Time{}
	if n := len(a.List()); n != 2 {
		t.Fatalf("A lists %d tokens, want both nodes' 2", n)
	}
	if _, err := a.Revoke(gA.ID); err != nil {
		t.Fatal(err)
	}
	b.checked = time.Time{} // as if a second passed
	if _, err := b.Verify(tokA); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a token revoked on A verifies on B: %v", err)
	}
	tokC, _, err := a.Create("shop", []string{"read"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	b.checked = time.Now().Add(-200 * time.Millisecond) // misses re-read at most every 100 ms
	if _, err := b.Verify(tokC); err != nil {
		t.Fatal(err)
	}
	// The store goes away: B keeps its list until it is MaxStale old, and
	// then verifies nothing.
	obj.down = true
	b.checked = time.Time{}
	if _, err := b.Verify(tokC); err != nil {
		t.Fatalf("a list a moment old is still used: %v", err)
	}
	b.checked, b.loaded = time.Time{}, time.Now().Add(-MaxStale-time.Millisecond)
	if _, err := b.Verify(tokC); !errors.Is(err, ErrStateUnavailable) {
		t.Fatalf("a list older than MaxStale is trusted: %v", err)
	}
	obj.down = false
	b.checked = time.Time{}
	if _, err := b.Verify(tokC); err != nil {
		t.Fatalf("after the store is back: %v", err)
	}
}
