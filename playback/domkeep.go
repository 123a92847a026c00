package playback

import (
	"errors"
	"fmt"

	"github.com/flightrec/flightrec/playback/dom"
	"github.com/flightrec/flightrec/store"
)

// domSetName is the derived blob (store/derived.go) a finished
// recording's DOM checkpoint set is kept under. The set's own header
// carries its format version (dom.SetFormat), so the name stays when the
// format changes and an older set is replaced in place when rebuilt.
const domSetName = "dom-checkpoints"

// domKeep keeps the checkpoint set of a finished recording the index holds
// whole as a derived blob, so the first DOM view after a restart restores
// one checkpoint instead of replaying the recording; nil (build in memory
// only, extend as it grows) for any other recording: a set built from a
// prefix must not be kept as the whole.
func (s *Service) domKeep(row store.RecordingRow) *dom.Keep {
	if row.State != store.StateFinished {
		return nil
	}
	man, _, err := s.st.Manifest(row.ID)
	if err != nil || row.IndexedTo < man.LastSeq {
		return nil
	}
	return &dom.Keep{
		Load: func() (*dom.Checkpoints, uint64) { return s.loadDOMSet(row.ID) },
		Save: func(cp *dom.Checkpoints, through uint64) {
			b, err := cp.Marshal(through)
			if err == nil {
				_, err = s.st.PutDerived(row.ID, domSetName, b)
			}
			if err != nil {
				// Only the next restart pays: it builds the set again.
				s.log.Warn("keeping the DOM checkpoint set failed", "recording", row.ID, "err", err)
			}
		},
	}
}

// loadDOMSet opens a recording's kept set: its head is read now, each
// checkpoint when a seek first needs it (dom.OpenCheckpoints), so the first
// view reads the same few bytes whatever the recording's length. nil when
// there is none, or it is of another format version or does not check out
// (it is rebuilt, and replaced when the rebuilt one is kept).
func (s *Service) loadDOMSet(id string) (*dom.Checkpoints, uint64) {
	c, ok, err := s.st.Derived(id, domSetName)
	if err != nil || !ok {
		return nil, 0
	}
	size, err := s.st.Blobs.Stat(c)
	if err != nil {
		s.log.Warn("reading the kept DOM checkpoint set failed; rebuilding it", "recording", id, "cid", c.String(), "err", err)
		return nil, 0
	}
	// Each read opens the blob: a cached set holds no file open, and a
	// blob gone since (a rebuilt set replaced it) is an error the view
	// answers by building the set again (handleDOM).
	read := func(off int64, p []byte) error {
		r, err := s.st.Blobs.Open(c)
		if err != nil {
			return err
		}
		defer r.Close()
		if n, err := r.ReadAt(p, off); n < len(p) {
			return fmt.Errorf("%d of %d bytes at %d: %w", n, len(p), off, err)
		}
		return nil
	}
	cp, through, err := dom.OpenCheckpoints(size, read)
	switch {
	case errors.Is(err, dom.ErrSetFormat):
		s.log.Info("the kept DOM checkpoint set has another format; rebuilding it", "recording", id, "err", err)
		return nil, 0
	case err != nil:
		s.log.Warn("the kept DOM checkpoint set does not check out; rebuilding it", "recording", id, "cid", c.String(), "err", err)
		return nil, 0
	}
	s.log.Info("DOM checkpoint set read from the store", "recording", id, "checkpoints", cp.Stats().Checkpoints)
	return cp, through
}

// dropDOMSet forgets recording id's kept set, found damaged at a seek (or
// its blob gone): the cached set is dropped, and the blob deleted, so the
// set built again in its place is stored anew — a rebuilt set has the
// same bytes, hence the same CID, and a put finding that CID stored would
// leave the damaged copy.
func (s *Service) dropDOMSet(id string) {
	s.dom.Remove(id)
	c, ok, err := s.st.Derived(id, domSetName)
	if err != nil || !ok {
		return
	}
	if err := s.st.Blobs.Delete(c); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("deleting the damaged DOM checkpoint set failed", "recording", id, "cid", c.String(), "err", err)
	}
}

// DOMSetCounts is how many DOM checkpoint sets were read from the store
// and how many were built from a recording since the service started.
func (s *Service) DOMSetCounts() (loaded, built int64) { return s.dom.Counts() }
