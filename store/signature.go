package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// A failing recording's failure signature ("POST /api/checkout 500
// GIFT_CARD_STATE") is derived from its events by diffrun once the index
// holds all of them, after the seal, so the manifest cannot carry it. It is
// kept in DATA/recordings/<id>/signature, and RowOf reads it, so a reindex
// restores it with the rest of the row.

func (s *Store) signaturePath(id string) string { return s.Layout().Signature(id) }

// maxSignature bounds a stored signature (diffrun's are one line).
const maxSignature = 4096

// SetFailureSignature records recording id's failure signature.
func (s *Store) SetFailureSignature(id, sig string) error {
	if !ValidRecordingID(id) {
		return fmt.Errorf("store: failure signature of %q: invalid recording id", id)
	}
	if err := s.writable(); err != nil {
		return err
	}
	if len(sig) > maxSignature || strings.ContainsAny(sig, "\n\r") {
		return fmt.Errorf("store: failure signature of %s: not one line of at most %d bytes", id, maxSignature)
	}
	if _, err := os.Stat(s.metaPath(id)); err != nil {
		return fmt.Errorf("recording %s: %w", id, ErrNotFound)
	}
	return WriteFileAtomic(s.signaturePath(id), []byte(sig+"\n"), 0o644)
}

// FailureSignature returns recording id's recorded failure signature, ""
// when none was recorded.
func (s *Store) FailureSignature(id string) (string, error) {
	b, err := os.ReadFile(s.signaturePath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: failure signature of %s: %w", id, err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
