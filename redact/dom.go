package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/jsonspan"
	"github.com/flightrec/flightrec/policy"
)

// rrweb DOM redaction. rrweb events are masked statefully: a mutation names
// nodes only by id, so whether "set value of node 42" or "text of node 97"
// is a secret depends on what node 42 and the parent of 97 are. domState
// mirrors the recorded DOM (ids, tags, the attributes masking decisions
// read, parent and children) and marks nodes masked.
//
// Decisions read structure only — tags, input types, autocomplete, name,
// id, selectors — never values, so observing the already-redacted log
// rebuilds exactly the masked set a restarted server needs.
//
// Masks are sticky: a node once masked stays masked for the rest of the
// snapshot (a show-password toggle that turns type=password into text does
// not unmask it), and masked form fields are carried into the next full
// snapshot by tag, id and name, since rrweb gives the same element a new id
// there.

type domAttr struct{ name, val string }

// dnode is one node of the recorded DOM.
type dnode struct {
	id    int64
	kind  int64
	tag   string    // lowercase, elements only
	attrs []domAttr // the attributes masking reads (lowercase names)

	parent, first, last, prev, next *dnode

	vmask    bool   // its value is masked (sticky)
	tmask    bool   // its text content is masked (sticky)
	editable bool   // its text is its value: textarea, select, option, contenteditable
	isStyle  bool   // a text node holding CSS
	rule     string // why vmask
	gen      uint64 // the event that last serialized it
}

func (n *dnode) attr(name string) (string, bool) {
	for i := range n.attrs {
		if n.attrs[i].name == name {
			return n.attrs[i].val, true
		}
	}
	return "", false
}

func (n *dnode) setAttr(name, val string) bool {
	for i := range n.attrs {
		if n.attrs[i].name == name {
			if n.attrs[i].val == val {
				return false
			}
			n.attrs[i].val = val
			return true
		}
	}
	n.attrs = append(n.attrs, domAttr{name, val})
	return true
}

func (n *dnode) delAttr(name string) bool {
	for i := range n.attrs {
		if n.attrs[i].name == name {
			n.attrs = append(n.attrs[:i], n.attrs[i+1:]...)
			return true
		}
	}
	return false
}

// parentElement is the nearest element above n, through iframe documents
// (an iframe's document sits under the iframe element) and shadow roots
// (whose children rrweb puts under the host).
func (n *dnode) parentElement() *dnode {
	for p := n.parent; p != nil; p = p.parent {
		if p.kind == event.RRWebNodeElement {
			return p
		}
	}
	return nil
}

func isFormControl(tag string) bool {
	return tag == "input" || tag == "textarea" || tag == "select"
}

// standard autocomplete tokens a report may name as they are.
var ccTokens = map[string]bool{
	"cc-name": true, "cc-given-name": true, "cc-additional-name": true, "cc-family-name": true,
	"cc-number": true, "cc-exp": true, "cc-exp-month": true, "cc-exp-year": true,
	"cc-csc": true, "cc-type": true, "current-password": true, "new-password": true,
	"one-time-code": true,
}

// domState tracks the rrweb DOM of one recording.
type domState struct {
	known *knownValues

	inputTypes   map[string]bool
	autoExact    map[string]bool
	autoPrefix   []string
	namePatterns []*regexp.Regexp
	sel, textSel *selectorSet
	tracked      []string // attribute names kept on nodes
	selAttrs     map[string]bool

	nodes  map[int64]*dnode
	root   *dnode
	masked map[*dnode]struct{} // masked elements (attached or not)
	carry  map[string]string   // tag, id, name of masked fields → rule, across snapshots

	// per event
	t        jsonspan.Doc // Unique: a repeated key is refused
	mut      event.RRWebMutationOps
	r        *Redactor
	emit     bool
	edits    []jsonspan.Edit
	findings []Finding
	removed  []*dnode
	touched  []*dnode
	path     []byte
	gen      uint64
	seen     map[int64]struct{}
	// selCache holds target selectors parsed for resolveSelector (nil: a
	// selector the matcher refuses).
	selCache map[string]*selectorSet
}

const maxCarry = 4096

