package lease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/lease"
	"github.com/flightrec/flightrec/store/objstore"
)

// clock is a settable clock shared by the test's "nodes", so that expiry
// is reached by moving time, not by sleeping.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func stores(t *testing.T) map[string]func(t *testing.T) objstore.Store {
	return map[string]func(t *testing.T) objstore.Store{
		"local": func(t *testing.T) objstore.Store {
			s, err := objstore.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"s3": func(t *testing.T) objstore.Store {
			srv := testenv.S3(t)
			b := make([]byte, 6)
			rand.Read(b)
			s, err := objstore.Open(srv.URL("lease-"+hex.EncodeToString(b)), objstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

// each runs fn against a fresh store of every kind.
func each(t *testing.T, fn func(t *testing.T, st objstore.Store)) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) { fn(t, open(t)) })
	}
}

const ttl = 10 * time.Second

// TestLeaseOneOfManyWins: N holders race for a fresh lease and then for
// an expired one; each time exactly one wins, the others are told who.
func TestLeaseOneOfManyWins(t *testing.T) {
	each(t, func(t *testing.T, st objstore.Store) {
		ctx := context.Background()
		clk := newClock()
		for round, wantEpoch := range []uint64{1, 2} {
			const n = 8
			var wg sync.WaitGroup
			wins := make(chan lease.Lease, n)
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Each node has its own Leases, as separate processes would.
					l, err := lease.New(st, "leases", clk.now).Acquire(ctx, "sweeper", fmt.Sprintf("node-%d-%d", round, i), ttl)
					if err != nil {
						errs <- err
						return
					}
					wins <- l
				}()
			}
			wg.Wait()
			close(wins)
			close(errs)
			var won []lease.Lease
			for l := range wins {
				won = append(won, l)
			}
			if len(won) != 1 {
				t.Fatalf("round %d: %d winners, want 1: %+v", round, len(won), won)
			}
			if won[0].Epoch != wantEpoch {
				t.Errorf("round %d: epoch %d, want %d", round, won[0].Epoch, wantEpoch)
			}
			for err := range errs {
				var held *lease.HeldError
				if !errors.As(err, &held) || !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("round %d: loser's error %v, want a HeldError", round, err)
				}
				if held.Lease.Holder != won[0].Holder || held.Lease.Epoch != won[0].Epoch {
					t.Errorf("round %d: loser told holder %s epoch %d, the winner is %s epoch %d", round, held.Lease.Holder, held.Lease.Epoch, won[0].Holder, won[0].Epoch)
				}
			}
			clk.advance(ttl + time.Second) // the winner lapses: next round takes over
		}
	})
}

// TestLeaseTakeoverFences: a holder that let its lease expire loses it to
// a taker (epoch + 1) and can then neither renew nor release it, while the
// taker can; a release keeps the epoch counting.
func TestLeaseTakeoverFences(t *testing.T) {
	each(t, func(t *testing.T, st objstore.Store) {
		ctx := context.Background()
		clk := newClock()
		a, b := lease.New(st, "leases", clk.now), lease.New(st, "leases", clk.now)
		if _, err := a.Read(ctx, "rec/1"); !errors.Is(err, lease.ErrNotExist) {
			t.Fatalf("read before any acquire: %v, want ErrNotExist", err)
		}
		la, err := a.Acquire(ctx, "rec/1", "A", ttl)
		if err != nil {
			t.Fatal(err)
		}
		la, err = a.Renew(ctx, la, ttl)
		if err != nil || la.Epoch != 1 {
			t.Fatalf("renew while live: %+v %v", la, err)
		}
		if _, err := b.Acquire(ctx, "rec/1", "B", ttl); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("B acquiring A's live lease: %v, want ErrHeld", err)
		}
		clk.advance(ttl + time.Second)
		lb, err := b.Acquire(ctx, "rec/1", "B", ttl)
		if err != nil {
			t.Fatalf("B taking over the expired lease: %v", err)
		}
		if lb.Epoch != la.Epoch+1 {
			t.Errorf("takeover epoch %d, want %d", lb.Epoch, la.Epoch+1)
		}
		if _, err := a.Renew(ctx, la, ttl); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("A renewing after the takeover: %v, want ErrLost", err)
		}
		if err := a.Release(ctx, la); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("A releasing after the takeover: %v, want ErrLost", err)
		}
		cur, err := a.Read(ctx, "rec/1")
		if err != nil || cur.Holder != "B" || cur.Epoch != lb.Epoch {
			t.Fatalf("after A's stale renew and release the lease is %+v (%v), want B's epoch %d", cur, err, lb.Epoch)
		}
		if lb, err = b.Renew(ctx, lb, ttl); err != nil {
			t.Fatalf("B renewing: %v", err)
		}
		if err := b.Release(ctx, lb); err != nil {
			t.Fatalf("B releasing: %v", err)
		}
		// Released: taken at once, without waiting for the expiry, and the
		// epoch keeps counting rather than starting again.
		la2, err := a.Acquire(ctx, "rec/1", "A", ttl)
		if err != nil || la2.Epoch != lb.Epoch+1 {
			t.Fatalf("acquire after release: %+v %v, want epoch %d", la2, err, lb.Epoch+1)
		}
		// A holder re-acquiring its own live lease (a restart) gets a new
		// epoch, fencing whatever its earlier self still had in flight.
		la3, err := a.Acquire(ctx, "rec/1", "A", ttl)
		if err != nil || la3.Epoch != la2.Epoch+1 {
			t.Fatalf("re-acquire by the same holder: %+v %v, want epoch %d", la3, err, la2.Epoch+1)
		}
		if _, err := a.Renew(ctx, la2, ttl); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("renewing the superseded epoch: %v, want ErrLost", err)
		}
	})
}
