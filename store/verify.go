package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/flightrec/flightrec/store/bundle"
	"github.com/flightrec/flightrec/store/log"
)

// VerifyReport is what Verify checked and found.
type VerifyReport struct {
	Recordings int       `json:"recordings"`
	Finished   int       `json:"finished"`
	Blobs      int       `json:"blobs"` // distinct blobs re-hashed
	Bytes      int64     `json:"bytes"` // bytes re-hashed
	Problems   []Problem `json:"problems"`
}

// OK reports whether nothing was found wrong.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// Verify checks what the service depends on, and lists every problem:
// every recording's meta.json; every open log (each damaged region, with
// the seqs it took) and the blobs its intact records reference; every
// finished recording's manifest, segments (they decode, their seqs follow
// one another but for the manifest's declared gaps, they add up to its
// events) and blobs, re-hashed; and the packs' unreadable regions. A
// corrupt packed blob is reported by its CID. progress, if set, is called
// after each recording. It only reads.
func (s *Store) Verify(ctx context.Context, progress func(done, total int)) (*VerifyReport, error) {
	ids, err := s.IDs()
	if err != nil {
		return nil, err
	}
	rep := &VerifyReport{Problems: []Problem{}}
	seen := map[string]bool{}
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Recordings++
		bad := rep.badFor(id)
		if _, err := s.Meta(id); err != nil {
			bad("", "meta.json unreadable: "+err.Error())
		}
		root, err := s.Root(id)
		switch {
		case err != nil:
			bad("", "ROOT unreadable: "+err.Error())
		case root == "":
			s.verifyOpen(id, seen, rep, bad)
		default:
			rep.Finished++
			s.verifyFinished(id, root, seen, rep, bad)
		}
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	regions, _ := s.Blobs.PackDamage()
	for _, d := range regions {
		rep.Problems = append(rep.Problems, Problem{What: fmt.Sprintf(
			"pack %08d bytes %d–%d hold no readable blob (the blobs around them are intact)", d.Pack, d.Offset, d.To)})
	}
	return rep, nil
}

// badFor returns the function that adds a problem of recording id.
func (r *VerifyReport) badFor(id string) func(c, what string) {
	return func(c, what string) { r.Problems = append(r.Problems, Problem{Recording: id, CID: c, What: what}) }
}

