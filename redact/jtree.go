package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// This file holds a small, strict JSON parser for rrweb events. It builds a
// tree of byte spans into the input (no values are copied), so a DOM event
// is read without allocating per value, and the redacted event is the input
// with only the erased string values spliced in: every byte redaction does
// not change — fields this package does not model, number spellings, key
// order — survives exactly.
//
// Keys are matched exactly (JavaScript's JSON.parse is case-sensitive,
// unlike encoding/json's struct matching), escapes in keys are decoded, and
// an object with a duplicate key is refused: with duplicates, what a player
// reads (the last) and what a stored byte holds could differ.

type jkind uint8

const (
	jNull jkind = iota
	jFalse
	jTrue
	jNumber
	jString
	jArray
	jObject
)

// jnode is one value. Spans are [start, end) byte offsets into the source;
// a string's span includes its quotes. A member of an object also has its
// key's span. Children are linked through first/next (-1: none).
type jnode struct {
	kind         jkind
	esc          bool // the string value holds backslash escapes
	kesc         bool // the key holds backslash escapes
	start, end   int32
	kstart, kend int32
	first, next  int32
}

// jtree is a parsed document; node 0 is the root. It is reused between
// events to keep parsing allocation-free.
type jtree struct {
	src   []byte
	nodes []jnode
	keys  []int32 // scratch for duplicate-key checks
}

var errJSONSyntax = errors.New("invalid JSON")

// jsonMaxDepth bounds nesting, as encoding/json does.
const jsonMaxDepth = 10000

// parse parses src into t, replacing what t held.
func (t *jtree) parse(src []byte) error {
	if len(src) > math.MaxInt32-1 {
		return errors.New("JSON document too large")
	}
	t.src = src
	t.nodes = t.nodes[:0]
	i := jsonSkipSpace(src, 0)
	_, i, err := t.value(i, 0)
	if err != nil {
		return err
	}
	if jsonSkipSpace(src, i) != len(src) {
		return errJSONSyntax
	}
	return nil
}

func jsonSkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// value parses the value at i and returns its node index and the offset
// after it.
func (t *jtree) value(i, depth int) (int32, int, error) {
	src := t.src
	if i >= len(src) {
		return -1, 0, errJSONSyntax
	}
	idx := int32(len(t.nodes))
	t.nodes = append(t.nodes, jnode{start: int32(i), kstart: -1, kend: -1, first: -1, next: -1})
	var n jnode
	switch c := src[i]; {
	case c == '{':
		if depth >= jsonMaxDepth {
			return -1, 0, errJSONSyntax
		}
		end, err := t.object(idx, i, depth+1)
		if err != nil {
			return -1, 0, err
		}
		n = t.nodes[idx]
		n.kind, n.end = jObject, int32(end)
	case c == '[':
		if depth >= jsonMaxDepth {
			return -1, 0, errJSONSyntax
		}
		end, err := t.array(idx, i, depth+1)
		if err != nil {
			return -1, 0, err
		}
		n = t.nodes[idx]
		n.kind, n.end = jArray, int32(end)
	case c == '"':
		end, esc, err := jsonScanString(src, i)
		if err != nil {
			return -1, 0, err
		}
		n = t.nodes[idx]
		n.kind, n.end, n.esc = jString, int32(end), esc
	case c == 't':
		if !bytes.HasPrefix(src[i:], []byte("true")) {
			return -1, 0, errJSONSyntax
		}
		n = t.nodes[idx]
		n.kind, n.end = jTrue, int32(i+4)
	case c == 'f':
		if !bytes.HasPrefix(src[i:], []byte("false")) {
			return -1, 0, errJSONSyntax
		}
		n = t.nodes[idx]
		n.kind, n.end = jFalse, int32(i+5)
	case c == 'n':
		if !bytes.HasPrefix(src[i:], []byte("null")) {
			return -1, 0, errJSONSyntax
		}
		n = t.nodes[idx]
		n.kind, n.end = jNull, int32(i+4)
	case c == '-' || (c >= '0' && c <= '9'):
		end, err := jsonScanNumber(src, i)
		if err != nil {
			return -1, 0, err
		}
		n = t.nodes[idx]
		n.kind, n.end = jNumber, int32(end)
	default:
		return -1, 0, errJSONSyntax
	}
	t.nodes[idx] = n
	return idx, int(n.end), nil
}

