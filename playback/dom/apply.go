package dom

import (
	"fmt"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/jsonspan"
)

// malformed is an event that is JSON but not shaped as its rrweb type
// requires (event's rrweb model names where and why), as an ErrMalformed.
func malformed(e *event.RRWebError) error { return fmt.Errorf("%w: %v", ErrMalformed, e) }

// Apply folds one rrweb event — a flightrec dom event's data, the JSON
// object {"type","data","timestamp"} — into the document, as rrweb's
// replayer would: a FullSnapshot replaces the document; mutations apply
// removes, then adds, then texts, then attributes; inputs set a form
// control's value and checkedness (as the recorder stored them, masked
// where it masked); Meta records the page's URL and viewport. Other event
// types and sources are accepted and change nothing.
//
// A reference to a node the document does not hold is skipped and counted
// (see Skipped), as rrweb skips it: one missed event must not make the
// rest of a recording unviewable. An event that is not JSON, or not shaped
// as its type requires, is an error wrapping ErrMalformed that names the
// problem, and changes nothing: the event is checked whole before any of
// it is applied.
func (d *Doc) Apply(event []byte) error {
	_, err := d.apply(event)
	return err
}

// maxJSONDepth bounds the nesting of arrays and objects, so that a
// hostile event cannot exhaust the stack of the recursive reader or of the
// recursive tree builder. rrweb nests two levels per DOM level, so this
// admits a DOM some 1,000 deep.
const maxJSONDepth = 2049

// maxKeptValues bounds the parse scratch a Doc keeps between events: a
// large full snapshot's values are let go rather than held for the next
// small mutation.
const maxKeptValues = 1 << 16

