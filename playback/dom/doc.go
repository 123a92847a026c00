// Package dom materializes the DOM a recording's rrweb events describe, at
// any point of the stream, and renders it as inert HTML.
//
// # Model
//
// The recorder stores each rrweb event (rrweb 2.x, @rrweb/record)
// unchanged as a flightrec dom event. A FullSnapshot (type 2) carries the
// whole serialized document; IncrementalSnapshot mutations (type 3, source
// 0) and inputs (source 5) then change it, naming nodes only by the ids
// the snapshot gave them. A Doc is that document as a tree keyed by rrweb
// id: Doc.Apply folds one event into it. Nothing else in an rrweb stream
// (mouse, scroll, viewport, canvas, style-sheet rule events) changes what
// a static rendering shows, so those are accepted and ignored.
//
// Replaying from the last full snapshot is what makes rrweb players slow to
// seek: jumping to the end of a long session replays every mutation since
// the page loaded. Checkpoints instead keeps the materialized state every K
// events and at step boundaries, compactly encoded and compressed, together
// with the events between them; the state at any seq is then one checkpoint
// restored plus at most K events replayed, whatever the recording's length.
// A Cache holds checkpoint sets of many recordings within a byte budget.
//
// Doc.RenderInert writes the state as a standalone HTML document in which
// nothing can run or fetch: scripts, handlers, frames, plug-ins, script and
// data URLs, external resources and CSS imports are removed, so the
// recorded page cannot act in the viewer's origin. The rendering is one
// layer; the CSP header (see CSP and SetHeaders) is the other, and the
// HTTP layer must send both.
package dom

import (
	"errors"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/jsonspan"
)

// node flags.
const (
	fSVG   = 1 << iota // rrweb's isSVG: the element is in the SVG namespace
	fStyle             // rrweb's isStyle: a text node holding CSS
	fAnon              // created here (a text mutation on an element): no rrweb id
)

type attr struct{ name, val string }

// node is one node of the tree. Nodes sit in one slice and link by index
// (-1 for none), so a Doc is a few allocations, cheap to restore from a
// checkpoint, and walks need no recursion however deep the page.
type node struct {
	id    int64
	kind  uint8
	flags uint8
	tag   string // an element's tagName as recorded; a doctype's name
	text  string // text, comment and CDATA content; a doctype's publicId
	text2 string // a doctype's systemId
	attrs []attr

	parent, first, last, prev, next int32
}

func (n *node) attr(name string) (string, bool) {
	for i := range n.attrs {
		if n.attrs[i].name == name {
			return n.attrs[i].val, true
		}
	}
	return "", false
}

func (n *node) setAttr(name, val string) {
	for i := range n.attrs {
		if n.attrs[i].name == name {
			n.attrs[i].val = val
			return
		}
	}
	n.attrs = append(n.attrs, attr{name, val})
}

func (n *node) delAttr(name string) {
	for i := range n.attrs {
		if n.attrs[i].name == name {
			n.attrs = append(n.attrs[:i:i], n.attrs[i+1:]...)
			return
		}
	}
}

// Doc is the materialized DOM of a recording at one point of its event
// stream. The zero value is not usable; use NewDoc. A Doc is not safe for
// concurrent use.
type Doc struct {
	nodes []node
	free  []int32
	ids   map[int64]int32
	root  int32

	href          string
	width, height int64
	skipped       int64
	seq           uint64

	j   jsonspan.Doc // the event being applied; reused
	mut event.RRWebMutationOps

	queue   []int32 // applyAdds' scratch
	created []int64 // place's scratch
}

// NewDoc returns an empty document: the state before any event.
func NewDoc() *Doc {
	return &Doc{ids: make(map[int64]int32), root: -1}
}

// ErrMalformed is wrapped by every error about an event that is not JSON or
// not shaped as its rrweb type requires. Such an event changes nothing.
var ErrMalformed = errors.New("malformed rrweb event")

// Href is the page URL of the last Meta event (empty before one).
func (d *Doc) Href() string { return d.href }

// Size is the viewport of the last Meta event.
func (d *Doc) Size() (width, height int64) { return d.width, d.height }