func (t *jtree) object(idx int32, i, depth int) (int, error) {
	src := t.src
	i = jsonSkipSpace(src, i+1)
	if i < len(src) && src[i] == '}' {
		return i + 1, nil
	}
	last := int32(-1)
	mark := len(t.keys)
	defer func() { t.keys = t.keys[:mark] }()
	for {
		if i >= len(src) || src[i] != '"' {
			return 0, errJSONSyntax
		}
		kstart := i
		kend, kesc, err := jsonScanString(src, i)
		if err != nil {
			return 0, err
		}
		i = jsonSkipSpace(src, kend)
		if i >= len(src) || src[i] != ':' {
			return 0, errJSONSyntax
		}
		i = jsonSkipSpace(src, i+1)
		child, end, err := t.value(i, depth)
		if err != nil {
			return 0, err
		}
		c := &t.nodes[child]
		c.kstart, c.kend, c.kesc = int32(kstart), int32(kend), kesc
		if last < 0 {
			t.nodes[idx].first = child
		} else {
			t.nodes[last].next = child
		}
		last = child
		t.keys = append(t.keys, child)
		i = jsonSkipSpace(src, end)
		if i >= len(src) {
			return 0, errJSONSyntax
		}
		if src[i] == '}' {
			if err := t.checkDuplicates(t.keys[mark:]); err != nil {
				return 0, err
			}
			return i + 1, nil
		}
		if src[i] != ',' {
			return 0, errJSONSyntax
		}
		i = jsonSkipSpace(src, i+1)
	}
}

var errDuplicateKey = errors.New("JSON object has a duplicate key")

// checkDuplicates refuses an object whose members repeat a key.
func (t *jtree) checkDuplicates(members []int32) error {
	if len(members) < 2 {
		return nil
	}
	escaped := false
	for _, m := range members {
		if t.nodes[m].kesc {
			escaped = true
			break
		}
	}
	if !escaped && len(members) <= 16 {
		for a := 1; a < len(members); a++ {
			ka := t.rawKey(members[a])
			for b := 0; b < a; b++ {
				if bytes.Equal(ka, t.rawKey(members[b])) {
					return errDuplicateKey
				}
			}
		}
		return nil
	}
	keys := make([]string, len(members))
	for k, m := range members {
		keys[k] = t.key(m)
	}
	sort.Strings(keys)
	for k := 1; k < len(keys); k++ {
		if keys[k] == keys[k-1] {
			return errDuplicateKey
		}
	}
	return nil
}

func (t *jtree) array(idx int32, i, depth int) (int, error) {
	src := t.src
	i = jsonSkipSpace(src, i+1)
	if i < len(src) && src[i] == ']' {
		return i + 1, nil
	}
	last := int32(-1)
	for {
		child, end, err := t.value(i, depth)
		if err != nil {
			return 0, err
		}
		if last < 0 {
			t.nodes[idx].first = child
		} else {
			t.nodes[last].next = child
		}
		last = child
		i = jsonSkipSpace(src, end)
		if i >= len(src) {
			return 0, errJSONSyntax
		}
		if src[i] == ']' {
			return i + 1, nil
		}
		if src[i] != ',' {
			return 0, errJSONSyntax
		}
		i = jsonSkipSpace(src, i+1)
	}
}

// jsonScanString returns the offset after the string starting at i (a quote)
// and whether it holds escapes. Escapes are checked; control characters
// are refused.
func jsonScanString(b []byte, i int) (int, bool, error) {
	esc := false
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			i++
			if i >= len(b) {
				return 0, false, errJSONSyntax
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, false, errJSONSyntax
				}
				for k := 1; k <= 4; k++ {
					if !jsonIsHex(b[i+k]) {
						return 0, false, errJSONSyntax
					}
				}
				i += 4
			default:
				return 0, false, errJSONSyntax
			}
		case c < 0x20:
			return 0, false, errJSONSyntax
		}
	}
	return 0, false, errJSONSyntax
}

func jsonIsHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func jsonScanNumber(b []byte, i int) (int, error) {
	digits := func() bool {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > s
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return 0, errJSONSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, errJSONSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, errJSONSyntax
		}
	}
	return i, nil
}