func newDOMState(plan *policy.Plan, known *knownValues) (*domState, error) {
	s := &domState{
		known:      known,
		inputTypes: map[string]bool{},
		autoExact:  map[string]bool{},
		nodes:      map[int64]*dnode{},
		masked:     map[*dnode]struct{}{},
		carry:      map[string]string{},
		seen:       map[int64]struct{}{},
		selCache:   map[string]*selectorSet{},
	}
	for _, t := range plan.MaskInputTypes {
		s.inputTypes[strings.ToLower(strings.TrimSpace(t))] = true
	}
	for _, a := range plan.MaskAutocomplete {
		a = strings.ToLower(strings.TrimSpace(a))
		if p, ok := strings.CutSuffix(a, "*"); ok {
			s.autoPrefix = append(s.autoPrefix, p)
		} else if a != "" {
			s.autoExact[a] = true
		}
	}
	for _, p := range plan.MaskNamePatterns {
		re, err := regexp.Compile("(?i)" + p)
		if err != nil {
			return nil, fmt.Errorf("redact: mask name pattern %q: %w", p, err)
		}
		s.namePatterns = append(s.namePatterns, re)
	}
	var err error
	if s.sel, err = parseSelectors(plan.MaskSelectors); err != nil {
		return nil, err
	}
	if s.textSel, err = parseSelectors(plan.MaskTextSelectors); err != nil {
		return nil, err
	}
	s.selAttrs = map[string]bool{}
	for a := range s.sel.attrs {
		s.selAttrs[a] = true
	}
	for a := range s.textSel.attrs {
		s.selAttrs[a] = true
	}
	seen := map[string]bool{}
	for _, a := range []string{"type", "name", "id", "autocomplete", "contenteditable"} {
		seen[a] = true
		s.tracked = append(s.tracked, a)
	}
	for a := range s.selAttrs {
		if !seen[a] {
			seen[a] = true
			s.tracked = append(s.tracked, a)
		}
	}
	return s, nil
}

var (
	errRRWeb      = errors.New("malformed rrweb event")
	errJSONSyntax = errors.New("invalid JSON")
)

// redact masks one rrweb event and updates the model.
func (s *domState) redact(r *Redactor, d *event.Decoded) (Result, error) {
	return s.process(r, d.Data, true)
}

// observe updates the model from an already redacted, stored event.
func (s *domState) observe(data json.RawMessage) {
	_, _ = s.process(nil, data, false)
}

func (s *domState) process(r *Redactor, data []byte, emit bool) (res Result, err error) {
	s.r, s.emit = r, emit
	s.gen++
	s.edits, s.findings, s.removed, s.touched = s.edits[:0], nil, s.removed[:0], s.touched[:0]
	defer func() {
		s.r = nil
		s.t.Release(1 << 16) // don't pin a big snapshot's arena
	}()
	t := &s.t
	t.Unique = true
	if err := t.Parse(data); err != nil {
		if !errors.Is(err, jsonspan.ErrDuplicateKey) {
			err = errJSONSyntax // the offset and reason are the parser's; the message stays short
		}
		return Result{}, fmt.Errorf("redact: dom: %w", err)
	}
	if !t.Is(0, jsonspan.Object) {
		return Result{}, fmt.Errorf("redact: dom: %w", errRRWeb)
	}
	// An event without a numeric type or an object data is applied by no
	// player; it still gets the known-value scrub below.
	typ, _ := t.Int(t.Get(0, "type"))
	d := t.Get(0, "data")
	s.path = append(s.path[:0], "/data"...)
	if t.Is(d, jsonspan.Object) {
		switch typ {
		case event.RRWebFullSnapshot:
			err = s.fullSnapshot(d)
		case event.RRWebIncremental:
			src, _ := t.Int(t.Get(d, "source"))
			switch src {
			case event.RRWebMutation:
				err = s.mutation(d)
			case event.RRWebInput:
				s.input(d)
			}
		}
	}
	s.forgetRemoved()
	if err != nil {
		return Result{}, fmt.Errorf("redact: dom: %w", err)
	}
	if emit && s.stringsNeedWork(data) {
		s.scrubStrings()
	}
	if len(s.edits) == 0 {
		return Result{}, nil
	}
	return Result{Data: jsonspan.Splice(data, s.edits), Findings: s.findings}, nil
}

