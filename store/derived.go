package store

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs"
)

// Derived blobs are what playback builds from a finished recording and
// keeps so it need not build it again: the WebM video, a clip. They are
// blobs like any other (content-addressed, deduplicated), named per
// recording in DATA/recordings/<id>/derived.json ({"name": "cid"}). A
// recording references its derived blobs (References lists them), so a
// sweep keeps them while the recording is kept and collects them with it.
// They are caches: losing derived.json loses nothing that cannot be built
// again from the recording.

func (s *Store) derivedPath(id string) string { return s.Layout().Derived(id) }

// validDerivedName keeps names to a small alphabet: they are JSON keys and
// appear in logs.
func validDerivedName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// derivedFile is the name of the derived records beside a recording in a
// shared blob store (recordings/<id>/derived): in shared mode a video one
// node built is every node's.
const derivedFile = "derived"

func (s *Store) readDerived(id string) (map[string]string, error) {
	var b []byte
	var err error
	if sh, ok := s.sharedBeside(); ok {
		b, err = sh.SideFile(id, derivedFile)
	} else if b, err = os.ReadFile(s.derivedPath(id)); errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: derived blobs of %s: %w", id, err)
	}
	m := map[string]string{}
	if len(b) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("store: derived blobs of %s: %w", id, err)
	}
	return m, nil
}

// Derived returns the blob recorded under name for recording id, ok false
// when there is none (or it is recorded but no longer stored).
func (s *Store) Derived(id, name string) (c cid.Cid, ok bool, err error) {
	if !ValidRecordingID(id) || !validDerivedName(name) {
		return cid.Undef, false, fmt.Errorf("store: derived blob %q of %q: invalid name", name, id)
	}
	m, err := s.readDerived(id)
	if err != nil {
		return cid.Undef, false, err
	}
	cs, found := m[name]
	if !found {
		return cid.Undef, false, nil
	}
	c, err = ParseCID(cs)
	if err != nil {
		return cid.Undef, false, nil // a damaged entry is a cache miss
	}
	if _, err := s.Blobs.Stat(c); err != nil {
		return cid.Undef, false, nil
	}
	return c, true, nil
}

// PutDerived stores data as a blob and records it under name for
// recording id (replacing what was there).
func (s *Store) PutDerived(id, name string, data []byte) (cid.Cid, error) {
	return s.putDerived(id, name, func() (cid.Cid, error) {
		if err := s.holdDerivedBlob(id, Sum(data)); err != nil {
			return cid.Undef, err
		}
		c, _, err := s.Blobs.Put(data)
		return c, err
	})
}

// PutDerivedFile is PutDerived for a blob built in the file at src (a
// temporary under the data directory), moved into the blob store without
// being read into memory (FSBlobs.PutFile). src is left for the caller to
// remove when it was not moved.
func (s *Store) PutDerivedFile(id, name, src string) (cid.Cid, error) {
	return s.putDerived(id, name, func() (cid.Cid, error) {
		if _, shared := s.Blobs.(SharedBlobs); shared {
			c, err := sumFile(src)
			if err == nil {
				err = s.holdDerivedBlob(id, c)
			}
			if err != nil {
				return cid.Undef, err
			}
		}
		c, _, err := s.Blobs.PutFile(src)
		return c, err
	})
}

// putDerived runs put and records its blob under name for recording id.
// The put and the record are one hold, so a sweep starting in between
// cannot collect the blob.
func (s *Store) putDerived(id, name string, put func() (cid.Cid, error)) (cid.Cid, error) {
	if !ValidRecordingID(id) || !validDerivedName(name) {
		return cid.Undef, fmt.Errorf("store: derived blob %q of %q: invalid name", name, id)
	}
	if err := s.writable(); err != nil {
		return cid.Undef, err
	}
	defer s.Blobs.Hold()()
	c, err := put()
	if err != nil {
		return cid.Undef, err
	}
	s.derivedMu.Lock()
	defer s.derivedMu.Unlock()
	if _, err := os.Stat(s.metaPath(id)); err != nil {
		return cid.Undef, fmt.Errorf("recording %s: %w", id, ErrNotFound)
	}
	if sh, ok := s.sharedBeside(); ok {
		err := sh.UpdateSideFile(id, derivedFile, func(old []byte) ([]byte, error) {
			m := map[string]string{}
			if json.Unmarshal(old, &m) != nil {
				m = map[string]string{} // rebuilt: the old entries are caches
			}
			m[name] = c.String()
			return json.Marshal(m)
		})
		return c, err
	}
	m, err := s.readDerived(id)
	if err != nil {
		m = map[string]string{} // rebuilt: the old entries are caches
	}
	m[name] = c.String()
	b, err := json.Marshal(m)
	if err != nil {
		return cid.Undef, err
	}
	if err := WriteFileAtomic(s.derivedPath(id), b, 0o644); err != nil {
		return cid.Undef, err
	}
	return c, nil
}

// derivedRefs lists the CIDs of a recording's derived blobs; an unreadable
// derived.json is an error (a sweep must not guess what is referenced).
func (s *Store) derivedRefs(id string) ([]string, error) {
	m, err := s.readDerived(id)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// sumFile is the CID of the file at path's bytes.
func sumFile(path string) (cid.Cid, error) {
	f, err := os.Open(path)
	if err != nil {
		return cid.Undef, fmt.Errorf("store: derived blob: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return cid.Undef, fmt.Errorf("store: derived blob: %w", err)
	}
	return blobs.FromDigest(h.Sum(nil)), nil
}

// dropDerived forgets every derived blob of recording id (Reseal): they
// were made from the events of a root it no longer has (a DOM checkpoint
// set, a video, holding what the rewrite erased), so each is built again
// from the new one when next wanted, on every node, and the old ones are
// collected (their hold records released, in shared mode).
func (s *Store) dropDerived(id string) error {
	s.derivedMu.Lock()
	defer s.derivedMu.Unlock()
	if sh, ok := s.sharedBeside(); ok {
		if err := sh.UpdateSideFile(id, derivedFile, func([]byte) ([]byte, error) { return []byte("{}"), nil }); err != nil {
			return err
		}
		return sh.ReleaseHolds(id, holdDerived)
	}
	if err := os.Remove(s.derivedPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: derived blobs of %s: %w", id, err)
	}
	return nil
}
