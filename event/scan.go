package event

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/flightrec/flightrec/internal/jsonspan"
)

// This file holds a small scanner for the top level of a JSON object. It
// lets ingest read the envelope without running encoding/json over the
// whole line, and pull a base64 image out of a frame without scanning its
// tens of kilobytes three times. Anything it does not fully check is
// checked afterwards: Decode validates the data completely with the span
// parser (internal/jsonspan, in duplicateKey), unmarshals it into its
// payload type, and decodes a binary member as base64 — so no byte is
// accepted unvalidated.
//
// It is not the span parser on purpose: it checks only the structure of
// the level it splits and skips values with bytes.IndexByte, so that the
// line's data, which Decode validates in full anyway, is not validated
// twice (a frame's image would be scanned once by ParseEnvelope, once by
// extractBinary and once by Decode).

var errScan = errors.New("invalid JSON")

// member is one top-level member of an object: its key and the byte ranges
// of the whole member (key through value) and of the value.
type member struct {
	key                 string
	start, vstart, vend int
}

// members splits a JSON object into its top-level members. It checks the
// structure it walks (quotes, brackets, commas, colons) and leaves scalar
// and nested validation to encoding/json.
func members(obj []byte) ([]member, error) {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, errScan
	}
	i = skipWS(obj, i+1)
	var out []member
	if i < len(obj) && obj[i] == '}' {
		if skipWS(obj, i+1) != len(obj) {
			return nil, errScan
		}
		return out, nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return nil, errScan
		}
		start := i
		kend, err := skipString(obj, i)
		if err != nil {
			return nil, err
		}
		key, err := unquote(obj[i:kend])
		if err != nil {
			return nil, err
		}
		i = skipWS(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return nil, errScan
		}
		i = skipWS(obj, i+1)
		vstart := i
		vend, err := skipValue(obj, i)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, start: start, vstart: vstart, vend: vend})
		i = skipWS(obj, vend)
		if i >= len(obj) {
			return nil, errScan
		}
		if obj[i] == '}' {
			if skipWS(obj, i+1) != len(obj) {
				return nil, errScan
			}
			return out, nil
		}
		if obj[i] != ',' {
			return nil, errScan
		}
		i = skipWS(obj, i+1)
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the closing quote of the string that
// starts at b[i].
func skipString(b []byte, i int) (int, error) {
	i++
	for {
		// IndexByte is vectorized; a base64 image has no backslash, so
		// this is two fast scans however long the string is.
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, errScan
		}
		k := bytes.IndexByte(b[i:i+j], '\\')
		if k < 0 {
			return i + j + 1, nil
		}
		i += k + 2 // a backslash escapes the next byte (\uXXXX's digits are plain)
		if i > len(b) {
			return 0, errScan
		}
	}
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errScan
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errScan
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' &&
			b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return 0, errScan
		}
		return j, nil
	}
}

// unquote decodes a JSON string token, fast when it has no escapes.
func unquote(tok []byte) (string, error) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return "", errScan
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		for _, c := range inner {
			if c < 0x20 {
				return "", errScan
			}
		}
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", errScan
	}
	return s, nil
}

// ParseEnvelope reads one NDJSON line into an envelope. Members may come
// in any order; an unknown or repeated member is an error, and so are
// numbers that are not integers. Data is returned as its raw bytes, to be
// validated by Decode.
func ParseEnvelope(line []byte) (Envelope, error) {
	var env Envelope
	ms, err := members(line)
	if err != nil {
		return env, &Error{Reason: "invalid JSON"}
	}
	var seen [5]bool
	for _, m := range ms {
		v := line[m.vstart:m.vend]
		if m.key == "seq" || m.key == "ts" || m.key == "step" {
			if !jsonInteger(v) {
				v = nil // fails the parse below with the field's message
			}
		}
		var k int
		switch m.key {
		case "seq":
			k = 0
			env.Seq, err = strconv.ParseUint(string(v), 10, 64)
		case "ts":
			k = 1
			env.TS, err = strconv.ParseInt(string(v), 10, 64)
		case "step":
			k = 2
			var n int64
			n, err = strconv.ParseInt(string(v), 10, 32)
			env.Step = int(n)
		case "kind":
			k = 3
			var s string
			if len(v) == 0 || v[0] != '"' {
				err = errScan
			} else {
				s, err = unquote(v)
			}
			env.Kind = Kind(s)
		case "data":
			k = 4
			env.Data = json.RawMessage(v)
		default:
			return env, &Error{Reason: "an unknown envelope member (want seq, ts, step, kind, data)"}
		}
		if err != nil {
			return env, errf(envelopeFields[k], "must be %s", envelopeWants[k])
		}
		if seen[k] {
			return env, errf(envelopeFields[k], "appears twice")
		}
		seen[k] = true
	}
	for k, ok := range seen {
		if !ok && k != 4 { // a missing data is reported by Decode
			return env, errf(envelopeFields[k], "is required")
		}
	}
	return env, nil
}