// fullSnapshot replaces the model with the snapshot's tree.
func (s *domState) fullSnapshot(d int32) error {
	node := s.t.Get(d, "node")
	if node >= 0 {
		s.resetSeen()
		if err := event.RRWebCheckNode(&s.t, node, s.visitID); err != nil {
			return errRRWeb
		}
	}
	s.reset()
	if node < 0 {
		return nil
	}
	n, err := s.build(node)
	if err != nil {
		return err
	}
	s.root = n
	s.evalSubtree(n)
	if s.emit {
		s.path = append(s.path, "/node"...)
		s.emitNode(node)
	}
	return nil
}

// reset forgets the tree, remembering masked fields by tag, id and name.
func (s *domState) reset() {
	for _, n := range s.nodes {
		if n.kind == event.RRWebNodeElement && n.vmask && isFormControl(n.tag) && len(s.carry) < maxCarry {
			if k := carryKey(n); k != "" {
				s.carry[k] = n.rule
			}
		}
	}
	clear(s.nodes)
	clear(s.masked)
	s.root = nil
}

func carryKey(n *dnode) string {
	id, _ := n.attr("id")
	name, _ := n.attr("name")
	if id == "" && name == "" {
		return ""
	}
	return n.tag + "\x00" + id + "\x00" + name
}

// visitID refuses an id serialized twice in one event, before anything
// is applied (so a refused event leaves the model as the stored log has
// it): the player would build every copy, and only one could be judged.
func (s *domState) visitID(id int64) *event.RRWebError {
	if _, dup := s.seen[id]; dup {
		return event.RRWebErrorf("appears twice in the event")
	}
	s.seen[id] = struct{}{}
	return nil
}

// resetSeen empties the id set, dropping it after a big event (clearing a
// map costs its capacity).
func (s *domState) resetSeen() {
	if len(s.seen) > 256 {
		s.seen = map[int64]struct{}{}
	} else {
		clear(s.seen)
	}
}

// build creates or refreshes the node serialized at JSON node i and its
// subtree, unlinked at the top. The tree was validated.
func (s *domState) build(i int32) (*dnode, error) {
	t := &s.t
	id, _ := t.Int(t.Get(i, "id"))
	kind, _ := t.Int(t.Get(i, "type"))
	n := s.nodes[id]
	if n == nil {
		n = &dnode{id: id}
		s.nodes[id] = n
	} else {
		// One id serialized twice in one event: the player would build
		// both, and only one could be judged. Refuse.
		if n.gen == s.gen {
			return nil, errRRWeb
		}
		s.detach(n)
		for c := n.first; c != nil; {
			next := c.next
			s.detach(c)
			s.removed = append(s.removed, c)
			c = next
		}
	}
	n.gen = s.gen
	n.kind = kind
	n.attrs = n.attrs[:0]
	n.tag = ""
	n.isStyle = false
	switch kind {
	case event.RRWebNodeElement:
		tn, _ := t.Str(t.Get(i, "tagName"))
		n.tag = domLower(tn)
		if a := t.Get(i, "attributes"); t.Is(a, jsonspan.Object) {
			for m := t.Nodes[a].First; m >= 0; m = t.Nodes[m].Next {
				name, ok := s.trackedName(m)
				if !ok {
					continue
				}
				if v, ok := event.RRWebAttrValue(t, m); ok {
					n.setAttr(name, v)
				}
			}
		}
	case event.RRWebNodeText:
		n.isStyle = t.Is(t.Get(i, "isStyle"), jsonspan.True)
	}
	// Children are read on every node type: a player shows only a
	// document's and an element's, but a value hidden under a text node
	// is stored all the same, so it is judged all the same.
	if cn := event.RRWebChildren(t, i); cn >= 0 {
		for c := t.Nodes[cn].First; c >= 0; c = t.Nodes[c].Next {
			child, err := s.build(c)
			if err != nil {
				return nil, err
			}
			if !s.link(child, n, nil) {
				return nil, errRRWeb
			}
		}
	}
	return n, nil
}

// trackedName is member m's key as a lowercase attribute name, when the
// model keeps that attribute.
func (s *domState) trackedName(m int32) (string, bool) {
	t := &s.t
	if !t.Nodes[m].KeyEsc {
		raw := t.RawKey(m)
		for _, name := range s.tracked {
			if domEqualFold(raw, name) {
				return name, true
			}
		}
		return "", false
	}
	k := domLower(t.Key(m))
	for _, name := range s.tracked {
		if k == name {
			return name, true
		}
	}
	return "", false
}

func domLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// domEqualFold compares raw to a lowercase name, folding ASCII only (as
// setAttribute lowercases names in HTML documents).
func domEqualFold(raw []byte, lower string) bool {
	if len(raw) != len(lower) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// link puts n under parent, before next when next is parent's child. It
// refuses to make a cycle.
func (s *domState) link(n, parent, next *dnode) bool {
	for p := parent; p != nil; p = p.parent {
		if p == n {
			return false
		}
	}
	if n.parent != nil {
		s.detach(n)
	}
	n.parent = parent
	if next != nil && next.parent == parent && next != n {
		n.next, n.prev = next, next.prev
		if next.prev != nil {
			next.prev.next = n
		} else {
			parent.first = n
		}
		next.prev = n
		return true
	}
	n.prev, n.next = parent.last, nil
	if parent.last != nil {
		parent.last.next = n
	} else {
		parent.first = n
	}
	parent.last = n
	return true
}

func (s *domState) detach(n *dnode) {
	p := n.parent
	if p == nil {
		return
	}
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		p.first = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		p.last = n.prev
	}
	n.parent, n.prev, n.next = nil, nil, nil
}

// forgetRemoved drops the subtrees removed by this event and not put back.
// Masked nodes keep their record (detached), so a node re-added later
// under the same id is still masked.
func (s *domState) forgetRemoved() {
	for _, n := range s.removed {
		if n.parent == nil && n != s.root && s.nodes[n.id] == n {
			s.forget(n)
		}
	}
	s.removed = s.removed[:0]
}

func (s *domState) forget(n *dnode) {
	for c := n.first; c != nil; {
		next := c.next
		c.parent, c.prev, c.next = nil, nil, nil
		s.forget(c)
		c = next
	}
	n.first, n.last = nil, nil
	delete(s.masked, n)
	if !n.vmask && !n.tmask && s.nodes[n.id] == n {
		delete(s.nodes, n.id)
	}
}

// mutation applies an rrweb mutation: removes, adds, texts, attributes (the
// order rrweb's replayer applies them), evaluates masks on the final
// structure, then masks what the event carries.
func (s *domState) mutation(d int32) error {
	t := &s.t
	m := &s.mut
	s.resetSeen()
	if err := m.Decode(t, d, s.visitID); err != nil {
		return errRRWeb
	}
	for _, id := range m.Removes {
		if n := s.nodes[id]; n != nil && n != s.root {
			s.detach(n)
			s.removed = append(s.removed, n)
		}
	}
	start := len(s.touched)
	for _, add := range m.Adds {
		n, err := s.build(add.Node)
		if err != nil {
			return err
		}
		s.touched = append(s.touched, n)
	}
	// Link once every added node exists: rrweb may list a child's add
	// before its parent's.
	for k, add := range m.Adds {
		n := s.touched[start+k]
		parent := s.nodes[add.Parent]
		var next *dnode
		if add.HasNext {
			next = s.nodes[add.Next]
		}
		if parent == nil || !s.link(n, parent, next) {
			s.removed = append(s.removed, n) // orphan: forgotten unless masked
		}
	}
	for _, op := range m.Attrs {
		n := s.nodes[op.ID]
		if n == nil || n.kind != event.RRWebNodeElement {
			continue
		}
		changed := false
		for a := t.Nodes[op.Attributes].First; a >= 0; a = t.Nodes[a].Next {
			name, ok := s.trackedName(a)
			if !ok {
				continue
			}
			var c bool
			if v, ok := event.RRWebAttrValue(t, a); ok {
				c = n.setAttr(name, v)
			} else if t.Is(a, jsonspan.Null) {
				c = n.delAttr(name)
			}
			if c {
				changed = true
				s.eval(n) // in order: a type set and reset in one map still masks
			}
		}
		if changed {
			s.touched = append(s.touched, n)
		}
	}
	for _, n := range s.touched {
		s.evalSubtree(n)
	}
	if !s.emit {
		return nil
	}
	base := len(s.path)
	for i, add := range m.Adds {
		s.path = append(strconv.AppendInt(append(s.path[:base], "/adds/"...), int64(i), 10), "/node"...)
		s.emitNode(add.Node)
	}
	s.path = s.path[:base]
	for i, op := range m.Texts {
		if n := s.nodes[op.ID]; n != nil {
			if rule, ok := s.textRule(n); ok {
				s.erase(op.Value, rule, "/texts/", i, "/value")
			}
		}
	}
	for i, op := range m.Attrs {
		if n := s.nodes[op.ID]; n != nil {
			if rule, ok := s.valueRule(n); ok {
				s.path = append(strconv.AppendInt(append(s.path[:base], "/attributes/"...), int64(i), 10), "/attributes"...)
				s.emitAttributes(n, op.Attributes, rule)
				s.path = s.path[:base]
			}
		}
	}
	return nil
}

