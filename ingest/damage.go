package ingest

import (
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// Damage is a recording that recovery found damaged. One damaged recording
// never stops the service: it is reported (/readyz, the
// flightrec_damaged_recordings metric, an error log line naming it and
// where) and contained. A damaged log's intact records stay readable
// (the projector reads around the damage) while appends and finish are
// refused until `flightrec repair` seals it; a recording whose metadata
// or manifest cannot be read answers RECORDING_DAMAGED on every route.
type Damage struct {
	ID string `json:"id"`
	// What says what is damaged, for a person.
	What string `json:"what"`
	// Log lists a damaged log's unreadable regions.
	Log []store.LogDamage `json:"log,omitempty"`
	// Unreadable is set when the recording itself (meta.json, its
	// manifest) cannot be read: no route can serve it.
	Unreadable bool `json:"unreadable,omitempty"`
}

// Next is what an operator does about it.
func (d Damage) Next() string {
	if d.Unreadable {
		return fmt.Sprintf("run flightrec verify --data DIR; restore recordings/%s from a backup or remove it", d.ID)
	}
	return fmt.Sprintf("run flightrec repair %s (it keeps the damaged bytes and seals the recording with the lost seqs as a gap)", d.ID)
}

// Error is the refusal of a request about the recording: 409
// RECORDING_DAMAGED with the way out.
func (d Damage) Error() *wire.Error {
	return wire.New(http.StatusConflict, "RECORDING_DAMAGED", d.Next(), "recording %s is damaged: %s", d.ID, d.What)
}

// markDamaged records that recovering recording id failed with err.
func (s *Service) markDamaged(id string, err error) {
	d := Damage{ID: id, What: err.Error()}
	var de *store.DamagedError
	if errors.As(err, &de) {
		d.Log = de.Damage
		for _, r := range de.Damage {
			s.log.Error("recording log damaged; its intact records stay readable, appends are refused",
				"recording", id, "segment", r.Segment, "offset", r.Offset, "end", r.End, "why", r.Why,
				"after_seq", r.AfterSeq, "before_seq", r.BeforeSeq, "next", d.Next())
		}
	} else {
		d.Unreadable = true
		s.log.Error("recording damaged; it is not served", "recording", id, "err", err, "next", d.Next())
	}
	s.mu.Lock()
	s.damaged[id] = d
	s.mu.Unlock()
}

// DamageOf reports whether recording id is damaged, and how.
func (s *Service) DamageOf(id string) (Damage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.damaged[id]
	return d, ok
}

// Damaged lists the damaged recordings, sorted by id.
func (s *Service) Damaged() []Damage {
	s.mu.Lock()
	out := make([]Damage, 0, len(s.damaged))
	for _, d := range s.damaged {
		out = append(out, d)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Repaired forgets a recording's damage once it is sealed by repair.
func (s *Service) Repaired(id, root, verdict string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.damaged, id)
	s.sealed[id] = sealedRec{root, verdict}
}

func registerDamageMetric(reg prometheus.Registerer, s *Service) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flightrec_damaged_recordings",
		Help: "Recordings found damaged (see /readyz and flightrec verify); each needs flightrec repair."},
		func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(len(s.damaged))
		}))
}
