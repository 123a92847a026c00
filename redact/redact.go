// Package redact applies a recording's redaction plan to each event before
// anything is stored: HAR headers, cookies, parameters and bodies, texts,
// rrweb DOM events (statefully, tracking nodes), frames, and video GOPs
// (RedactGOP: mask rectangles painted, with ffmpeg). It reports what
// it erased or masked by rule, channel and JSON pointer — never the values.
//
// A Redactor belongs to one recording and is not safe for concurrent use;
// ingest serializes a recording's appends anyway.
package redact

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/policy"
)

// Finding is one thing redaction erased or masked. Rule names the rule
// ("header:authorization", "detector:jwt", "dom:input-type:password", …),
// Channel the event kind, Pointer where (an RFC 6901 JSON pointer into the
// event's data, or "/image" for pixels). It never holds the value.
type Finding struct {
	Rule    string `json:"rule"`
	Channel string `json:"channel"`
	Pointer string `json:"pointer"`
}

// Result is the outcome of redacting one event.
type Result struct {
	// Data is the redacted data, nil when nothing changed. For frames and
	// screenshots it never holds the image: see Image.
	Data json.RawMessage
	// Image is the re-encoded image of a frame or screenshot whose mask
	// rectangles were painted, nil when the image is unchanged.
	Image []byte
	// Drop says the event must not be stored at all (fail closed).
	Drop bool
	// Findings lists what was erased or masked.
	Findings []Finding
}

// Changed reports whether the event must be stored differently.
func (r *Result) Changed() bool { return r.Data != nil || r.Image != nil || r.Drop }

// Redactor redacts the events of one recording.
type Redactor struct {
	plan *policy.Plan
	key  []byte // pseudonym key; nil for plain "[redacted]"

	det *detectors
	dom *domState
	// known holds values this recording masked somewhere (a masked input's
	// value, a fill aimed at a masked field): they are masked wherever else
	// they show (snapshots, console, checks, bodies). In memory only.
	known *knownValues
	// hkey is the server's key, for the known values' hashes (knownhash.go);
	// nil: they are neither written nor loaded.
	hkey []byte
	// hashed holds known values loaded as hashes after a restart;
	// pendingHashes the entries of values learned since TakeKnownHashes.
	hashed        hashedKnown
	pendingHashes []byte
	// pendingSnaps are snapshot texts not yet read for refs (target.go).
	pendingSnaps []string
	pendingBytes int
	// video holds the video events' mask rectangles, for the GOPs
	// RedactGOP is given later. In memory; Observe rebuilds it.
	vmasks videoMasks

	// Video says how RedactGOP runs ffmpeg; set it before the first GOP.
	Video VideoConfig
}

// New compiles a plan for one recording. key, when the plan pseudonymizes,
// is the server's HMAC key.
func New(plan *policy.Plan, key []byte) (*Redactor, error) {
	r := &Redactor{plan: plan, known: newKnownValues()}
	if len(key) >= 16 {
		r.hkey = key
		r.known.onAdd = r.hashKnown
	}
	if plan.Pseudonymize {
		if len(key) < 16 {
			return nil, fmt.Errorf("redact: a pseudonymizing plan needs a key of at least 16 bytes")
		}
		r.key = key
	}
	var err error
	if r.det, err = newDetectors(plan); err != nil {
		return nil, err
	}
	if r.dom, err = newDOMState(plan, r.known); err != nil {
		return nil, err
	}
	return r, nil
}

// Redact redacts one decoded, validated event. It never modifies d.
func (r *Redactor) Redact(d *event.Decoded) (Result, error) {
	switch d.Kind {
	case event.KindHAR:
		return r.redactHAR(d)
	case event.KindDOM:
		return r.dom.redact(r, d)
	case event.KindFrame, event.KindScreenshot:
		return r.redactFrame(d)
	case event.KindVideo:
		return r.redactVideo(d)
	case event.KindDownload:
		return r.redactDownload(d)
	default: // receipt, snapshot, console, check, meta
		return r.redactText(d)
	}
}

