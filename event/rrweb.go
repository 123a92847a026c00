package event

import (
	"fmt"
	"strings"

	"github.com/flightrec/flightrec/internal/jsonspan"
)

// rrweb's vocabulary, as the recorder stores it in dom events (rrweb 2.x):
// what redaction and playback both read of an rrweb stream.

// rrweb event types (the envelope's "type").
const (
	RRWebFullSnapshot = 2
	RRWebIncremental  = 3
	RRWebMeta         = 4
)

// rrweb incremental snapshot sources (data.source) read by flightrec.
const (
	RRWebMutation = 0
	RRWebInput    = 5
)

// rrweb-snapshot serialized node types (node.type).
const (
	RRWebNodeDocument = 0
	RRWebNodeDocType  = 1
	RRWebNodeElement  = 2
	RRWebNodeText     = 3
	RRWebNodeCDATA    = 4
	RRWebNodeComment  = 5
)

// The rrweb model: how a serialized node and a mutation are read and
// checked. Redaction (redact/dom.go) and the DOM player
// (playback/dom/apply.go) both read events through it, so what redaction
// judged and what the player applies are the same nodes, ids and lists:
// an event one of them would read differently cannot be stored by one and
// shown by the other. Both read events parsed by internal/jsonspan.

// RRWebError is an event that is JSON but not shaped as its rrweb type
// requires. The path is collected innermost first while the checks
// unwind, so it costs nothing unless an event is malformed. It names
// fields and indices, never values.
type RRWebError struct {
	path []string
	Msg  string
}

// RRWebErrorf makes an RRWebError.
func RRWebErrorf(format string, args ...any) *RRWebError {
	return &RRWebError{Msg: fmt.Sprintf(format, args...)}
}

// At prefixes the error's path with a member name.
func (e *RRWebError) At(seg string) *RRWebError {
	e.path = append(e.path, seg)
	return e
}

// AtIndex prefixes the error's path with an array index.
func (e *RRWebError) AtIndex(i int) *RRWebError { return e.At(fmt.Sprintf("[%d]", i)) }

