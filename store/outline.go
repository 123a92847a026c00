package store

import (
	"fmt"
	"io"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/jsonspan"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/log"
)

// OutlineMin is the smallest part of an event's data kept as a blob of
// its own (Outline): below it, the part's reference (a CID, which does not
// compress) and its blob cost more than its share of a compressed
// segment. At 1 KiB the demo storefront's pages, style sheet and scripts
// are outlined, and a rerun's log takes 3 KB less (of about 20).
const OutlineMin = 1 << 10

// outlinePackedMax is the size below which an outlined part goes to a
// pack (PutMany: one write and one fsync for a batch's parts, kept
// compressed there) rather than a loose seekable blob: such a part is one
// frame of a seekable blob anyway, so its own file would buy no ranged
// reads, only a file (and a filesystem block) each.
const outlinePackedMax = blobs.ZFrameTarget

// Outline moves the large part of each record's data — a HAR entry's
// response or request body, a DOM FullSnapshot's node tree, a snapshot's
// text — of OutlineMin bytes or more into a blob of exactly those bytes
// (kept compressed: in a pack, or PutSeekable from outlinePackedMax), so
// identical ones, across the runs of a flow, are stored once; the record
// names it (Record.Outlined) and every reader of the facade (Scan, Reader)
// gets the data back whole. Data stays whole in recs. The caller holds the
// blob store (Blobs.Hold) until the records are appended, as for any blob
// a record names.
func (s *Store) Outline(recs []Record) error {
	var doc jsonspan.Doc
	defer doc.Release(0)
	type part struct{ rec, at, end int }
	var parts []part
	var small [][]byte
	for i := range recs {
		r := &recs[i]
		at, end, ok := outlinePart(&doc, r.Kind, r.Data)
		if !ok {
			continue
		}
		if end-at < outlinePackedMax {
			parts = append(parts, part{i, at, end})
			small = append(small, r.Data[at:end])
			continue
		}
		c, _, err := s.Blobs.PutSeekable(r.Data[at:end], nil)
		if err != nil {
			return fmt.Errorf("store: outline seq %d: %w", r.Seq, err)
		}
		r.Outline(c.String(), int64(at), int64(end-at))
	}
	if len(small) == 0 {
		return nil
	}
	cids, err := s.Blobs.PutMany(small)
	if err != nil {
		return fmt.Errorf("store: outline: %w", err)
	}
	for k, p := range parts {
		recs[p.rec].Outline(cids[k].String(), int64(p.at), int64(p.end-p.at))
	}
	return nil
}

// outlinePart finds the span of data kept as its own blob, if any: the
// value that makes an event of kind large and repeats across runs, without
// the parts that differ each time (timestamps, timings, ids).
func outlinePart(doc *jsonspan.Doc, kind event.Kind, data []byte) (at, end int, ok bool) {
	if len(data) < OutlineMin || (kind != event.KindHAR && kind != event.KindDOM && kind != event.KindSnapshot) {
		return 0, 0, false
	}
	if doc.Parse(data) != nil {
		return 0, 0, false
	}
	var best int32 = -1
	consider := func(n int32) {
		if n >= 0 && (best < 0 || span(doc, n) > span(doc, best)) {
			best = n
		}
	}
	switch kind {
	case event.KindHAR:
		consider(doc.Get(doc.Get(doc.Get(0, "response"), "content"), "text"))
		consider(doc.Get(doc.Get(doc.Get(0, "request"), "postData"), "text"))
	case event.KindDOM:
		if t, ok := doc.Int(doc.Get(0, "type")); ok && t == 2 { // rrweb's FullSnapshot
			consider(doc.Get(doc.Get(0, "data"), "node"))
		}
	case event.KindSnapshot:
		consider(doc.Get(0, "text"))
	}
	if best < 0 || span(doc, best) < OutlineMin {
		return 0, 0, false
	}
	n := doc.Nodes[best]
	return int(n.Start), int(n.End), true
}

func span(doc *jsonspan.Doc, n int32) int32 { return doc.Nodes[n].End - doc.Nodes[n].Start }

// inline puts the outlined part of r's data back, read from its blob.
func (s *Store) inline(r *Record) error {
	if r.Outlined == nil {
		return nil
	}
	c, err := ParseCID(r.Outlined.CID)
	if err != nil {
		return fmt.Errorf("store: seq %d: outlined data: %w", r.Seq, err)
	}
	b, err := s.blobBytes(c)
	if err != nil {
		return fmt.Errorf("store: seq %d: outlined data: %w", r.Seq, err)
	}
	return r.Inline(b)
}

// blobBytes reads blob c whole.
func (s *Store) blobBytes(c cid.Cid) ([]byte, error) {
	f, err := s.Blobs.Open(c)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// inlined wraps a record callback so it sees every record's data whole.
func (s *Store) inlined(fn func(Record, Locator) error) func(Record, Locator) error {
	return func(r Record, loc Locator) error {
		if err := s.inline(&r); err != nil {
			return err
		}
		return fn(r, loc)
	}
}

// The log's name for the outlined part, for callers of the facade.
type Outlined = log.Outlined
