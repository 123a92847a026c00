package sourcemap

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// mapJSON writes a regular map with these sources, names and mappings.
func mapJSON(sources, names []string, mappings string) string {
	q := func(ss []string) string {
		if ss == nil {
			return "[]"
		}
		return `["` + strings.Join(ss, `","`) + `"]`
	}
	return fmt.Sprintf(`{"version":3,"file":"out.js","sources":%s,"names":%s,"mappings":%q}`, q(sources), q(names), mappings)
}

func mustParse(t *testing.T, data, base string) *Map {
	t.Helper()
	m, err := Parse([]byte(data), base)
	if err != nil {
		t.Fatalf("Parse(%s): %v", data, err)
	}
	return m
}

func TestDecodeVLQ(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		next int
	}{
		{"A", 0, 1}, {"B", 0, 1}, // B is -0
		{"C", 1, 1}, {"D", -1, 1},
		{"S", 9, 1}, {"M", 6, 1},
		{"gB", 16, 2}, {"hB", -16, 2},
		{"2H", 123, 2},
		{"AC", 0, 1}, // one value: stops after A
		{"+/////D", 1<<31 - 1, 7},
		{"//////D", -(1<<31 - 1), 7},
	} {
		got, next, err := decodeVLQ(c.in, 0)
		if err != nil || got != c.want || next != c.next {
			t.Errorf("decodeVLQ(%q) = %d, %d, %v; want %d, %d", c.in, got, next, err, c.want, c.next)
		}
	}
	for _, in := range []string{"", "g", "!", "g!", "gggggggA", "+/////H"} {
		if v, _, err := decodeVLQ(in, 0); err == nil {
			t.Errorf("decodeVLQ(%q) = %d, want an error", in, v)
		}
	}
}

// hand is a map written by hand:
//
//	line 0: AAAA  col 0 → a.js 0:0
//	        SAAS  col 9 → a.js 0:9 (S is 9)
//	        CAACC col 10 → a.js 0:10, name 1 "bar" (names count from 0)
//	        K     col 15, no source (K is 5)
//	line 1: nothing
//	line 2: AACA  col 0 → a.js 1:10 (the source line goes on from line 0's)
//	        MCAMD col 6 → b.js 1:16, name 0 "foo" (D is -1)
//	line 3: nothing (the trailing ;)
var hand = mapJSON([]string{"a.js", "b.js"}, []string{"foo", "bar"}, "AAAA,SAAS,CAACC,K;;AACA,MCAMD;")

func TestLookup(t *testing.T) {
	m := mustParse(t, hand, "")
	a, b := "a.js", "b.js"
	for _, c := range []struct {
		line, col int
		want      Position
		ok        bool
	}{
		{0, 0, Position{a, 0, 0, ""}, true},
		{0, 5, Position{a, 0, 0, ""}, true},
		{0, 9, Position{a, 0, 9, ""}, true},
		{0, 10, Position{a, 0, 10, "bar"}, true},
		{0, 14, Position{a, 0, 10, "bar"}, true},
		{0, 15, Position{}, false},
		{0, 1000, Position{}, false},
		{1, 0, Position{}, false},
		{2, 0, Position{a, 1, 10, ""}, true},
		{2, 5, Position{a, 1, 10, ""}, true},
		{2, 6, Position{b, 1, 16, "foo"}, true},
		{2, 1 << 40, Position{b, 1, 16, "foo"}, true},
		{3, 0, Position{}, false},
		{4, 0, Position{}, false},
		{-1, 0, Position{}, false},
		{0, -1, Position{}, false},
	} {
		got, ok := m.Lookup(c.line, c.col)
		if got != c.want || ok != c.ok {
			t.Errorf("Lookup(%d, %d) = %+v, %v; want %+v, %v", c.line, c.col, got, ok, c.want, c.ok)
		}
	}
	if m.File != "out.js" {
		t.Errorf("File = %q", m.File)
	}
	if got := strings.Join(m.Sources(), " "); got != "a.js b.js" {
		t.Errorf("Sources = %s", got)
	}
}

