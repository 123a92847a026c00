package store

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/log"
)

// Store is the data directory: blobs, and one directory per recording.
//
// Its paths are named by store/layout (docs/design.md § Storage layout lists
// them).
//
// Finishing a recording turns its segments into blobs, writes the manifest
// as a blob, writes ROOT, and then removes the log directory. Each step is
// idempotent, so a crash in between is finished again on the next Seal or
// on Recover.
type Store struct {
	dir   string
	Blobs blobs.Store
	LogOptions
	derivedMu sync.Mutex // serializes derived.json updates
	besideMu  sync.Mutex // serializes UpdateBeside on the data directory
	groupsMu  sync.Mutex // serializes groups/ writes
	// readOnly is set by OpenStoreReadOnly: nothing on disk may change.
	readOnly bool
	// borrowed is set on a Scratch store: its blob store is another's,
	// which closes it.
	borrowed bool
	// plainSegments stores sealed segments uncompressed, as stores
	// written before compression did (tests of old stores set it).
	plainSegments bool
	// copies is when each fetched copy was last checked against the
	// published ROOT, and how often it was replaced (shared mode: copy.go).
	copies copyChecks
}

// ErrReadOnly is returned by any write to a store opened read-only.
var ErrReadOnly = blobs.ErrReadOnly

// OpenStoreReadOnly opens a data directory for commands that check or
// read (verify, export, audit verify and scan): it creates nothing, cuts
// no torn tail, removes no leftovers, preallocates no pack and writes no
// byte, whether or not a server runs on the directory.
//
// A server may be appending meanwhile: a pack or log tail that is torn now
// is an append in progress, so it is read around, never cut.
func OpenStoreReadOnly(dir string, lo LogOptions) (*Store, error) {
	if fi, err := os.Stat(layout.Of(dir).Recordings()); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("store: %s is not a flightrec data directory: %w", dir, ErrNotFound)
	}
	b, err := blobs.OpenFSBlobsReadOnly(layout.Of(dir).Blobs().Dir)
	if err != nil {
		return nil, err
	}
	return &Store{dir: dir, Blobs: b, LogOptions: lo, readOnly: true}, nil
}

// OpenStoreReadOnlyWithBlobs is OpenStoreReadOnly for a data directory
// whose blobs live in b (an object store's: --blobs), which the store
// closes. Nothing is written to b either.
func OpenStoreReadOnlyWithBlobs(dir string, lo LogOptions, b blobs.Store) (*Store, error) {
	if fi, err := os.Stat(layout.Of(dir).Recordings()); err != nil || !fi.IsDir() {
		b.Close()
		return nil, fmt.Errorf("store: %s is not a flightrec data directory: %w", dir, ErrNotFound)
	}
	return &Store{dir: dir, Blobs: b, LogOptions: lo, readOnly: true}, nil
}

// writable returns ErrReadOnly for a store opened read-only; every method
// that changes the data directory calls it first.
func (s *Store) writable() error {
	if s.readOnly {
		return ErrReadOnly
	}
	return nil
}

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// ErrFinished is returned when a recording is already sealed.
var ErrFinished = errors.New("recording is finished")

// OpenStore opens (creating if needed) a data directory.
func OpenStore(dir string, lo LogOptions) (*Store, error) {
	if err := os.MkdirAll(layout.Of(dir).Recordings(), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	b, err := blobs.OpenFSBlobs(layout.Of(dir).Blobs().Dir)
	if err != nil {
		return nil, err
	}
	return openStore(dir, lo, b)
}

// OpenStoreWithBlobs opens (creating if needed) a data directory whose
// blobs live in b (an object store's: serve --blobs), which the store
// closes.
func OpenStoreWithBlobs(dir string, lo LogOptions, b blobs.Store) (*Store, error) {
	if err := os.MkdirAll(layout.Of(dir).Recordings(), 0o755); err != nil {
		b.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	return openStore(dir, lo, b)
}

func openStore(dir string, lo LogOptions, b blobs.Store) (*Store, error) {
	s := &Store{dir: dir, Blobs: b, LogOptions: lo}
	if err := s.removeLeftovers(); err != nil {
		b.Close()
		return nil, err
	}
	removeVideoTemps(dir)
	return s, nil
}

// Close releases the blob store's open pack (a Scratch store's is left
// to the store it was made from).
func (s *Store) Close() error {
	if s.borrowed {
		return nil
	}
	return s.Blobs.Close()
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// NewRecordingID returns a fresh id: 26 characters of lowercase Crockford
// base32, the first ten a millisecond timestamp so ids sort by creation.
func NewRecordingID(now time.Time) string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err)
	}
	// 128 bits → 26 base32 digits (the top two bits of the first are zero).
	out := make([]byte, 26)
	var acc uint64
	var bits uint
	j := 0
	// Emit 2 leading bits first so the remaining 126 split evenly into 5s.
	acc = uint64(b[0] >> 6)
	out[j] = alphabet[acc]
	j++
	acc, bits = uint64(b[0]&0x3f), 6
	for _, x := range b[1:] {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[j] = alphabet[(acc>>bits)&31]
			j++
		}
	}
	return string(out[:j])
}

