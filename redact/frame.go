package redact

import "github.com/flightrec/flightrec/event"

func (r *Redactor) redactFrame(d *event.Decoded) (Result, error) { return Result{}, nil }
func (r *Redactor) redactVideo(d *event.Decoded) (Result, error) { return Result{}, nil }
