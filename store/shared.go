package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs"
)

// SharedBlobs is a blob store other nodes read too (objblobs on an object
// store: serve --blobs s3://…). Besides the blobs it keeps each finished
// recording's meta.json and ROOT, so that any node sharing the blob store
// and the index serves a recording another node ingested.
type SharedBlobs interface {
	blobs.Store
	// PutRecordingFile stores a finished recording's file (by its name in
	// the recording's directory) for the other nodes.
	PutRecordingFile(id, name string, data []byte) error
	// RecordingFile reads one; a missing file is ErrNotFound.
	RecordingFile(id, name string) ([]byte, error)
	// RecordingIDs lists the recordings whose ROOT is published.
	RecordingIDs() ([]string, error)
	// RemoveRecordingFiles removes a recording's published files (ROOT
	// first) and every hold record of it.
	RemoveRecordingFiles(id string) error
	// HoldFor writes a hold record naming cids for recording id: a sweep
	// on any node keeps them until ReleaseHolds(id, kind) (objblobs/gc.go).
	HoldFor(id, kind string, cids []cid.Cid) error
	// ReleaseHolds removes recording id's hold records of kind.
	ReleaseHolds(id, kind string) error
	// Held reports whether any hold record of recording id remains.
	Held(id string) (bool, error)
	// SideFile reads a file beside recording id kept for every node
	// (nil when none); UpdateSideFile changes it without losing another
	// node's concurrent change (beside.go).
	SideFile(id, name string) ([]byte, error)
	UpdateSideFile(id, name string, change func(old []byte) ([]byte, error)) error
}

// The kinds of hold record: a batch's (and a seal's) blobs, redundant
// once the recording's manifest is published; a derived blob's, for as
// long as the recording exists.
const (
	holdBatch   = "batch"
	holdDerived = "derived"
)

// HoldBlobs makes sure no sweep, on any node, collects the blobs datas are
// about to be stored as before recording id references them where every
// node's sweep reads (its published manifest): in shared mode it writes a
// hold record naming them; with the local blob store it does nothing (the
// caller's Blobs.Hold brackets it). Call it before storing them.
func (s *Store) HoldBlobs(id string, datas [][]byte) error {
	sh, ok := s.Blobs.(SharedBlobs)
	if !ok || len(datas) == 0 {
		return nil
	}
	cids := make([]cid.Cid, len(datas))
	for i, d := range datas {
		cids[i] = blobs.Sum(d)
	}
	return sh.HoldFor(id, holdBatch, cids)
}

// PutBlobsAfter stores an ingest batch's blobs (Blobs.PutMany), as the
// continuation of a recording's frames when the blob store can use that
// (blobs.SequencePutter): prev is the recording's last frame before the
// batch (cid.Undef: none), so that a new frame may be kept against the
// one the recording showed before it.
func (s *Store) PutBlobsAfter(prev cid.Cid, datas [][]byte) ([]cid.Cid, error) {
	if sp, ok := s.Blobs.(blobs.SequencePutter); ok {
		return sp.PutManyAfter(prev, datas)
	}
	return s.Blobs.PutMany(datas)
}

// holdDerivedBlob is HoldBlobs for a derived blob, whose hold lasts as
// long as the recording.
func (s *Store) holdDerivedBlob(id string, c cid.Cid) error {
	if sh, ok := s.Blobs.(SharedBlobs); ok {
		return sh.HoldFor(id, holdDerived, []cid.Cid{c})
	}
	return nil
}

// Shared reports whether the blob store is shared with other nodes
// (shared mode), and so the index too.
func (s *Store) Shared() bool {
	_, ok := s.Blobs.(SharedBlobs)
	return ok
}

// SharedIDs lists the recordings published in a shared blob store (shared
// false with the local one): a sweep's mark phase reads their references
// too, and those of no finished recording that is not published (another
// node removed it; or this node has not published it yet, and then hold
// records keep its blobs).
func (s *Store) SharedIDs() (ids []string, shared bool, err error) {
	sh, ok := s.Blobs.(SharedBlobs)
	if !ok {
		return nil, false, nil
	}
	ids, err = sh.RecordingIDs()
	return ids, true, err
}

// RemovedElsewhere reports whether finished recording id, in this data
// directory, was removed by another node: in shared mode, it is not
// published and no hold record of it remains. (One this node sealed but
// has yet to publish keeps its batch holds until it is.) Its copy here
// is then a stale cache of a recording that no longer exists.
func (s *Store) RemovedElsewhere(id string) (bool, error) {
	sh, ok := s.Blobs.(SharedBlobs)
	if !ok {
		return false, nil
	}
	if _, err := sh.RecordingFile(id, publishedRoot); err == nil || !errors.Is(err, ErrNotFound) {
		return false, err
	}
	held, err := sh.Held(id)
	return !held && err == nil, err
}

// unpublish removes a recording from a shared blob store (RemoveRecording).
func (s *Store) unpublish(id string) error {
	if sh, ok := s.Blobs.(SharedBlobs); ok {
		return sh.RemoveRecordingFiles(id)
	}
	return nil
}

