// Package sourcemap reads Source Map v3 files (ECMA-426) and maps positions
// in generated JavaScript back to the original sources, so a stack recorded
// from a minified bundle can be shown against the code as it was written.
//
// Parse reads a map — a regular one (version, sources, sourceRoot, names,
// mappings) or an index map made of "sections" — and Map.Lookup maps a
// 0-based generated line and column, as the Chrome DevTools Protocol
// reports them, to a 0-based original position. A Resolver fetches the map
// a script names in its sourceMappingURL, caches it and maps frames.
//
// A malformed map is an error wrapping ErrMalformed that says what is wrong
// and where; nothing in this package panics on input.
package sourcemap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
)

// ErrMalformed is wrapped by every error Parse returns for input that is
// not a Source Map v3 it can read.
var ErrMalformed = errors.New("sourcemap: malformed source map")

// Position is a place in an original source.
type Position struct {
	// Source is the original source's URL: the map's "sources" entry
	// prefixed with "sourceRoot" and resolved against the map's URL.
	Source string
	// Line and Column are 0-based.
	Line, Column int
	// Name is the original identifier at this place, from the map's
	// "names", or "". It names the token mapped here (for a call site, the
	// callee or the object it is called on), not the enclosing function.
	Name string
}

// Map is a parsed source map. It is read-only once parsed and safe for
// concurrent use.
type Map struct {
	// File is the map's "file" field: the generated file's name, often "".
	File string

	sources []string // resolved; "" for a null entry
	names   []string

	// A regular map: the segments of generated line i are
	// segs[lineStart[i]:lineStart[i+1]], sorted by generated column.
	segs      []segment
	lineStart []int32

	// An index map: its sections, sorted by offset.
	sections []section
}

// segment is one decoded mapping. src and name are -1 when absent.
type segment struct {
	genCol, src, line, col, name int32
}

type section struct {
	line, col int
	m         *Map
}

type rawMap struct {
	Version    json.RawMessage `json:"version"`
	File       *string         `json:"file"`
	SourceRoot *string         `json:"sourceRoot"`
	Sources    []*string       `json:"sources"`
	Names      []*string       `json:"names"`
	Mappings   *string         `json:"mappings"`
	Sections   []rawSection    `json:"sections"`
}

type rawSection struct {
	Offset *struct {
		Line   *int `json:"line"`
		Column *int `json:"column"`
	} `json:"offset"`
	URL *string         `json:"url"`
	Map json.RawMessage `json:"map"`
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// Parse reads a Source Map v3. baseURL is the URL the sources are resolved
// against: the map's own URL, or for an inline (data:) map the generated
// script's URL; "" leaves relative sources relative (prefixed with
// sourceRoot only).
//
// Index maps ("sections") are read when each section embeds its map;
// sections that point at another map with "url" are refused, as are
// nested index maps. A leading ")]}'" line (XSSI guard) is skipped.
func Parse(data []byte, baseURL string) (*Map, error) {
	if bytes.HasPrefix(data, []byte(")]}'")) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	var base *url.URL
	if baseURL != "" {
		if u, err := url.Parse(baseURL); err == nil && u.IsAbs() && u.Opaque == "" {
			base = u
		}
	}
	return parse(data, base, true)
}

func parse(data []byte, base *url.URL, top bool) (*Map, error) {
	var raw rawMap
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, malformed("not a JSON source map: %v", err)
	}
	if v := string(bytes.TrimSpace(raw.Version)); v != "3" {
		if v == "" {
			return nil, malformed(`no "version" (want 3)`)
		}
		return nil, malformed(`"version" is %s, want 3`, v)
	}
	m := &Map{}
	if raw.File != nil {
		m.File = *raw.File
	}
	if raw.Sections != nil {
		if !top {
			return nil, malformed("nested index map: a section's map has sections")
		}
		if raw.Mappings != nil {
			return nil, malformed(`index map has both "sections" and "mappings"`)
		}
		return m, m.parseSections(raw.Sections, base)
	}
	if raw.Mappings == nil {
		return nil, malformed(`no "mappings"`)
	}
	root := ""
	if raw.SourceRoot != nil {
		root = *raw.SourceRoot
	}
	m.sources = make([]string, len(raw.Sources))
	for i, s := range raw.Sources {
		if s != nil {
			m.sources[i] = resolveSource(base, root, *s)
		}
	}
	m.names = make([]string, len(raw.Names))
	for i, n := range raw.Names {
		if n != nil {
			m.names[i] = *n
		}
	}
	segs, lineStart, err := decodeMappings(*raw.Mappings, len(m.sources), len(m.names))
	if err != nil {
		return nil, err
	}
	m.segs, m.lineStart = segs, lineStart
	return m, nil
}

