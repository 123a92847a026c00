package redact

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
)

// cssTree builds: html > body > form#pay.checkout[data-kind=Card] > (label, div.row > input[name=num])
// and an iframe document under body > iframe > #document > html > body > input.secret
func cssTree() map[string]*dnode {
	nodes := map[string]*dnode{}
	mk := func(key, tag string, parent *dnode, attrs ...string) *dnode {
		n := &dnode{kind: event.RRWebNodeElement, tag: tag, parent: parent}
		for i := 0; i+1 < len(attrs); i += 2 {
			n.attrs = append(n.attrs, domAttr{attrs[i], attrs[i+1]})
		}
		nodes[key] = n
		return n
	}
	html := mk("html", "html", nil)
	body := mk("body", "body", html)
	form := mk("form", "form", body, "id", "pay", "class", "checkout  wide", "data-kind", "Card")
	mk("label", "label", form, "for", "num")
	row := mk("row", "div", form, "class", "row")
	mk("input", "input", row, "name", "num", "type", "text")
	iframe := mk("iframe", "iframe", body, "src", "https://pay.example/frame")
	doc := &dnode{kind: event.RRWebNodeDocument, parent: iframe}
	ihtml := mk("ihtml", "html", doc)
	ibody := mk("ibody", "body", ihtml)
	mk("iinput", "input", ibody, "class", "secret")
	return nodes
}

func TestCSSSelectors(t *testing.T) {
	nodes := cssTree()
	for _, tc := range []struct {
		sel  string
		want string // space-separated keys that match
	}{
		{"input", "input iinput"},
		{"INPUT", "input iinput"},
		{"*", "html body form label row input iframe ihtml ibody iinput"},
		{"#pay", "form"},
		{"#PAY", "form"}, // case-insensitive: errs towards masking
		{".checkout", "form"},
		{".wide.checkout", "form"},
		{".check", ""},
		{"[data-kind]", "form"},
		{"[data-kind=card]", "form"},
		{`[data-kind="Card" i]`, "form"},
		{"[class~=wide]", "form"},
		{"[src^='https://pay.']", "iframe"},
		{"[src$=frame]", "iframe"},
		{"[src*=example]", "iframe"},
		{"[data-kind|=card]", "form"},
		{"form input", "input"},
		{"form > input", ""},
		{"form > div > input", "input"},
		{"#pay .row [name=num]", "input"},
		{"body input", "input iinput"}, // the iframe's body, and across the boundary
		{"iframe input", "iinput"},     // across the iframe boundary: errs towards masking
		{"label + div input", "input"}, // sibling widened to the shared parent
		{"label ~ div", "row"},
		{"input:not(.secret)", "input"},
		{"input:not([type=text], .secret)", ""},
		{"input:not(.SECRET)", "input iinput"}, // strict inside :not: .SECRET ≠ secret
		{"input:not(:focus)", "input iinput"},  // non-simple :not taken as true
		{"input:focus", "input iinput"},
		{"input::placeholder", "input iinput"},
		{"div:nth-child(2n+1) input", "input"},
		{"select, .row > input", "input"},
		{`#\70 ay`, "form"},
		{"  form   >   .row  ", "row"},
	} {
		set, err := parseSelectors([]string{tc.sel})
		if err != nil {
			t.Errorf("%q: %v", tc.sel, err)
			continue
		}
		var got []string
		for _, k := range []string{"html", "body", "form", "label", "row", "input", "iframe", "ihtml", "ibody", "iinput"} {
			if set.matches(nodes[k]) {
				got = append(got, k)
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q matches [%s], want [%s]", tc.sel, strings.Join(got, " "), tc.want)
		}
	}
}

func TestCSSSelectorErrors(t *testing.T) {
	for _, sel := range []string{"", "div[", "[value]", "input[VALUE=x]", "a,", "svg|rect", "div )", `[a="x]`, "#", "a > > b"} {
		if _, err := parseSelectors([]string{sel}); err == nil {
			t.Errorf("%q parsed", sel)
		}
	}
}

func TestCSSSelectorAttrsTracked(t *testing.T) {
	set, err := parseSelectors([]string{"#a .b [data-x] input:not([aria-hidden])"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"id", "class", "data-x", "aria-hidden"} {
		if !set.attrs[a] {
			t.Errorf("attribute %q not tracked", a)
		}
	}
}

// FuzzDOMEvent feeds arbitrary rrweb-ish events after a snapshot: no panic,
// and whatever comes out is JSON with the password value erased.
func FuzzDOMEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":3,"data":{"source":0,"attributes":[{"id":10,"attributes":{"value":"pw-secret"}}]},"timestamp":1}`,
		`{"type":3,"data":{"source":0,"adds":[{"parentId":3,"node":{"type":2,"id":11,"tagName":"input","attributes":{"type":"password","value":"pw-secret"},"childNodes":[]}}]},"timestamp":1}`,
		`{"type":3,"data":{"source":5,"id":10,"text":"pw-secret"},"timestamp":1}`,
		`{"type":3,"data":{"source":0,"removes":[{"parentId":3,"id":10}],"adds":[{"parentId":10,"node":{"type":2,"id":3,"tagName":"div","attributes":{},"childNodes":[]}}]},"timestamp":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := New(testPlan(), nil)
		if err != nil {
			t.Fatal(err)
		}
		snap := `{"type":2,"data":{"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":"html","attributes":{},"childNodes":[{"type":2,"id":3,"tagName":"body","attributes":{},"childNodes":[{"type":2,"id":10,"tagName":"input","attributes":{"type":"password"},"childNodes":[]}]}]}]}},"timestamp":1}`
		r.dom.observe([]byte(snap))
		res, err := r.dom.process(r, b, true)
		if err != nil {
			return
		}
		if res.Data != nil && !json.Valid(res.Data) {
			t.Fatalf("output is not JSON: %q", res.Data)
		}
		r.dom.maskedOnPage()
	})
}