// input masks an rrweb input event aimed at a masked element.
func (s *domState) input(d int32) {
	if !s.emit {
		return
	}
	id, ok := s.t.Int(s.t.Get(d, "id"))
	if !ok {
		return
	}
	if n := s.nodes[id]; n != nil {
		if _, ok := s.valueRule(n); ok {
			s.erase(s.t.Get(d, "text"), "dom:input-event", "/text", -1, "")
		}
	}
}

// eval decides n's masks from its own structure and its parent's (which
// must be decided already). Masks only ever get added.
func (s *domState) eval(n *dnode) {
	p := n.parent
	switch n.kind {
	case event.RRWebNodeElement:
		if !n.editable {
			ce, ok := n.attr("contenteditable")
			n.editable = n.tag == "textarea" || n.tag == "select" || n.tag == "option" || n.tag == "optgroup" ||
				(ok && !strings.EqualFold(strings.TrimSpace(ce), "false")) ||
				(p != nil && p.editable)
		}
		if !n.vmask {
			if rule := s.ownRule(n); rule != "" {
				n.vmask, n.rule = true, rule
			} else if s.sel.matches(n) {
				n.vmask, n.rule = true, "dom:selector"
			} else if p != nil && p.vmask {
				n.vmask, n.rule = true, p.rule
			} else if isFormControl(n.tag) && len(s.carry) > 0 {
				if k := carryKey(n); k != "" {
					if rule, ok := s.carry[k]; ok {
						n.vmask, n.rule = true, rule
					}
				}
			}
		}
		if !n.tmask && ((p != nil && p.tmask) || s.textSel.matches(n)) {
			n.tmask = true
		}
		if n.vmask || n.tmask {
			s.masked[n] = struct{}{}
		}
	case event.RRWebNodeDocument: // an iframe's document takes the iframe's masks
		if p != nil {
			n.tmask = n.tmask || p.tmask
			n.editable = n.editable || p.editable
			if p.vmask && !n.vmask {
				n.vmask, n.rule = true, p.rule
			}
		}
	case event.RRWebNodeText, event.RRWebNodeCDATA, event.RRWebNodeComment:
		if p != nil {
			n.tmask = n.tmask || p.tmask
			if p.vmask && p.editable && !n.vmask {
				n.vmask, n.rule = true, p.rule
			}
		}
	}
}

func (s *domState) evalSubtree(n *dnode) {
	s.eval(n)
	for c := n.first; c != nil; c = c.next {
		s.evalSubtree(c)
	}
}

// ownRule is the rule masking a form control by its own attributes.
func (s *domState) ownRule(n *dnode) string {
	if !isFormControl(n.tag) {
		return ""
	}
	if n.tag == "input" && len(s.inputTypes) > 0 {
		if typ, ok := n.attr("type"); ok {
			typ = strings.ToLower(strings.TrimSpace(typ))
			if s.inputTypes[typ] {
				return "dom:input-type:" + typ
			}
		}
	}
	if ac, ok := n.attr("autocomplete"); ok && ac != "" {
		for _, tok := range strings.Fields(strings.ToLower(ac)) {
			if s.autoExact[tok] {
				return "dom:autocomplete:" + tok
			}
			for _, p := range s.autoPrefix {
				if strings.HasPrefix(tok, p) {
					if ccTokens[tok] {
						return "dom:autocomplete:" + tok
					}
					return "dom:autocomplete:" + p + "*" // the page's token is not ours to report
				}
			}
		}
	}
	if len(s.namePatterns) > 0 {
		name, _ := n.attr("name")
		id, _ := n.attr("id")
		for _, re := range s.namePatterns {
			if (name != "" && re.MatchString(name)) || (id != "" && re.MatchString(id)) {
				return "dom:name-pattern"
			}
		}
	}
	return ""
}