// apply is Apply that also reports whether the event can change the
// state, so that Checkpoints keeps only those (mouse moves and scrolls are
// most of a recording's events, and need no replay).
func (d *Doc) apply(ev []byte) (bool, error) {
	j := &d.j
	defer j.Release(maxKeptValues) // the caller's event: not ours to keep
	j.MaxDepth = maxJSONDepth
	if err := j.Parse(ev); err != nil {
		return false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	const root = 0
	if !j.Is(root, jsonspan.Object) {
		return false, malformed(event.RRWebErrorf("the event is %s, not an object", j.KindName(root)))
	}
	typ, rerr := event.RRWebInt(j, root, "type")
	if rerr != nil {
		return false, malformed(rerr)
	}
	if typ != event.RRWebFullSnapshot && typ != event.RRWebIncremental && typ != event.RRWebMeta {
		return false, nil
	}
	// A popup's events (page p2 …) are another document history: the
	// view is the first page's.
	if p, ok := j.Str(j.Get(root, "page")); ok && p != "" {
		return false, nil
	}
	data := j.Get(root, "data")
	if !j.Is(data, jsonspan.Object) {
		return false, malformed(event.RRWebErrorf("is %s, not an object", j.KindName(data)).At("data"))
	}
	switch typ {
	case event.RRWebFullSnapshot:
		nd := j.Get(data, "node")
		if err := event.RRWebCheckNode(j, nd, nil); err != nil {
			return false, malformed(err.At("node").At("data"))
		}
		d.reset()
		d.root = d.build(nd)
		return true, nil
	case event.RRWebMeta:
		if err := event.RRWebOptString(j, data, "href"); err != nil {
			return false, malformed(err.At("data"))
		}
		if s, ok := j.Str(j.Get(data, "href")); ok {
			d.href = s
		}
		if w, ok := j.Int(j.Get(data, "width")); ok {
			d.width = w
		}
		if h, ok := j.Int(j.Get(data, "height")); ok {
			d.height = h
		}
		return true, nil
	}
	src, rerr := event.RRWebInt(j, data, "source")
	if rerr != nil {
		return false, malformed(rerr.At("data"))
	}
	switch src {
	case event.RRWebMutation:
		if err := d.mut.Decode(j, data, nil); err != nil {
			return false, malformed(err.At("data"))
		}
		d.applyMutation()
		return true, nil
	case event.RRWebInput:
		if err := d.input(data); err != nil {
			return false, malformed(err.At("data"))
		}
		return true, nil
	}
	return false, nil
}

// build creates the (checked) serialized node i and its children, maps
// their ids, and returns it detached.
func (d *Doc) build(i int32) int32 {
	j := &d.j
	id, _ := j.Int(j.Get(i, "id"))
	t, _ := j.Int(j.Get(i, "type"))
	n := node{id: id, kind: uint8(t)}
	switch t {
	case event.RRWebNodeDocType:
		n.tag, _ = j.Str(j.Get(i, "name"))
		n.text, _ = j.Str(j.Get(i, "publicId"))
		n.text2, _ = j.Str(j.Get(i, "systemId"))
	case event.RRWebNodeElement:
		n.tag, _ = j.Str(j.Get(i, "tagName"))
		if b := j.Get(i, "isSVG"); j.Is(b, jsonspan.True) {
			n.flags |= fSVG
		}
		if a := j.Get(i, "attributes"); j.Is(a, jsonspan.Object) {
			for m := j.Nodes[a].First; m >= 0; m = j.Nodes[m].Next {
				if v, ok := event.RRWebAttrValue(j, m); ok {
					n.attrs = append(n.attrs, attr{j.Key(m), v})
				}
			}
		}
	default:
		n.text, _ = j.Str(j.Get(i, "textContent"))
		if b := j.Get(i, "isStyle"); j.Is(b, jsonspan.True) {
			n.flags |= fStyle
		}
	}
	x := d.alloc(n)
	d.mapID(x)
	if t == event.RRWebNodeDocument || t == event.RRWebNodeElement {
		if cn := j.Get(i, "childNodes"); j.Is(cn, jsonspan.Array) {
			for c := j.Nodes[cn].First; c >= 0; c = j.Nodes[c].Next {
				d.insert(d.build(c), x, -1)
			}
		}
	}
	return x
}

func (d *Doc) applyMutation() {
	m := &d.mut
	j := &d.j
	for _, id := range m.Removes {
		n, ok := d.lookup(id)
		if !ok {
			d.skipped++
			continue
		}
		d.drop(n)
	}
	d.applyAdds()
	for _, t := range m.Texts {
		n, ok := d.lookup(t.ID)
		if !ok {
			d.skipped++
			continue
		}
		val, _ := j.Str(t.Value)
		switch d.nodes[n].kind {
		case event.RRWebNodeText, event.RRWebNodeComment, event.RRWebNodeCDATA:
			d.nodes[n].text = val
		case event.RRWebNodeElement:
			// textContent on an element replaces its children with one
			// text node, which no rrweb id names.
			for c := d.nodes[n].first; c >= 0; c = d.nodes[n].first {
				d.drop(c)
			}
			if val != "" {
				d.insert(d.alloc(node{kind: event.RRWebNodeText, flags: fAnon, text: val}), n, -1)
			}
		default:
			d.skipped++
		}
	}
	for _, a := range m.Attrs {
		n, ok := d.lookup(a.ID)
		if !ok || d.nodes[n].kind != event.RRWebNodeElement {
			d.skipped++
			continue
		}
		x := &d.nodes[n]
		for v := j.Nodes[a.Attributes].First; v >= 0; v = j.Nodes[v].Next {
			name := j.Key(v)
			switch j.Nodes[v].Kind {
			case jsonspan.Object: // a style declaration diff
				cur, _ := x.attr(name)
				if s := applyStyleDiff(cur, j, v); s != "" {
					x.setAttr(name, s)
				} else {
					x.delAttr(name)
				}
			case jsonspan.Array:
			default:
				if val, ok := event.RRWebAttrValue(j, v); ok {
					x.setAttr(name, val)
				} else {
					x.delAttr(name)
				}
			}
		}
	}
}

// applyAdds places a batch's added nodes. rrweb lists them in no order a
// parent or next sibling is sure to precede: an add waits until both its
// parent and (when it names one) its next sibling exist, and is placed as
// soon as the node it waits for is. Waiting adds are indexed by the id
// they wait for, so a batch costs O(adds) in any order. Adds still waiting
// at the end name nodes that never came: they are skipped and counted.
func (d *Doc) applyAdds() {
	m := &d.mut
	if len(m.Adds) == 0 {
		return
	}
	var wait map[int64][]int32
	for i := range m.Adds {
		q := append(d.queue[:0], int32(i))
		for h := 0; h < len(q); h++ {
			op := &m.Adds[q[h]]
			if miss, ok := d.missing(op); ok {
				if wait == nil {
					wait = make(map[int64][]int32)
				}
				wait[miss] = append(wait[miss], q[h])
				continue
			}
			for _, id := range d.place(op) {
				if w, ok := wait[id]; ok {
					delete(wait, id)
					q = append(q, w...)
				}
			}
		}
		d.queue = q
	}
	for _, w := range wait {
		d.skipped += int64(len(w))
	}
}

// missing returns the id an add still waits for.
func (d *Doc) missing(op *event.RRWebAdd) (int64, bool) {
	if _, ok := d.ids[op.Parent]; !ok {
		return op.Parent, true
	}
	if op.HasNext {
		if _, ok := d.ids[op.Next]; !ok {
			return op.Next, true
		}
	}
	return 0, false
}

// place inserts an add whose parent (and next sibling) exist, and returns
// the ids it created.
func (d *Doc) place(op *event.RRWebAdd) []int64 {
	d.created = d.subtreeIDs(op.Node, d.created[:0])
	// A serialized id that is already in the document replaces that node:
	// rrweb serializes a node again with its id when it comes back.
	for _, id := range d.created {
		if n, ok := d.ids[id]; ok {
			d.drop(n)
		}
	}
	p, ok := d.ids[op.Parent]
	if !ok || (d.nodes[p].kind != event.RRWebNodeElement && d.nodes[p].kind != event.RRWebNodeDocument) {
		d.skipped++
		return nil
	}
	next := int32(-1)
	if op.HasNext {
		if n, ok := d.ids[op.Next]; ok {
			next = n
		}
	} else if op.HasPrev {
		if pv, ok := d.ids[op.Prev]; ok && d.nodes[pv].parent == p {
			next = d.nodes[pv].next // -1, append, when prev is last
		}
	}
	d.insert(d.build(op.Node), p, next)
	return d.created
}

func (d *Doc) subtreeIDs(i int32, out []int64) []int64 {
	j := &d.j
	id, _ := j.Int(j.Get(i, "id"))
	out = append(out, id)
	t, _ := j.Int(j.Get(i, "type"))
	if t != event.RRWebNodeDocument && t != event.RRWebNodeElement {
		return out
	}
	if cn := j.Get(i, "childNodes"); j.Is(cn, jsonspan.Array) {
		for c := j.Nodes[cn].First; c >= 0; c = j.Nodes[c].Next {
			out = d.subtreeIDs(c, out)
		}
	}
	return out
}

// input applies an Input event: the control's value (as recorded: the
// recorder masks it first where the plan says so) and, for checkboxes and
// radios, its checkedness, kept as the value and checked attributes so
// that a rendering shows them.
func (d *Doc) input(data int32) *event.RRWebError {
	j := &d.j
	id, err := event.RRWebInt(j, data, "id")
	if err != nil {
		return err
	}
	if err := event.RRWebOptString(j, data, "text"); err != nil {
		return err
	}
	ic := j.Get(data, "isChecked")
	if ic >= 0 && !j.IsBool(ic) && !j.Is(ic, jsonspan.Null) {
		return event.RRWebErrorf("is %s, not a boolean", j.KindName(ic)).At("isChecked")
	}
	n, ok := d.lookup(id)
	if !ok || d.nodes[n].kind != event.RRWebNodeElement {
		d.skipped++
		return nil
	}
	x := &d.nodes[n]
	if text, ok := j.Str(j.Get(data, "text")); ok {
		x.setAttr("value", text)
	}
	if j.IsBool(ic) && strings.EqualFold(x.tag, "input") {
		typ, _ := x.attr("type")
		if strings.EqualFold(typ, "checkbox") || strings.EqualFold(typ, "radio") {
			if j.Is(ic, jsonspan.True) {
				x.setAttr("checked", "")
			} else {
				x.delAttr("checked")
			}
		}
	}
	return nil
}

// Style declarations. rrweb records a change to an element's inline style
// as a diff, {"prop": "value" | ["value", "important"] | false}, which the
// replayer applies through CSSOM; here the style attribute's text is
// parsed into declarations, changed, and written back the way a browser
// serializes it ("prop: value; prop2: value2 !important;").

type decl struct {
	prop, val string
	important bool
}

func applyStyleDiff(cur string, j *jsonspan.Doc, obj int32) string {
	decls := parseDecls(cur)
	set := func(prop, val string, imp bool) {
		if !strings.HasPrefix(prop, "--") {
			prop = strings.ToLower(prop)
		}
		for i := range decls {
			if decls[i].prop == prop {
				if val == "" {
					decls = append(decls[:i], decls[i+1:]...)
				} else {
					decls[i].val, decls[i].important = val, imp
				}
				return
			}
		}
		if val != "" {
			decls = append(decls, decl{prop, val, imp})
		}
	}
	for m := j.Nodes[obj].First; m >= 0; m = j.Nodes[m].Next {
		prop := strings.TrimSpace(j.Key(m))
		if prop == "" {
			continue
		}
		switch j.Nodes[m].Kind {
		case jsonspan.String:
			v, _ := j.Str(m)
			set(prop, strings.TrimSpace(v), false)
		case jsonspan.Array:
			v, _ := j.Str(j.Nodes[m].First)
			pri := ""
			if f := j.Nodes[m].First; f >= 0 {
				pri, _ = j.Str(j.Nodes[f].Next)
			}
			set(prop, strings.TrimSpace(v), strings.EqualFold(pri, "important"))
		case jsonspan.False, jsonspan.True, jsonspan.Null:
			set(prop, "", false)
		}
	}
	return formatDecls(decls)
}

// parseDecls splits a declaration list at semicolons outside strings,
// parentheses and comments.
func parseDecls(s string) []decl {
	var out []decl
	start, depth := 0, 0
	var quote byte
	emit := func(part string) {
		i := strings.IndexByte(part, ':')
		if i < 0 {
			return
		}
		prop := strings.TrimSpace(part[:i])
		val := strings.TrimSpace(part[i+1:])
		if prop == "" {
			return
		}
		if !strings.HasPrefix(prop, "--") {
			prop = strings.ToLower(prop)
		}
		imp := false
		if k := strings.LastIndexByte(val, '!'); k >= 0 && strings.EqualFold(strings.TrimSpace(val[k+1:]), "important") {
			imp, val = true, strings.TrimSpace(val[:k])
		}
		out = append(out, decl{prop, val, imp})
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '\\':
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = cssCommentEnd(s, i) - 1 // the loop steps past the last byte
		case c == '(':
			depth++
		case c == ')':
			if depth > 0 {
				depth--
			}
		case c == ';' && depth == 0:
			emit(s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		emit(s[start:])
	}
	return out
}

func formatDecls(decls []decl) string {
	var b strings.Builder
	for i, dc := range decls {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(dc.prop)
		b.WriteString(": ")
		b.WriteString(dc.val)
		if dc.important {
			b.WriteString(" !important")
		}
		b.WriteByte(';')
	}
	return b.String()
}
