package store

import (
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"
)

// CopyCheckEvery bounds how long, in shared mode, a node serves its copy
// of a finished recording (meta.json and ROOT, as fetch or its own seal
// wrote them) after another node published a new root for it (audit scan
// --fix there: Reseal): a read checks the copy against the published ROOT
// at most once per CopyCheckEvery per recording, and every sweep checks
// each copy (CheckCopy).
const CopyCheckEvery = 2 * time.Second

// copyChecks is, per recording, when its copy was last checked against
// the published ROOT and how many times it was replaced (its generation:
// a Reader's open segments of an older one are stale).
type copyChecks struct {
	mu      sync.Mutex
	checked map[string]time.Time
	gen     map[string]uint64
}

// due reports whether recording id's copy is to be checked now, and if
// so notes it checked: a read that finds the object store unreachable
// serves the copy and the next check is CopyCheckEvery later.
func (c *copyChecks) due(id string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.checked[id]; ok && now.Sub(t) < CopyCheckEvery {
		return false
	}
	if c.checked == nil {
		c.checked = map[string]time.Time{}
	}
	c.checked[id] = now
	return true
}

func (c *copyChecks) generation(id string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen[id]
}

func (c *copyChecks) replaced(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil {
		c.gen = map[string]uint64{}
	}
	c.gen[id]++
}

// checkCopy is the root to serve for finished recording id whose ROOT
// here is local: in shared mode, when the check is due (or force), the
// published root replaces the copy's when they differ (replaceCopy). A
// read (force false) that cannot reach the object store, or replace the
// copy, serves the copy: it may then be stale until the store answers. A
// sweep (force) gets the error, and collects nothing.
func (s *Store) checkCopy(id, local string, force bool) (string, error) {
	if !s.Shared() || s.readOnly || (!force && !s.copies.due(id, time.Now())) {
		return local, nil
	}
	published, err := s.PublishedRoot(id)
	if err != nil {
		if force {
			return "", err
		}
		return local, nil
	}
	if published == "" || published == local {
		// Not published: this node's seal not yet published (its holds
		// keep its blobs), or removed elsewhere (the sweep drops the copy:
		// RemovedElsewhere).
		return local, nil
	}
	root, err := s.replaceCopy(id, local, published)
	if err != nil && !force {
		return local, nil
	}
	return root, err
}

// CheckCopy is checkCopy forced, for a sweep's mark phase: the root
// recording id is to be marked under, its copy replaced first if another
// node published a new one. With a local blob store it is Root.
func (s *Store) CheckCopy(id string) (string, error) {
	local, err := s.localRoot(id)
	if err != nil || local == "" {
		return local, err
	}
	return s.checkCopy(id, local, true)
}

// replaceCopy writes the published meta.json and ROOT of recording id
// over its copy, as fetch writes them, unless the copy is the newer: its
// own meta names the published root as one it re-redacted (a Reseal here
// whose publish has yet to succeed; it is retried, and must not be undone).
func (s *Store) replaceCopy(id, local, published string) (string, error) {
	sh := s.Blobs.(SharedBlobs)
	var have RecordingMeta
	if b, err := os.ReadFile(s.metaPath(id)); err == nil && json.Unmarshal(b, &have) == nil {
		for _, r := range have.ReRedacted {
			if r.OldRoot == published {
				return local, nil
			}
		}
	}
	meta, err := publishedMetaOf(sh, id)
	if errors.Is(err, ErrNotFound) {
		return local, nil // removed meanwhile: the sweep's (RemovedElsewhere)
	} else if err != nil {
		return "", err
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	// meta.json first: a crash between leaves the old ROOT, which the next
	// check replaces again.
	if err := WriteFileAtomic(s.metaPath(id), b, 0o644); err != nil {
		return "", err
	}
	if err := WriteFileAtomic(s.rootPath(id), []byte(published+"\n"), 0o644); err != nil {
		return "", err
	}
	s.copies.replaced(id)
	return published, nil
}