// verifyOpen checks an open recording's log and the blobs its intact
// records reference.
func (s *Store) verifyOpen(id string, seen map[string]bool, rep *VerifyReport, bad func(c, what string)) {
	if gaps, err := s.pendingGaps(id); err != nil || len(gaps) > 0 {
		bad("", "a repair was interrupted: run flightrec repair "+id)
	}
	refs := map[string]bool{}
	damage, err := log.Walk(s.logDir(id), func(r Record, _ Locator) error {
		r.EachBlob(func(c string, _ int64) { refs[c] = true })
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		bad("", "log unreadable: "+err.Error())
	}
	if len(damage) > 0 {
		// A frame a live server is appending can look bad to a reader
		// that saw part of it: damage is what a second look finds too.
		again, _ := log.Walk(s.logDir(id), nil)
		damage = sameDamage(damage, again)
	}
	for _, d := range damage {
		bad("", "log damaged: "+d.String()+"; next: flightrec repair "+id)
	}
	cids := make([]string, 0, len(refs))
	for c := range refs {
		cids = append(cids, c)
	}
	sort.Strings(cids)
	for _, c := range cids {
		s.rehash(c, seen, rep, bad)
	}
}

// sameDamage keeps the regions of a that b found too.
func sameDamage(a, b []LogDamage) []LogDamage {
	var out []LogDamage
	for _, d := range a {
		for _, e := range b {
			if d.Segment == e.Segment && d.Offset == e.Offset {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func (s *Store) verifyFinished(id, root string, seen map[string]bool, rep *VerifyReport, bad func(c, what string)) {
	if !s.rehash(root, seen, rep, bad) {
		return
	}
	m, err := s.ReadManifest(root)
	if err != nil {
		bad(root, "manifest unreadable: "+err.Error())
		return
	}
	if m.Recording.ID != id {
		bad(root, "manifest names another recording")
	}
	var prev uint64
	var events int64
	whole := true
	for i, seg := range m.Segments {
		if !s.rehash(seg.CID, seen, rep, bad) {
			whole = false
			continue
		}
		n, last, err := s.checkSegmentSeqs(seg.CID, m.Gaps, prev)
		if err != nil {
			whole = false
			bad(seg.CID, fmt.Sprintf("segment %d: %v", i+1, err))
		}
		events += n
		prev = last
	}
	if whole && events != m.Events {
		bad(root, fmt.Sprintf("the manifest says %d events, its segments hold %d", m.Events, events))
	}
	for _, c := range m.Blobs {
		s.rehash(c, seen, rep, bad)
	}
}

// checkSegmentSeqs reads a sealed segment and checks that its seqs follow
// prev, one by one but for the declared gaps. It returns the records read
// and the last seq.
func (s *Store) checkSegmentSeqs(cs string, gaps []Gap, prev uint64) (int64, uint64, error) {
	c, err := ParseCID(cs)
	if err != nil {
		return 0, prev, err
	}
	f, err := s.Blobs.Open(c)
	if err != nil {
		return 0, prev, err
	}
	defer f.Close()
	sr := log.NewSegmentReader(f)
	var n int64
	for {
		rec, _, err := sr.Next()
		if err == io.EOF {
			return n, prev, nil
		}
		if err != nil {
			return n, prev, err
		}
		if !bundle.SeqsFollow(gaps, prev, rec.Seq) {
			return n, prev, fmt.Errorf("seq %d follows %d, and no declared gap covers the seqs between", rec.Seq, prev)
		}
		n++
		prev = rec.Seq
	}
}

// rehash checks that blob c's bytes hash to c; seen skips blobs shared by
// several recordings after their first check.
func (s *Store) rehash(cs string, seen map[string]bool, rep *VerifyReport, bad func(c, what string)) bool {
	if ok, done := seen[cs]; done {
		if !ok {
			bad(cs, "blob failed verification (see above)")
		}
		return ok
	}
	c, err := ParseCID(cs)
	if err != nil {
		seen[cs] = false
		bad(cs, "not a flightrec CID")
		return false
	}
	f, err := s.Blobs.Open(c)
	if err != nil {
		seen[cs] = false
		if errors.Is(err, ErrNotFound) {
			bad(cs, "blob missing")
		} else {
			bad(cs, "blob unreadable: "+err.Error())
		}
		return false
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		seen[cs] = false
		bad(cs, "blob unreadable: "+err.Error())
		return false
	}
	want, _ := Digest(c)
	ok := bytes.Equal(h.Sum(nil), want)
	seen[cs] = ok
	rep.Blobs++
	rep.Bytes += n
	if !ok {
		bad(cs, "blob bytes do not match their CID")
	}
	return ok
}

// VerifyIndex checks the index against the logs and manifests: for every
// recording the index holds, the events it counts must be the records the
// store holds up to the recording's indexed-through seq (the index lags
// the log by design, so nothing past that point is compared). It adds to
// rep's problems; a recording rep already holds a problem of (damage
// Verify found, which skews any count) is not compared.
func (s *Store) VerifyIndex(ctx context.Context, idx Index, rep *VerifyReport) error {
	ids, err := s.IDs()
	if err != nil {
		return err
	}
	damaged := map[string]bool{}
	for _, p := range rep.Problems {
		damaged[p.Recording] = true
	}
	for _, id := range ids {
		if damaged[id] {
			continue
		}
		row, err := idx.Recording(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // not indexed yet: the projection lags
		}
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Recording: id, What: "index unreadable: " + err.Error() + "; next: flightrec reindex"})
			continue
		}
		var held int64
		if _, err := s.Scan(id, Pos{}, 0, func(r Record, _ Locator) error {
			if r.Seq <= row.IndexedTo {
				held++
			}
			return nil
		}); err != nil {
			continue // the log's own problems are Verify's
		}
		if held != row.Events {
			rep.Problems = append(rep.Problems, Problem{Recording: id, What: fmt.Sprintf(
				"the index counts %d events through seq %d, the store holds %d; next: flightrec reindex",
				row.Events, row.IndexedTo, held)})
		}
	}
	return nil
}

// Reindex rebuilds the index from the logs and manifests: it drops every
// row, then projects every recording of this data directory from its
// first record. On an index shared with other nodes (shared mode) it
// drops nothing else's: it rebuilds each recording published or held
// here, and leaves those open on other nodes alone (rebuildSet).
func (s *Store) Reindex(ctx context.Context, idx Index, progress func(done, total int)) error {
	ids, _, err := s.rebuildSet(ctx, idx)
	if err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	return s.projectFromStart(ctx, idx, ids, progress)
}

// ReindexRewritten rebuilds the index after recordings ids were
// rewritten (audit scan --fix), since their rows still hold what was
// erased: the whole index on a single node (Reindex); on an index shared
// with other nodes, whose reset would empty it under every node, the rows
// of ids alone, deleted and projected again from their first records.
func (s *Store) ReindexRewritten(ctx context.Context, idx Index, ids []string) error {
	if !s.Shared() {
		return s.Reindex(ctx, idx, nil)
	}
	if err := deleteRows(ctx, idx, ids); err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	return s.projectFromStart(ctx, idx, ids, nil)
}

// projectFromStart projects recordings ids, whose rows are gone, from
// their first records.
func (s *Store) projectFromStart(ctx context.Context, idx Index, ids []string, progress func(done, total int)) error {
	p := NewProjector(s, idx, slog.New(slog.DiscardHandler), nil)
	for i, id := range ids {
		row, last, err := s.RowOf(id)
		if err != nil {
			return fmt.Errorf("reindex %s: %w", id, err)
		}
		p.Put(row)
		p.Notify(id, last)
		if err := p.Flush(ctx); err != nil {
			return fmt.Errorf("reindex %s: %w", id, err)
		}
		p.Forget(id)
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	return nil
}

// RowOf returns a recording's metadata row as the store knows it (with
// its failure signature once one is recorded), and the
// last seq it holds (from the manifest when finished; 0 when open, where
// the projector reads to the end of the log anyway).
func (s *Store) RowOf(id string) (RecordingRow, uint64, error) {
	root, err := s.Root(id)
	if err != nil {
		return RecordingRow{}, 0, err
	}
	if root != "" {
		m, err := s.ReadManifest(root)
		if err != nil {
			return RecordingRow{}, 0, err
		}
		row := RecordingRow{RecordingMeta: m.Recording, State: StateFinished, Root: root}
		if row.FailureSignature, err = s.FailureSignature(id); err != nil {
			return RecordingRow{}, 0, err
		}
		return row, m.LastSeq, nil
	}
	meta, err := s.Meta(id)
	if err != nil {
		return RecordingRow{}, 0, err
	}
	return RecordingRow{RecordingMeta: meta, State: StateOpen}, 0, nil
}
