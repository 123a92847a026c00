package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/layout"
)

// removingPrefix names a recording directory being removed:
// DIR/recordings/.removing-<id>. The name is not a recording id, so IDs and
// every route ignore it; OpenStore finishes what a crash interrupted.
const removingPrefix = layout.RemovingPrefix

// RemoveRecording removes recording id's directory — meta.json, ROOT, the
// log segments, the plan and any other file in it — and returns the bytes
// of the files removed. It does not touch blobs, not even the recording's
// manifest and segment blobs: which blobs nothing references any more is a
// sweep's decision (FSBlobs.BeginSweep).
//
// The directory is first renamed to DIR/recordings/.removing-<id> and the
// parent fsynced, so the recording disappears at once and for good: a
// crash never leaves a half-removed recording that recovery would take
// for an open one. Then the renamed tree is removed and the parent fsynced
// again; OpenStore removes such a tree a crash left.
//
// It is idempotent: removing a recording that does not exist (or no longer
// does) returns 0 and no error. An invalid id is an error. The caller makes
// sure nothing appends to the recording (retention removes only finished
// recordings) and drops it from the index and from Readers.
func (s *Store) RemoveRecording(id string) (freed int64, err error) {
	if !ValidRecordingID(id) {
		return 0, fmt.Errorf("store: remove recording: invalid recording id %q", id)
	}
	if err := s.writable(); err != nil {
		return 0, err
	}
	// In shared mode the published recording goes first: every node stops
	// serving it and every node's sweep stops marking its blobs.
	if err := s.unpublish(id); err != nil {
		return 0, err
	}
	parent, tomb := s.Layout().Recordings(), s.Layout().Removing(id)
	// A removal a crash interrupted: finish it first (a rename onto a
	// non-empty directory would fail).
	if n, err := removeTree(tomb); err != nil {
		return 0, err
	} else {
		freed += n
	}
	err = os.Rename(s.recDir(id), tomb)
	if errors.Is(err, fs.ErrNotExist) {
		if freed > 0 {
			return freed, SyncDir(parent)
		}
		return 0, nil
	}
	if err != nil {
		return freed, fmt.Errorf("store: remove recording %s: %w", id, err)
	}
	if err := SyncDir(parent); err != nil {
		return freed, err
	}
	n, err := removeTree(tomb)
	freed += n
	if err != nil {
		return freed, err
	}
	return freed, SyncDir(parent)
}

// removeTree removes dir and everything under it and returns the bytes of
// the regular files removed. A missing dir is 0, nil.
func removeTree(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: remove %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("store: remove %s: %w", dir, err)
	}
	return n, nil
}

// removeLeftovers finishes recording removals a crash interrupted.
func (s *Store) removeLeftovers() error {
	parent := s.Layout().Recordings()
	ents, err := os.ReadDir(parent)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	removed := false
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), removingPrefix) {
			if _, err := removeTree(filepath.Join(parent, e.Name())); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		return SyncDir(parent)
	}
	return nil
}

// VideoTempPrefix starts the names of the temporary files playback builds
// videos in, in the data directory: they are on the blob store's
// filesystem, so a built video is moved into it, not copied.
const VideoTempPrefix = layout.VideoTempPrefix

// removeVideoTemps removes the video temporaries a crash left (the
// process that made them is gone: a store is opened for writing under the
// data directory's lock). A failure only leaves space used.
func removeVideoTemps(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), VideoTempPrefix) && e.Type().IsRegular() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// References returns every blob CID recording id references, sorted and
// distinct: for a finished recording its root (the manifest), the
// manifest's segments and the manifest's blobs; for an open one the CIDs
// its log records carry (the records a concurrent append has not finished
// writing are not read); either way, its derived blobs (derived.go). A
// recording sealed while it is read is read again as a finished one. A missing or invalid recording is ErrNotFound.
//
// A sweep's mark phase calls it for every recording it keeps, after
// BeginSweep returned (see gc.go).
func (s *Store) References(id string) ([]string, error) {
	if !ValidRecordingID(id) {
		return nil, fmt.Errorf("recording %q: %w", id, ErrNotFound)
	}
	derived, err := s.derivedRefs(id)
	if err != nil {
		return nil, err
	}
	// The plan's blob (SavePlan) is referenced like a derived one.
	if c, ok, err := s.planRef(id); err != nil {
		return nil, err
	} else if ok {
		derived = append(derived, c.String())
	}
	for try := 0; ; try++ {
		root, err := s.Root(id)
		if err != nil {
			return nil, err
		}
		if root != "" {
			m, err := s.ReadManifest(root)
			if err != nil {
				return nil, fmt.Errorf("store: references of %s: %w", id, err)
			}
			refs := append(manifestRefs(m, root), derived...)
			return sortedDistinct(refs), nil
		}
		refs := append([]string(nil), derived...)
		err = ScanLog(s.logDir(id), func(r Record, _ Locator) error {
			r.EachBlob(func(c string, _ int64) { refs = append(refs, c) })
			return nil
		})
		if err == nil {
			return sortedDistinct(refs), nil
		}
		// The log may have been removed under us by a Seal (after it
		// wrote ROOT): look again. An open recording with nothing
		// appended yet has no log directory.
		if root, rerr := s.Root(id); rerr == nil && root != "" && try < 3 {
			continue
		}
		if errors.Is(err, ErrNotFound) {
			if _, merr := os.Stat(s.metaPath(id)); merr == nil {
				return sortedDistinct(append([]string{}, derived...)), nil
			}
			return nil, fmt.Errorf("recording %s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("store: references of %s: %w", id, err)
	}
}

func sortedDistinct(ss []string) []string {
	sort.Strings(ss)
	out := ss[:0]
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// manifestRefs is what manifest m (whose CID is root) references:
// itself, its segments and its blobs.
func manifestRefs(m *Manifest, root string) []string {
	refs := make([]string, 0, 1+len(m.Segments)+len(m.Blobs))
	refs = append(refs, root)
	for _, seg := range m.Segments {
		refs = append(refs, seg.CID)
	}
	return append(refs, m.Blobs...)
}

// ManifestRefs is what the manifest data references, itself included: a
// shared blob store's sweep reads it for recordings published while it
// ran (objblobs.Options.Refs).
func ManifestRefs(data []byte) ([]cid.Cid, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("store: manifest: %w", err)
	}
	var out []cid.Cid
	for _, s := range manifestRefs(&m, Sum(data).String()) {
		c, err := ParseCID(s)
		if err != nil {
			return nil, fmt.Errorf("store: manifest: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}