// Layout names the data directory's paths.
func (s *Store) Layout() layout.Layout { return layout.Of(s.dir) }

func (s *Store) recDir(id string) string   { return s.Layout().Recording(id) }
func (s *Store) logDir(id string) string   { return s.Layout().Log(id) }
func (s *Store) metaPath(id string) string { return s.Layout().Meta(id) }
func (s *Store) rootPath(id string) string { return s.Layout().Root(id) }

// Create makes a recording's directory and writes its metadata durably.
func (s *Store) Create(m RecordingMeta) error {
	if err := s.writable(); err != nil {
		return err
	}
	if !ValidRecordingID(m.ID) {
		return fmt.Errorf("store: invalid recording id")
	}
	if err := os.MkdirAll(s.recDir(m.ID), 0o755); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := SyncDir(s.Layout().Recordings()); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return WriteFileAtomic(s.metaPath(m.ID), b, 0o644)
}

// Meta reads the metadata a recording was opened with.
func (s *Store) Meta(id string) (RecordingMeta, error) {
	var m RecordingMeta
	if !ValidRecordingID(id) {
		return m, ErrNotFound
	}
	b, err := os.ReadFile(s.metaPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		// Another node may have ingested it (a shared blob store).
		if ferr := s.fetch(id); errors.Is(ferr, ErrNotFound) {
			return m, fmt.Errorf("recording %s: %w", id, ErrNotFound)
		} else if ferr != nil {
			return m, ferr // the shared blob store unreachable: not "missing"
		}
		b, err = os.ReadFile(s.metaPath(id))
	}
	if err != nil {
		return m, fmt.Errorf("store: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("store: meta of %s: %w", id, err)
	}
	return m, nil
}

// Root returns the manifest CID of a finished recording, or "" while open.
// A recording this data directory does not have is looked for in a shared
// blob store (another node's: fetch).
//
// In shared mode a finished recording's root is checked against the
// published one at most once per CopyCheckEvery (checkCopy).
func (s *Store) Root(id string) (string, error) {
	root, err := s.localRoot(id)
	if err != nil {
		return root, err
	}
	if root != "" {
		return s.checkCopy(id, root, false)
	}
	if _, merr := os.Stat(s.metaPath(id)); !errors.Is(merr, fs.ErrNotExist) || s.fetch(id) != nil {
		return "", nil // open here, or nowhere
	}
	return s.localRoot(id)
}

// localRoot is Root in this data directory alone.
func (s *Store) localRoot(id string) (string, error) {
	if !ValidRecordingID(id) {
		return "", fmt.Errorf("recording %q: %w", id, ErrNotFound)
	}
	b, err := os.ReadFile(s.rootPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// IDs lists every recording in the data directory, sorted.
func (s *Store) IDs() ([]string, error) {
	ents, err := os.ReadDir(s.Layout().Recordings())
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && ValidRecordingID(e.Name()) {
			if _, err := os.Stat(s.metaPath(e.Name())); err == nil {
				ids = append(ids, e.Name())
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// OpenLog opens a recording's log for appending; recovery of a torn tail
// happens here.
func (s *Store) OpenLog(id string) (*Log, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	if gaps, err := s.pendingGaps(id); err != nil || len(gaps) > 0 {
		if err == nil {
			d := LogDamage{AfterSeq: gaps[0].From - 1, Why: "a repair was interrupted; run it again"}
			if gaps[0].To > 0 {
				d.BeforeSeq = gaps[0].To + 1
			}
			err = &DamagedError{Dir: s.logDir(id), Damage: []LogDamage{d}}
		}
		return nil, err
	}
	return log.OpenLog(s.logDir(id), s.LogOptions)
}

// Manifest reads a finished recording's manifest.
func (s *Store) Manifest(id string) (*Manifest, string, error) {
	root, err := s.Root(id)
	if err != nil {
		return nil, "", err
	}
	if root == "" {
		return nil, "", fmt.Errorf("recording %s is still open: %w", id, ErrNotFound)
	}
	m, err := s.ReadManifest(root)
	return m, root, err
}

// ReadManifest reads and parses the manifest blob root.
func (s *Store) ReadManifest(root string) (*Manifest, error) {
	c, err := ParseCID(root)
	if err != nil {
		return nil, err
	}
	r, err := s.Blobs.Open(c)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var m Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("store: manifest %s: %w", root, err)
	}
	return &m, nil
}

// Seal finishes a recording: the caller has closed its Log. meta is the
// final metadata (verdict, finished_at). It returns the root CID. Calling
// it again on a sealed recording returns the same root.
func (s *Store) Seal(meta RecordingMeta) (string, error) { return s.seal(meta, nil) }

// SealUnpublished is Seal without publishing to a shared blob store: the
// segments and manifest are stored (held, so no node's sweep removes
// them), ROOT is written here, and the recording's published files are
// left as they were. Cluster mode publishes only once its seal won the
// recording's key space (ingest/cluster.go), with PublishSealed.
func (s *Store) SealUnpublished(meta RecordingMeta) (string, error) {
	return s.sealUnpublished(meta, nil)
}

// seal is Seal with the gaps a repair declares (repair.go).
func (s *Store) seal(meta RecordingMeta, gaps []Gap) (string, error) {
	root, err := s.sealUnpublished(meta, gaps)
	if err == nil {
		err = s.publish(meta.ID, root)
	}
	return root, err
}

func (s *Store) sealUnpublished(meta RecordingMeta, gaps []Gap) (string, error) {
	if err := s.writable(); err != nil {
		return "", err
	}
	id := meta.ID
	if root, err := s.Root(id); err != nil || root != "" {
		if _, statErr := os.Stat(s.logDir(id)); root != "" && statErr == nil {
			_ = os.RemoveAll(s.logDir(id)) // a crash after ROOT, before cleanup
		}
		return root, err
	}
	return s.sealLog(meta, gaps)
}

// Reseal replaces a finished recording's events and metadata with recs (in
// seq order, every event) and meta: retroactive redaction. It writes recs
// as a new log, seals it into a new manifest and root exactly as Seal does,
// and points ROOT at it; the old manifest and segments stay as blobs,
// referenced by nothing, until garbage collection, so a bundle exported
// for the old root still verifies on its own. A crash before ROOT is
// replaced leaves the old root (recovery removes the new log); after, the
// new one. The recording's derived blobs, made from the old events, are
// dropped (dropDerived). The caller holds the data directory's lock.
func (s *Store) Reseal(meta RecordingMeta, recs []Record) (oldRoot, newRoot string, err error) {
	if err := s.writable(); err != nil {
		return "", "", err
	}
	id := meta.ID
	if oldRoot, err = s.Root(id); err != nil {
		return "", "", err
	}
	if oldRoot == "" {
		return "", "", fmt.Errorf("recording %s is still open: only a finished recording is resealed", id)
	}
	// A repaired recording's declared gaps stay declared.
	old, err := s.ReadManifest(oldRoot)
	if err != nil {
		return "", "", err
	}
	if err := os.RemoveAll(s.logDir(id)); err != nil { // a crashed reseal's
		return "", "", fmt.Errorf("store: reseal %s: %w", id, err)
	}
	lg, err := s.OpenLog(id)
	if err != nil {
		return "", "", err
	}
	for len(recs) > 0 {
		n := min(len(recs), 1024)
		if _, err := lg.Append(recs[:n]); err != nil {
			lg.Close()
			return "", "", fmt.Errorf("store: reseal %s: %w", id, err)
		}
		recs = recs[n:]
	}
	if err := lg.Close(); err != nil {
		return "", "", err
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return "", "", err
	}
	if err := WriteFileAtomic(s.metaPath(id), b, 0o644); err != nil {
		return "", "", err
	}
	if newRoot, err = s.sealLog(meta, old.Gaps); err == nil {
		err = s.publish(id, newRoot)
	}
	if err == nil {
		err = s.dropDerived(id)
	}
	return oldRoot, newRoot, err
}

// sealLog turns a recording's log into a manifest and points ROOT at it.
func (s *Store) sealLog(meta RecordingMeta, gaps []Gap) (string, error) {
	id := meta.ID
	// From the first segment Put until ROOT names the manifest, the blobs
	// stored here are referenced by nothing a sweep's mark phase reads: a
	// sweep beginning meanwhile waits for this (FSBlobs.Hold).
	defer s.Blobs.Hold()()
	man := Manifest{Version: 1, Recording: meta, Counts: map[event.Kind]int64{}, Gaps: gaps}
	report := NewReportBuilder(id, meta.PlanDigest)
	report.AddMeta(&meta)
	blobs := map[string]int64{}
	steps := map[int]struct{}{}
	segs, err := segmentFiles(s.logDir(id))
	if err != nil {
		return "", err
	}
	for _, path := range segs {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("store: seal %s: %w", id, err)
		}
		ref := SegmentRef{Bytes: int64(len(data))}
		sr := log.NewSegmentReader(bytes.NewReader(data))
		for {
			rec, _, err := sr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return "", fmt.Errorf("store: seal %s: %s: %w", id, filepath.Base(path), err)
			}
			if ref.Records == 0 {
				ref.FirstSeq = rec.Seq
			}
			ref.Records++
			ref.LastSeq = rec.Seq
			man.Counts[rec.Kind]++
			report.Add(&rec)
			steps[rec.Step] = struct{}{}
			rec.EachBlob(func(c string, n int64) { blobs[c] = n })
		}
		if ref.Records == 0 {
			continue // an empty segment (rolled, then crashed) carries nothing
		}
		if err := s.HoldBlobs(id, [][]byte{data}); err != nil {
			return "", err
		}
		c, err := s.putSegment(data)
		if err != nil {
			return "", err
		}
		ref.CID = c.String()
		man.Segments = append(man.Segments, ref)
		man.Events += ref.Records
		man.LastSeq = ref.LastSeq
		man.Bytes += ref.Bytes
	}
	man.Steps = len(steps)
	man.Redaction = report.Report()
	for c, n := range blobs {
		man.Blobs = append(man.Blobs, c)
		man.Bytes += n
	}
	sort.Strings(man.Blobs)
	mb, err := json.MarshalIndent(man, "", " ")
	if err != nil {
		return "", err
	}
	if err := s.HoldBlobs(id, [][]byte{mb}); err != nil {
		return "", err
	}
	rc, err := s.putManifest(mb)
	if err != nil {
		return "", err
	}
	root := rc.String()
	if err := WriteFileAtomic(s.rootPath(id), []byte(root+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(s.logDir(id)); err != nil {
		return "", fmt.Errorf("store: seal %s: %w", id, err)
	}
	return root, SyncDir(s.recDir(id))
}

// putSegment stores a sealed log segment as a blob: under the CID of its
// bytes, kept compressed in frames that end between records, so a read of
// one record decodes one frame (blobs.PutSeekable).
func (s *Store) putSegment(data []byte) (cid.Cid, error) {
	if s.plainSegments {
		c, _, err := s.Blobs.Put(data)
		return c, err
	}
	c, _, err := s.Blobs.PutSeekable(data, log.RecordEnds(data))
	return c, err
}

// putManifest stores a manifest blob, kept compressed as sealed segments
// are (its JSON shrinks about 4×): the root names the uncompressed bytes.
func (s *Store) putManifest(mb []byte) (cid.Cid, error) {
	if s.plainSegments {
		c, _, err := s.Blobs.Put(mb)
		return c, err
	}
	c, _, err := s.Blobs.PutSeekable(mb, nil)
	return c, err
}

func segmentFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".seg") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// segmentSource opens segment n (1-based) of a recording, from the log while
// it is open and from the manifest's blobs once it is finished.
func (s *Store) segmentSource(id string, n int) (SegmentFile, error) {
	f, err := os.Open(s.Layout().Segment(id, n))
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: %w", err)
	}
	m, _, merr := s.Manifest(id)
	if merr != nil {
		return nil, fmt.Errorf("recording %s segment %d: %w", id, n, ErrNotFound)
	}
	if n < 1 || n > len(m.Segments) {
		return nil, fmt.Errorf("recording %s segment %d: %w", id, n, ErrNotFound)
	}
	c, err := ParseCID(m.Segments[n-1].CID)
	if err != nil {
		return nil, err
	}
	return s.Blobs.Open(c)
}

// Reader reads records of recordings by locator, keeping segments open
// between calls. It is safe for concurrent use.
type Reader struct {
	s    *Store
	mu   sync.Mutex
	open map[segKey]openSegment
}

type segKey struct {
	id  string
	seg int
}

// openSegment is a cached handle, and the generation of the recording's
// copy it was opened under: a copy replaced since (checkCopy) has other
// segments.
type openSegment struct {
	f   SegmentFile
	gen uint64
}

// NewReader returns a Reader over s.
func (s *Store) NewReader() *Reader { return &Reader{s: s, open: map[segKey]openSegment{}} }

// maxOpenSegments bounds the Reader's cache of open files.
const maxOpenSegments = 256

// Read returns the record at loc of recording id.
func (r *Reader) Read(id string, loc Locator) (Record, error) {
	f, err := r.segment(id, loc.Segment)
	if err != nil {
		return Record{}, err
	}
	rec, err := log.ReadRecordAt(f, loc)
	if err != nil {
		// The recording may have been sealed since: the log file is gone
		// (reads of an unlinked file still work, but be safe) — reopen once.
		r.forget(id, loc.Segment)
		if f, err2 := r.segment(id, loc.Segment); err2 == nil {
			rec, err = log.ReadRecordAt(f, loc)
		}
	}
	if err == nil {
		err = r.s.inline(&rec)
	}
	return rec, err
}

func (r *Reader) segment(id string, n int) (SegmentFile, error) {
	k := segKey{id, n}
	var gen uint64 // only a shared store's copies are ever replaced
	if r.s.Shared() {
		gen = r.s.copies.generation(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.open[k]; ok {
		if o.gen == gen {
			return o.f, nil
		}
		o.f.Close()
		delete(r.open, k)
	}
	f, err := r.s.segmentSource(id, n)
	if err != nil {
		return nil, err
	}
	if len(r.open) >= maxOpenSegments {
		for k2, o := range r.open { // evict an arbitrary one
			o.f.Close()
			delete(r.open, k2)
			break
		}
	}
	r.open[k] = openSegment{f, gen}
	return f, nil
}

// Forget drops cached handles of a recording (after seal or deletion).
func (r *Reader) Forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, o := range r.open {
		if k.id == id {
			o.f.Close()
			delete(r.open, k)
		}
	}
}

func (r *Reader) forget(id string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.open[segKey{id, n}]; ok {
		o.f.Close()
		delete(r.open, segKey{id, n})
	}
}

// Close closes every cached handle.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, o := range r.open {
		o.f.Close()
		delete(r.open, k)
	}
	return nil
}

// Scan calls fn for every record of recording id with seq > after, in
// order, starting at pos (a position an earlier Scan returned, or the zero
// Pos), reading the log while open and the segment blobs once finished. It
// returns the position after the last record read, so a projector that
// follows a growing log never reads a record twice. Every record's data is
// whole (its outlined part read back: Outline).
func (s *Store) Scan(id string, pos Pos, after uint64, fn func(Record, Locator) error) (Pos, error) {
	segs, err := segmentFiles(s.logDir(id))
	if err != nil {
		return pos, err
	}
	n := len(segs)
	if n == 0 {
		m, _, err := s.Manifest(id)
		if errors.Is(err, ErrNotFound) {
			return pos, nil // open, nothing appended yet
		}
		if err != nil {
			return pos, err
		}
		n = len(m.Segments)
		if pos.Segment == 0 {
			// Skip whole segments below the cursor.
			for i := range m.Segments {
				if m.Segments[i].LastSeq > after {
					pos = Pos{Segment: i + 1}
					break
				}
				pos = Pos{Segment: i + 2}
			}
		}
	}
	if pos.Segment == 0 {
		pos.Segment = 1
	}
	whole := s.inlined(fn)
	for ; pos.Segment <= n; pos = (Pos{Segment: pos.Segment + 1}) {
		f, err := s.segmentSource(id, pos.Segment)
		if err != nil {
			return pos, err
		}
		next, err := log.ScanSegment(f, pos, after, whole)
		f.Close()
		if err != nil {
			return next, err
		}
		if pos.Segment == n {
			return next, nil // stay at the end of the last segment: it may grow
		}
	}
	return pos, nil
}

// CheckLog walks recording id's log (while it is open) and returns its
// damage, nil for a sound one. It only reads.
func (s *Store) CheckLog(id string) ([]LogDamage, error) {
	damage, err := log.Walk(s.logDir(id), nil)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return damage, err
}
