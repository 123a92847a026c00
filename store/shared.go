package store

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

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
}

// The files of a finished recording that are published. ROOT goes last:
// a recording whose ROOT is published is complete.
const (
	publishedMeta = "meta.json"
	publishedRoot = "ROOT"
)

// publish stores a finished recording's meta.json and ROOT in a shared
// blob store; with the local one it does nothing. Seal calls it after ROOT
// is written locally, and again on every later Seal of the recording, so
// a finish that failed here (the object store unreachable) publishes when
// the executor retries it.
func (s *Store) publish(id, root string) error {
	sh, ok := s.Blobs.(SharedBlobs)
	if !ok || root == "" {
		return nil
	}
	meta, err := s.readMetaFile(id)
	if err != nil {
		return err
	}
	if err := sh.PutRecordingFile(id, publishedMeta, meta); err != nil {
		return err
	}
	return sh.PutRecordingFile(id, publishedRoot, []byte(root+"\n"))
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
	mb, err := sh.RecordingFile(id, publishedMeta)
	if err != nil {
		return err
	}
	var meta RecordingMeta
	if err := json.Unmarshal(mb, &meta); err != nil || meta.ID != id {
		return fmt.Errorf("store: published meta of %s is damaged (%v)", id, err)
	}
	return s.install(meta, strings.TrimSpace(string(rb)), nil)
}

// readMetaFile reads a recording's meta.json as it is on disk.
func (s *Store) readMetaFile(id string) ([]byte, error) {
	b, err := os.ReadFile(s.metaPath(id))
	if err != nil {
		return nil, fmt.Errorf("store: publish %s: %w", id, err)
	}
	return b, nil
}
