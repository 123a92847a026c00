package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/flightrec/flightrec/store/layout"
)

// Files beside a recording: state about a recording that is not part of
// what was recorded (share links, comments, the viewer audit). They live
// in the recording's directory, outside its sealed log and manifest, so
// they change without touching the root, and RemoveRecording deletes them
// with the recording. Each is named by its layout method.
const (
	SharesFile   = "shares"
	CommentsFile = "comments"
	ViewsFile    = "views"
)

var besideFiles = map[string]func(layout.Layout, string) string{
	SharesFile:   layout.Layout.Shares,
	CommentsFile: layout.Layout.Comments,
	ViewsFile:    layout.Layout.Views,
}

func (s *Store) besidePath(id, name string) (string, error) {
	path, ok := besideFiles[name]
	if !layout.ValidRecordingID(id) || !ok {
		return "", fmt.Errorf("store: no file %q beside recording %q", name, id)
	}
	return path(s.Layout(), id), nil
}

// ReadBeside reads a file beside recording id (nil when there is none).
// A recording that does not exist is ErrNotFound.
func (s *Store) ReadBeside(id, name string) ([]byte, error) {
	path, err := s.besidePath(id, name)
	if err != nil {
		return nil, err
	}
	if sh, ok := s.sharedBeside(); ok {
		if _, err := s.Meta(id); err != nil {
			return nil, err
		}
		return sh.SideFile(id, name)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(s.metaPath(id)); serr != nil {
			return nil, fmt.Errorf("recording %s: %w", id, ErrNotFound)
		}
		return nil, nil
	}
	return b, err
}

// WriteBeside replaces a file beside recording id durably (atomic
// rename). A recording that does not exist is ErrNotFound: a recording
// removed meanwhile does not come back as a directory of side files.
func (s *Store) WriteBeside(id, name string, b []byte) error {
	if sh, ok := s.sharedBeside(); ok {
		return s.updateShared(sh, id, name, func([]byte) ([]byte, error) { return b, nil })
	}
	path, err := s.besideWritable(id, name)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b, 0o600)
}

// UpdateBeside replaces a file beside recording id with change(old) (old
// nil when there is none yet) without losing another writer's change: in
// shared mode by read-modify-write on the object's ETag, where change may
// run more than once (on another node's newer bytes), else under a mutex
// of the store. change's error ends the update and is returned.
func (s *Store) UpdateBeside(id, name string, change func(old []byte) ([]byte, error)) error {
	if sh, ok := s.sharedBeside(); ok {
		return s.updateShared(sh, id, name, change)
	}
	s.besideMu.Lock()
	defer s.besideMu.Unlock()
	old, err := s.ReadBeside(id, name)
	if err != nil {
		return err
	}
	b, err := change(old)
	if err != nil {
		return err
	}
	return s.WriteBeside(id, name, b)
}

// sharedBeside is the shared blob store files beside recordings are kept
// in, in shared mode: every node reads and changes the same ones, under
// recordings/<id>/<name> (objblobs).
func (s *Store) sharedBeside() (SharedBlobs, bool) {
	sh, ok := s.Blobs.(SharedBlobs)
	return sh, ok
}

// updateShared changes a file beside recording id in the shared blob
// store, once the recording is known to exist (on any node).
func (s *Store) updateShared(sh SharedBlobs, id, name string, change func([]byte) ([]byte, error)) error {
	if _, err := s.besidePath(id, name); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	if _, err := s.Meta(id); err != nil {
		return err
	}
	return sh.UpdateSideFile(id, name, change)
}

// besideWritable is the path of a file beside recording id that may be
// written now: the store is writable and the recording exists.
func (s *Store) besideWritable(id, name string) (string, error) {
	path, err := s.besidePath(id, name)
	if err != nil {
		return "", err
	}
	if err := s.writable(); err != nil {
		return "", err
	}
	if _, err := os.Stat(s.metaPath(id)); err != nil {
		return "", fmt.Errorf("recording %s: %w", id, ErrNotFound)
	}
	return path, nil
}

// AppendBeside appends b to a file beside recording id and fsyncs it
// (ErrNotFound when the recording does not exist).
func (s *Store) AppendBeside(id, name string, b []byte) error {
	if sh, ok := s.sharedBeside(); ok {
		return s.updateShared(sh, id, name, func(old []byte) ([]byte, error) { return append(old, b...), nil })
	}
	path, err := s.besideWritable(id, name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: %s of %s: %w", name, id, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
