// Package jsonspan is flightrec's one span parser for JSON: a small,
// strict parser that builds a tree of byte spans into its input instead of
// values. Redaction (redact) and the DOM player (playback/dom) read every
// rrweb event through it, for three reasons encoding/json cannot meet:
//
//   - Nothing is copied: a value is decoded only when it is read, and the
//     node slice is reused from document to document, so a hot path that
//     reads a few fields of a large event allocates almost nothing.
//   - Every byte keeps its place: redaction rewrites an event by splicing
//     replacements into the spans it erases (Splice), so every byte it
//     does not change (members it does not model, number spellings, key
//     order) survives exactly; the player keeps attribute order, so a
//     rendering never depends on map iteration.
//   - Keys are matched exactly, as JavaScript's JSON.parse matches them
//     (encoding/json's struct matching folds case), and a syntax error
//     names its offset and reason.
//
// Validation is that of encoding/json: Parse accepts exactly what
// json.Valid accepts (up to MaxDepth nesting), and a decoded string is the
// string json.Unmarshal would give, lone surrogates as U+FFFD (invalid
// UTF-8 bytes are kept as they are; see Unescape).
package jsonspan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is a value's JSON type.
type Kind uint8

const (
	Null Kind = iota
	False
	True
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"null", "a boolean", "a boolean", "a number", "a string", "an array", "an object"}

// Node is one value. Spans are [start, end) byte offsets into the source;
// a string's span includes its quotes. A member of an object also has its
// key's span (quotes included; -1 when the node is no member). Children
// are linked through First and Next (-1: none).
type Node struct {
	Kind             Kind
	Esc              bool // the string value holds backslash escapes
	KeyEsc           bool // the member key holds backslash escapes
	Start, End       int32
	KeyStart, KeyEnd int32
	First, Next      int32
}

// DefaultMaxDepth is encoding/json's nesting limit.
const DefaultMaxDepth = 10000

// Doc is a parsed document; node 0 is the root. A Doc is reused from
// document to document to keep parsing allocation-free; the zero Doc is
// ready to use.
type Doc struct {
	Src   []byte
	Nodes []Node

	// MaxDepth bounds the nesting of arrays and objects (0: DefaultMaxDepth),
	// so that hostile input cannot exhaust the stack of the recursive parser
	// or of a recursive reader.
	MaxDepth int
	// Unique refuses an object that repeats a key (ErrDuplicateKey). With
	// duplicates, what one reader takes (JSON.parse keeps the last,
	// others the first) and what a check looked at could differ. Without
	// it, Get answers the last, as JSON.parse does.
	Unique bool

	keys []int32 // scratch for duplicate-key checks
	pos  int     // offset of a syntax error
}

// SyntaxError is input that is not JSON: where and why.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// ErrDuplicateKey is an object that repeats a key, refused when Doc.Unique.
var ErrDuplicateKey = errors.New("JSON object has a duplicate key")

// Parse parses src into d, replacing what d held. d keeps src (Src) until
// the next Parse or Release.
func (d *Doc) Parse(src []byte) error {
	if len(src) > math.MaxInt32-1 {
		return &SyntaxError{0, "document too large"}
	}
	d.Src = src
	d.Nodes = d.Nodes[:0]
	i := SkipSpace(src, 0)
	_, i, err := d.value(i, 0)
	if err != nil {
		return err
	}
	if i = SkipSpace(src, i); i != len(src) {
		return &SyntaxError{i, "data after the top-level value"}
	}
	return nil
}

// Release lets go of the source, and of the node slice when it grew past
// keep nodes: a large document's arena is not pinned until the next small
// one.
func (d *Doc) Release(keep int) {
	d.Src = nil
	if cap(d.Nodes) > keep {
		d.Nodes = nil
	}
}

// SkipSpace returns the offset of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func fail(off int, msg string) (int32, int, error) { return -1, 0, &SyntaxError{off, msg} }