// Observe feeds an already redacted, stored event back through the state
// that spans events (DOM nodes, video masks), without redacting it: how a
// restarted server rebuilds a recording's redaction state from its log.
func (r *Redactor) Observe(kind event.Kind, data json.RawMessage) {
	switch kind {
	case event.KindDOM:
		r.dom.observe(data)
	case event.KindVideo:
		r.vmasks.observe(data)
	case event.KindSnapshot, event.KindReceipt:
		// Refs and whether they are masked are read from names, which
		// redaction keeps: the stored text teaches what the sent one did.
		var v struct {
			Text    string `json:"text"`
			Effects *struct {
				SnapshotDelta string `json:"snapshot_delta"`
			} `json:"effects"`
		}
		if json.Unmarshal(data, &v) == nil {
			r.noteSnapshot(v.Text)
			if v.Effects != nil {
				r.noteSnapshot(v.Effects.SnapshotDelta)
			}
		}
	}
}

// Erased is what replaces an erased value.
const Erased = "[redacted]"

// erase returns the replacement for a secret value: "[redacted]", or with
// pseudonyms "[redacted:<16 hex>]", the HMAC of the value under the
// server's key, so the same secret correlates within and across events.
func (r *Redactor) erase(value string) string {
	if r.key == nil {
		return Erased
	}
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(value))
	return "[redacted:" + hex.EncodeToString(m.Sum(nil)[:8]) + "]"
}

// knownValues is the set of secret values seen masked in this recording.
type knownValues struct {
	vals map[string]struct{}
	// minLen keeps short values (a checkbox "on", a one-digit quantity)
	// from masking unrelated text.
	minLen int
	// onAdd hears each new value (the Redactor hashes it to outlive a
	// restart).
	onAdd func(string)
}

func newKnownValues() *knownValues { return &knownValues{vals: map[string]struct{}{}, minLen: 4} }

// add remembers a masked value (trimmed; short ones are ignored).
func (k *knownValues) add(v string) {
	v = strings.TrimSpace(v)
	if len(v) >= k.minLen && v != Erased && !strings.HasPrefix(v, "[redacted") {
		if _, ok := k.vals[v]; ok {
			return
		}
		k.vals[v] = struct{}{}
		if k.onAdd != nil {
			k.onAdd(v)
		}
	}
}

// PointerEscape escapes one JSON pointer reference token (RFC 6901).
func PointerEscape(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

// Meta is a recording's metadata as sent at open: what the list, the index
// and meta.json show of it.
type Meta struct {
	Labels   map[string]string `json:"labels,omitempty"`
	Executor string            `json:"executor,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
}

// RedactMeta redacts a recording's metadata with the same pass as a meta
// event's data (secret keys, detectors, URLs, known values), so a label
// like {"note":"password=…"} is stored erased wherever the metadata goes.
// Findings carry channel "recording" and pointers into Meta's JSON.
func (r *Redactor) RedactMeta(m Meta) (Meta, []Finding, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return m, nil, err
	}
	res, err := r.redactText(&event.Decoded{Envelope: event.Envelope{Kind: event.KindMeta, Data: raw}})
	if err != nil || res.Data == nil {
		return m, nil, err
	}
	var out Meta
	if err := json.Unmarshal(res.Data, &out); err != nil {
		return m, nil, err
	}
	for i := range res.Findings {
		res.Findings[i].Channel = "recording"
	}
	return out, res.Findings, nil
}

// KnownCount is how many values the recording has learned to mask so far
// (ingest compares it across a batch: an event redacted before a value was
// learned is scrubbed again, RescrubKnown).
func (r *Redactor) KnownCount() int { return len(r.known.vals) }

// RedactString redacts free text written about a recording (a comment on
// a step) with the recording's plan: the same string pass as a meta
// event's values (URL scrubbing, the detectors, the known values), so a
// card number or a secret in it is masked as it would be in the
// recording.
func (r *Redactor) RedactString(s string) (string, error) {
	m, _, err := r.RedactMeta(Meta{Labels: map[string]string{"text": s}})
	if err != nil {
		return "", err
	}
	return m.Labels["text"], nil
}