func (m *Map) parseSections(raws []rawSection, base *url.URL) error {
	m.sections = make([]section, 0, len(raws))
	for i, rs := range raws {
		if rs.URL != nil {
			return malformed("section %d: sections with \"url\" are not supported, only embedded \"map\"", i)
		}
		if rs.Offset == nil || rs.Offset.Line == nil || rs.Offset.Column == nil {
			return malformed("section %d: no \"offset\" with line and column", i)
		}
		line, col := *rs.Offset.Line, *rs.Offset.Column
		if line < 0 || col < 0 || line > math.MaxInt32 || col > math.MaxInt32 {
			return malformed("section %d: offset %d:%d out of range", i, line, col)
		}
		if n := len(m.sections); n > 0 {
			p := m.sections[n-1]
			if line < p.line || line == p.line && col < p.col {
				return malformed("section %d: offset %d:%d before the previous section's %d:%d", i, line, col, p.line, p.col)
			}
		}
		if len(rs.Map) == 0 || string(rs.Map) == "null" {
			return malformed("section %d: no \"map\"", i)
		}
		sub, err := parse(rs.Map, base, false)
		if err != nil {
			return fmt.Errorf("section %d: %w", i, err)
		}
		m.sections = append(m.sections, section{line: line, col: col, m: sub})
	}
	return nil
}

// resolveSource applies sourceRoot and the base URL to one "sources" entry.
// An absolute source URL (one with a scheme, such as webpack:///x.js) is
// kept as it is.
func resolveSource(base *url.URL, root, src string) string {
	if u, err := url.Parse(src); err == nil && u.IsAbs() {
		return src
	}
	if root != "" {
		if !strings.HasSuffix(root, "/") {
			root += "/"
		}
		src = root + src
	}
	if base == nil {
		return src
	}
	u, err := url.Parse(src)
	if err != nil {
		return src
	}
	return base.ResolveReference(u).String()
}

// Sources returns the map's resolved sources, in order ("" for a null
// entry); for an index map, those of every section.
func (m *Map) Sources() []string {
	if m.sections == nil {
		return append([]string(nil), m.sources...)
	}
	var out []string
	for _, s := range m.sections {
		out = append(out, s.m.sources...)
	}
	return out
}

// Lookup maps a 0-based generated line and column to the original
// position, using the closest mapping at or before col on that line. It
// reports false when the line has no such mapping, or when that mapping
// names no source.
func (m *Map) Lookup(line, col int) (Position, bool) {
	if line < 0 || col < 0 {
		return Position{}, false
	}
	if m.sections != nil {
		// The last section that starts at or before line:col.
		i := sort.Search(len(m.sections), func(i int) bool {
			s := m.sections[i]
			return s.line > line || s.line == line && s.col > col
		}) - 1
		if i < 0 {
			return Position{}, false
		}
		s := m.sections[i]
		if line == s.line {
			col -= s.col
		}
		return s.m.Lookup(line-s.line, col)
	}
	if line >= len(m.lineStart) {
		return Position{}, false
	}
	lo, hi := int(m.lineStart[line]), len(m.segs)
	if line+1 < len(m.lineStart) {
		hi = int(m.lineStart[line+1])
	}
	segs := m.segs[lo:hi]
	i := sort.Search(len(segs), func(i int) bool { return int(segs[i].genCol) > col }) - 1
	if i < 0 || segs[i].src < 0 {
		return Position{}, false
	}
	s := segs[i]
	src := m.sources[s.src]
	if src == "" {
		return Position{}, false
	}
	p := Position{Source: src, Line: int(s.line), Column: int(s.col)}
	if s.name >= 0 {
		p.Name = m.names[s.name]
	}
	return p, true
}