// value parses the value at i and returns its node index and the offset
// after it.
func (d *Doc) value(i, depth int) (int32, int, error) {
	src := d.Src
	if i >= len(src) {
		return fail(i, "unexpected end of input")
	}
	idx := int32(len(d.Nodes))
	d.Nodes = append(d.Nodes, Node{Start: int32(i), KeyStart: -1, KeyEnd: -1, First: -1, Next: -1})
	var n Node
	switch c := src[i]; {
	case c == '{' || c == '[':
		max := d.MaxDepth
		if max <= 0 {
			max = DefaultMaxDepth
		}
		if depth >= max {
			return fail(i, "nesting too deep")
		}
		var end int
		var err error
		if c == '{' {
			end, err = d.object(idx, i, depth+1)
		} else {
			end, err = d.array(idx, i, depth+1)
		}
		if err != nil {
			return -1, 0, err
		}
		n = d.Nodes[idx]
		n.Kind, n.End = Object, int32(end)
		if c == '[' {
			n.Kind = Array
		}
	case c == '"':
		end, esc, err := ScanString(src, i)
		if err != nil {
			return -1, 0, err
		}
		n = d.Nodes[idx]
		n.Kind, n.End, n.Esc = String, int32(end), esc
	case c == 't':
		if !bytes.HasPrefix(src[i:], []byte("true")) {
			return fail(i, "invalid literal")
		}
		n = d.Nodes[idx]
		n.Kind, n.End = True, int32(i+4)
	case c == 'f':
		if !bytes.HasPrefix(src[i:], []byte("false")) {
			return fail(i, "invalid literal")
		}
		n = d.Nodes[idx]
		n.Kind, n.End = False, int32(i+5)
	case c == 'n':
		if !bytes.HasPrefix(src[i:], []byte("null")) {
			return fail(i, "invalid literal")
		}
		n = d.Nodes[idx]
		n.Kind, n.End = Null, int32(i+4)
	case c == '-' || (c >= '0' && c <= '9'):
		end, err := ScanNumber(src, i)
		if err != nil {
			return -1, 0, err
		}
		n = d.Nodes[idx]
		n.Kind, n.End = Number, int32(end)
	default:
		return fail(i, fmt.Sprintf("invalid character %q looking for a value", c))
	}
	d.Nodes[idx] = n
	return idx, int(n.End), nil
}

func (d *Doc) object(idx int32, i, depth int) (int, error) {
	src := d.Src
	i = SkipSpace(src, i+1)
	if i < len(src) && src[i] == '}' {
		return i + 1, nil
	}
	last := int32(-1)
	mark := len(d.keys)
	defer func() { d.keys = d.keys[:mark] }()
	for {
		if i >= len(src) || src[i] != '"' {
			return 0, &SyntaxError{i, "expected a member name"}
		}
		kstart := i
		kend, kesc, err := ScanString(src, i)
		if err != nil {
			return 0, err
		}
		i = SkipSpace(src, kend)
		if i >= len(src) || src[i] != ':' {
			return 0, &SyntaxError{i, "expected : after a member name"}
		}
		i = SkipSpace(src, i+1)
		child, end, err := d.value(i, depth)
		if err != nil {
			return 0, err
		}
		c := &d.Nodes[child]
		c.KeyStart, c.KeyEnd, c.KeyEsc = int32(kstart), int32(kend), kesc
		if last < 0 {
			d.Nodes[idx].First = child
		} else {
			d.Nodes[last].Next = child
		}
		last = child
		if d.Unique {
			d.keys = append(d.keys, child)
		}
		i = SkipSpace(src, end)
		if i >= len(src) {
			return 0, &SyntaxError{i, "unterminated object"}
		}
		if src[i] == '}' {
			if d.Unique {
				if err := d.checkDuplicates(d.keys[mark:]); err != nil {
					return 0, err
				}
			}
			return i + 1, nil
		}
		if src[i] != ',' {
			return 0, &SyntaxError{i, "expected , or } in object"}
		}
		i = SkipSpace(src, i+1)
	}
}

// checkDuplicates refuses an object whose members repeat a key.
func (d *Doc) checkDuplicates(members []int32) error {
	if len(members) < 2 {
		return nil
	}
	escaped := false
	for _, m := range members {
		if d.Nodes[m].KeyEsc {
			escaped = true
			break
		}
	}
	if !escaped && len(members) <= 16 {
		for a := 1; a < len(members); a++ {
			ka := d.RawKey(members[a])
			for b := 0; b < a; b++ {
				if bytes.Equal(ka, d.RawKey(members[b])) {
					return ErrDuplicateKey
				}
			}
		}
		return nil
	}
	keys := make([]string, len(members))
	for k, m := range members {
		keys[k] = d.Key(m)
	}
	sort.Strings(keys)
	for k := 1; k < len(keys); k++ {
		if keys[k] == keys[k-1] {
			return ErrDuplicateKey
		}
	}
	return nil
}

func (d *Doc) array(idx int32, i, depth int) (int, error) {
	src := d.Src
	i = SkipSpace(src, i+1)
	if i < len(src) && src[i] == ']' {
		return i + 1, nil
	}
	last := int32(-1)
	for {
		child, end, err := d.value(i, depth)
		if err != nil {
			return 0, err
		}
		if last < 0 {
			d.Nodes[idx].First = child
		} else {
			d.Nodes[last].Next = child
		}
		last = child
		i = SkipSpace(src, end)
		if i >= len(src) {
			return 0, &SyntaxError{i, "unterminated array"}
		}
		if src[i] == ']' {
			return i + 1, nil
		}
		if src[i] != ',' {
			return 0, &SyntaxError{i, "expected , or ] in array"}
		}
		i = SkipSpace(src, i+1)
	}
}

