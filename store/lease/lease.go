// Package lease is a named lease on the object store: one holder at a
// time, taken and renewed by conditional writes (objstore CreateOnly and
// IfMatch) of one small object per lease, with an expiry and a fencing
// token (Epoch) that grows by one at every change of hands.
//
// It needs no engine beyond the object store the deployment already has:
// S3's conditional PUT (If-None-Match: *, If-Match) decides every race,
// and exactly one of any number of concurrent acquirers wins.
//
// Expiry is judged by the clock of the node that reads the lease, so the
// nodes' clocks must agree to well within a lease's TTL (NTP does). A
// holder must stop acting on a lease before its Expires by its own clock;
// writes that must be fenced carry the Epoch, so that a holder paused
// past its expiry (a GC pause, SIGSTOP) is refused or ignored when it
// wakes (see docs/design.md § Leases).
package lease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/flightrec/flightrec/store/objstore"
)

// Lease is one holder's claim on a name, as of the write that made it.
type Lease struct {
	Name   string
	Holder string
	// Epoch is the fencing token: 1 for the first holder, one more at
	// every Acquire, never reused (a Release keeps it in the object).
	Epoch uint64
	// Expires is when the lease lapses unless renewed. Zero: released.
	Expires time.Time

	etag string // the object's ETag after the write that made this Lease
}

// Live says whether the lease is held at now.
func (l Lease) Live(now time.Time) bool { return l.Holder != "" && now.Before(l.Expires) }

var (
	// ErrHeld: another holder's lease is live. The error is a *HeldError
	// naming that holder.
	ErrHeld = errors.New("lease held by another holder")
	// ErrLost: the lease changed hands (or was released) since the Lease
	// passed in was made; its holder must stop acting on it.
	ErrLost = errors.New("lease lost")
	// ErrNotExist: nobody ever took the lease.
	ErrNotExist = errors.New("lease never taken")
)