// valueRule says whether an element's value (attribute, input events) is
// masked, and by which rule.
func (s *domState) valueRule(n *dnode) (string, bool) {
	if n.vmask {
		return n.rule, true
	}
	if n.tmask && n.kind == event.RRWebNodeElement {
		return "dom:text-selector", true
	}
	return "", false
}

// textRule says whether a node's text content is masked.
func (s *domState) textRule(n *dnode) (string, bool) {
	switch n.kind {
	case event.RRWebNodeText, event.RRWebNodeCDATA, event.RRWebNodeComment:
		if n.isStyle {
			return "", false
		}
		if n.vmask {
			return n.rule, true
		}
		if n.tmask {
			return "dom:text-selector", true
		}
	case event.RRWebNodeElement:
		return s.valueRule(n)
	}
	return "", false
}

// emitNode masks what the serialized node at JSON node i (and below)
// carries; s.path is its pointer.
func (s *domState) emitNode(i int32) {
	t := &s.t
	id, _ := t.Int(t.Get(i, "id"))
	n := s.nodes[id]
	if n == nil {
		return
	}
	switch n.kind {
	case event.RRWebNodeElement:
		if rule, ok := s.valueRule(n); ok {
			base := len(s.path)
			s.path = append(s.path, "/attributes"...)
			s.emitAttributes(n, t.Get(i, "attributes"), rule)
			s.path = s.path[:base]
		}
	case event.RRWebNodeText, event.RRWebNodeCDATA, event.RRWebNodeComment:
		if rule, ok := s.textRule(n); ok {
			s.erase(t.Get(i, "textContent"), rule, "/textContent", -1, "")
		}
	}
	cn := t.Get(i, "childNodes")
	if !t.Is(cn, jsonspan.Array) {
		return
	}
	base := len(s.path)
	k := 0
	for c := t.Nodes[cn].First; c >= 0; c = t.Nodes[c].Next {
		s.path = strconv.AppendInt(append(s.path[:base], "/childNodes/"...), int64(k), 10)
		s.emitNode(c)
		k++
	}
	s.path = s.path[:base]
}

// emitAttributes masks a masked element's value in an attributes map (and
// an option's label, and which option is selected). s.path points at the
// map.
func (s *domState) emitAttributes(n *dnode, a int32, rule string) {
	t := &s.t
	if !t.Is(a, jsonspan.Object) {
		return
	}
	for m := t.Nodes[a].First; m >= 0; m = t.Nodes[m].Next {
		var name string
		if t.Nodes[m].KeyEsc {
			name = domLower(t.Key(m))
		} else {
			raw := t.RawKey(m)
			switch {
			case domEqualFold(raw, "value"):
				name = "value"
			case domEqualFold(raw, "label"):
				name = "label"
			case domEqualFold(raw, "selected"):
				name = "selected"
			default:
				continue
			}
		}
		switch {
		case name == "value" || (name == "label" && n.tag == "option"):
			s.erase(m, rule, "/", -1, t.Key(m))
		case name == "selected" && n.tag == "option" && !t.Is(m, jsonspan.Null) && !t.Is(m, jsonspan.False):
			// Which option of a masked select is chosen is the secret.
			start, end := t.MemberSpan(a, m)
			s.edits = append(s.edits, jsonspan.Edit{Start: start, End: end})
			s.finding(rule, "/", -1, t.Key(m))
		}
	}
}

// scrubStrings runs the one string pass every channel gets (URLs, the
// plan's detectors, the known values: scrubber.str) over every other string
// of the event — text nodes, mutation texts, attribute values (title, alt,
// data-*, data: URLs), input events — so a JWT, "password: …" or a card
// number in page text is erased as it would be in a console line. Strings
// the model reads — tagName and the tracked attributes — are left alone,
// so that observing the stored event rebuilds the same structure; strings
// a mask already erased are skipped.
// stringsNeedWork is the string pass's pre-filter (rawNeedsWork) over
// each string value's raw span, quotes included, rather than over the
// whole event: the pass looks at values alone, never at member names or
// across values, and the names and structure are most of an rrweb event's
// bytes (and most of its ':' for the key-signal scan). Most DOM events
// (mouse moves, scrolls, viewport changes) carry no string value at all.
func (s *domState) stringsNeedWork(data []byte) bool {
	for i := range s.t.Nodes {
		if n := &s.t.Nodes[i]; n.Kind == jsonspan.String && s.r.rawNeedsWork(data[n.Start:n.End]) {
			return true
		}
	}
	return false
}

