package redact

import "github.com/flightrec/flightrec/policy"

// detectors is the plan's compiled detectors (stub: being built).
type detectors struct{}

func newDetectors(plan *policy.Plan) (*detectors, error) { return &detectors{}, nil }