// The files of a finished recording that are published. ROOT goes last:
// a recording whose ROOT is published is complete.
const (
	publishedMeta = "meta.json"
	publishedPlan = "plan.json" // the redaction plan, when the recording has one
	publishedRoot = "ROOT"
)

// publish stores a finished recording's meta.json and ROOT in a shared
// blob store; with the local one it does nothing. Seal calls it after ROOT
// is written locally, and again on every later Seal of the recording, so
// a finish that failed here (the object store unreachable) publishes when
// the executor retries it.
func (s *Store) publish(id, root string) error {
	if _, ok := s.Blobs.(SharedBlobs); !ok || root == "" {
		return nil
	}
	meta, plan, err := s.SealedFiles(id)
	if err != nil {
		return err
	}
	return s.PublishSealed(id, root, meta, plan)
}

// SealedFiles are the files of recording id, sealed here, that publishing
// stores for the other nodes: its meta.json and its redaction plan (nil
// when it has none), as they are on disk.
func (s *Store) SealedFiles(id string) (meta, plan []byte, err error) {
	if meta, err = s.readMetaFile(id); err != nil {
		return nil, nil, err
	}
	plan, err = os.ReadFile(s.Layout().Plan(id))
	if errors.Is(err, fs.ErrNotExist) {
		return meta, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: publish %s: %w", id, err)
	}
	return meta, plan, nil
}

// PublishSealed publishes a finished recording whose segments and
// manifest (root) are in the shared blob store, from its meta.json and
// plan (SealedFiles of the node that sealed it): any node can, so a
// seal whose node died before publishing is published by another
// (ingest/cluster.go). With a local blob store it does nothing.
func (s *Store) PublishSealed(id, root string, meta, plan []byte) error {
	sh, ok := s.Blobs.(SharedBlobs)
	if !ok || root == "" {
		return nil
	}
	if err := sh.PutRecordingFile(id, publishedMeta, meta); err != nil {
		return err
	}
	// Every node redacts comments on it with its plan.
	if plan != nil {
		if err := sh.PutRecordingFile(id, publishedPlan, plan); err != nil {
			return err
		}
	}
	if err := sh.PutRecordingFile(id, publishedRoot, []byte(root+"\n")); err != nil {
		return err
	}
	// The manifest names every blob the batches' holds did, for every
	// node's sweep: the holds are redundant from here.
	return sh.ReleaseHolds(id, holdBatch)
}

// PublishedRoot is the root under which recording id is published in a
// shared blob store ("" when it is not, or the blob store is local).
func (s *Store) PublishedRoot(id string) (string, error) {
	sh, ok := s.Blobs.(SharedBlobs)
	if !ok {
		return "", nil
	}
	rb, err := sh.RecordingFile(id, publishedRoot)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return strings.TrimSpace(string(rb)), err
}

// fetch installs in this data directory a finished recording another node
// published in the shared blob store: meta.json and ROOT, written as an
// imported bundle's are (install), so the recording reads like any other.
// It is ErrNotFound when the blob store is not shared or holds no such
// recording.
func (s *Store) fetch(id string) error {
	sh, ok := s.Blobs.(SharedBlobs)
	if !ok || s.readOnly {
		return fmt.Errorf("recording %s: %w", id, ErrNotFound)
	}
	rb, err := sh.RecordingFile(id, publishedRoot)
	if err != nil {
		return err
	}
	meta, err := publishedMetaOf(sh, id)
	if err != nil {
		return err
	}
	return s.install(meta, strings.TrimSpace(string(rb)), nil)
}

// publishedMetaOf reads and checks recording id's published meta.json.
func publishedMetaOf(sh SharedBlobs, id string) (RecordingMeta, error) {
	var meta RecordingMeta
	mb, err := sh.RecordingFile(id, publishedMeta)
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(mb, &meta); err != nil || meta.ID != id {
		return meta, fmt.Errorf("store: published meta of %s is damaged (%v)", id, err)
	}
	return meta, nil
}

// readMetaFile reads a recording's meta.json as it is on disk.
func (s *Store) readMetaFile(id string) ([]byte, error) {
	b, err := os.ReadFile(s.metaPath(id))
	if err != nil {
		return nil, fmt.Errorf("store: publish %s: %w", id, err)
	}
	return b, nil
}

// Scratch opens dir, a private scratch directory, as a data directory
// over s's blob store, for a reader of a read-only store in shared mode
// (audit scan): reading a recording another node published fetches its
// meta.json and ROOT into the data directory, which a read-only one
// refuses, so they go to dir instead. Its Close leaves the blob store
// open: s closes it.
func (s *Store) Scratch(dir string) (*Store, error) {
	sc := &Store{dir: dir, Blobs: s.Blobs, LogOptions: s.LogOptions, borrowed: true}
	if err := os.MkdirAll(sc.Layout().Recordings(), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return sc, nil
}
