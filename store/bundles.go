package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/bundle"
	"github.com/flightrec/flightrec/store/log"
)

// Bundles of finished recordings: the store's side (reading the manifest
// and blobs, installing an imported recording). The format, its writer's
// encoding and its verifier are store/bundle's.

var (
	// ErrOpen is returned (wrapped) for a recording that is still open
	// where a finished one is needed (WriteBundle, ManifestBytes,
	// ImportBundle over an open recording of the same id).
	ErrOpen = errors.New("recording is still open")
	// ErrConflict is returned (wrapped) by ImportBundle when the data
	// directory holds a recording of the same id under another root.
	ErrConflict = errors.New("recording exists with another root")
)

// ManifestBytes returns a finished recording's manifest exactly as stored
// (the bytes its root CID names, re-hashed), parsed, and its root. A
// missing recording is ErrNotFound, an open one ErrOpen.
func (s *Store) ManifestBytes(id string) (raw []byte, m *Manifest, root string, err error) {
	root, err = s.Root(id)
	if err != nil {
		return nil, nil, "", err
	}
	if root == "" {
		if _, err := s.Meta(id); err != nil {
			return nil, nil, "", err
		}
		return nil, nil, "", fmt.Errorf("recording %s: %w", id, ErrOpen)
	}
	c, err := ParseCID(root)
	if err != nil {
		return nil, nil, "", fmt.Errorf("store: ROOT of %s: %w", id, err)
	}
	f, err := s.Blobs.Open(c)
	if err != nil {
		return nil, nil, "", err
	}
	defer f.Close()
	if f.Size() > MaxBundleSection-bundle.CIDLen {
		return nil, nil, "", fmt.Errorf("store: manifest %s is %d bytes, over the bundle section limit", root, f.Size())
	}
	raw, err = log.ReadN(f, nil, int(f.Size()))
	if err != nil {
		return nil, nil, "", fmt.Errorf("store: manifest %s: %w", root, err)
	}
	if Sum(raw) != c {
		return nil, nil, "", fmt.Errorf("store: manifest %s: bytes do not match the CID (run flightrec verify)", root)
	}
	m = new(Manifest)
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, nil, "", fmt.Errorf("store: manifest %s: %w", root, err)
	}
	return raw, m, root, nil
}

// WriteBundle writes finished recording id as a bundle to w and returns its
// root. It streams: the manifest is held in memory, every other blob is
// copied from the blob store, re-hashed on the way (a blob the store holds
// damaged fails the export rather than shipping). An open recording is an
// error wrapping ErrOpen, a missing one ErrNotFound. On error, w holds a
// partial bundle the caller discards.
func (s *Store) WriteBundle(w io.Writer, id string) (root string, err error) {
	raw, m, root, err := s.ManifestBytes(id)
	if err != nil {
		return "", err
	}
	return root, bundle.Write(w, id, root, raw, m, s.Blobs.Open)
}

// ImportBundle reads a bundle from r and installs its recording in s: it
// verifies as it reads (as VerifyBundle does), stores each block with
// s.Blobs only once its hash is checked (segments loose, like Seal; blobs
// in batches, packed like an ingest batch's), and once the whole bundle has
// verified writes the recording's directory — meta.json (the manifest's
// recording) and ROOT — in a staging directory that it renames into place,
// so the recording appears whole or not at all. It holds s.Blobs.Hold()
// throughout, so a sweep beginning meanwhile cannot collect the blobs
// before ROOT references them.
//
// A recording of the same id and root already there is success (nothing
// changes; the blobs are stored again if missing). The same id with
// another root is ErrConflict, an open one ErrOpen. A bundle that fails
// verification is ErrBadBundle and installs nothing: blobs it stored
// before the failure are referenced by nothing, and the next sweep
// collects them. The caller indexes the recording (IndexRecording).
func (s *Store) ImportBundle(r io.Reader) (id, root string, err error) {
	if err := s.writable(); err != nil {
		return "", "", err
	}
	defer s.Blobs.Hold()()
	const batchBytes, batchCount = 8 << 20, 256
	var (
		batch     [][]byte
		batchSize int
		// outlined are the outlined parts the segments name; a bundle
		// carries its segments before its other blobs.
		outlined = map[string]bool{}
	)
	var importing string // the recording's id, from its manifest
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := s.HoldBlobs(importing, batch); err != nil {
			return err
		}
		_, err := s.Blobs.PutMany(batch)
		batch, batchSize = nil, 0
		return err
	}
	sink := &bundle.Sink{
		Manifest: func(m *Manifest, root string) error {
			importing = m.Recording.ID
			return s.importable(m.Recording.ID, root)
		},
		Block: func(c cid.Cid, segment bool, data []byte) error {
			if segment || len(data) > blobs.PackMaxBlob {
				if err := s.HoldBlobs(importing, [][]byte{data}); err != nil {
					return err
				}
			}
			if segment {
				_, err := s.putSegment(data)
				noteOutlined(data, outlined)
				return err
			}
			if outlined[c.String()] && len(data) >= outlinePackedMax {
				// Kept compressed, as Outline stored it where it was
				// recorded (a smaller one goes to a pack, as there).
				_, _, err := s.Blobs.PutSeekable(data, nil)
				return err
			}
			if len(data) > blobs.PackMaxBlob {
				_, _, err := s.Blobs.Put(data)
				return err
			}
			batch = append(batch, bytes.Clone(data))
			batchSize += len(data)
			if batchSize >= batchBytes || len(batch) >= batchCount {
				return flush()
			}
			return nil
		},
	}
	rep, man, raw, err := bundle.Import(r, sink)
	if err != nil {
		return "", "", err
	}
	if !rep.OK() {
		p := rep.Problems[0]
		what := p.What
		if p.CID != "" {
			what = p.CID + ": " + what
		}
		if n := len(rep.Problems) - 1; n > 0 {
			what += fmt.Sprintf(" (and %d more problems)", n)
		}
		return rep.Recording, rep.Root, fmt.Errorf("%w: %s", ErrBadBundle, what)
	}
	if err := flush(); err != nil {
		return "", "", err
	}
	id, root = man.Recording.ID, rep.Root
	if err := s.install(man.Recording, root, raw); err != nil {
		return id, root, err
	}
	// In shared mode every node serves it, and every node's sweep marks
	// its blobs (which the holds kept until now).
	return id, root, s.publish(id, root)
}