// Error is "path: reason", the path as data.adds[0].node.id.
func (e *RRWebError) Error() string {
	var b strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		s := e.path[i]
		if b.Len() > 0 && s[0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	if len(e.path) > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// RRWebAttrValue reads a serialized attribute value: rrweb writes strings,
// numbers (kept as spelled), and true for a present boolean attribute;
// null and false mean absent, and so does anything else.
func RRWebAttrValue(j *jsonspan.Doc, v int32) (string, bool) {
	switch j.Kind(v) {
	case jsonspan.String, jsonspan.Number:
		return j.Scalar(v), true
	case jsonspan.True:
		return "", true
	}
	return "", false
}

// RRWebOptString checks that member key of obj is a string, null or
// absent.
func RRWebOptString(j *jsonspan.Doc, obj int32, key string) *RRWebError {
	v := j.Get(obj, key)
	if v < 0 || j.Is(v, jsonspan.String) || j.Is(v, jsonspan.Null) {
		return nil
	}
	return RRWebErrorf("is %s, not a string", j.KindName(v)).At(key)
}

// RRWebInt reads required integer member key of obj.
func RRWebInt(j *jsonspan.Doc, obj int32, key string) (int64, *RRWebError) {
	v := j.Get(obj, key)
	n, ok := j.Int(v)
	if !ok {
		return 0, RRWebErrorf("is %s, not an integer", j.KindName(v)).At(key)
	}
	return n, nil
}

// RRWebChildren is serialized node i's childNodes array, or -1 when it
// has none (absent or null).
func RRWebChildren(j *jsonspan.Doc, i int32) int32 {
	cn := j.Get(i, "childNodes")
	if !j.Is(cn, jsonspan.Array) {
		return -1
	}
	return cn
}

// RRWebCheckNode checks serialized node i and its subtree, so that a
// reader building from it cannot fail halfway: an object with an integer
// id, a known node type, an element's string tagName and object
// attributes, a doctype's and a text node's strings, and childNodes an
// array of nodes (on any node type: a player shows only a document's and
// an element's children, but redaction reads whatever an event carries).
// Absent and null are the same. visit, when not nil, sees every node's id
// in document order and may refuse it.
func RRWebCheckNode(j *jsonspan.Doc, i int32, visit func(id int64) *RRWebError) *RRWebError {
	if !j.Is(i, jsonspan.Object) {
		return RRWebErrorf("is %s, not a serialized node", j.KindName(i))
	}
	if v := j.Get(i, "id"); !j.Is(v, jsonspan.Number) {
		return RRWebErrorf("is %s, not an integer", j.KindName(v)).At("id")
	} else if id, ok := j.Int(v); !ok {
		return RRWebErrorf("is not an integer").At("id")
	} else if visit != nil {
		if err := visit(id); err != nil {
			return err.At("id")
		}
	}
	t, err := RRWebInt(j, i, "type")
	if err != nil {
		return err
	}
	switch t {
	case RRWebNodeDocument:
	case RRWebNodeDocType:
		for _, k := range [...]string{"name", "publicId", "systemId"} {
			if err := RRWebOptString(j, i, k); err != nil {
				return err
			}
		}
	case RRWebNodeElement:
		if tn := j.Get(i, "tagName"); !j.Is(tn, jsonspan.String) {
			return RRWebErrorf("is %s, not a string", j.KindName(tn)).At("tagName")
		}
		if a := j.Get(i, "attributes"); a >= 0 && !j.Is(a, jsonspan.Object) && !j.Is(a, jsonspan.Null) {
			return RRWebErrorf("is %s, not an object", j.KindName(a)).At("attributes")
		}
	case RRWebNodeText, RRWebNodeCDATA, RRWebNodeComment:
		if err := RRWebOptString(j, i, "textContent"); err != nil {
			return err
		}
	default:
		return RRWebErrorf("unknown node type %d", t).At("type")
	}
	cn := j.Get(i, "childNodes")
	if cn < 0 || j.Is(cn, jsonspan.Null) {
		return nil
	}
	if !j.Is(cn, jsonspan.Array) {
		return RRWebErrorf("is %s, not an array", j.KindName(cn)).At("childNodes")
	}
	k := 0
	for c := j.Nodes[cn].First; c >= 0; c = j.Nodes[c].Next {
		if err := RRWebCheckNode(j, c, visit); err != nil {
			return err.AtIndex(k).At("childNodes")
		}
		k++
	}
	return nil
}

// RRWebMutationOps is a decoded, checked mutation (an incremental
// snapshot of source RRWebMutation). Its slices are reused from event to
// event; node and value fields are indices into the parsed event.
type RRWebMutationOps struct {
	Removes []int64
	Adds    []RRWebAdd
	Texts   []RRWebText
	Attrs   []RRWebAttrs
}

// RRWebAdd is one added node: placed under Parent, before Next when
// HasNext, else after Prev when HasPrev, else last. A nextId or
// previousId that is absent, null or -1 (rrweb's "not serialized") is
// none.
type RRWebAdd struct {
	Parent, Next, Prev int64
	HasNext, HasPrev   bool
	Node               int32 // the serialized node
}

// RRWebText sets node ID's text; Value is a string or null (-1: absent).
type RRWebText struct {
	ID    int64
	Value int32
}

// RRWebAttrs changes node ID's attributes; Attributes is an object whose
// members are values (RRWebAttrValue), null (remove) or, for style, a
// declaration diff.
type RRWebAttrs struct {
	ID         int64
	Attributes int32
}

// Decode reads mutation data (the event's data object) into m, checking
// all of it first: removes, adds, texts and attributes are each absent,
// null or an array of objects; ids are integers; added nodes pass
// RRWebCheckNode (with visit); text values are strings or null; attribute
// maps are objects. On error m is partly filled and must not be used.
func (m *RRWebMutationOps) Decode(j *jsonspan.Doc, data int32, visit func(id int64) *RRWebError) *RRWebError {
	m.Removes, m.Adds, m.Texts, m.Attrs = m.Removes[:0], m.Adds[:0], m.Texts[:0], m.Attrs[:0]
	err := rrwebList(j, data, "removes", func(x int32) *RRWebError {
		id, err := RRWebInt(j, x, "id")
		m.Removes = append(m.Removes, id)
		return err
	})
	if err != nil {
		return err
	}
	err = rrwebList(j, data, "adds", func(x int32) *RRWebError {
		var op RRWebAdd
		var err *RRWebError
		if op.Parent, err = RRWebInt(j, x, "parentId"); err != nil {
			return err
		}
		if op.Next, op.HasNext, err = rrwebOptID(j, x, "nextId"); err != nil {
			return err
		}
		if op.Prev, op.HasPrev, err = rrwebOptID(j, x, "previousId"); err != nil {
			return err
		}
		op.Node = j.Get(x, "node")
		if err := RRWebCheckNode(j, op.Node, visit); err != nil {
			return err.At("node")
		}
		m.Adds = append(m.Adds, op)
		return nil
	})
	if err != nil {
		return err
	}
	err = rrwebList(j, data, "texts", func(x int32) *RRWebError {
		id, err := RRWebInt(j, x, "id")
		if err != nil {
			return err
		}
		if err := RRWebOptString(j, x, "value"); err != nil {
			return err
		}
		m.Texts = append(m.Texts, RRWebText{id, j.Get(x, "value")})
		return nil
	})
	if err != nil {
		return err
	}
	return rrwebList(j, data, "attributes", func(x int32) *RRWebError {
		id, err := RRWebInt(j, x, "id")
		if err != nil {
			return err
		}
		a := j.Get(x, "attributes")
		if !j.Is(a, jsonspan.Object) {
			return RRWebErrorf("is %s, not an object", j.KindName(a)).At("attributes")
		}
		m.Attrs = append(m.Attrs, RRWebAttrs{id, a})
		return nil
	})
}

// rrwebList checks that member key of obj is an array of objects (or
// absent, or null) and calls fn on each element.
func rrwebList(j *jsonspan.Doc, obj int32, key string, fn func(x int32) *RRWebError) *RRWebError {
	a := j.Get(obj, key)
	if a < 0 || j.Is(a, jsonspan.Null) {
		return nil
	}
	if !j.Is(a, jsonspan.Array) {
		return RRWebErrorf("is %s, not an array", j.KindName(a)).At(key)
	}
	k := 0
	for x := j.Nodes[a].First; x >= 0; x = j.Nodes[x].Next {
		if !j.Is(x, jsonspan.Object) {
			return RRWebErrorf("is %s, not an object", j.KindName(x)).AtIndex(k).At(key)
		}
		if err := fn(x); err != nil {
			return err.AtIndex(k).At(key)
		}
		k++
	}
	return nil
}

// rrwebOptID reads an optional node id: absent, null and -1 (rrweb's "not
// serialized") all mean none.
func rrwebOptID(j *jsonspan.Doc, obj int32, key string) (int64, bool, *RRWebError) {
	v := j.Get(obj, key)
	if v < 0 || j.Is(v, jsonspan.Null) {
		return 0, false, nil
	}
	n, ok := j.Int(v)
	if !ok {
		return 0, false, RRWebErrorf("is %s, not an integer or null", j.KindName(v)).At(key)
	}
	return n, n != -1, nil
}
