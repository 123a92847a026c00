// Package event is flightrec's vocabulary: the envelope every executor event
// travels in, the kinds, their typed payloads and validation.
//
// It imports nothing of flightrec's own, so every other package can depend on
// it. Field names are the wire contract (snake_case, HAR and rrweb keep their
// own spelling); extend with care, never rename.
package event

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Kind names what an event's data holds.
type Kind string

// The kinds of DESIGN.md's event model.
const (
	KindReceipt    Kind = "receipt"
	KindSnapshot   Kind = "snapshot"
	KindDOM        Kind = "dom"
	KindHAR        Kind = "har"
	KindConsole    Kind = "console"
	KindFrame      Kind = "frame"
	KindVideo      Kind = "video"
	KindScreenshot Kind = "screenshot"
	KindCheck      Kind = "check"
	KindMeta       Kind = "meta"
	// KindDownload carries a downloaded file's bytes, sent only when the
	// recording's policy keeps downloads (plan keep_downloads).
	KindDownload Kind = "download"
)

// Kinds lists every kind in a stable order (used for per-kind counts).
var Kinds = []Kind{KindReceipt, KindSnapshot, KindDOM, KindHAR, KindConsole,
	KindFrame, KindVideo, KindScreenshot, KindCheck, KindMeta, KindDownload}

// Valid reports whether k is one of the known kinds.
func (k Kind) Valid() bool {
	for _, x := range Kinds {
		if k == x {
			return true
		}
	}
	return false
}

// Envelope is the one shape every event has, on the wire and in storage.
// Data stays raw JSON so that fields this version does not model (HAR and
// rrweb carry many) pass through unchanged.
type Envelope struct {
	Seq  uint64          `json:"seq"`
	TS   int64           `json:"ts"`
	Step int             `json:"step"`
	Kind Kind            `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// Limits bound what one event may hold. Zero means "no limit".
type Limits struct {
	// MaxEventBytes bounds the encoded size of one event (its NDJSON line).
	MaxEventBytes int
	// MaxStep bounds the step number, so a typo cannot create 2^31 steps.
	MaxStep int
}

// DefaultLimits are the limits ingest applies unless configured otherwise.
var DefaultLimits = Limits{MaxEventBytes: 16 << 20, MaxStep: 1_000_000}

// Error is a validation failure: which field and why. Its message never
// quotes the field's value, since values may be secrets.
type Error struct {
	Field  string // JSON path of the offending field, e.g. "data.action.verb"
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func errf(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Decoded is an envelope whose data has been parsed into its typed payload
// and validated. Payload is one of the pointer types in payload.go.
type Decoded struct {
	Envelope
	Payload any
	// Replaced counts the invalid UTF-8 sequences and lone surrogate
	// escapes the reader replaced with U+FFFD before decoding (ingest
	// reports them).
	Replaced int
	// Sanitized says Data already went through that replacement (the
	// batch reader did it), so ingest need not scan it a second time.
	Sanitized bool
	bin       *binarySpan // where the binary member sits in Data, if any
}

// Decode validates env and parses its data into the kind's payload type.
// The error, if any, is an *Error naming the field.
func Decode(env Envelope, lim Limits) (*Decoded, error) {
	if env.Seq == 0 {
		return nil, errf("seq", "must be ≥ 1")
	}
	if env.TS <= 0 {
		return nil, errf("ts", "must be unix nanoseconds > 0")
	}
	if env.Step < 0 {
		return nil, errf("step", "must be ≥ 0")
	}
	if lim.MaxStep > 0 && env.Step > lim.MaxStep {
		return nil, errf("step", "exceeds the limit of %d", lim.MaxStep)
	}
	if !env.Kind.Valid() {
		return nil, errf("kind", "unknown kind (want one of receipt, snapshot, dom, har, console, frame, video, screenshot, check, meta)")
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return nil, errf("data", "is required")
	}
	if env.Data[0] != '{' {
		return nil, errf("data", "must be a JSON object")
	}
	if dup, err := duplicateKey(env.Data); err != nil {
		return nil, &Error{Field: "data", Reason: "invalid JSON"}
	} else if dup {
		return nil, errf("data", "an object has the same key twice")
	}
	p := newPayload(env.Kind)
	data := env.Data
	var bin []byte
	var span *binarySpan
	if field := binaryField(env.Kind); field != "" {
		var e *Error
		if bin, data, span, e = extractBinary(env.Data, field); e != nil {
			e.Field = joinField("data", e.Field)
			return nil, e
		}
	}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, &Error{Field: "data", Reason: describeJSONError(err)}
	}
	if span != nil {
		setBinary(p, bin)
	} else if field := binaryField(env.Kind); field != "" && hasBinary(p) {
		// encoding/json matched a differently cased key ("Image"): the
		// bytes would stay inline. Only the exact spelling is the contract.
		return nil, errf(joinField("data", field), "must be spelled exactly %q", field)
	}
	if v, ok := p.(interface{ validate() *Error }); ok {
		if e := v.validate(); e != nil {
			e.Field = joinField("data", e.Field)
			return nil, e
		}
	}
	return &Decoded{Envelope: env, Payload: p, bin: span}, nil
}

// HasBinary reports whether a kind carries bytes on the wire.
func HasBinary(k Kind) bool { return binaryField(k) != "" }

// binaryField names the member that carries a kind's bytes on the wire.
func binaryField(k Kind) string {
	switch k {
	case KindFrame, KindScreenshot:
		return "image"
	case KindVideo:
		return "chunk"
	case KindDownload:
		return "data"
	}
	return ""
}

func hasBinary(p any) bool {
	switch p := p.(type) {
	case *Frame:
		return p.Image != nil
	case *Screenshot:
		return p.Image != nil
	case *Video:
		return p.Chunk != nil
	case *Download:
		return p.Data != nil
	}
	return false
}

func setBinary(p any, b []byte) {
	switch p := p.(type) {
	case *Frame:
		p.Image = b
	case *Screenshot:
		p.Image = b
	case *Video:
		p.Chunk = b
	case *Download:
		p.Data = b
	}
}

func joinField(prefix, f string) string {
	if f == "" {
		return prefix
	}
	return prefix + "." + f
}

// describeJSONError turns a json error into a message without any value from
// the input (UnmarshalTypeError carries only types and field names).
func describeJSONError(err error) string {
	switch e := err.(type) {
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("field %q: expected %s, got JSON %s", FieldRoot(e.Field), e.Type, e.Value)
	case *json.SyntaxError:
		return fmt.Sprintf("invalid JSON at byte %d", e.Offset)
	default:
		return "invalid payload"
	}
}

// FieldRoot keeps the first member of a JSON path. Deeper members can be
// map keys, and a key is input that may be a secret; the first member of a
// payload is always one of our own field names.
func FieldRoot(path string) string {
	root, _, _ := strings.Cut(path, ".")
	return root
}

func newPayload(k Kind) any {
	switch k {
	case KindReceipt:
		return new(Receipt)
	case KindSnapshot:
		return new(Snapshot)
	case KindDOM:
		return new(DOM)
	case KindHAR:
		return new(HAR)
	case KindConsole:
		return new(Console)
	case KindFrame:
		return new(Frame)
	case KindVideo:
		return new(Video)
	case KindScreenshot:
		return new(Screenshot)
	case KindCheck:
		return new(Check)
	case KindMeta:
		return new(Meta)
	case KindDownload:
		return new(Download)
	}
	panic("event: no payload type for kind " + string(k))
}
