package store

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SavePlan writes a recording's redaction plan (JSON) durably. A recording
// keeps the plan it was opened with, whatever the policy says later, so a
// restart redacts the rest of it the same way.
func (s *Store) SavePlan(id string, plan json.RawMessage) error {
	if err := s.writable(); err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(s.recDir(id), "plan.json"), plan, 0o644)
}

// Plan reads a recording's redaction plan.
func (s *Store) Plan(id string) (json.RawMessage, error) {
	b, err := os.ReadFile(filepath.Join(s.recDir(id), "plan.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("plan of %s: %w", id, ErrNotFound)
	}
	return b, err
}

// Key returns the server's secret key called name (32 random bytes made on
// first use, kept under DIR/keys with mode 0600).
func (s *Store) Key(name string) ([]byte, error) {
	dir := filepath.Join(s.dir, "keys")
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != 32 {
			return nil, fmt.Errorf("store: key %s is damaged (%d bytes)", name, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: key %s: %w", name, err)
	}
	if err := s.writable(); err != nil {
		return nil, fmt.Errorf("store: key %s does not exist yet: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(path, b, 0o600); err != nil {
		return nil, err
	}
	return b, nil
}
