package jsonspan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// Moved from redact/css_test.go (TestJTreeAgreesWithEncodingJSON) with
// the parser.
func TestParseAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n","d":-0.5e+3,"e":true,"f":false}`,
		` {"a" : 1 } `, `"x"`, `0`, `-0`, `1.5E3`,
		`{"a":1,}`, `[1,]`, `{"a"}`, `01`, `1.`, `.5`, `"\x"`, "\"a\tb\"", `{"a":1}x`, `[`, `nul`, `"\ud800"`,
	} {
		var d Doc
		err := d.Parse([]byte(s))
		if (err == nil) != json.Valid([]byte(s)) {
			t.Errorf("%q: Parse err %v, json.Valid %v", s, err, json.Valid([]byte(s)))
		}
	}
}

// TestNestingBound: MaxDepth counts arrays and objects, as encoding/json's
// limit does (10,000 nested containers are valid, 10,001 are not).
func TestNestingBound(t *testing.T) {
	nest := func(n int, inner string) []byte {
		return []byte(strings.Repeat("[", n) + inner + strings.Repeat("]", n))
	}
	for _, c := range []struct {
		max, n int
		ok     bool
	}{{0, 10000, true}, {0, 10001, false}, {3, 3, true}, {3, 4, false}} {
		var d Doc
		d.MaxDepth = c.max
		b := nest(c.n, "1")
		if err := d.Parse(b); (err == nil) != c.ok {
			t.Errorf("MaxDepth %d, %d arrays: err %v", c.max, c.n, err)
		}
		if c.max == 0 && json.Valid(b) != c.ok {
			t.Errorf("%d arrays: json.Valid disagrees", c.n)
		}
	}
}

func TestSyntaxErrorsNameOffsetAndReason(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":3`, "offset 9: unterminated object"},
		{`{"a":1} x`, "offset 8: data after the top-level value"},
		{`[1,]`, `offset 3: invalid character ']' looking for a value`},
		{"\"a\x01\"", "offset 2: control character in string"},
		{`{"a" 1}`, "offset 5: expected : after a member name"},
	} {
		var d Doc
		err := d.Parse([]byte(c.in))
		var se *SyntaxError
		if !errors.As(err, &se) || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

func TestUniqueAndGet(t *testing.T) {
	src := []byte(`{"a":1,"\u0061":2}`)
	var d Doc
	if err := d.Parse(src); err != nil {
		t.Fatal(err)
	}
	if n, _ := d.Int(d.Get(0, "a")); n != 2 {
		t.Errorf("Get answered %d, want the last member (2), as JSON.parse keeps", n)
	}
	d.Unique = true
	if err := d.Parse(src); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("Unique: %v, want ErrDuplicateKey (escaped spelling of one key)", err)
	}
	if err := d.Parse([]byte(`{"a":1,"A":2}`)); err != nil {
		t.Errorf("keys are case-sensitive: %v", err)
	}
}

func TestInt(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{{"5", 5, true}, {"-5", -5, true}, {"5.0", 5, true}, {"5e0", 5, true}, {"5.5", 0, false},
		{"9223372036854775807", 1<<63 - 1, true}, {"1e19", 0, false}, {`"5"`, 0, false}} {
		var d Doc
		if err := d.Parse([]byte(c.in)); err != nil {
			t.Fatal(err)
		}
		if n, ok := d.Int(0); n != c.want || ok != c.ok {
			t.Errorf("Int(%s) = %d, %v; want %d, %v", c.in, n, ok, c.want, c.ok)
		}
	}
}

// FuzzParse: Parse accepts exactly what encoding/json accepts (a Unique
// document may refuse only for a duplicate key), every string and key
// decodes as json.Unmarshal decodes it (when it is valid UTF-8), and Splice with no edits gives the
// input back. (Moved from redact's FuzzJTree, which held the first two.)
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"type":3,"data":{"source":0,"texts":[{"id":1,"value":"x"}]}}`, `[1,"a",{"b":[]}]`, `{"a":"\u0041"}`,
		`"\ud800\u0000<>&"`, "\"\xff\\n\"", `{"a":1,"a":2}`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, unique bool) {
		d := Doc{Unique: unique}
		err := d.Parse(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("Parse accepted invalid JSON %q", b)
		}
		if err != nil {
			if json.Valid(b) && !(unique && errors.Is(err, ErrDuplicateKey)) {
				t.Fatalf("Parse refused valid JSON %q: %v", b, err)
			}
			return
		}
		for i := range d.Nodes {
			n := &d.Nodes[i]
			if n.Kind == String && utf8.Valid(d.Src[n.Start:n.End]) { // invalid UTF-8 is kept (Unescape)
				var want string
				if json.Unmarshal(d.Src[n.Start:n.End], &want) != nil {
					t.Fatalf("node %d is no JSON string", i)
				}
				if got, _ := d.Str(int32(i)); got != want {
					t.Fatalf("Str = %q, json.Unmarshal = %q", got, want)
				}
			}
			if n.KeyStart >= 0 && utf8.Valid(d.Src[n.KeyStart:n.KeyEnd]) {
				var want string
				if json.Unmarshal(d.Src[n.KeyStart:n.KeyEnd], &want) != nil || d.Key(int32(i)) != want {
					t.Fatalf("Key = %q, json.Unmarshal = %q", d.Key(int32(i)), want)
				}
			}
		}
		if string(Splice(b, nil)) != string(b) {
			t.Fatal("Splice without edits changed the input")
		}
	})
}

// TestScanStringStopsAnywhere: the eight-bytes-at-a-time skip stops at a
// quote, a backslash or a control character in any position of a word.
func TestScanStringStopsAnywhere(t *testing.T) {
	for n := 0; n < 40; n++ {
		for p := 0; p < n; p++ {
			for _, stop := range []byte{'"', '\\', 0x00, 0x1f, 0x7f, 0x80, 0xff, '!', ']'} {
				body := []byte(strings.Repeat("A", n))
				body[p] = stop
				src := append(append([]byte{'"'}, body...), '"')
				var d Doc
				err := d.Parse(src)
				if (err == nil) != json.Valid(src) {
					t.Fatalf("%q: Parse err %v, json.Valid %v", src, err, json.Valid(src))
				}
			}
		}
	}
}