// ScanString returns the offset after the string starting at b[i] (a
// quote) and whether it holds escapes. Escapes are checked; control
// characters are refused.
//
// A base64 image or a long text is one string of tens of kilobytes with
// nothing to stop at, so the next quote and backslash are found with
// bytes.IndexByte (vectorized) and the run between is checked for control
// characters a word at a time. No search goes past the string's quote,
// and each starts where the last stopped, so a string with many escapes
// is still scanned once.
func ScanString(b []byte, i int) (int, bool, error) {
	// Most strings are short (keys, tag names, ids): a plain loop over the
	// first bytes answers them without the searches' call overhead.
	i++
	for lim := min(len(b), i+16); i < lim; i++ {
		if c := b[i]; c == '"' {
			return i + 1, false, nil
		} else if c == '\\' || c < 0x20 {
			break
		}
	}
	esc := false
	quote := -1 // the next quote at or after i (len(b): none)
	for {
		if quote < i {
			if quote = bytes.IndexByte(b[i:], '"'); quote < 0 {
				quote = len(b)
			} else {
				quote += i
			}
		}
		end := quote // a backslash is looked for only before the quote
		if k := bytes.IndexByte(b[i:quote], '\\'); k >= 0 {
			end = i + k
		}
		if c := firstControl(b[i:end]); c >= 0 {
			return 0, false, &SyntaxError{i + c, "control character in string"}
		}
		i = end
		if i >= len(b) {
			return 0, false, &SyntaxError{i, "unterminated string"}
		}
		if b[i] == '"' {
			return i + 1, esc, nil
		}
		esc = true
		if i+1 >= len(b) {
			return 0, false, &SyntaxError{i, "unterminated string"}
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(b) {
				return 0, false, &SyntaxError{i, "invalid \\u escape"}
			}
			for _, h := range b[i+2 : i+6] {
				if Unhex(h) < 0 {
					return 0, false, &SyntaxError{i, "invalid \\u escape"}
				}
			}
			i += 6
		default:
			return 0, false, &SyntaxError{i, "invalid escape in string"}
		}
	}
}

// firstControl is the index of the first byte of b below 0x20, or -1. It
// tests four words at a time (a byte below 0x20 is the classic SWAR
// "has less than" test) and finds the byte itself only in the block that
// has one.
func firstControl(b []byte) int {
	const ones, highs, bound = 0x0101010101010101, 0x8080808080808080, 0x0101010101010101 * 0x20
	k := 0
	for ; k+32 <= len(b); k += 32 {
		w := b[k : k+32 : k+32]
		x0 := binary.LittleEndian.Uint64(w[0:8])
		x1 := binary.LittleEndian.Uint64(w[8:16])
		x2 := binary.LittleEndian.Uint64(w[16:24])
		x3 := binary.LittleEndian.Uint64(w[24:32])
		if ((x0-bound)&^x0|(x1-bound)&^x1|(x2-bound)&^x2|(x3-bound)&^x3)&highs != 0 {
			break
		}
	}
	for ; k < len(b); k++ {
		if b[k] < 0x20 {
			return k
		}
	}
	return -1
}

// ScanNumber returns the offset after the number starting at b[i].
func ScanNumber(b []byte, i int) (int, error) {
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
		return 0, &SyntaxError{i, "invalid number"}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, &SyntaxError{i, "invalid number"}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, &SyntaxError{i, "invalid number"}
		}
	}
	return i, nil
}

