package redact

import (
	"encoding/json"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/policy"
)

// domState tracks the rrweb DOM of one recording (stub: being built).
type domState struct{ known *knownValues }

func newDOMState(plan *policy.Plan, known *knownValues) (*domState, error) {
	return &domState{known: known}, nil
}

func (s *domState) redact(r *Redactor, d *event.Decoded) (Result, error) { return Result{}, nil }
func (s *domState) observe(data json.RawMessage)                          {}

// maskedOnPage reports whether a masked element is attached to the page now.
func (s *domState) maskedOnPage() bool { return false }