func TestLookupUnsortedAndEmptySegments(t *testing.T) {
	// Segments out of column order (col 10, then col 3) and empty ones
	// (",,") still read: the line is sorted.
	m := mustParse(t, mapJSON([]string{"a.js"}, nil, "UAAU,,PAAC"), "")
	for _, c := range []struct{ col, wantCol int }{{3, 11}, {9, 11}, {10, 10}, {20, 10}} {
		p, ok := m.Lookup(0, c.col)
		if !ok || p.Column != c.wantCol {
			t.Errorf("Lookup(0, %d) = %+v, %v; want column %d", c.col, p, ok, c.wantCol)
		}
	}
	if _, ok := m.Lookup(0, 2); ok {
		t.Error("Lookup(0, 2) found a mapping before the line's first")
	}
}

func TestSources(t *testing.T) {
	const base = "https://shop.example/static/js/app.min.js.map"
	for _, c := range []struct {
		root, src, base, want string
	}{
		{"", "a.js", base, "https://shop.example/static/js/a.js"},
		{"", "../src/a.js", base, "https://shop.example/static/src/a.js"},
		{"", "/abs/a.js", base, "https://shop.example/abs/a.js"},
		{"src", "a.js", base, "https://shop.example/static/js/src/a.js"},
		{"src/", "a.js", base, "https://shop.example/static/js/src/a.js"},
		{"/root", "a.js", base, "https://shop.example/root/a.js"},
		{"https://cdn.example/x", "a.js", base, "https://cdn.example/x/a.js"},
		{"src", "webpack:///./a.js", base, "webpack:///./a.js"},
		{"", "https://other.example/a.js", base, "https://other.example/a.js"},
		{"", "a.js", "", "a.js"},
		{"src", "a.js", "", "src/a.js"},
		{"", "a.js", "data:application/json,{}", "a.js"}, // an opaque base resolves nothing
	} {
		data := fmt.Sprintf(`{"version":3,"sourceRoot":%q,"sources":[%q],"names":[],"mappings":"AAAA"}`, c.root, c.src)
		m := mustParse(t, data, c.base)
		p, ok := m.Lookup(0, 0)
		if !ok || p.Source != c.want {
			t.Errorf("root %q, source %q, base %q: %q, %v; want %q", c.root, c.src, c.base, p.Source, ok, c.want)
		}
	}
	// A null source maps nowhere.
	m := mustParse(t, `{"version":3,"sources":[null,"b.js"],"names":[null],"mappings":"AAAAA,CCAAA"}`, "")
	if p, ok := m.Lookup(0, 0); ok {
		t.Errorf("a null source: %+v", p)
	}
	if p, ok := m.Lookup(0, 1); !ok || p.Source != "b.js" || p.Name != "" {
		t.Errorf("after a null source: %+v, %v", p, ok)
	}
}

func TestXSSIPrefix(t *testing.T) {
	m := mustParse(t, ")]}'\n"+hand, "")
	if p, ok := m.Lookup(2, 6); !ok || p.Name != "foo" {
		t.Errorf("%+v, %v", p, ok)
	}
}