// importable checks that recording id can take root: absent, or there
// with that root.
func (s *Store) importable(id, root string) error {
	have, err := s.localRoot(id)
	if err != nil {
		return err
	}
	switch {
	case have == root:
		return nil
	case have != "":
		return fmt.Errorf("store: import %s: %w (%s, the bundle's is %s)", id, ErrConflict, have, root)
	}
	if _, err := os.Stat(s.metaPath(id)); err == nil {
		return fmt.Errorf("store: import %s: a recording of that id exists: %w", id, ErrOpen)
	}
	return nil
}

// install stores the manifest blob and makes recording meta.ID finished
// under root: meta.json and ROOT are written in a staging directory
// recordings/.removing-import-<id>-*, which is renamed to the recording's
// directory (a crash before the rename leaves a directory OpenStore
// removes, see remove.go).
func (s *Store) install(meta RecordingMeta, root string, manifest []byte) (err error) {
	id := meta.ID
	if err := s.importable(id, root); err != nil {
		return err
	}
	if have, _ := s.localRoot(id); have == root {
		if manifest == nil {
			return nil
		}
		_, err := s.putManifest(manifest)
		return err
	}
	parent := s.Layout().Recordings()
	stage, err := os.MkdirTemp(parent, removingPrefix+"import-"+id+"-")
	if err != nil {
		return fmt.Errorf("store: import %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(stage)
		}
	}()
	if err := os.Chmod(stage, 0o755); err != nil {
		return fmt.Errorf("store: import %s: %w", id, err)
	}
	mb, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	// The staging directory is a recording directory under another name.
	staged := filepath.Base(stage)
	if err := WriteFileAtomic(s.Layout().Meta(staged), mb, 0o644); err != nil {
		return err
	}
	if err := WriteFileAtomic(s.Layout().Root(staged), []byte(root+"\n"), 0o644); err != nil {
		return err
	}
	if manifest != nil { // nil: the shared blob store holds it (fetch)
		if _, err := s.putManifest(manifest); err != nil {
			return err
		}
	}
	if err := os.Rename(stage, s.recDir(id)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Someone installed or created it meanwhile.
			if err := s.importable(id, root); err != nil {
				return err
			}
			if have, _ := s.localRoot(id); have == root {
				os.RemoveAll(stage)
				return nil
			}
		}
		return fmt.Errorf("store: import %s: %w", id, err)
	}
	return SyncDir(parent)
}

// IndexRecording projects one recording into idx, as Reindex does for
// every recording: its row, then its events from the index's cursor on.
func (s *Store) IndexRecording(ctx context.Context, idx Index, id string) error {
	row, last, err := s.RowOf(id)
	if err != nil {
		return fmt.Errorf("index %s: %w", id, err)
	}
	p := NewProjector(s, idx, slog.New(slog.DiscardHandler), nil)
	p.Put(row)
	p.Notify(id, last)
	if err := p.Flush(ctx); err != nil {
		return fmt.Errorf("index %s: %w", id, err)
	}
	return nil
}

// noteOutlined adds the outlined parts the records of segment data name
// to set; it stops at the first record it cannot read (verification
// reports it).
func noteOutlined(data []byte, set map[string]bool) {
	sr := log.NewSegmentReader(bytes.NewReader(data))
	for {
		rec, _, err := sr.Next()
		if err != nil {
			return
		}
		if rec.Outlined != nil {
			set[rec.Outlined.CID] = true
		}
	}
}
