package dom

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON reader of its own, rather than encoding/json, for three
// reasons: attribute maps must keep their order (a rendering must not
// depend on map iteration, or two replays of the same state would render
// differently); a materializer decodes every DOM event of a recording, so
// decoding is the hot path and a flat, reusable value slice avoids most
// allocation; and the reader fails with an offset and a reason instead of
// a type mismatch deep in reflection.

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNum
	jStr
	jArr
	jObj
)

var jkindName = [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}

// jval is one parsed value. Values sit in one slice (jdoc.v); arrays and
// objects link their children by index, and an object member carries its
// key's span.
type jval struct {
	kind         jkind
	esc          bool // a string with escapes: decode before use
	kesc         bool // the member key has escapes
	b            bool // a jBool's value
	start, end   int32
	kstart, kend int32
	first, next  int32 // first child, next sibling; -1 for none
}

// maxJSONDepth bounds nesting, so that a hostile event cannot exhaust the
// stack of the recursive reader or of the recursive tree builder. rrweb
// nests two levels per DOM level, so this admits a DOM some 1,000 deep.
const maxJSONDepth = 2048

// jdoc is a parsed event. It is reused from event to event.
type jdoc struct {
	buf []byte
	v   []jval
	pos int
}

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.off, e.msg) }

func (d *jdoc) parse(buf []byte) (int32, error) {
	if len(buf) > math.MaxInt32 {
		return -1, &syntaxError{0, "event too large"}
	}
	d.buf, d.v, d.pos = buf, d.v[:0], 0
	d.ws()
	root, err := d.value(0)
	if err != nil {
		return -1, err
	}
	d.ws()
	if d.pos != len(d.buf) {
		return -1, d.fail("data after the top-level value")
	}
	return root, nil
}

func (d *jdoc) fail(msg string) error { return &syntaxError{d.pos, msg} }