func TestIndexMap(t *testing.T) {
	first := mapJSON([]string{"one.js"}, []string{"x"}, "AAAA,EAAEA")
	second := mapJSON([]string{"two.js"}, nil, "AAAA;AACA")
	data := fmt.Sprintf(`{"version":3,"file":"bundle.js","sections":[
		{"offset":{"line":0,"column":0},"map":%s},
		{"offset":{"line":1,"column":10},"map":%s}]}`, first, second)
	m := mustParse(t, data, "http://h/js/bundle.js.map")
	for _, c := range []struct {
		line, col int
		want      Position
		ok        bool
	}{
		{0, 0, Position{"http://h/js/one.js", 0, 0, ""}, true},
		{0, 3, Position{"http://h/js/one.js", 0, 2, "x"}, true},
		{1, 9, Position{}, false}, // the first section has no line 1
		{1, 10, Position{"http://h/js/two.js", 0, 0, ""}, true},
		{1, 50, Position{"http://h/js/two.js", 0, 0, ""}, true},
		{2, 0, Position{"http://h/js/two.js", 1, 0, ""}, true}, // columns count from 0 past the section's first line
		{3, 0, Position{}, false},
	} {
		got, ok := m.Lookup(c.line, c.col)
		if got != c.want || ok != c.ok {
			t.Errorf("Lookup(%d, %d) = %+v, %v; want %+v, %v", c.line, c.col, got, ok, c.want, c.ok)
		}
	}
	if got := strings.Join(m.Sources(), " "); got != "http://h/js/one.js http://h/js/two.js" {
		t.Errorf("Sources = %s", got)
	}
}

func TestParseErrors(t *testing.T) {
	one := []string{"a.js"}
	section := func(off, m string) string {
		return fmt.Sprintf(`{"version":3,"sections":[{"offset":%s,"map":%s}]}`, off, m)
	}
	for _, c := range []struct {
		name, data, want string
	}{
		{"not JSON", `{"version":3,`, "not a JSON source map"},
		{"not an object", `[]`, "not a JSON source map"},
		{"no version", `{"sources":[],"mappings":""}`, `no "version"`},
		{"version 2", `{"version":2,"sources":[],"mappings":""}`, `"version" is 2, want 3`},
		{"version as a string", `{"version":"3","sources":[],"mappings":""}`, `"version" is "3"`},
		{"no mappings", `{"version":3,"sources":[]}`, `no "mappings"`},
		{"sources not strings", `{"version":3,"sources":[1],"mappings":""}`, "not a JSON source map"},
		{"bad VLQ digit", mapJSON(one, nil, "AA!A"), `line 0, segment 0 (byte 0): '!' at byte 2 is not a base64 VLQ digit`},
		{"VLQ cut short", mapJSON(one, nil, "AAAg"), "ends in the middle"},
		{"VLQ too big", mapJSON(one, nil, "ggggggggA"), "does not fit in 32 bits"},
		{"two fields", mapJSON(one, nil, "AA"), "2 fields, want 1, 4 or 5"},
		{"six fields", mapJSON(one, []string{"n"}, "AAAAAA"), "more than 5 fields"},
		{"source index", mapJSON(one, nil, "AAAA;ACAA"), "line 1, segment 0 (byte 5): source index 1 out of range (1 sources)"},
		{"negative source", mapJSON(one, nil, "ADAA"), "source index -1 out of range"},
		{"no sources", mapJSON(nil, nil, "AAAA"), "source index 0 out of range (0 sources)"},
		{"name index", mapJSON(one, []string{"n"}, "AAAAA,CAAAC"), "line 0, segment 1 (byte 6): name index 1 out of range (1 names)"},
		{"negative column", mapJSON(one, nil, "D"), "generated column -1 out of range"},
		{"negative original line", mapJSON(one, nil, "AADA"), "original line -1 out of range"},
		{"negative original column", mapJSON(one, nil, "AAAD"), "original column -1 out of range"},
		{"sections and mappings", `{"version":3,"mappings":"","sections":[]}`, `both "sections" and "mappings"`},
		{"section with url", `{"version":3,"sections":[{"offset":{"line":0,"column":0},"url":"x.map"}]}`, `"url" are not supported`},
		{"section without offset", `{"version":3,"sections":[{"map":` + hand + `}]}`, `section 0: no "offset"`},
		{"section without map", section(`{"line":0,"column":0}`, "null"), `section 0: no "map"`},
		{"bad section map", section(`{"line":0,"column":0}`, mapJSON(one, nil, "AA")), "section 0: sourcemap: malformed source map: mappings"},
		{"nested index map", section(`{"line":0,"column":0}`, section(`{"line":0,"column":0}`, hand)), "nested index map"},
		{"negative offset", section(`{"line":-1,"column":0}`, hand), "offset -1:0 out of range"},
		{"sections out of order", `{"version":3,"sections":[{"offset":{"line":2,"column":0},"map":` + hand +
			`},{"offset":{"line":1,"column":5},"map":` + hand + `}]}`, "section 1: offset 1:5 before the previous section's 2:0"},
	} {
		m, err := Parse([]byte(c.data), "")
		if err == nil {
			t.Errorf("%s: parsed: %+v", c.name, m)
			continue
		}
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrMalformed and %q", c.name, err, c.want)
		}
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// only ever looks up positions within the map's sources and names.
func FuzzParse(f *testing.F) {
	f.Add([]byte(hand))
	f.Add([]byte(mapJSON([]string{"a.js"}, nil, "UAAU,,PAAC;;;gBAAgB,2HAA2H")))
	f.Add([]byte(`{"version":3,"sections":[{"offset":{"line":0,"column":0},"map":` + hand +
		`},{"offset":{"line":2,"column":3},"map":` + hand + `}]}`))
	f.Add([]byte(`{"version":3,"sources":[null],"names":[null],"sourceRoot":"x","mappings":"AAAAA"}`))
	f.Add([]byte(`)]}'` + "\n" + hand))
	f.Add([]byte("AAAA,SAAS,CAACC,K;;AACA,MCAMD;"))
	f.Add([]byte("gB2H+/////D;;;AAAAE"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// data as a whole map, and as the mappings of a map with two
		// sources and two names (so that the VLQ decoder sees it as is).
		mappings, _ := json.Marshal(string(data))
		for _, in := range [][]byte{data,
			[]byte(`{"version":3,"sources":["a.js","b.js"],"names":["x","y"],"mappings":` + string(mappings) + `}`)} {
			m, err := Parse(in, "https://h.example/js/x.js.map")
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("an error that is not ErrMalformed: %v", err)
				}
				continue
			}
			checkLookups(t, m)
			for _, s := range m.sections {
				checkLookups(t, s.m)
			}
		}
	})
}

