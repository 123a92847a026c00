package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// The canonical encoding of an entry, which is both what a line of the log
// holds and what its hash covers. It is defined here rather than left to
// encoding/json, whose output has changed between Go releases (\b and \f
// in Go 1.22), so a line written today verifies under any later Go and can
// be checked by a program in another language:
//
//   - one JSON object, no insignificant whitespace, members in this order:
//     n, ts, kind, recording, project, why, bytes_freed, details, prev, hash;
//   - recording, project and why are left out when empty, bytes_freed when
//     0, details when it has no member, hash when computing the hash;
//   - n, ts and bytes_freed are decimal integers;
//   - strings are valid UTF-8, written raw except `"` → \", `\` → \\ and
//     the control characters U+0000–U+001F → \u00xx (lower-case hex);
//   - inside details, objects have their members sorted by key (bytewise),
//     arrays keep their order, numbers are written exactly as given (Append
//     takes them from Go's encoding of the value), true, false and null as
//     themselves.
//
// hash = lower-case hex SHA-256 of the canonical encoding without hash, and
// the line is that encoding with `,"hash":"<hash>"` inserted before the
// final `}`, then "\n". So a line's hash is the SHA-256 of the line with
// its hash member and newline removed.

// ZeroHash is the prev of entry 1, and the head hash of an empty log.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// appendBody appends the canonical encoding of e without its hash.
func appendBody(b []byte, e *Entry) ([]byte, error) {
	b = append(b, `{"n":`...)
	b = strconv.AppendUint(b, e.N, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, e.TS, 10)
	var err error
	if b, err = appendMember(b, "kind", e.Kind); err != nil {
		return nil, err
	}
	if e.Recording != "" {
		if b, err = appendMember(b, "recording", e.Recording); err != nil {
			return nil, err
		}
	}
	if e.Project != "" {
		if b, err = appendMember(b, "project", e.Project); err != nil {
			return nil, err
		}
	}
	if e.Why != "" {
		if b, err = appendMember(b, "why", e.Why); err != nil {
			return nil, err
		}
	}
	if e.BytesFreed != 0 {
		b = append(b, `,"bytes_freed":`...)
		b = strconv.AppendInt(b, e.BytesFreed, 10)
	}
	if len(e.Details) > 0 {
		b = append(b, `,"details":`...)
		if b, err = appendValue(b, e.Details, 0); err != nil {
			return nil, fmt.Errorf("details: %w", err)
		}
	}
	if b, err = appendMember(b, "prev", e.Prev); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendMember(b []byte, key, s string) ([]byte, error) {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	b, err := appendString(b, s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

var errUTF8 = errors.New("not valid UTF-8")

func appendString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, errUTF8
	}
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

// maxDepth bounds the nesting of details (the line length bounds it too;
// this keeps the encoder's recursion small whatever a caller passes).
const maxDepth = 64

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	var err error
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case string:
		return appendString(b, v)
	case json.Number:
		if !validNumber(string(v)) {
			return nil, fmt.Errorf("%q is not a JSON number", string(v))
		}
		return append(b, v...), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendString(b, k); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendValue(b, v[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, x, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	default:
		// Any other Go value (ints, floats, structs, times, typed maps
		// and slices): Go's JSON encoding of it, read back as plain JSON
		// values with numbers kept as written.
		n, err := normalize(v)
		if err != nil {
			return nil, err
		}
		return appendValue(b, n, depth)
	}
}

// normalize turns a Go value into plain JSON values (map[string]any, []any,
// string, json.Number, bool, nil) through encoding/json.
func normalize(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// normalizeDetails returns details as plain JSON values, so that what Append
// returns equals what a later read decodes.
func normalizeDetails(d map[string]any) (map[string]any, error) {
	if len(d) == 0 {
		return nil, nil
	}
	b, err := appendValue(nil, d, 0)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// validNumber reports whether s is a JSON number literal:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// encodeLine returns e's line (with its newline) and its hash. e.Hash is
// ignored.
func encodeLine(e *Entry) (line []byte, hash string, err error) {
	body, err := appendBody(make([]byte, 0, 256), e)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	hash = hex.EncodeToString(sum[:])
	line = make([]byte, 0, len(body)+len(hash)+12)
	line = append(line, body[:len(body)-1]...)
	line = append(line, `,"hash":"`...)
	line = append(line, hash...)
	line = append(line, "\"}\n"...)
	return line, hash, nil
}

// ComputeHash returns the hash e should carry: the lower-case hex SHA-256 of
// its canonical encoding without the hash. A client reading entries from
// GET /v1/audit checks a page with it (and n and prev) just as Verify checks
// the file.
func (e Entry) ComputeHash() (string, error) {
	_, h, err := encodeLine(&e)
	return h, err
}

// MarshalJSON writes the canonical encoding (with the hash when set), so an
// entry served over HTTP is byte for byte its line in the log.
func (e Entry) MarshalJSON() ([]byte, error) {
	b, err := appendBody(make([]byte, 0, 256), &e)
	if err != nil {
		return nil, fmt.Errorf("audit: entry %d: %w", e.N, err)
	}
	if e.Hash == "" {
		return b, nil
	}
	b = b[:len(b)-1]
	if b, err = appendMember(b, "hash", e.Hash); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes an entry keeping the numbers in details as
// json.Number, as they were written, so that re-encoding gives the same
// bytes.
func (e *Entry) UnmarshalJSON(b []byte) error {
	type plain Entry // without these methods
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*e = Entry(p)
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkLine parses one line (without its newline) and checks that it is an
// intact entry: a JSON object, in the canonical encoding, whose hash
// recomputes. It says nothing about the entry's place in the chain.
// unparsable is set when the line is not JSON at all (what a crash
// mid-write leaves).
func checkLine(line []byte) (e Entry, why string, unparsable bool) {
	if len(line) == 0 {
		return e, "empty line", true
	}
	if !json.Valid(line) {
		return e, "not valid JSON", true
	}
	if err := e.UnmarshalJSON(line); err != nil {
		return Entry{}, "not an audit entry", false
	}
	if !isHex64(e.Hash) {
		return e, "hash is not 64 lower-case hex digits", false
	}
	if !isHex64(e.Prev) {
		return e, "prev is not 64 lower-case hex digits", false
	}
	want, _, err := encodeLine(&e)
	if err != nil || !bytes.Equal(want[:len(want)-1], line) {
		if err == nil && len(want)-1 == len(line) && bytes.Equal(want[:len(want)-3-64], line[:len(line)-2-64]) {
			// Everything but the hash's value is canonical.
			return e, "hash does not match the entry's contents", false
		}
		return e, "not the canonical encoding of an entry (a byte was changed, added or removed)", false
	}
	return e, "", false
}
