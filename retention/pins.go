package retention

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/statedoc"
	"github.com/flightrec/flightrec/wire"
)

// Pin reasons.
const (
	ReasonEvidence  = "evidence"   // an issue or pull request carries the recording
	ReasonLegalHold = "legal_hold" // kept until the hold is lifted
)

// Pin keeps a recording beyond its class (its shape is the read API's,
// in wire).
type Pin = wire.Pin

// Errors of pin requests.
var (
	ErrBadPin    = errors.New("retention: bad pin")
	ErrNoSuchPin = errors.New("retention: no such pin")
)

// Pins keeps the pins of a data directory's recordings: each recording's
// list is one statedoc.Doc, a file beside its metadata (the single-node
// default: removing the recording removes them) or one object in the
// deployment's object store (shared mode, so that a pin made through one
// node holds against every node's sweep).
type Pins struct {
	st  *store.Store
	doc func(id string) statedoc.Doc
	mu  sync.Mutex
	now func() time.Time
}

// NewPins returns the pins of st's recordings, kept in its data directory.
func NewPins(st *store.Store, now func() time.Time) *Pins {
	return NewPinsIn(st, func(id string) statedoc.Doc { return statedoc.File(st.Layout().Pins(id), 0o644) }, now)
}

// NewPinsIn returns the pins of st's recordings, each recording's kept in
// doc(id).
func NewPinsIn(st *store.Store, doc func(id string) statedoc.Doc, now func() time.Time) *Pins {
	if now == nil {
		now = time.Now
	}
	return &Pins{st: st, doc: doc, now: now}
}

// forget removes a removed recording's pins (a file went with the
// recording's directory; an object stays until this).
func (p *Pins) forget(id string) error { return p.doc(id).Delete(context.Background()) }

// List returns a recording's pins, oldest first (ended ones included).
func (p *Pins) List(id string) ([]Pin, error) {
	if _, err := p.st.Meta(id); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.read(id)
}

func (p *Pins) read(id string) ([]Pin, error) {
	b, err := p.doc(id).Read(context.Background())
	if err != nil {
		return nil, fmt.Errorf("retention: pins of %s: %w", id, err)
	}
	return parsePins(id, b)
}

func parsePins(id string, b []byte) ([]Pin, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var pins []Pin
	if err := json.Unmarshal(b, &pins); err != nil {
		return nil, fmt.Errorf("retention: pins of %s are damaged: %w", id, err)
	}
	return pins, nil
}

// change rewrites a recording's pins as fn makes them from the current
// ones (fn may run again when another node wrote first).
func (p *Pins) change(id string, fn func(pins []Pin) ([]Pin, error)) error {
	return p.doc(id).Update(context.Background(), func(old []byte) ([]byte, error) {
		pins, err := parsePins(id, old)
		if err != nil {
			return nil, err
		}
		if pins, err = fn(pins); err != nil {
			return nil, err
		}
		sort.Slice(pins, func(i, j int) bool { return pins[i].CreatedAt < pins[j].CreatedAt })
		return json.MarshalIndent(pins, "", " ")
	})
}

// Add pins a recording. reason is evidence or legal_hold; until (unix ns)
// is optional and must be in the future.
func (p *Pins) Add(id, reason, ref string, until int64) (Pin, error) {
	if reason != ReasonEvidence && reason != ReasonLegalHold {
		return Pin{}, fmt.Errorf("%w: reason must be evidence or legal_hold", ErrBadPin)
	}
	if len(ref) > 500 {
		return Pin{}, fmt.Errorf("%w: ref is longer than 500 characters", ErrBadPin)
	}
	now := p.now()
	if until != 0 && until <= now.UnixNano() {
		return Pin{}, fmt.Errorf("%w: until is in the past", ErrBadPin)
	}
	if _, err := p.st.Meta(id); err != nil {
		return Pin{}, err
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Pin{}, err
	}
	pin := Pin{ID: "pin_" + hex.EncodeToString(b[:]), Reason: reason, Ref: ref, Until: until, CreatedAt: now.UnixNano()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.change(id, func(pins []Pin) ([]Pin, error) { return append(pins, pin), nil }); err != nil {
		return Pin{}, err
	}
	return pin, nil
}

// Remove removes a pin and returns it.
func (p *Pins) Remove(id, pinID string) (Pin, error) {
	if _, err := p.st.Meta(id); err != nil {
		return Pin{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var removed Pin
	err := p.change(id, func(pins []Pin) ([]Pin, error) {
		for i, pin := range pins {
			if pin.ID == pinID {
				removed = pin
				return append(append([]Pin{}, pins[:i]...), pins[i+1:]...), nil
			}
		}
		return nil, ErrNoSuchPin
	})
	if err != nil {
		return Pin{}, err
	}
	return removed, nil
}

// heldUntil is how long a recording's pins keep it: 0 when no pin holds
// at now, -1 when one holds without end, else the latest end.
func heldUntil(pins []Pin, now time.Time) int64 {
	var until int64
	for _, p := range pins {
		switch {
		case !p.Active(now):
		case p.Until == 0:
			return -1
		default:
			until = max(until, p.Until)
		}
	}
	return until
}
