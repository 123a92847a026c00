package retention

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/flightrec/flightrec/store"
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

// Pins keeps the pins of a data directory's recordings.
type Pins struct {
	st  *store.Store
	mu  sync.Mutex
	now func() time.Time
}

// NewPins returns the pins of st's recordings.
func NewPins(st *store.Store, now func() time.Time) *Pins {
	if now == nil {
		now = time.Now
	}
	return &Pins{st: st, now: now}
}

// path is a recording's pins, beside its metadata: removing the recording
// removes them.
func (p *Pins) path(id string) string { return p.st.Layout().Pins(id) }

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
	b, err := os.ReadFile(p.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	var pins []Pin
	if err := json.Unmarshal(b, &pins); err != nil {
		return nil, fmt.Errorf("retention: pins of %s are damaged: %w", id, err)
	}
	return pins, nil
}

func (p *Pins) write(id string, pins []Pin) error {
	sort.Slice(pins, func(i, j int) bool { return pins[i].CreatedAt < pins[j].CreatedAt })
	b, err := json.MarshalIndent(pins, "", " ")
	if err != nil {
		return err
	}
	return store.WriteFileAtomic(p.path(id), b, 0o644)
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
	pins, err := p.read(id)
	if err != nil {
		return Pin{}, err
	}
	if err := p.write(id, append(pins, pin)); err != nil {
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
	pins, err := p.read(id)
	if err != nil {
		return Pin{}, err
	}
	for i, pin := range pins {
		if pin.ID == pinID {
			rest := append(append([]Pin{}, pins[:i]...), pins[i+1:]...)
			if err := p.write(id, rest); err != nil {
				return Pin{}, err
			}
			return pin, nil
		}
	}
	return Pin{}, ErrNoSuchPin
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