// rawKey is the bytes between a member key's quotes (escapes undecoded).
func (t *jtree) rawKey(m int32) []byte {
	n := &t.nodes[m]
	return t.src[n.kstart+1 : n.kend-1]
}

// key is a member's decoded key.
func (t *jtree) key(m int32) string {
	n := &t.nodes[m]
	if !n.kesc {
		return string(t.src[n.kstart+1 : n.kend-1])
	}
	return jsonUnquote(t.src[n.kstart:n.kend])
}

// keyIs reports whether member m's key is exactly k.
func (t *jtree) keyIs(m int32, k string) bool {
	n := &t.nodes[m]
	if n.kstart < 0 {
		return false
	}
	if !n.kesc {
		return string(t.src[n.kstart+1:n.kend-1]) == k
	}
	return t.key(m) == k
}

// get returns the member of object o whose key is exactly k, or -1.
func (t *jtree) get(o int32, k string) int32 {
	if o < 0 || t.nodes[o].kind != jObject {
		return -1
	}
	for c := t.nodes[o].first; c >= 0; c = t.nodes[c].next {
		if t.keyIs(c, k) {
			return c
		}
	}
	return -1
}

// kind is node i's kind; -1 is treated as absent (null).
func (t *jtree) kind(i int32) jkind {
	if i < 0 {
		return jNull
	}
	return t.nodes[i].kind
}

// str decodes string node i.
func (t *jtree) str(i int32) string {
	n := &t.nodes[i]
	if !n.esc {
		return string(t.src[n.start+1 : n.end-1])
	}
	return jsonUnquote(t.src[n.start:n.end])
}

// scalar is the text of a scalar that redaction may erase: a string's
// decoded value or a number's spelling.
func (t *jtree) scalar(i int32) string {
	n := &t.nodes[i]
	if n.kind == jString {
		return t.str(i)
	}
	return string(t.src[n.start:n.end])
}

// int reads node i as an integer the way JavaScript would (5, 5.0, 5e0).
func (t *jtree) int(i int32) (int, bool) {
	if i < 0 || t.nodes[i].kind != jNumber {
		return 0, false
	}
	b := t.src[t.nodes[i].start:t.nodes[i].end]
	v := 0
	simple := len(b) > 0 && len(b) <= 15
	for _, c := range b {
		if c < '0' || c > '9' {
			simple = false
			break
		}
		v = v*10 + int(c-'0')
	}
	if simple {
		return v, true
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// jsonUnquote decodes a quoted JSON string the way encoding/json does.
func jsonUnquote(q []byte) string {
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return string(q)
	}
	return s
}

// jedit replaces src[start:end] with repl.
type jedit struct {
	start, end int32
	repl       []byte
}

// spliceEdits applies edits (any order, not overlapping) to src.
func spliceEdits(src []byte, edits []jedit) []byte {
	sort.Slice(edits, func(a, b int) bool { return edits[a].start < edits[b].start })
	size := len(src)
	for _, e := range edits {
		size += len(e.repl) - int(e.end-e.start)
	}
	out := make([]byte, 0, size)
	at := int32(0)
	for _, e := range edits {
		if e.start < at { // overlapping: keep the first (never produced)
			continue
		}
		out = append(out, src[at:e.start]...)
		out = append(out, e.repl...)
		at = e.end
	}
	return append(out, src[at:]...)
}

// jsonQuote encodes s as a JSON string.
func jsonQuote(s string) []byte {
	if utf8.ValidString(s) {
		simple := true
		for k := 0; k < len(s); k++ {
			if c := s[k]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
				simple = false
				break
			}
		}
		if simple {
			b := make([]byte, 0, len(s)+2)
			b = append(b, '"')
			b = append(b, s...)
			return append(b, '"')
		}
	}
	b, _ := json.Marshal(s)
	return b
}

// memberSpan is the span that deleting member m from its object removes,
// with the comma that separated it from a neighbour.
func (t *jtree) memberSpan(obj, m int32) (int32, int32) {
	n := &t.nodes[m]
	if n.next >= 0 { // delete through the next member's key
		return n.kstart, t.nodes[n.next].kstart
	}
	var prev int32 = -1
	for c := t.nodes[obj].first; c >= 0 && c != m; c = t.nodes[c].next {
		prev = c
	}
	if prev < 0 { // the only member
		return n.kstart, n.end
	}
	return t.nodes[prev].end, n.end
}