func (s *domState) scrubStrings() {
	done := make(map[int32]bool, len(s.edits))
	for _, e := range s.edits {
		done[e.Start] = true
	}
	w := &scrubber{r: s.r, channel: string(event.KindDOM)}
	s.path = s.path[:0]
	s.scrubAt(w, 0, false, done)
	s.findings = append(s.findings, w.findings...)
}

func (s *domState) scrubAt(w *scrubber, i int32, attrMap bool, done map[int32]bool) {
	t := &s.t
	n := &t.Nodes[i]
	switch n.Kind {
	case jsonspan.String:
		if done[n.Start] {
			return
		}
		w.fixed = string(s.path)
		if w.fixed == "" {
			w.fixed = "/"
		}
		str, _ := t.Str(i)
		nv, ok := w.str(str)
		if ok {
			s.edits = append(s.edits, jsonspan.Edit{Start: n.Start, End: n.End, Repl: jsonspan.Quote(nv)})
		}
	case jsonspan.Object:
		base := len(s.path)
		for m := n.First; m >= 0; m = t.Nodes[m].Next {
			if k := t.Nodes[m].Kind; k != jsonspan.String && k != jsonspan.Object && k != jsonspan.Array {
				continue
			}
			if t.KeyIs(m, "tagName") {
				continue
			}
			if attrMap {
				if _, tracked := s.trackedName(m); tracked {
					continue
				}
			}
			s.path = append(s.path[:base], '/')
			if t.Nodes[m].KeyEsc {
				s.path = append(s.path, PointerEscape(t.Key(m))...)
			} else {
				s.path = appendPointerToken(s.path, t.RawKey(m))
			}
			s.scrubAt(w, m, t.KeyIs(m, "attributes") && t.Nodes[m].Kind == jsonspan.Object, done)
		}
		s.path = s.path[:base]
	case jsonspan.Array:
		base := len(s.path)
		k := 0
		for c := n.First; c >= 0; c = t.Nodes[c].Next {
			s.path = strconv.AppendInt(append(s.path[:base], '/'), int64(k), 10)
			s.scrubAt(w, c, false, done)
			k++
		}
		s.path = s.path[:base]
	}
}

func appendPointerToken(p, tok []byte) []byte {
	for _, c := range tok {
		switch c {
		case '~':
			p = append(p, '~', '0')
		case '/':
			p = append(p, '~', '1')
		default:
			p = append(p, c)
		}
	}
	return p
}

// erase replaces the string or number at JSON node v with its erased form,
// remembers the value and records a finding at s.path + suffix (with an
// array index when idx ≥ 0, and a key token).
func (s *domState) erase(v int32, rule, suffix string, idx int, tail string) {
	t := &s.t
	if v < 0 || (t.Nodes[v].Kind != jsonspan.String && t.Nodes[v].Kind != jsonspan.Number) {
		return
	}
	orig := t.Scalar(v)
	if strings.TrimSpace(orig) == "" {
		return
	}
	if strings.Trim(orig, "*") != "" { // rrweb's own mask is no secret
		s.known.add(orig)
	}
	s.edits = append(s.edits, jsonspan.Edit{Start: t.Nodes[v].Start, End: t.Nodes[v].End, Repl: jsonspan.Quote(s.r.erase(orig))})
	s.finding(rule, suffix, idx, tail)
}

func (s *domState) finding(rule, suffix string, idx int, tail string) {
	p := append([]byte(nil), s.path...)
	p = append(p, suffix...)
	if idx >= 0 {
		p = strconv.AppendInt(p, int64(idx), 10)
	}
	if suffix == "/" {
		p = append(p, PointerEscape(tail)...)
	} else {
		p = append(p, tail...)
	}
	s.findings = append(s.findings, Finding{Rule: rule, Channel: string(event.KindDOM), Pointer: string(p)})
}

// maskedOnPage reports whether a masked element is attached to the page now.
// Hidden inputs never show, so they do not count.
func (s *domState) maskedOnPage() bool {
	if s.root == nil {
		return false
	}
	for n := range s.masked {
		if n.tag == "input" {
			if typ, _ := n.attr("type"); strings.EqualFold(strings.TrimSpace(typ), "hidden") {
				continue
			}
		}
		top := n
		for top.parent != nil {
			top = top.parent
		}
		if top == s.root {
			return true
		}
	}
	return false
}