// HeldError is ErrHeld with the live lease that refused the acquirer.
type HeldError struct{ Lease Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s held by %s (epoch %d) until %s", e.Lease.Name, e.Lease.Holder, e.Lease.Epoch, e.Lease.Expires.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Leases takes and renews leases kept under one prefix of a store.
type Leases struct {
	st     objstore.Store
	prefix string
	now    func() time.Time
}

// New keeps the leases under prefix in st (the object prefix/NAME per
// lease), judging expiry by now.
func New(st objstore.Store, prefix string, now func() time.Time) *Leases {
	return &Leases{st: st, prefix: prefix, now: now}
}

// doc is the lease object's JSON. Nonce is fresh per write, so that a
// writer whose conditional put failed as unavailable can read the object
// back and tell whether its own write landed.
type doc struct {
	Name    string `json:"name"`
	Holder  string `json:"holder"`
	Epoch   uint64 `json:"epoch"`
	Expires int64  `json:"expires_unix_nano"`
	Nonce   string `json:"nonce"`
}

func (ls *Leases) key(name string) string { return path.Join(ls.prefix, name) }

// Read returns the lease's current state (live or not); ErrNotExist when
// nobody ever took it.
func (ls *Leases) Read(ctx context.Context, name string) (Lease, error) {
	l, _, err := ls.read(ctx, name)
	return l, err
}

func (ls *Leases) read(ctx context.Context, name string) (Lease, string, error) {
	data, info, err := objstore.ReadAll(ctx, ls.st, ls.key(name))
	if errors.Is(err, objstore.ErrNotExist) {
		return Lease{}, "", ErrNotExist
	}
	if err != nil {
		return Lease{}, "", err
	}
	var d doc
	if err := json.Unmarshal(data, &d); err != nil {
		return Lease{}, "", fmt.Errorf("lease %s: unreadable object: %w", name, err)
	}
	l := Lease{Name: name, Holder: d.Holder, Epoch: d.Epoch, etag: info.ETag}
	if d.Expires != 0 {
		l.Expires = time.Unix(0, d.Expires)
	}
	return l, d.Nonce, nil
}

// write puts l conditionally (CreateOnly when ifMatch is empty) and
// returns it with its new ETag. A put that fails as unavailable may have
// landed: the object is read back and its nonce decides.
func (ls *Leases) write(ctx context.Context, l Lease, ifMatch string) (Lease, error) {
	nonce := make([]byte, 12)
	rand.Read(nonce)
	d := doc{Name: l.Name, Holder: l.Holder, Epoch: l.Epoch, Nonce: hex.EncodeToString(nonce)}
	if !l.Expires.IsZero() {
		d.Expires = l.Expires.UnixNano()
	}
	data, err := json.Marshal(d)
	if err != nil {
		return Lease{}, err
	}
	opts := objstore.PutOptions{CreateOnly: ifMatch == "", IfMatch: ifMatch}
	info, err := ls.st.Put(ctx, ls.key(l.Name), bytes.NewReader(data), int64(len(data)), opts)
	if errors.Is(err, objstore.ErrUnavailable) {
		if got, n, rerr := ls.read(ctx, l.Name); rerr == nil && n == d.Nonce {
			l.etag = got.etag
			return l, nil
		}
	}
	if err != nil {
		return Lease{}, err
	}
	l.etag = info.ETag
	return l, nil
}

func lostRace(err error) bool {
	return errors.Is(err, objstore.ErrExists) || errors.Is(err, objstore.ErrPrecondition)
}

// Acquire takes the lease for holder for ttl. When another holder's
// lease is live it answers a *HeldError (errors.Is ErrHeld). Taking a
// lease that was released, expired, or is holder's own (a restarted
// holder re-acquiring) makes a new Epoch, one more than the last.
func (ls *Leases) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	if holder == "" {
		return Lease{}, errors.New("lease: empty holder")
	}
	for {
		cur, _, err := ls.read(ctx, name)
		if err != nil && !errors.Is(err, ErrNotExist) {
			return Lease{}, err
		}
		now := ls.now()
		if err == nil && cur.Live(now) && cur.Holder != holder {
			return Lease{}, &HeldError{Lease: cur}
		}
		next := Lease{Name: name, Holder: holder, Epoch: cur.Epoch + 1, Expires: now.Add(ttl)}
		got, err := ls.write(ctx, next, cur.etag)
		if err == nil {
			return got, nil
		}
		if !lostRace(err) {
			return Lease{}, err
		}
		// Someone else wrote between our read and our put: read again,
		// and either find them live (ErrHeld) or race for the next epoch.
		if ctx.Err() != nil {
			return Lease{}, ctx.Err()
		}
	}
}

// Renew extends l by ttl from now, keeping its Epoch. It answers ErrLost
// when the lease changed hands or was released since l was made; l's
// holder must then stop acting on it. A lease that expired but that
// nobody took is renewed (its epoch still fences everyone else).
func (ls *Leases) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	next := l
	next.Expires = ls.now().Add(ttl)
	got, err := ls.write(ctx, next, l.etag)
	if err == nil {
		return got, nil
	}
	if !lostRace(err) {
		return Lease{}, err
	}
	return Lease{}, fmt.Errorf("%w: %s (epoch %d, holder %s)", ErrLost, l.Name, l.Epoch, l.Holder)
}

// Release gives the lease up so that the next Acquire need not wait for
// its expiry. The object stays, holding the epoch, so that epochs never
// repeat. Releasing a lease already lost answers ErrLost.
func (ls *Leases) Release(ctx context.Context, l Lease) error {
	next := Lease{Name: l.Name, Epoch: l.Epoch}
	_, err := ls.write(ctx, next, l.etag)
	if lostRace(err) {
		return fmt.Errorf("%w: %s (epoch %d, holder %s)", ErrLost, l.Name, l.Epoch, l.Holder)
	}
	return err
}