func (d *jdoc) ws() {
	for d.pos < len(d.buf) {
		switch d.buf[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jdoc) add(v jval) int32 {
	d.v = append(d.v, v)
	return int32(len(d.v) - 1)
}

func (d *jdoc) value(depth int) (int32, error) {
	if depth > maxJSONDepth {
		return -1, d.fail("nesting too deep")
	}
	if d.pos >= len(d.buf) {
		return -1, d.fail("unexpected end of input")
	}
	switch c := d.buf[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, e, esc, err := d.scanStr()
		if err != nil {
			return -1, err
		}
		return d.add(jval{kind: jStr, esc: esc, start: s, end: e, first: -1, next: -1}), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return d.literal("true", jval{kind: jBool, b: true, first: -1, next: -1})
	case c == 'f':
		return d.literal("false", jval{kind: jBool, first: -1, next: -1})
	case c == 'n':
		return d.literal("null", jval{kind: jNull, first: -1, next: -1})
	default:
		return -1, d.fail(fmt.Sprintf("invalid character %q looking for a value", c))
	}
}

func (d *jdoc) literal(word string, v jval) (int32, error) {
	if len(d.buf)-d.pos < len(word) || string(d.buf[d.pos:d.pos+len(word)]) != word {
		return -1, d.fail("invalid literal")
	}
	d.pos += len(word)
	return d.add(v), nil
}

func (d *jdoc) number() (int32, error) {
	start := d.pos
	b := d.buf
	if b[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(b) && b[d.pos] >= '0' && b[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.pos < len(b) && b[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return -1, d.fail("invalid number")
	}
	if d.pos < len(b) && b[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return -1, d.fail("invalid number")
		}
	}
	if d.pos < len(b) && (b[d.pos] == 'e' || b[d.pos] == 'E') {
		d.pos++
		if d.pos < len(b) && (b[d.pos] == '+' || b[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return -1, d.fail("invalid number")
		}
	}
	return d.add(jval{kind: jNum, start: int32(start), end: int32(d.pos), first: -1, next: -1}), nil
}

// scanStr scans a string at d.pos and returns its content's span.
func (d *jdoc) scanStr() (start, end int32, esc bool, err error) {
	b := d.buf
	d.pos++ // opening quote
	s := d.pos
	for d.pos < len(b) {
		c := b[d.pos]
		switch {
		case c == '"':
			e := d.pos
			d.pos++
			return int32(s), int32(e), esc, nil
		case c == '\\':
			esc = true
			if d.pos+1 >= len(b) {
				return 0, 0, false, d.fail("unterminated string")
			}
			switch b[d.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.pos += 2
			case 'u':
				if d.pos+6 > len(b) {
					return 0, 0, false, d.fail("invalid \\u escape")
				}
				for _, h := range b[d.pos+2 : d.pos+6] {
					if unhex(h) < 0 {
						return 0, 0, false, d.fail("invalid \\u escape")
					}
				}
				d.pos += 6
			default:
				return 0, 0, false, d.fail("invalid escape in string")
			}
		case c < 0x20:
			return 0, 0, false, d.fail("control character in string")
		default:
			d.pos++
		}
	}
	return 0, 0, false, d.fail("unterminated string")
}

func (d *jdoc) array(depth int) (int32, error) {
	self := d.add(jval{kind: jArr, first: -1, next: -1})
	d.pos++
	d.ws()
	if d.pos < len(d.buf) && d.buf[d.pos] == ']' {
		d.pos++
		return self, nil
	}
	last := int32(-1)
	for {
		d.ws()
		c, err := d.value(depth + 1)
		if err != nil {
			return -1, err
		}
		if last < 0 {
			d.v[self].first = c
		} else {
			d.v[last].next = c
		}
		last = c
		d.ws()
		if d.pos >= len(d.buf) {
			return -1, d.fail("unterminated array")
		}
		switch d.buf[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return self, nil
		default:
			return -1, d.fail("expected , or ] in array")
		}
	}
}

func (d *jdoc) object(depth int) (int32, error) {
	self := d.add(jval{kind: jObj, first: -1, next: -1})
	d.pos++
	d.ws()
	if d.pos < len(d.buf) && d.buf[d.pos] == '}' {
		d.pos++
		return self, nil
	}
	last := int32(-1)
	for {
		d.ws()
		if d.pos >= len(d.buf) || d.buf[d.pos] != '"' {
			return -1, d.fail("expected a member name")
		}
		ks, ke, kesc, err := d.scanStr()
		if err != nil {
			return -1, err
		}
		d.ws()
		if d.pos >= len(d.buf) || d.buf[d.pos] != ':' {
			return -1, d.fail("expected : after a member name")
		}
		d.pos++
		d.ws()
		c, err := d.value(depth + 1)
		if err != nil {
			return -1, err
		}
		d.v[c].kstart, d.v[c].kend, d.v[c].kesc = ks, ke, kesc
		if last < 0 {
			d.v[self].first = c
		} else {
			d.v[last].next = c
		}
		last = c
		d.ws()
		if d.pos >= len(d.buf) {
			return -1, d.fail("unterminated object")
		}
		switch d.buf[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return self, nil
		default:
			return -1, d.fail("expected , or } in object")
		}
	}
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// unescape decodes a validated string body. A lone surrogate becomes
// U+FFFD, as encoding/json does.
func unescape(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch b[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(b[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(b[i+2:])); r2 != utf8.RuneError {
						out = utf8.AppendRune(out, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // " \ /
			out = append(out, b[i+1])
		}
		i += 2
	}
	return string(out)
}

func hex4(b []byte) rune {
	return unhex(b[0])<<12 | unhex(b[1])<<8 | unhex(b[2])<<4 | unhex(b[3])
}

// Accessors. Each takes an index that may be -1 (absent) and answers as for
// an absent value.

func (d *jdoc) kind(i int32) (jkind, bool) {
	if i < 0 {
		return 0, false
	}
	return d.v[i].kind, true
}

func (d *jdoc) is(i int32, k jkind) bool { return i >= 0 && d.v[i].kind == k }

func (d *jdoc) keyEq(i int32, key string) bool {
	v := &d.v[i]
	if v.kesc {
		return unescape(d.buf[v.kstart:v.kend]) == key
	}
	return string(d.buf[v.kstart:v.kend]) == key
}

func (d *jdoc) key(i int32) string {
	v := &d.v[i]
	if v.kesc {
		return unescape(d.buf[v.kstart:v.kend])
	}
	return string(d.buf[v.kstart:v.kend])
}

// get returns obj's member named key (the last one, as JavaScript's
// JSON.parse keeps), or -1.
func (d *jdoc) get(obj int32, key string) int32 {
	if !d.is(obj, jObj) {
		return -1
	}
	found := int32(-1)
	for c := d.v[obj].first; c >= 0; c = d.v[c].next {
		if d.keyEq(c, key) {
			found = c
		}
	}
	return found
}

func (d *jdoc) str(i int32) (string, bool) {
	if !d.is(i, jStr) {
		return "", false
	}
	v := &d.v[i]
	if v.esc {
		return unescape(d.buf[v.start:v.end]), true
	}
	return string(d.buf[v.start:v.end]), true
}

// int returns an integral number that fits in an int64.
func (d *jdoc) int(i int32) (int64, bool) {
	if !d.is(i, jNum) {
		return 0, false
	}
	lit := string(d.buf[d.v[i].start:d.v[i].end])
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// raw returns a number's literal.
func (d *jdoc) raw(i int32) string { return string(d.buf[d.v[i].start:d.v[i].end]) }

func (d *jdoc) kindName(i int32) string {
	if i < 0 {
		return "missing"
	}
	return jkindName[d.v[i].kind]
}
