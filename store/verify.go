package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Problem is one thing verify found wrong.
type Problem struct {
	Recording string `json:"recording,omitempty"`
	CID       string `json:"cid,omitempty"`
	What      string `json:"what"`
}

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

// Verify re-hashes every blob that a manifest references (the manifest
// itself, its segments and its events' blobs) and checks every open log's
// frames. progress, if set, is called after each recording.
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
		root, err := s.Root(id)
		if err != nil {
			return nil, err
		}
		if root == "" {
			if err := checkOpenLog(s.logDir(id)); err != nil {
				rep.Problems = append(rep.Problems, Problem{Recording: id, What: err.Error()})
			}
		} else {
			rep.Finished++
			s.verifyFinished(id, root, seen, rep)
		}
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	return rep, nil
}

func (s *Store) verifyFinished(id, root string, seen map[string]bool, rep *VerifyReport) {
	bad := func(c, what string) { rep.Problems = append(rep.Problems, Problem{Recording: id, CID: c, What: what}) }
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
	for _, seg := range m.Segments {
		s.rehash(seg.CID, seen, rep, bad)
	}
	for _, c := range m.Blobs {
		s.rehash(c, seen, rep, bad)
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

func checkOpenLog(dir string) error {
	segs, err := segmentFiles(dir)
	if err != nil {
		return err
	}
	for _, p := range segs {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		sr := NewSegmentReader(f)
		for {
			_, _, err := sr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("log segment %s: %w", p, err)
			}
		}
		f.Close()
	}
	return nil
}

// Reindex rebuilds the index from the logs and manifests: it drops every
// row, then projects every recording from its first record.
func (s *Store) Reindex(ctx context.Context, idx Index, progress func(done, total int)) error {
	if err := idx.Reset(ctx); err != nil {
		return fmt.Errorf("reindex: reset: %w", err)
	}
	ids, err := s.IDs()
	if err != nil {
		return err
	}
	p := NewProjector(s, idx, slog.New(slog.DiscardHandler))
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
