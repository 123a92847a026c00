package dom

import (
	"encoding/binary"
	"errors"

	"github.com/flightrec/flightrec/event"
)

// The binary form of a Doc, which checkpoints keep (compressed). It holds
// what the state is — the tree in document order, the Meta values, the
// skip count, the seq — and nothing of how it was stored (node slots, the
// free list), so a restored Doc renders, and takes further events, exactly
// as the one encoded:
//
//	state  = "FRD1" | uvarint seq | str href | varint width | varint height |
//	         varint skipped | uvarint nodes | node{nodes}   (preorder)
//	node   = byte kind|flags<<3 | [varint id, unless anonymous] | body
//	body   = document: uvarint children
//	         doctype:  str name | str publicId | str systemId
//	         element:  str tag | uvarint n | (str name | str value){n} | uvarint children
//	         text, CDATA, comment: str text
//	str    = uvarint length | bytes

const stateMagic = "FRD1"

var errState = errors.New("dom: corrupt checkpoint state")

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encode appends the state's binary form to dst. It only reads d, so
// concurrent encodes of one Doc are safe.
func (d *Doc) encode(dst []byte) []byte {
	dst = append(dst, stateMagic...)
	dst = binary.AppendUvarint(dst, d.seq)
	dst = appendStr(dst, d.href)
	dst = binary.AppendVarint(dst, d.width)
	dst = binary.AppendVarint(dst, d.height)
	dst = binary.AppendVarint(dst, d.skipped)
	count := 0
	d.walk(d.root, func(int32) bool { count++; return true }, nil)
	dst = binary.AppendUvarint(dst, uint64(count))
	d.walk(d.root, func(n int32) bool {
		x := &d.nodes[n]
		// A node its id no longer reaches (a later node took the id) is
		// written as anonymous: which of two nodes holds an id must not
		// depend on the order a restore creates them in.
		flags := x.flags
		if m, ok := d.ids[x.id]; flags&fAnon == 0 && (!ok || m != n) {
			flags |= fAnon
		}
		dst = append(dst, x.kind|flags<<3)
		if flags&fAnon == 0 {
			dst = binary.AppendVarint(dst, x.id)
		}
		switch x.kind {
		case event.RRWebNodeDocType:
			dst = appendStr(dst, x.tag)
			dst = appendStr(dst, x.text)
			dst = appendStr(dst, x.text2)
			return false
		case event.RRWebNodeElement:
			dst = appendStr(dst, x.tag)
			dst = binary.AppendUvarint(dst, uint64(len(x.attrs)))
			for _, a := range x.attrs {
				dst = appendStr(dst, a.name)
				dst = appendStr(dst, a.val)
			}
		case event.RRWebNodeDocument:
		default:
			dst = appendStr(dst, x.text)
			return false
		}
		k := 0
		for c := x.first; c >= 0; c = d.nodes[c].next {
			k++
		}
		dst = binary.AppendUvarint(dst, uint64(k))
		return true
	}, nil)
	return dst
}

type stateReader struct {
	s   string // the whole state: every string of the Doc is a slice of it
	pos int
	bad bool
}

func (r *stateReader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := uvarintString(r.s[r.pos:])
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.pos += n
	return v
}

func (r *stateReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *stateReader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.s)-r.pos) {
		r.bad = true
		return ""
	}
	s := r.s[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

func (r *stateReader) byte() byte {
	if r.bad || r.pos >= len(r.s) {
		r.bad = true
		return 0
	}
	r.pos++
	return r.s[r.pos-1]
}

func uvarintString(s string) (uint64, int) {
	var x uint64
	var sh uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -1
			}
			return x | uint64(c)<<sh, i + 1
		}
		x |= uint64(c&0x7f) << sh
		sh += 7
	}
	return 0, -1
}

// decodeState rebuilds a Doc from its binary form. The bytes are copied
// once into a string that every string of the Doc slices, so a restore
// costs a few allocations however many nodes the page has.
func decodeState(b []byte) (*Doc, error) {
	r := &stateReader{s: string(b)}
	if len(r.s) < len(stateMagic) || r.s[:len(stateMagic)] != stateMagic {
		return nil, errState
	}
	r.pos = len(stateMagic)
	d := NewDoc()
	d.seq = r.uvarint()
	d.href = r.str()
	d.width = r.varint()
	d.height = r.varint()
	d.skipped = r.varint()
	count := r.uvarint()
	if r.bad || count > uint64(len(r.s)-r.pos) { // every node takes at least a byte
		return nil, errState
	}
	if count == 0 {
		return d, nil
	}
	d.nodes = make([]node, 0, count)
	d.ids = make(map[int64]int32, count)
	type open struct {
		n    int32
		left uint64
	}
	var stack []open
	for i := uint64(0); i < count; i++ {
		parent := int32(-1)
		for len(stack) > 0 && stack[len(stack)-1].left == 0 {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			stack[len(stack)-1].left--
			parent = stack[len(stack)-1].n
		} else if i > 0 {
			return nil, errState // a second root
		}
		kf := r.byte()
		x := node{kind: kf & 7, flags: kf >> 3}
		if x.kind > event.RRWebNodeComment {
			return nil, errState
		}
		if x.flags&fAnon == 0 {
			x.id = r.varint()
		}
		var children uint64
		switch x.kind {
		case event.RRWebNodeDocType:
			x.tag, x.text, x.text2 = r.str(), r.str(), r.str()
		case event.RRWebNodeElement:
			x.tag = r.str()
			na := r.uvarint()
			if na > uint64(len(r.s)-r.pos) {
				return nil, errState
			}
			if na > 0 {
				x.attrs = make([]attr, na)
				for k := range x.attrs {
					x.attrs[k] = attr{r.str(), r.str()}
				}
			}
			children = r.uvarint()
		case event.RRWebNodeDocument:
			children = r.uvarint()
		default:
			x.text = r.str()
		}
		if r.bad {
			return nil, errState
		}
		n := d.alloc(x)
		if x.flags&fAnon == 0 {
			d.mapID(n)
		}
		if parent >= 0 {
			d.insert(n, parent, -1)
		} else {
			d.root = n
		}
		if children > 0 {
			stack = append(stack, open{n, children})
		}
	}
	if r.pos != len(r.s) {
		return nil, errState
	}
	return d, nil
}