// Unhex is hex digit c's value, or -1.
func Unhex(c byte) rune {
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

func hex4(b []byte) rune {
	return Unhex(b[0])<<12 | Unhex(b[1])<<8 | Unhex(b[2])<<4 | Unhex(b[3])
}

// Unescape decodes the body of a string that ScanString accepted (between
// its quotes) as json.Unmarshal does, lone surrogates becoming U+FFFD,
// except that invalid UTF-8 bytes are kept as they are, as they are in a
// string without escapes (which is used as it stands): a reader sees the
// same bytes whether or not a string holds an escape. Ingest replaces
// invalid UTF-8 before anything is stored.
func Unescape(b []byte) string {
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

// Unquote decodes a quoted string token that ScanString accepted.
func Unquote(q []byte, esc bool) string {
	if !esc {
		return string(q[1 : len(q)-1])
	}
	return Unescape(q[1 : len(q)-1])
}

// Accessors. Each takes an index that may be -1 (absent) and answers as
// for an absent value.

// Kind is node i's kind; an absent node (-1) reads as Null.
func (d *Doc) Kind(i int32) Kind {
	if i < 0 {
		return Null
	}
	return d.Nodes[i].Kind
}

// Is reports whether node i is present and of kind k.
func (d *Doc) Is(i int32, k Kind) bool { return i >= 0 && d.Nodes[i].Kind == k }

// IsBool reports whether node i is true or false.
func (d *Doc) IsBool(i int32) bool {
	return i >= 0 && (d.Nodes[i].Kind == True || d.Nodes[i].Kind == False)
}

// KindName names node i's kind for an error message ("missing" when absent).
func (d *Doc) KindName(i int32) string {
	if i < 0 {
		return "missing"
	}
	return kindNames[d.Nodes[i].Kind]
}

// RawKey is the bytes between member m's key quotes (escapes undecoded).
func (d *Doc) RawKey(m int32) []byte {
	n := &d.Nodes[m]
	return d.Src[n.KeyStart+1 : n.KeyEnd-1]
}

// Key is member m's decoded key.
func (d *Doc) Key(m int32) string {
	n := &d.Nodes[m]
	return Unquote(d.Src[n.KeyStart:n.KeyEnd], n.KeyEsc)
}

// KeyIs reports whether member m's key is exactly k.
func (d *Doc) KeyIs(m int32, k string) bool {
	n := &d.Nodes[m]
	if n.KeyStart < 0 {
		return false
	}
	if !n.KeyEsc {
		return string(d.Src[n.KeyStart+1:n.KeyEnd-1]) == k
	}
	return d.Key(m) == k
}

// Get returns the member of object o whose key is exactly k, or -1. Of
// repeated keys it answers the last, as JSON.parse keeps (a Unique
// document has none, so the search stops at the first).
func (d *Doc) Get(o int32, k string) int32 {
	if o < 0 || d.Nodes[o].Kind != Object {
		return -1
	}
	found := int32(-1)
	for c := d.Nodes[o].First; c >= 0; c = d.Nodes[c].Next {
		if d.KeyIs(c, k) {
			if d.Unique {
				return c
			}
			found = c
		}
	}
	return found
}

// Str decodes string node i; false when i is no string.
func (d *Doc) Str(i int32) (string, bool) {
	if i < 0 || d.Nodes[i].Kind != String {
		return "", false
	}
	n := &d.Nodes[i]
	return Unquote(d.Src[n.Start:n.End], n.Esc), true
}

// Raw is node i's source text.
func (d *Doc) Raw(i int32) []byte {
	n := &d.Nodes[i]
	return d.Src[n.Start:n.End]
}

// Scalar is the text of a string or number: a string's decoded value, a
// number's spelling.
func (d *Doc) Scalar(i int32) string {
	if s, ok := d.Str(i); ok {
		return s
	}
	return string(d.Raw(i))
}

// Int reads number node i as an integer that fits in an int64, the way a
// reader of JSON numbers would: 5, 5.0 and 5e0 are all 5.
func (d *Doc) Int(i int32) (int64, bool) {
	if i < 0 || d.Nodes[i].Kind != Number {
		return 0, false
	}
	b := d.Raw(i)
	if len(b) <= 18 { // fast path: plain digits cannot overflow
		var v int64
		neg := b[0] == '-'
		k := 0
		if neg {
			k = 1
		}
		simple := k < len(b)
		for ; k < len(b); k++ {
			c := b[k]
			if c < '0' || c > '9' {
				simple = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if simple {
			if neg {
				v = -v
			}
			return v, true
		}
	}
	lit := string(b)
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// MemberSpan is the span that deleting member m from object obj removes,
// with the comma that separated it from a neighbour.
func (d *Doc) MemberSpan(obj, m int32) (int32, int32) {
	n := &d.Nodes[m]
	if n.Next >= 0 { // delete through the next member's key
		return n.KeyStart, d.Nodes[n.Next].KeyStart
	}
	var prev int32 = -1
	for c := d.Nodes[obj].First; c >= 0 && c != m; c = d.Nodes[c].Next {
		prev = c
	}
	if prev < 0 { // the only member
		return n.KeyStart, n.End
	}
	return d.Nodes[prev].End, n.End
}

// Edit replaces src[Start:End] with Repl.
type Edit struct {
	Start, End int32
	Repl       []byte
}

// Splice applies edits (any order, not overlapping) to src, into a new
// slice.
func Splice(src []byte, edits []Edit) []byte {
	sort.Slice(edits, func(a, b int) bool { return edits[a].Start < edits[b].Start })
	size := len(src)
	for _, e := range edits {
		size += len(e.Repl) - int(e.End-e.Start)
	}
	out := make([]byte, 0, size)
	at := int32(0)
	for _, e := range edits {
		if e.Start < at { // overlapping: keep the first (never produced)
			continue
		}
		out = append(out, src[at:e.Start]...)
		out = append(out, e.Repl...)
		at = e.End
	}
	return append(out, src[at:]...)
}

// Quote encodes s as a JSON string, as encoding/json does (HTML
// characters escaped, invalid UTF-8 as U+FFFD), without its cost for the
// plain ASCII most values are.
func Quote(s string) []byte {
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