// base64 digit values; -1 for a byte that is not one.
var b64 = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	const digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(digits); i++ {
		t[digits[i]] = int8(i)
	}
	return t
}()

// decodeVLQ reads one base64 VLQ starting at s[i]: it returns the value
// and the index after it. Values must fit in 32 bits, as the format says.
func decodeVLQ(s string, i int) (int64, int, error) {
	var v uint64
	for shift := uint(0); ; shift += 5 {
		if i >= len(s) {
			return 0, i, errors.New("VLQ ends in the middle of a value")
		}
		d := b64[s[i]]
		if d < 0 {
			return 0, i, fmt.Errorf("%q at byte %d is not a base64 VLQ digit", s[i], i)
		}
		i++
		if shift > 30 {
			return 0, i, errors.New("VLQ value does not fit in 32 bits")
		}
		v |= uint64(d&31) << shift
		if d&32 == 0 {
			break
		}
	}
	if v > 1<<32-1 {
		return 0, i, errors.New("VLQ value does not fit in 32 bits")
	}
	n := int64(v >> 1)
	if v&1 != 0 {
		n = -n
	}
	return n, i, nil
}

// decodeMappings decodes a "mappings" string, checking every index and
// position, and sorts each line's segments by generated column.
func decodeMappings(s string, nSources, nNames int) ([]segment, []int32, error) {
	var (
		segs      []segment
		lineStart = []int32{0}
		// Every field but the generated column carries over from segment
		// to segment, across lines.
		genCol, src, oline, ocol, name int64
		line, nseg                     int
		sorted                         = true
	)
	endLine := func() {
		if !sorted {
			l := segs[lineStart[len(lineStart)-1]:]
			sort.SliceStable(l, func(a, b int) bool { return l[a].genCol < l[b].genCol })
		}
		sorted = true
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			endLine()
			if len(segs) > math.MaxInt32 || len(lineStart) >= math.MaxInt32 {
				return nil, nil, malformed("mappings: too many segments")
			}
			lineStart = append(lineStart, int32(len(segs)))
			line++
			nseg, genCol = 0, 0
			i++
			continue
		case ',':
			i++
			continue
		}
		start := i
		bad := func(format string, args ...any) error {
			return malformed("mappings: line %d, segment %d (byte %d): %s", line, nseg, start, fmt.Sprintf(format, args...))
		}
		var f [5]int64
		n := 0
		for i < len(s) && s[i] != ',' && s[i] != ';' {
			if n == 5 {
				return nil, nil, bad("more than 5 fields")
			}
			v, next, err := decodeVLQ(s, i)
			if err != nil {
				return nil, nil, bad("%v", err)
			}
			f[n], i = v, next
			n++
		}
		if n != 1 && n != 4 && n != 5 {
			return nil, nil, bad("%d fields, want 1, 4 or 5", n)
		}
		prev := genCol
		genCol += f[0]
		if genCol < 0 || genCol > math.MaxInt32 {
			return nil, nil, bad("generated column %d out of range", genCol)
		}
		if nseg > 0 && genCol < prev {
			sorted = false
		}
		seg := segment{genCol: int32(genCol), src: -1, name: -1}
		if n >= 4 {
			src += f[1]
			oline += f[2]
			ocol += f[3]
			switch {
			case src < 0 || src >= int64(nSources):
				return nil, nil, bad("source index %d out of range (%d sources)", src, nSources)
			case oline < 0 || oline > math.MaxInt32:
				return nil, nil, bad("original line %d out of range", oline)
			case ocol < 0 || ocol > math.MaxInt32:
				return nil, nil, bad("original column %d out of range", ocol)
			}
			seg.src, seg.line, seg.col = int32(src), int32(oline), int32(ocol)
		}
		if n == 5 {
			name += f[4]
			if name < 0 || name >= int64(nNames) {
				return nil, nil, bad("name index %d out of range (%d names)", name, nNames)
			}
			seg.name = int32(name)
		}
		segs = append(segs, seg)
		nseg++
	}
	endLine()
	return segs, lineStart, nil
}
