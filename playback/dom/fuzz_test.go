package dom

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	nethtml "golang.org/x/net/html"
)

// FuzzApply feeds arbitrary events (one per line) after a valid full
// snapshot. Nothing may panic; a malformed event must change nothing; the
// rendering must be inert; and the state must be the same whether kept
// directly, restored from its binary form, or rebuilt through checkpoints.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		string(mutEv(mutM{Adds: []addM{{ParentID: 30, Node: tx(31, "plum")}, {ParentID: 12, NextID: ptr[int64](15), Node: el(30, "li", nil)}}})),
		string(mutEv(mutM{Removes: []removeM{{ParentID: 12, ID: 13}}, Texts: []textM{{ID: 20, Value: ptr("x")}}, Attributes: []attrM{{ID: 9, Attributes: map[string]any{"class": nil, "style": map[string]any{"color": []string{"red", "important"}}}}}})),
		string(inputEv(17, "*****", false)) + "\n" + string(inputEv(18, "on", true)),
		string(metaEv("https://x.example/", 1, 2)),
		string(fullEv(hostile())),
		string(mutEv(mutM{Adds: []addM{{ParentID: 9, Node: el(50, "script", map[string]any{"src": "x"}, tx(51, "alert(1)"))}, {ParentID: 50, Node: el(9, "div", nil)}}})),
		string(mutEv(mutM{Adds: []addM{{ParentID: 3, NextID: ptr[int64](9), Node: el(12, "ul", nil, el(13, "li", nil))}}, Texts: []textM{{ID: 3, Value: ptr("flat")}}})),
		`{"type":3,"data":{"source":0,"removes":[{"parentId":1,"id":1}],"adds":[{"parentId":1,"nextId":null,"node":{"type":2,"id":99,"tagName":"p"}}]}}`,
		`{"type":3,"data":{"source":0,"adds":[{"parentId":14,"nextId":null,"node":{"type":3,"id":60,"textContent":"x"}}]}}`,
		`{"type":2,"data":{"node":{"type":3,"id":1,"textContent":"root text"}}}`,
		`{"type":3,"data":{"source":0,"adds":[{"parentId":12,"nextId":-1,"previousId":13,"node":{"type":2,"id":70,"tagName":"li","attributes":{"a":1,"b":true,"c":false,"d":null},"childNodes":[{"type":5,"id":71,"textContent":"c"}]}}]}}`,
		`{"type":3,"data":{"source":0,"texts":[{"id":11,"value":"\ud800\u0000<>&"}]}}`,
		`{"type":4,"data":{"href":"x","width":1e3,"height":-1}}`,
		`{"type":3,"data":{"source":5,"id":99999,"text":"x"}}`,
		`{"type":3,"data":{"source":0,"adds":[{"parentId":`,
		"\x00\xff{}[]",
	} {
		f.Add([]byte(s))
	}
	base := fullEv(shop())
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte{'\n'})
		if len(lines) > 32 {
			lines = lines[:32]
		}
		d := NewDoc()
		mustApply(t, d, base)
		cp := NewCheckpoints(2)
		if err := cp.Add(Event{Seq: 1, Data: base}); err != nil {
			t.Fatal(err)
		}
		for i, l := range lines {
			before := d.encode(nil)
			if err := d.Apply(l); err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Apply: %v does not wrap ErrMalformed", err)
				}
				if !bytes.Equal(before, d.encode(nil)) {
					t.Fatalf("a malformed event changed the state: %v", err)
				}
			}
			if err := cp.Add(Event{Seq: uint64(i + 2), Step: i / 3, Data: l}); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatal(err)
			}
		}
		out := render(t, d)
		_ = d.Text()
		for _, p := range inertProblems(out) {
			t.Errorf("not inert: %s\n%s", p, out)
		}
		r, err := decodeState(d.encode(nil))
		if err != nil {
			t.Fatal(err)
		}
		if render(t, r) != out {
			t.Fatalf("the restored state renders differently")
		}
		c, err := cp.At(uint64(len(lines) + 1))
		if err != nil {
			t.Fatal(err)
		}
		if render(t, c) != out {
			t.Fatalf("the checkpointed state renders differently")
		}
	})
}

// elementNames lists a parsed document's elements in order.
func elementNames(out string) []string {
	doc, err := nethtml.Parse(strings.NewReader(out))
	if err != nil {
		return []string{"parse error"}
	}
	var names []string
	var walk func(*nethtml.Node)
	walk = func(n *nethtml.Node) {
		if n.Type == nethtml.ElementNode {
			names = append(names, n.Namespace+":"+n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return names
}

// FuzzRenderInert puts arbitrary tag names, attribute names and values,
// text and CSS where a page can put them, in HTML and SVG, and checks the
// rendering as a browser parses it: nothing that runs or fetches, text
// that adds no element, and style text that the CSS sanitizer would not
// change again (so no url() or @import is left in it).
func FuzzRenderInert(f *testing.F) {
	f.Add("div", "title", "x", "hello", "a{color:red}")
	f.Add("script", "onerror", "javascript:alert(1)", "</textarea><script>alert(1)</script>", "@import 'x'; a{b:url(http://e/)}")
	f.Add("img", "src", " JaVa\tScRiPt:alert(1)", "<img src=x onerror=alert(1)>", `a{b:u\72l(x)}`)
	f.Add("a", "xlink:href", "&#106;avascript:x", "-->", `/* " */ a{b:url(x)} /* " */ </style><script>`)
	f.Add("set", "attributeName", "href", "</style>", `ur@import x;l(http://e/)`)
	f.Add("textarea", "value", "data:text/html,<script>", "\x00\xff", "a{b:image-set('x' 1x)}")
	f.Add("plaintext", "srcdoc", "<script>", "&amp;<", "a{b:url(\""+png+"\")}")
	f.Add("foreignObject", "style", "background:url(//e/)", "x", "")
	f.Fuzz(func(t *testing.T, tag, name, value, text, css string) {
		if tag == "" {
			tag = "div" // rrweb always names an element
		}
		page := func(text string) string {
			root := docNode(1, el(2, "html", nil,
				el(3, "head", nil,
					el(4, "style", nil, styleTx(5, css)),
					el(6, "link", map[string]any{"rel": "stylesheet", "_cssText": css})),
				el(7, "body", nil,
					el(8, tag, map[string]any{name: value, "style": css}, tx(9, text)),
					el(10, "a", map[string]any{"href": value, name: value}, tx(11, text)),
					el(12, "img", map[string]any{"src": value, "srcset": value, name: value}),
					el(13, "textarea", nil, tx(14, text)),
					svgEl(15, "svg", nil,
						svgEl(16, tag, map[string]any{name: value, "href": value, "fill": css}, tx(17, text)),
						svgEl(18, "style", nil, tx(19, css)),
						svgEl(20, "animate", map[string]any{"attributeName": value, "to": value})))))
			d := NewDoc()
			mustApply(t, d, fullEv(root))
			return render(t, d)
		}
		out := page(text)
		for _, p := range inertProblems(out) {
			t.Errorf("not inert: %s\n%s", p, out)
		}
		for _, s := range styleTexts(out) {
			if again := sanitizeCSS(s); again != s {
				t.Errorf("style text not sanitized: %q -> %q", s, again)
			}
		}
		if a, b := elementNames(out), elementNames(page("")); !slices.Equal(a, b) {
			t.Errorf("text changed the elements: %v vs %v\n%s", a, b, out)
		}
	})
}
