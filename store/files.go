package store

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/ipfs/go-cid"
)

// SavePlan writes a recording's redaction plan (JSON) durably. A recording
// keeps the plan it was opened with, whatever the policy says later, so a
// restart redacts the rest of it the same way.
//
// The plan is a blob, named from the recording by its PlanRef file: every
// rerun of a flow under one policy has the same plan, 1.1 KB stored once
// instead of once a recording (the reference takes 60 bytes). The put and
// the reference are one hold, so a sweep starting in between cannot collect
// the blob; References lists it, so a sweep keeps it while a recording
// names it. With shared blobs (the cluster) the plan stays a file: the node
// that sweeps reads the other nodes' recordings from the object store,
// which holds their published files but not their local references.
func (s *Store) SavePlan(id string, plan json.RawMessage) error {
	if err := s.writable(); err != nil {
		return err
	}
	if _, shared := s.Blobs.(SharedBlobs); shared {
		return WriteFileAtomic(s.Layout().Plan(id), plan, 0o644)
	}
	defer s.Blobs.Hold()()
	c, _, err := s.Blobs.Put(plan)
	if err != nil {
		return fmt.Errorf("store: plan of %s: %w", id, err)
	}
	return WriteFileAtomic(s.Layout().PlanRef(id), []byte(c.String()+"\n"), 0o644)
}

// planRef reads the CID recording id's PlanRef names (ok false when it
// has none: the plan is a file, or the recording has no plan).
func (s *Store) planRef(id string) (c cid.Cid, ok bool, err error) {
	b, err := os.ReadFile(s.Layout().PlanRef(id))
	if errors.Is(err, fs.ErrNotExist) {
		return cid.Undef, false, nil
	}
	if err != nil {
		return cid.Undef, false, fmt.Errorf("store: plan of %s: %w", id, err)
	}
	c, err = ParseCID(strings.TrimSuffix(string(b), "\n"))
	if err != nil {
		return cid.Undef, false, fmt.Errorf("store: plan of %s: a damaged reference: %w", id, err)
	}
	return c, true, nil
}

// Plan reads a recording's redaction plan.
func (s *Store) Plan(id string) (json.RawMessage, error) {
	if c, ok, err := s.planRef(id); err != nil {
		return nil, err
	} else if ok {
		b, err := s.blobBytes(c)
		if err == nil && Sum(b) != c {
			err = fmt.Errorf("blob %s holds other bytes", c)
		}
		if err != nil {
			return nil, fmt.Errorf("store: plan of %s: %w", id, err)
		}
		return b, nil
	}
	b, err := os.ReadFile(s.Layout().Plan(id))
	if errors.Is(err, fs.ErrNotExist) {
		// Another node's finished recording: its plan is published.
		if sh, ok := s.Blobs.(SharedBlobs); ok {
			if b, err := sh.RecordingFile(id, publishedPlan); !errors.Is(err, ErrNotFound) {
				return b, err
			}
		}
		return nil, fmt.Errorf("plan of %s: %w", id, ErrNotFound)
	}
	return b, err
}

// Key returns the server's secret key called name (32 random bytes made on
// first use, kept under DIR/keys with mode 0600).
func (s *Store) Key(name string) ([]byte, error) {
	dir, path := s.Layout().Keys(), s.Layout().Key(name)
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

// knownHashesFile holds a recording's redaction known-value hashes
// (redact.KnownHashSize-byte entries; keyed hashes, never values).
const knownHashesFile = "known.hashes"

// AppendKnownHashes appends entries to a recording's known-value hashes
// durably (fsync; the directory too when the file is new). Ingest writes a
// batch's entries before its log records, so whatever a restart finds
// acknowledged, the values it taught are remembered.
func (s *Store) AppendKnownHashes(id string, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	path := s.Layout().KnownHashes(id)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: known hashes of %s: %w", id, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && statErr != nil {
		err = SyncDir(s.recDir(id))
	}
	if err != nil {
		return fmt.Errorf("store: known hashes of %s: %w", id, err)
	}
	// In shared mode every node can read them (one that takes the open
	// recording over masks what this one learned); the batch is refused
	// unless they are there too.
	if sh, ok := s.sharedBeside(); ok {
		if err := sh.UpdateSideFile(id, knownHashesFile, func(old []byte) ([]byte, error) {
			return append(old, b...), nil
		}); err != nil {
			return fmt.Errorf("store: known hashes of %s: %w", id, err)
		}
	}
	return nil
}

// KnownHashes reads a recording's known-value hashes (nil when none).
func (s *Store) KnownHashes(id string) ([]byte, error) {
	if sh, ok := s.sharedBeside(); ok {
		if b, err := sh.SideFile(id, knownHashesFile); err != nil || len(b) > 0 {
			return b, err
		}
	}
	b, err := os.ReadFile(s.Layout().KnownHashes(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
