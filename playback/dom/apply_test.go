package dom

import (
	"errors"
	"strings"
	"testing"
)

// shop is a small page: ids 1-24.
func shop() *sn {
	return docNode(1,
		doctype(2),
		el(3, "html", nil,
			el(4, "head", nil,
				el(5, "title", nil, tx(6, "Shop")),
				el(7, "style", nil, styleTx(8, "body{color:red}"))),
			el(9, "body", map[string]any{"class": "main"},
				el(10, "h1", nil, tx(11, "Cart")),
				el(12, "ul", nil,
					el(13, "li", nil, tx(14, "apple")),
					el(15, "li", nil, tx(16, "pear"))),
				el(17, "input", map[string]any{"type": "text", "name": "q", "value": ""}),
				el(18, "input", map[string]any{"type": "checkbox"}),
				el(19, "p", nil, tx(20, "total: 0")),
				el(21, "textarea", nil),
				el(22, "select", nil,
					el(23, "option", map[string]any{"value": "a", "selected": true}, tx(25, "A")),
					el(24, "option", map[string]any{"value": "b"}, tx(26, "B"))))))
}

func TestMaterialize(t *testing.T) {
	d := NewDoc()
	mustApply(t, d, metaEv("https://shop.example/cart", 1280, 720), fullEv(shop()))
	if got, want := d.Text(), "Cart apple pear total: 0 A B"; got != want {
		t.Fatalf("Text after snapshot = %q, want %q", got, want)
	}

	// Adds in an order where children and next siblings come after the
	// nodes that need them; one add names a parent that never comes.
	mustApply(t, d, mutEv(mutM{Adds: []addM{
		{ParentID: 30, Node: tx(31, "plum")},                            // parent 30 comes later
		{ParentID: 12, NextID: ptr[int64](15), Node: el(30, "li", nil)}, // before pear
		{ParentID: 12, NextID: ptr[int64](33), Node: el(32, "li", nil)}, // next 33 comes later
		{ParentID: 32, Node: tx(34, "kiwi")},
		{ParentID: 999, Node: el(40, "li", nil, tx(41, "ghost"))},
		{ParentID: 12, Node: el(33, "li", nil, tx(35, "fig"))}, // appended, with its child inline
	}}))
	if got, want := d.Text(), "Cart apple plum pear kiwi fig total: 0 A B"; got != want {
		t.Fatalf("Text after adds = %q, want %q", got, want)
	}
	if d.Skipped() != 1 {
		t.Fatalf("Skipped = %d, want 1 (the add under 999)", d.Skipped())
	}

	// Removes, texts, attributes (null removes one; an object is a style
	// diff) in one mutation; a remove of an unknown id is skipped.
	mustApply(t, d, mutEv(mutM{
		Removes: []removeM{{ParentID: 12, ID: 13}, {ParentID: 12, ID: 777}},
		Texts:   []textM{{ID: 20, Value: ptr("total: 4")}},
		Attributes: []attrM{
			{ID: 9, Attributes: map[string]any{"class": nil, "data-x": "1"}},
			{ID: 10, Attributes: map[string]any{"style": map[string]any{"color": "blue", "font-weight": []string{"bold", "important"}}}},
		},
	}))
	mustApply(t, d, mutEv(mutM{Attributes: []attrM{
		{ID: 10, Attributes: map[string]any{"style": map[string]any{"color": false}}},
	}}))
	mustApply(t, d,
		inputEv(17, "hello", false),
		inputEv(18, "on", true),
		inputEv(21, "notes <b>", false),
		inputEv(22, "b", false),
		mouseEv(10, 20))
	if got, want := d.Text(), "Cart plum pear kiwi fig total: 4 A B"; got != want {
		t.Fatalf("Text = %q, want %q", got, want)
	}
	if d.Skipped() != 2 {
		t.Fatalf("Skipped = %d, want 2", d.Skipped())
	}
	if d.Href() != "https://shop.example/cart" {
		t.Fatalf("Href = %q", d.Href())
	}
	if w, h := d.Size(); w != 1280 || h != 720 {
		t.Fatalf("Size = %d×%d", w, h)
	}

	out := render(t, d)
	for _, want := range []string{
		"<!DOCTYPE html><html><head>" + headMetas + "<title>Shop</title><style>body{color:red}</style></head>",
		`<body data-x="1">`,
		`<h1 style="font-weight: bold !important;">Cart</h1>`,
		"<ul><li>plum</li><li>pear</li><li>kiwi</li><li>fig</li></ul>",
		`<input name="q" type="text" value="hello">`,
		`<input type="checkbox" value="on" checked="">`,
		`<p>total: 4</p>`,
		`<textarea>notes &lt;b&gt;</textarea>`,
		`<option value="a">A</option><option value="b" selected>B</option>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendering lacks %s\n%s", want, out)
		}
	}
	if strings.Contains(out, "ghost") || strings.Contains(out, "apple") {
		t.Errorf("rendering holds removed or orphaned nodes:\n%s", out)
	}

	// The state survives its binary form.
	r, err := decodeState(d.encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := render(t, r); got != out {
		t.Fatalf("restored state renders differently:\n%s\nvs\n%s", got, out)
	}

	// A later full snapshot replaces the document.
	mustApply(t, d, fullEv(docNode(1, el(2, "html", nil, el(3, "body", nil, tx(4, "next page"))))))
	if got := d.Text(); got != "next page" {
		t.Fatalf("Text after second snapshot = %q", got)
	}
	if d.Nodes() != 4 {
		t.Fatalf("Nodes = %d, want 4", d.Nodes())
	}
}

// A node rrweb serializes again (a move) replaces the one holding its id.
func TestMoveReusesIDs(t *testing.T) {
	d := NewDoc()
	mustApply(t, d, fullEv(shop()))
	mustApply(t, d, mutEv(mutM{
		Removes: []removeM{{ParentID: 12, ID: 13}},
		Adds: []addM{
			{ParentID: 13, Node: tx(14, "apple")},
			{ParentID: 12, Node: el(13, "li", nil)},
		},
	}))
	if got, want := d.Text(), "Cart pear apple total: 0 A B"; got != want {
		t.Fatalf("Text = %q, want %q", got, want)
	}
	// Without the remove: the add's id is taken from the old node.
	mustApply(t, d, mutEv(mutM{Adds: []addM{
		{ParentID: 12, NextID: ptr[int64](15), Node: el(13, "li", nil, tx(14, "apple"))},
	}}))
	if got, want := d.Text(), "Cart apple pear total: 0 A B"; got != want {
		t.Fatalf("Text = %q, want %q", got, want)
	}
	if d.Skipped() != 0 {
		t.Fatalf("Skipped = %d", d.Skipped())
	}
}

func TestMalformedEvents(t *testing.T) {
	d := NewDoc()
	mustApply(t, d, fullEv(shop()))
	before := render(t, d)
	for _, c := range []struct{ ev, want string }{
		{`{"type":3`, "offset 9"},
		{`{"type":3,"data":{"source":0}} x`, "data after the top-level value"},
		{`[1,2]`, "not an object"},
		{`{"data":{}}`, "type: is missing"},
		{`{"type":"3","data":{}}`, "type: is a string, not an integer"},
		{`{"type":3,"data":[]}`, "data: is an array"},
		{`{"type":3,"data":{"source":0,"adds":[{"parentId":"x"}]}}`, "data.adds[0].parentId: is a string"},
		{`{"type":3,"data":{"source":0,"removes":[{"id":13}],"adds":[{"parentId":12,"nextId":null,"node":{"type":2,"id":50,"tagName":"li","childNodes":[{"type":9,"id":51}]}}]}}`,
			"data.adds[0].node.childNodes[0].type: unknown node type 9"},
		{`{"type":3,"data":{"source":0,"texts":[{"id":20,"value":5}]}}`, "data.texts[0].value: is a number"},
		{`{"type":3,"data":{"source":5,"id":17,"text":"x","isChecked":"yes"}}`, "data.isChecked: is a string"},
		{`{"type":2,"data":{"node":{"type":0,"id":1.5}}}`, "data.node.id: is not an integer"},
		{"{\"type\":3,\"data\":{\"source\":0,\"texts\":[{\"id\":20,\"value\":\"a\x01\"}]}}", "control character in string"},
	} {
		err := d.Apply([]byte(c.ev))
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Apply(%s) = %v, want ErrMalformed naming %q", c.ev, err, c.want)
		}
	}
	if got := render(t, d); got != before {
		t.Fatalf("malformed events changed the state")
	}
	// Other event types and sources are not errors.
	for _, ev := range []string{
		`{"type":0,"data":{},"timestamp":1}`, `{"type":1,"data":{},"timestamp":1}`,
		`{"type":5,"data":{"tag":"x","payload":{}}}`, `{"type":6,"data":{"plugin":"x"}}`, `{"type":42}`,
		`{"type":3,"data":{"source":3,"id":1,"x":0,"y":10}}`, `{"type":3,"data":{"source":8,"id":7,"adds":[]}}`,
	} {
		if err := d.Apply([]byte(ev)); err != nil {
			t.Errorf("Apply(%s) = %v", ev, err)
		}
	}
}

func TestStyleDiff(t *testing.T) {
	d := NewDoc()
	mustApply(t, d, fullEv(docNode(1, el(2, "html", nil, el(3, "body", nil,
		el(4, "div", map[string]any{"style": "color: red; background: url(\"a;b.png\") ; --X: 1;"}))))))
	mustApply(t, d, mutEv(mutM{Attributes: []attrM{{ID: 4, Attributes: map[string]any{"style": map[string]any{
		"COLOR": "green", "--X": false, "margin": []string{"1px", "important"}, "padding": "",
	}}}}}))
	x := &d.nodes[d.ids[4]]
	got, _ := x.attr("style")
	want := `color: green; background: url("a;b.png"); margin: 1px !important;`
	if got != want {
		t.Fatalf("style = %q, want %q", got, want)
	}
}
