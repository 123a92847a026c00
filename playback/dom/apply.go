package dom

import (
	"fmt"
	"strings"

	"github.com/flightrec/flightrec/event"
)

// shapeError is an event that is JSON but not shaped as its rrweb type
// requires. The path is collected innermost first while the validators
// unwind, so it costs nothing unless an event is malformed.
type shapeError struct {
	path []string
	msg  string
}

func shapef(format string, args ...any) *shapeError {
	return &shapeError{msg: fmt.Sprintf(format, args...)}
}

func (e *shapeError) at(seg string) *shapeError {
	e.path = append(e.path, seg)
	return e
}

func (e *shapeError) atIndex(i int) *shapeError { return e.at(fmt.Sprintf("[%d]", i)) }

func (e *shapeError) Error() string {
	var b strings.Builder
	b.WriteString(ErrMalformed.Error())
	b.WriteString(": ")
	for i := len(e.path) - 1; i >= 0; i-- {
		s := e.path[i]
		if b.Len() > len(ErrMalformed.Error())+2 && s[0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	if len(e.path) > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

func (e *shapeError) Unwrap() error { return ErrMalformed }

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

// maxKeptValues bounds the parse scratch a Doc keeps between events: a
// large full snapshot's values are let go rather than held for the next
// small mutation.
const maxKeptValues = 1 << 16

// apply is Apply that also reports whether the event can change the
// state, so that Checkpoints keeps only those (mouse moves and scrolls are
// most of a recording's events, and need no replay).
func (d *Doc) apply(ev []byte) (bool, error) {
	j := &d.j
	defer func() {
		j.buf = nil // the caller's event: not ours to keep
		if cap(j.v) > maxKeptValues {
			j.v = nil
		}
	}()
	root, err := j.parse(ev)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !j.is(root, jObj) {
		return false, shapef("the event is %s, not an object", j.kindName(root))
	}
	tv := j.get(root, "type")
	typ, ok := j.int(tv)
	if !ok {
		return false, shapef("is %s, not an integer", j.kindName(tv)).at("type")
	}
	if typ != event.RRWebFullSnapshot && typ != event.RRWebIncremental && typ != event.RRWebMeta {
		return false, nil
	}
	data := j.get(root, "data")
	if !j.is(data, jObj) {
		return false, shapef("is %s, not an object", j.kindName(data)).at("data")
	}
	switch typ {
	case event.RRWebFullSnapshot:
		nd := j.get(data, "node")
		if err := d.checkNode(nd); err != nil {
			return false, err.at("node").at("data")
		}
		d.reset()
		d.root = d.build(nd)
		return true, nil
	case event.RRWebMeta:
		href := j.get(data, "href")
		if href >= 0 && !j.is(href, jStr) && !j.is(href, jNull) {
			return false, shapef("is %s, not a string", j.kindName(href)).at("href").at("data")
		}
		if s, ok := j.str(href); ok {
			d.href = s
		}
		if w, ok := j.int(j.get(data, "width")); ok {
			d.width = w
		}
		if h, ok := j.int(j.get(data, "height")); ok {
			d.height = h
		}
		return true, nil
	}
	sv := j.get(data, "source")
	src, ok := j.int(sv)
	if !ok {
		return false, shapef("is %s, not an integer", j.kindName(sv)).at("source").at("data")
	}
	switch src {
	case event.RRWebMutation:
		if err := d.decodeMutation(data); err != nil {
			return false, err.at("data")
		}
		d.applyMutation()
		return true, nil
	case event.RRWebInput:
		if err := d.input(data); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// optString checks that member key of obj is a string, null or absent.
func (d *Doc) optString(obj int32, key string) *shapeError {
	v := d.j.get(obj, key)
	if v < 0 || d.j.is(v, jStr) || d.j.is(v, jNull) {
		return nil
	}
	return shapef("is %s, not a string", d.j.kindName(v)).at(key)
}

// checkNode validates a serialized node and its children, so that build
// cannot fail halfway.
func (d *Doc) checkNode(i int32) *shapeError {
	j := &d.j
	if !j.is(i, jObj) {
		return shapef("is %s, not a serialized node", j.kindName(i))
	}
	if v := j.get(i, "id"); !j.is(v, jNum) {
		return shapef("is %s, not an integer", j.kindName(v)).at("id")
	} else if _, ok := j.int(v); !ok {
		return shapef("is not an integer").at("id")
	}
	tv := j.get(i, "type")
	t, ok := j.int(tv)
	if !ok {
		return shapef("is %s, not an integer", j.kindName(tv)).at("type")
	}
	switch t {
	case event.RRWebNodeDocument:
	case event.RRWebNodeDocType:
		for _, k := range [...]string{"name", "publicId", "systemId"} {
			if err := d.optString(i, k); err != nil {
				return err
			}
		}
		return nil
	case event.RRWebNodeElement:
		if tn := j.get(i, "tagName"); !j.is(tn, jStr) {
			return shapef("is %s, not a string", j.kindName(tn)).at("tagName")
		}
		if a := j.get(i, "attributes"); a >= 0 && !j.is(a, jObj) && !j.is(a, jNull) {
			return shapef("is %s, not an object", j.kindName(a)).at("attributes")
		}
	case event.RRWebNodeText, event.RRWebNodeCDATA, event.RRWebNodeComment:
		return d.optString(i, "textContent")
	default:
		return shapef("unknown node type %d", t).at("type")
	}
	cn := j.get(i, "childNodes")
	if cn < 0 || j.is(cn, jNull) {
		return nil
	}
	if !j.is(cn, jArr) {
		return shapef("is %s, not an array", j.kindName(cn)).at("childNodes")
	}
	k := 0
	for c := j.v[cn].first; c >= 0; c = j.v[c].next {
		if err := d.checkNode(c); err != nil {
			return err.atIndex(k).at("childNodes")
		}
		k++
	}
	return nil
}

// build creates the (checked) serialized node i and its children, maps
// their ids, and returns it detached.
func (d *Doc) build(i int32) int32 {
	j := &d.j
	id, _ := j.int(j.get(i, "id"))
	t, _ := j.int(j.get(i, "type"))
	n := node{id: id, kind: uint8(t)}
	switch t {
	case event.RRWebNodeDocType:
		n.tag, _ = j.str(j.get(i, "name"))
		n.text, _ = j.str(j.get(i, "publicId"))
		n.text2, _ = j.str(j.get(i, "systemId"))
	case event.RRWebNodeElement:
		n.tag, _ = j.str(j.get(i, "tagName"))
		if b := j.get(i, "isSVG"); j.is(b, jBool) && j.v[b].b {
			n.flags |= fSVG
		}
		if a := j.get(i, "attributes"); j.is(a, jObj) {
			for m := j.v[a].first; m >= 0; m = j.v[m].next {
				if v, ok := d.attrValue(m); ok {
					n.attrs = append(n.attrs, attr{j.key(m), v})
				}
			}
		}
	default:
		n.text, _ = j.str(j.get(i, "textContent"))
		if b := j.get(i, "isStyle"); j.is(b, jBool) && j.v[b].b {
			n.flags |= fStyle
		}
	}
	x := d.alloc(n)
	d.mapID(x)
	if t == event.RRWebNodeDocument || t == event.RRWebNodeElement {
		if cn := j.get(i, "childNodes"); j.is(cn, jArr) {
			for c := j.v[cn].first; c >= 0; c = j.v[c].next {
				d.insert(d.build(c), x, -1)
			}
		}
	}
	return x
}

// attrValue converts a serialized attribute value: rrweb writes strings,
// numbers, and true for a present boolean attribute; null and false mean
// absent.
func (d *Doc) attrValue(m int32) (string, bool) {
	j := &d.j
	switch j.v[m].kind {
	case jStr:
		return j.str(m)
	case jNum:
		return j.raw(m), true
	case jBool:
		return "", j.v[m].b
	}
	return "", false
}

// mutation is a decoded, checked mutation event; its slices are reused.
type mutation struct {
	removes []int64
	adds    []addOp
	texts   []textOp
	attrs   []attrOp

	queue   []int32
	created []int64
}

type addOp struct {
	parent, next, prev int64
	hasNext, hasPrev   bool
	node               int32
}

type textOp struct {
	id  int64
	val int32
}

type attrOp struct {
	id    int64
	attrs int32
}

// list checks that member key of obj is an array of objects (or absent, or
// null) and calls fn on each element.
func (d *Doc) list(obj int32, key string, fn func(x int32) *shapeError) *shapeError {
	j := &d.j
	a := j.get(obj, key)
	if a < 0 || j.is(a, jNull) {
		return nil
	}
	if !j.is(a, jArr) {
		return shapef("is %s, not an array", j.kindName(a)).at(key)
	}
	k := 0
	for x := j.v[a].first; x >= 0; x = j.v[x].next {
		if !j.is(x, jObj) {
			return shapef("is %s, not an object", j.kindName(x)).atIndex(k).at(key)
		}
		if err := fn(x); err != nil {
			return err.atIndex(k).at(key)
		}
		k++
	}
	return nil
}

func (d *Doc) reqInt(obj int32, key string) (int64, *shapeError) {
	v := d.j.get(obj, key)
	n, ok := d.j.int(v)
	if !ok {
		return 0, shapef("is %s, not an integer", d.j.kindName(v)).at(key)
	}
	return n, nil
}

// optID reads an optional node id: absent, null and -1 (rrweb's "not
// serialized") all mean none.
func (d *Doc) optID(obj int32, key string) (int64, bool, *shapeError) {
	v := d.j.get(obj, key)
	if v < 0 || d.j.is(v, jNull) {
		return 0, false, nil
	}
	n, ok := d.j.int(v)
	if !ok {
		return 0, false, shapef("is %s, not an integer or null", d.j.kindName(v)).at(key)
	}
	return n, n != -1, nil
}

func (d *Doc) decodeMutation(data int32) *shapeError {
	m := &d.mut
	m.removes, m.adds, m.texts, m.attrs = m.removes[:0], m.adds[:0], m.texts[:0], m.attrs[:0]
	j := &d.j
	err := d.list(data, "removes", func(x int32) *shapeError {
		id, err := d.reqInt(x, "id")
		m.removes = append(m.removes, id)
		return err
	})
	if err != nil {
		return err
	}
	err = d.list(data, "adds", func(x int32) *shapeError {
		var op addOp
		var err *shapeError
		if op.parent, err = d.reqInt(x, "parentId"); err != nil {
			return err
		}
		if op.next, op.hasNext, err = d.optID(x, "nextId"); err != nil {
			return err
		}
		if op.prev, op.hasPrev, err = d.optID(x, "previousId"); err != nil {
			return err
		}
		op.node = j.get(x, "node")
		if err := d.checkNode(op.node); err != nil {
			return err.at("node")
		}
		m.adds = append(m.adds, op)
		return nil
	})
	if err != nil {
		return err
	}
	err = d.list(data, "texts", func(x int32) *shapeError {
		id, err := d.reqInt(x, "id")
		if err != nil {
			return err
		}
		if err := d.optString(x, "value"); err != nil {
			return err
		}
		m.texts = append(m.texts, textOp{id, j.get(x, "value")})
		return nil
	})
	if err != nil {
		return err
	}
	return d.list(data, "attributes", func(x int32) *shapeError {
		id, err := d.reqInt(x, "id")
		if err != nil {
			return err
		}
		a := j.get(x, "attributes")
		if !j.is(a, jObj) {
			return shapef("is %s, not an object", j.kindName(a)).at("attributes")
		}
		m.attrs = append(m.attrs, attrOp{id, a})
		return nil
	})
}

func (d *Doc) applyMutation() {
	m := &d.mut
	j := &d.j
	for _, id := range m.removes {
		n, ok := d.lookup(id)
		if !ok {
			d.skipped++
			continue
		}
		d.drop(n)
	}
	d.applyAdds()
	for _, t := range m.texts {
		n, ok := d.lookup(t.id)
		if !ok {
			d.skipped++
			continue
		}
		val, _ := j.str(t.val)
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
	for _, a := range m.attrs {
		n, ok := d.lookup(a.id)
		if !ok || d.nodes[n].kind != event.RRWebNodeElement {
			d.skipped++
			continue
		}
		x := &d.nodes[n]
		for v := j.v[a.attrs].first; v >= 0; v = j.v[v].next {
			name := j.key(v)
			switch j.v[v].kind {
			case jObj: // a style declaration diff
				cur, _ := x.attr(name)
				if s := applyStyleDiff(cur, j, v); s != "" {
					x.setAttr(name, s)
				} else {
					x.delAttr(name)
				}
			case jArr:
			default:
				if val, ok := d.attrValue(v); ok {
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
	if len(m.adds) == 0 {
		return
	}
	var wait map[int64][]int32
	for i := range m.adds {
		q := append(m.queue[:0], int32(i))
		for h := 0; h < len(q); h++ {
			op := &m.adds[q[h]]
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
		m.queue = q
	}
	for _, w := range wait {
		d.skipped += int64(len(w))
	}
}

// missing returns the id an add still waits for.
func (d *Doc) missing(op *addOp) (int64, bool) {
	if _, ok := d.ids[op.parent]; !ok {
		return op.parent, true
	}
	if op.hasNext {
		if _, ok := d.ids[op.next]; !ok {
			return op.next, true
		}
	}
	return 0, false
}

// place inserts an add whose parent (and next sibling) exist, and returns
// the ids it created.
func (d *Doc) place(op *addOp) []int64 {
	m := &d.mut
	m.created = d.subtreeIDs(op.node, m.created[:0])
	// A serialized id that is already in the document replaces that node:
	// rrweb serializes a node again with its id when it comes back.
	for _, id := range m.created {
		if n, ok := d.ids[id]; ok {
			d.drop(n)
		}
	}
	p, ok := d.ids[op.parent]
	if !ok || (d.nodes[p].kind != event.RRWebNodeElement && d.nodes[p].kind != event.RRWebNodeDocument) {
		d.skipped++
		return nil
	}
	next := int32(-1)
	if op.hasNext {
		if n, ok := d.ids[op.next]; ok {
			next = n
		}
	} else if op.hasPrev {
		if pv, ok := d.ids[op.prev]; ok && d.nodes[pv].parent == p {
			next = d.nodes[pv].next // -1, append, when prev is last
		}
	}
	d.insert(d.build(op.node), p, next)
	return m.created
}

func (d *Doc) subtreeIDs(i int32, out []int64) []int64 {
	j := &d.j
	id, _ := j.int(j.get(i, "id"))
	out = append(out, id)
	t, _ := j.int(j.get(i, "type"))
	if t != event.RRWebNodeDocument && t != event.RRWebNodeElement {
		return out
	}
	if cn := j.get(i, "childNodes"); j.is(cn, jArr) {
		for c := j.v[cn].first; c >= 0; c = j.v[c].next {
			out = d.subtreeIDs(c, out)
		}
	}
	return out
}

// input applies an Input event: the control's value (as recorded: the
// recorder masks it first where the plan says so) and, for checkboxes and
// radios, its checkedness, kept as the value and checked attributes so
// that a rendering shows them.
func (d *Doc) input(data int32) error {
	j := &d.j
	id, err := d.reqInt(data, "id")
	if err != nil {
		return err.at("data")
	}
	if err := d.optString(data, "text"); err != nil {
		return err.at("data")
	}
	ic := j.get(data, "isChecked")
	if ic >= 0 && !j.is(ic, jBool) && !j.is(ic, jNull) {
		return shapef("is %s, not a boolean", j.kindName(ic)).at("isChecked").at("data")
	}
	n, ok := d.lookup(id)
	if !ok || d.nodes[n].kind != event.RRWebNodeElement {
		d.skipped++
		return nil
	}
	x := &d.nodes[n]
	if text, ok := j.str(j.get(data, "text")); ok {
		x.setAttr("value", text)
	}
	if j.is(ic, jBool) && strings.EqualFold(x.tag, "input") {
		typ, _ := x.attr("type")
		if strings.EqualFold(typ, "checkbox") || strings.EqualFold(typ, "radio") {
			if j.v[ic].b {
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

func applyStyleDiff(cur string, j *jdoc, obj int32) string {
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
	for m := j.v[obj].first; m >= 0; m = j.v[m].next {
		prop := strings.TrimSpace(j.key(m))
		if prop == "" {
			continue
		}
		switch j.v[m].kind {
		case jStr:
			v, _ := j.str(m)
			set(prop, strings.TrimSpace(v), false)
		case jArr:
			v, _ := j.str(j.v[m].first)
			pri := ""
			if f := j.v[m].first; f >= 0 {
				pri, _ = j.str(j.v[f].next)
			}
			set(prop, strings.TrimSpace(v), strings.EqualFold(pri, "important"))
		case jBool, jNull:
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