// jsonInteger reports whether b is a JSON number without fraction or
// exponent: -?(0|[1-9][0-9]*). strconv alone would take "+1" and "007".
func jsonInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var (
	envelopeFields = [5]string{"seq", "ts", "step", "kind", "data"}
	envelopeWants  = [5]string{"an unsigned integer", "an integer (unix ns)", "an integer", "a string", "an object"}
)

// binarySpan is where a binary member sits in an event's data: the whole
// member, from its key's opening quote to the end of its value.
type binarySpan struct {
	field      string
	start, end int
}

// extractBinary finds member field (a base64 string) in data and decodes
// it. For the typed decode it returns data with that value replaced by
// null; the member's position is kept so the stored data can be made by
// replacing the member, with no second parse.
func extractBinary(data []byte, field string) (bin []byte, rest []byte, span *binarySpan, err *Error) {
	ms, serr := members(data)
	if serr != nil {
		return nil, nil, nil, &Error{Reason: "invalid JSON"}
	}
	for _, m := range ms {
		if m.key != field {
			continue
		}
		if span != nil {
			return nil, nil, nil, errf(field, "appears twice")
		}
		tok := data[m.vstart:m.vend]
		if tok[0] != '"' {
			return nil, nil, nil, errf(field, "must be a base64 string")
		}
		inner := tok[1 : len(tok)-1]
		if bytes.IndexByte(inner, '\\') >= 0 { // e.g. "\/": let encoding/json unescape
			var s string
			if json.Unmarshal(tok, &s) != nil {
				return nil, nil, nil, errf(field, "must be a base64 string")
			}
			inner = []byte(s)
		}
		bin = make([]byte, base64.StdEncoding.DecodedLen(len(inner)))
		n, derr := base64.StdEncoding.Decode(bin, inner)
		if derr != nil {
			return nil, nil, nil, errf(field, "must be standard base64")
		}
		bin = bin[:n]
		rest = make([]byte, 0, len(data)-len(tok)+4)
		rest = append(append(append(rest, data[:m.vstart]...), "null"...), data[m.vend:]...)
		span = &binarySpan{field: field, start: m.start, end: m.vend}
	}
	if span == nil {
		return nil, data, nil, nil
	}
	return bin, rest, span, nil
}

// StoredData returns d's data as stored: a binary member replaced by its
// CID under field+"_cid", every other byte as received.
func StoredData(d *Decoded, cid string) json.RawMessage {
	s := d.bin
	if s == nil {
		return d.Data
	}
	c, _ := json.Marshal(cid)
	out := make([]byte, 0, len(d.Data)-(s.end-s.start)+len(s.field)+len(c)+8)
	out = append(out, d.Data[:s.start]...)
	out = append(out, '"')
	out = append(out, s.field...)
	out = append(out, `_cid":`...)
	out = append(out, c...)
	return append(out, d.Data[s.end:]...)
}

// duplicateKey reports whether any object in the JSON value b, at any
// depth, has the same key twice. Readers disagree on such input (Go keeps
// the last value, others the first), so a check could pass on one copy
// while the other reaches disk: ingest refuses it. It is the span parser's
// check (jsonspan.Doc.Unique), the one redaction's DOM reader makes too, so
// both refuse the same events; it also validates b completely.
func duplicateKey(b []byte) (bool, error) {
	d := dupDocs.Get().(*jsonspan.Doc)
	defer func() {
		d.Release(1 << 16) // don't pin a big snapshot's arena in the pool
		dupDocs.Put(d)
	}()
	err := d.Parse(b)
	if errors.Is(err, jsonspan.ErrDuplicateKey) {
		return true, nil
	}
	return false, err
}

// dupDocs holds parse scratch: ingest decodes events concurrently.
var dupDocs = sync.Pool{New: func() any { return &jsonspan.Doc{Unique: true} }}