// checkLookups looks up, on every line of m (up to a bound) and around
// every segment's column, and checks each result against m's tables.
func checkLookups(t *testing.T, m *Map) {
	sources := map[string]bool{}
	for _, s := range m.Sources() {
		sources[s] = true
	}
	names := map[string]bool{"": true}
	for _, n := range m.names {
		names[n] = true
	}
	for _, s := range m.sections {
		for _, n := range s.m.names {
			names[n] = true
		}
	}
	lines := len(m.lineStart)
	cols := []int{0, 1, 1 << 30}
	for _, seg := range m.segs {
		cols = append(cols, int(seg.genCol), int(seg.genCol)+1, int(seg.genCol)-1)
	}
	for _, s := range m.sections {
		lines = max(lines, s.line+len(s.m.lineStart)+1)
		cols = append(cols, s.col, s.col-1, s.col+1)
		for _, seg := range s.m.segs {
			cols = append(cols, s.col+int(seg.genCol))
		}
	}
	cols = cols[:min(len(cols), 200)]
	for line := -1; line <= min(lines, 200); line++ {
		for _, col := range cols {
			p, ok := m.Lookup(line, col)
			if !ok {
				if p != (Position{}) {
					t.Fatalf("Lookup(%d, %d) = %+v with false", line, col, p)
				}
				continue
			}
			if line < 0 || col < 0 || p.Line < 0 || p.Column < 0 || !sources[p.Source] || p.Source == "" || !names[p.Name] {
				t.Fatalf("Lookup(%d, %d) = %+v: out of range (sources %v)", line, col, p, m.Sources())
			}
		}
	}
}