// Skipped counts the references to unknown nodes that mutations and
// inputs made so far (an id the document does not hold, an add whose
// parent never came): rrweb's replayer skips them too, and a count that
// grows says the stream and the state disagree.
func (d *Doc) Skipped() int64 { return d.skipped }

// Seq is the seq of the last event a Checkpoints applied to this state
// (0 for a Doc built with Apply, or before any event). The rendering of a
// recording at a seq never changes, so it makes a good ETag.
func (d *Doc) Seq() uint64 { return d.seq }

// Nodes is the number of nodes in the document.
func (d *Doc) Nodes() int { return len(d.ids) }

func (d *Doc) alloc(n node) int32 {
	n.parent, n.first, n.last, n.prev, n.next = -1, -1, -1, -1, -1
	if k := len(d.free); k > 0 {
		i := d.free[k-1]
		d.free = d.free[:k-1]
		d.nodes[i] = n
		return i
	}
	d.nodes = append(d.nodes, n)
	return int32(len(d.nodes) - 1)
}

// mapID points id at node i. A node already holding the id stays in the
// tree but is no longer reachable by id: the newer serialization wins, as
// in rrweb's mirror.
func (d *Doc) mapID(i int32) {
	d.ids[d.nodes[i].id] = i
}

func (d *Doc) lookup(id int64) (int32, bool) {
	i, ok := d.ids[id]
	return i, ok
}

// detach unlinks n from its parent.
func (d *Doc) detach(n int32) {
	x := &d.nodes[n]
	p := x.parent
	if p < 0 {
		return
	}
	if x.prev >= 0 {
		d.nodes[x.prev].next = x.next
	} else {
		d.nodes[p].first = x.next
	}
	if x.next >= 0 {
		d.nodes[x.next].prev = x.prev
	} else {
		d.nodes[p].last = x.prev
	}
	x.parent, x.prev, x.next = -1, -1, -1
}

// insert links n (detached) under parent before next, or last when next
// is -1 or not a child of parent.
func (d *Doc) insert(n, parent, next int32) {
	x := &d.nodes[n]
	x.parent = parent
	if next >= 0 && d.nodes[next].parent == parent {
		nx := &d.nodes[next]
		x.next, x.prev = next, nx.prev
		if nx.prev >= 0 {
			d.nodes[nx.prev].next = n
		} else {
			d.nodes[parent].first = n
		}
		nx.prev = n
		return
	}
	p := &d.nodes[parent]
	x.prev, x.next = p.last, -1
	if p.last >= 0 {
		d.nodes[p.last].next = n
	} else {
		p.first = n
	}
	p.last = n
}

// drop removes n and its subtree from the document and frees them.
func (d *Doc) drop(n int32) {
	d.detach(n)
	if n == d.root {
		d.root = -1
	}
	d.freeSubtree(n)
}

func (d *Doc) freeSubtree(n int32) {
	stack := []int32{n}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := d.nodes[i].first; c >= 0; c = d.nodes[c].next {
			stack = append(stack, c)
		}
		x := &d.nodes[i]
		if x.flags&fAnon == 0 {
			if j, ok := d.ids[x.id]; ok && j == i {
				delete(d.ids, x.id)
			}
		}
		*x = node{parent: -1, first: -1, last: -1, prev: -1, next: -1}
		d.free = append(d.free, i)
	}
}

// reset empties the document (a full snapshot replaces it).
func (d *Doc) reset() {
	d.nodes = d.nodes[:0]
	d.free = d.free[:0]
	clear(d.ids)
	d.root = -1
}

// walk visits top's subtree in document order. enter returns whether to
// visit a node's children; leave is called after the children of every
// node entered with true. It uses no recursion, since mutations can nest
// nodes arbitrarily deep.
func (d *Doc) walk(top int32, enter func(int32) bool, leave func(int32)) {
	if top < 0 {
		return
	}
	cur := top
	for {
		if enter(cur) {
			if c := d.nodes[cur].first; c >= 0 {
				cur = c
				continue
			}
			if leave != nil {
				leave(cur)
			}
		}
		for {
			if cur == top {
				return
			}
			if nx := d.nodes[cur].next; nx >= 0 {
				cur = nx
				break
			}
			cur = d.nodes[cur].parent
			if leave != nil {
				leave(cur)
			}
		}
	}
}
