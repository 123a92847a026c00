// Error envelope: flightrec's one error shape,
//
//	{"error": {"code": "SEQ_GAP", "message": "…", "next": "…"}}
//
// served with a fitting HTTP status by every route and printed by the CLI.
// Messages never carry event values (they may be secrets): they name fields,
// lines and limits.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/flightrec/flightrec/event"
)

// Error is an error with a stable code, an HTTP status and what to do next.
type Error struct {
	Status     int    `json:"-"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Next       string `json:"next"`
	RetryAfter int    `json:"-"` // seconds; set only on 429 and 503
	// Extra carries machine-readable details (e.g. "expected_seq").
	Extra map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New returns an Error.
func New(status int, code, next, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...), Next: next}
}

// With adds a detail and returns e.
func (e *Error) With(key string, v any) *Error {
	if e.Extra == nil {
		e.Extra = map[string]any{}
	}
	e.Extra[key] = v
	return e
}

// Envelope is the JSON shape on the wire.
type Envelope struct {
	Error *Error `json:"error"`
}

// From returns err as an *Error, or a 500 INTERNAL whose message does not
// repeat err (which may quote anything); the caller logs err itself.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return New(http.StatusInternalServerError, "INTERNAL", "retry later; if it persists, check the server log",
		"internal error")
}

// Decode reads an envelope from a response body, for clients.
func Decode(status int, body []byte) *Error {
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
		return &Error{Status: status, Code: "HTTP_" + strconv.Itoa(status),
			Message: http.StatusText(status), Next: "check the server URL and its log"}
	}
	env.Error.Status = status
	return env.Error
}

// Retryable reports whether a client should try the same request again.
func (e *Error) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// RecordingNotFound is the answer about a recording that does not exist:
// a read's (list them) and a write's (open one) differ only in next. Access
// control answers a recording the caller may not see with the same bytes.
func RecordingNotFound(read bool) *Error {
	next := "open a recording with POST /v1/recordings"
	if read {
		next = "list recordings with GET /v1/recordings"
	}
	return New(http.StatusNotFound, "RECORDING_NOT_FOUND", next, "no such recording")
}

// GroupNotFound is the answer for a group that does not exist or that the
// caller may not see: the two look the same.
func GroupNotFound() *Error {
	return New(http.StatusNotFound, "GROUP_NOT_FOUND", "make one with POST /v1/groups, or flightrec rerun", "no such group")
}

// DescribeJSON turns a JSON decoding error into a message that holds no
// value from the input, only offsets, types and our own field names: the
// server answers malformed bodies with it and the client reports malformed
// input files with it, and either input may hold secrets.
func DescribeJSON(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("field %q: expected %s, got JSON %s", event.FieldRoot(te.Field), te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("truncated JSON")
	}
	// encoding/json's unknown-field message quotes the name, and a name is
	// input too: say only that there is one.
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return errors.New("an unknown envelope field (want seq, ts, step, kind, data)")
	}
	return errors.New("invalid JSON")
}
