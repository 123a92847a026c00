package redact

import (
	"encoding/json"
	"fmt"

	"github.com/flightrec/flightrec/event"
)

// redactDownload keeps a downloaded file's bytes only when the plan keeps
// downloads, and only under a name redaction leaves as it is: the bytes
// are stored as sent (a blob), so the event's text cannot be rewritten
// around them, and a name that carries a secret drops the event (the
// receipt still describes the file, its name redacted like any text).
func (r *Redactor) redactDownload(d *event.Decoded) (Result, error) {
	p, ok := d.Payload.(*event.Download)
	if !ok {
		return Result{}, fmt.Errorf("redact: %s event without a download payload", d.Kind)
	}
	if !r.plan.KeepDownloads {
		return Result{Drop: true, Findings: []Finding{{Rule: "download:not-kept", Channel: string(d.Kind), Pointer: "/data"}}}, nil
	}
	text, _ := json.Marshal(map[string]string{"name": p.Name, "mime": p.MIME})
	res, err := r.redactText(&event.Decoded{Envelope: event.Envelope{Seq: d.Seq, TS: d.TS, Step: d.Step, Kind: d.Kind, Data: text}})
	if err != nil || !res.Changed() {
		return Result{}, err
	}
	return Result{Drop: true, Findings: res.Findings}, nil
}
