package redact

import "github.com/flightrec/flightrec/event"

func (r *Redactor) redactText(d *event.Decoded) (Result, error) { return Result{}, nil }
