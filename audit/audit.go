// Package audit is flightrec's audit log: an append-only, hash-chained
// record of what retention did and why (pins, unpins, deletions, plans,
// sweeps), and of share links and comments made and changed, in
// DATA/audit.log.
//
// Each line is one entry in a canonical JSON encoding (canonical.go). Each
// entry carries the hash of the one before it (prev) and its own hash over
// its canonical encoding, which includes prev; so changing any byte,
// dropping, duplicating or reordering entries breaks the chain, and Verify
// says where and how. Cutting entries off the end, or rewriting the chain
// from some entry on, leaves a chain that verifies by itself: that is found
// only against a head (count and hash) remembered from before, with
// VerifyAgainst. The log is tamper-evident, not tamper-proof: there is no
// key, anyone who can write the file can write a new valid chain.
package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/objstore"
)

// FileName is the log's name in the data directory (store/layout names
// its path).
var FileName = filepath.Base(layout.Of("").AuditLog())

// Entry kinds written today; others may be added (a kind is 1–32 of
// a–z, 0–9 and _, starting with a letter).
const (
	KindPin    = "pin"    // recording, project, why
	KindUnpin  = "unpin"  // recording, project, why
	KindDelete = "delete" // recording, project, why, bytes_freed, details{class, expired_at}
	KindPlan   = "plan"   // recording, details{plan_digest}
	KindSweep  = "sweep"  // details{removed, blobs_removed, bytes_freed}
	// recording, project, details{old_root, new_root, rules}
	KindReRedact = "re_redact"
	// recording, project, details{share, what, expires_at, by}: a share
	// link made (never its secret)
	KindShare = "share"
	// recording, project, details{share, by}: a share link revoked
	KindUnshare = "unshare"
	// recording, project, details{comment, step, author, by}: a comment
	// added, changed or deleted (never its text)
	KindComment       = "comment"
	KindCommentEdit   = "comment_edit"
	KindCommentDelete = "comment_delete"
)

// Reasons for a deletion (Entry.Why); others may be added.
const (
	WhyClassExpiry = "class expiry"
	WhyPinEnded    = "pin ended"
)

// Entry is one line of the log. Append assigns N, Prev and Hash, and TS
// when it is zero. Details holds kind-specific values; read back (Entries,
// or decoding JSON), its numbers are json.Number, exactly as written.
type Entry struct {
	N          uint64         `json:"n"`
	TS         int64          `json:"ts"` // unix ns
	Kind       string         `json:"kind"`
	Recording  string         `json:"recording,omitempty"`
	Project    string         `json:"project,omitempty"`
	Why        string         `json:"why,omitempty"`
	BytesFreed int64          `json:"bytes_freed,omitempty"`
	Details    map[string]any `json:"details,omitempty"`
	Prev       string         `json:"prev"`
	Hash       string         `json:"hash,omitempty"`
}

// Delete is the entry for a recording retention removed. expiredAt is unix
// ns (0 when it does not apply, e.g. a pin ended).
func Delete(recording, project, why string, bytesFreed int64, class string, expiredAt int64) Entry {
	d := map[string]any{"class": class}
	if expiredAt != 0 {
		d["expired_at"] = expiredAt
	}
	return Entry{Kind: KindDelete, Recording: recording, Project: project, Why: why,
		BytesFreed: bytesFreed, Details: d}
}

// Plan is the entry for the retention plan decided for a recording.
func Plan(recording, planDigest string) Entry {
	return Entry{Kind: KindPlan, Recording: recording, Details: map[string]any{"plan_digest": planDigest}}
}

// ReRedact is the entry for a finished recording rewritten by a newer
// redaction policy (audit scan --fix): the root it replaced, the new one,
// and the rules that fired — never the values.
func ReRedact(recording, project, oldRoot, newRoot string, rules []string) Entry {
	return Entry{Kind: KindReRedact, Recording: recording, Project: project, Why: "re-redacted by a newer policy",
		Details: map[string]any{"old_root": oldRoot, "new_root": newRoot, "rules": rules}}
}

// Sweep is the entry summing up one sweep.
func Sweep(removed, blobsRemoved int, bytesFreed int64) Entry {
	return Entry{Kind: KindSweep, Details: map[string]any{
		"removed": removed, "blobs_removed": blobsRemoved, "bytes_freed": bytesFreed}}
}

// Head names the last entry: its number (the count of entries) and hash.
// An empty log's head is {0, ZeroHash}.
type Head struct {
	N    uint64 `json:"n"`
	Hash string `json:"hash"`
}

// Limits.
const (
	// MaxLineBytes bounds a line, newline included. Append refuses a
	// larger entry; Verify reports a longer line without reading it whole.
	MaxLineBytes = 64 << 10
	// DefaultPageSize is Entries' limit when it is given as 0 or less;
	// MaxPageSize caps it.
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Errors.
var (
	// ErrCorrupt is wrapped (with a *Problem) by Open when the log fails
	// verification anywhere but a torn last line, and by Entries when the
	// file no longer holds what was written.
	ErrCorrupt = errors.New("audit log corrupt")
	ErrClosed  = errors.New("audit: log closed")
	// ErrInvalid is wrapped by Append for an entry it will not write.
	ErrInvalid = errors.New("audit: invalid entry")
)

// Options configure OpenWith.
type Options struct {
	// Now is the clock for entries appended without a TS (default
	// time.Now).
	Now func() time.Time
	// Replica, in shared mode, is the deployment's object store: every
	// entry is copied there after it is fsynced, as this node's chain
	// (chains.go). nil: the log is the data directory's alone.
	Replica objstore.Store
}

// Log is the open audit log. It is safe for concurrent use.
type Log struct {
	path string
	now  func() time.Time
	cut  int64

	wmu sync.Mutex // serializes appends, held across write and fsync

	mu      sync.Mutex // guards what follows; never held across I/O
	f       *os.File
	size    int64   // committed bytes: whole, fsynced lines
	offsets []int64 // offsets[i] is where entry i+1's line starts
	head    Head
	broken  error // set when the file's state past size is unknown
	closed  bool

	replica *replica // nil: no copy in an object store
}

// Open opens (creating if needed) DATA/audit.log in dir with default
// options.
func Open(dir string) (*Log, error) { return OpenWith(dir, Options{}) }

// OpenWith opens (creating if needed) the log in dir and verifies it whole.
//
// A torn last line — one without its newline, or not JSON at all, as a
// crash mid-append leaves — was never acknowledged: it is cut (truncated
// and fsynced) and Recovered reports how many bytes went. Any other
// failure (an edited, missing, duplicated or reordered entry, or a bad
// last line that is JSON) is damage, not a crash: Open returns an error
// wrapping ErrCorrupt and the *Problem, and cuts nothing. The operator
// moves the file aside (keeping it as evidence); a new log starts a new
// chain at entry 1.
func OpenWith(dir string, o Options) (*Log, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("audit: open: %w", err)
		}
		if err := store.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	path := layout.Of(dir).AuditLog()
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	l := &Log{path: path, now: o.Now, f: f}
	if err := l.recover(errors.Is(statErr, fs.ErrNotExist)); err != nil {
		f.Close()
		return nil, err
	}
	if o.Replica != nil {
		l.replica = &replica{obj: o.Replica}
		// Entries an earlier run could not copy: a failure is kept
		// (ReplicaErr) and retried at the next append.
		l.replicate(context.Background())
	}
	return l, nil
}

func (l *Log) recover(created bool) error {
	if created {
		if err := store.SyncDir(filepath.Dir(l.path)); err != nil {
			return err
		}
	}
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("audit: open: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("audit: open: %s is not a regular file", l.path)
	}
	var offsets []int64
	rep, p, err := scan(io.NewSectionReader(l.f, 0, fi.Size()), Head{}, func(_ Entry, off int64) {
		offsets = append(offsets, off)
	})
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", l.path, err)
	}
	end := fi.Size()
	if p != nil {
		if !p.cuttable || !p.last {
			return fmt.Errorf("audit: open %s: %w: %w", l.path, ErrCorrupt, p)
		}
		end = p.off
		if err := l.f.Truncate(end); err != nil {
			return fmt.Errorf("audit: open %s: cut torn tail: %w", l.path, err)
		}
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("audit: open %s: cut torn tail: %w", l.path, err)
		}
		l.cut = fi.Size() - end
	}
	l.size, l.offsets, l.head = end, offsets, rep.Head
	return nil
}

// Recovered reports how many bytes of a torn last line Open cut (0 if
// none).
func (l *Log) Recovered() int64 { return l.cut }

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// Head returns the number and hash of the last entry ({0, ZeroHash} when
// the log is empty). Remember it somewhere the log's writer cannot reach
// to detect later truncation or rewriting with VerifyAgainst.
func (l *Log) Head() (n uint64, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head.N, l.head.Hash
}

func validKind(k string) bool {
	if len(k) == 0 || len(k) > 32 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// Append writes e as the next entry and fsyncs it before returning: it
// assigns N (the next number), Prev (the head's hash), Hash, and TS from
// the clock when e.TS is 0, and returns the entry as written (Details as
// plain JSON values, numbers as json.Number). Appends are serialized; one
// that returns an error wrote nothing that a later Open keeps, unless the
// fsync itself failed, after which the log refuses appends until reopened
// (the entry may then be found on disk).
//
// Write the entry before the act it records: a crash between the two then
// leaves an entry for an act not (fully) done, never an act without one.
func (l *Log) Append(e Entry) (Entry, error) {
	if !validKind(e.Kind) {
		return Entry{}, fmt.Errorf("%w: kind %q is not 1–32 of a–z, 0–9, _ starting with a letter", ErrInvalid, e.Kind)
	}
	for _, s := range [...]string{e.Recording, e.Project, e.Why} {
		if !utf8.ValidString(s) {
			return Entry{}, fmt.Errorf("%w: a string field is not valid UTF-8", ErrInvalid)
		}
	}
	if e.BytesFreed < 0 {
		return Entry{}, fmt.Errorf("%w: bytes_freed is negative", ErrInvalid)
	}
	d, err := normalizeDetails(e.Details)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: details: %w", ErrInvalid, err)
	}
	e.Details = d

	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	closed, broken, head, size := l.closed, l.broken, l.head, l.size
	l.mu.Unlock()
	switch {
	case closed:
		return Entry{}, ErrClosed
	case broken != nil:
		return Entry{}, broken
	}
	if e.TS == 0 {
		e.TS = l.now().UnixNano()
	}
	e.N, e.Prev = head.N+1, head.Hash
	line, hash, err := encodeLine(&e)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(line) > MaxLineBytes {
		return Entry{}, fmt.Errorf("%w: the entry is %d bytes, more than %d", ErrInvalid, len(line), MaxLineBytes)
	}
	e.Hash = hash
	if _, err := l.f.WriteAt(line, size); err != nil {
		if terr := l.f.Truncate(size); terr != nil {
			l.setBroken(fmt.Errorf("audit: append failed (%v) and could not be undone: %w; reopen the log", err, terr))
		}
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		l.setBroken(fmt.Errorf("audit: an fsync failed (%w); reopen the log", err))
		return Entry{}, fmt.Errorf("audit: append: fsync: %w", err)
	}
	l.mu.Lock()
	l.offsets = append(l.offsets, size)
	l.size = size + int64(len(line))
	l.head = Head{N: e.N, Hash: hash}
	l.mu.Unlock()
	if l.replica != nil {
		// The entry is durable here; its copy (and any an outage held
		// back) goes to the node's chain in the object store, in order.
		l.replicate(context.Background())
	}
	return e, nil
}

func (l *Log) setBroken(err error) {
	l.mu.Lock()
	l.broken = err
	l.mu.Unlock()
}

// Close closes the file. Appends after it fail with ErrClosed.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.f.Close()
}

type snapshot struct {
	f       *os.File
	size    int64
	offsets []int64
	head    Head
}

func (l *Log) snap() (snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return snapshot{}, ErrClosed
	}
	// offsets is only ever appended to: the elements below its length
	// here never change, whatever later appends do to the slice.
	return snapshot{l.f, l.size, l.offsets[:len(l.offsets):len(l.offsets)], l.head}, nil
}

// Entries returns up to limit entries after entry number after (0 for
// the first page), in order. limit ≤ 0 means DefaultPageSize; it is capped
// at MaxPageSize. Past the head it returns none. Every line read is
// checked as Verify would (hash, number, link to the entry before); a
// failure is an error wrapping ErrCorrupt and the *Problem.
func (l *Log) Entries(after uint64, limit int) ([]Entry, error) {
	es, _, err := l.page(after, limit)
	return es, err
}

func (l *Log) page(after uint64, limit int) ([]Entry, Head, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	if limit > MaxPageSize {
		limit = MaxPageSize
	}
	s, err := l.snap()
	if err != nil {
		return nil, Head{}, err
	}
	out := []Entry{}
	if after >= s.head.N {
		return out, s.head, nil
	}
	last := after + uint64(limit)
	if last > s.head.N {
		last = s.head.N
	}
	// Read from the entry before the page, to check the page's link to it.
	first := after
	if first == 0 {
		first = 1
	}
	start := s.offsets[first-1]
	end := s.size
	if last < s.head.N {
		end = s.offsets[last]
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, start, end-start), MaxLineBytes)
	prev := ZeroHash
	for n := first; n <= last; n++ {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, bufio.ErrBufferFull) {
				err = &Problem{Line: int(n), N: n, Kind: Edited, Detail: "the line is not whole (the file changed under the log)"}
			}
			return nil, Head{}, fmt.Errorf("audit: read entry %d: %w: %w", n, ErrCorrupt, err)
		}
		e, why, _ := checkLine(line[:len(line)-1])
		var p *Problem
		switch {
		case why != "":
			p = &Problem{Line: int(n), N: n, Kind: Edited, Detail: why}
		case e.N != n:
			p = &Problem{Line: int(n), N: n, Kind: Edited, Detail: fmt.Sprintf("entry %d's line holds entry %d", n, e.N)}
		case n > after && e.Prev != prev:
			p = &Problem{Line: int(n), N: n, Kind: Unlinked, Detail: "prev is not the hash of the entry before"}
		}
		if p != nil {
			return nil, Head{}, fmt.Errorf("audit: read entry %d: %w: %w", n, ErrCorrupt, p)
		}
		prev = e.Hash
		if n > after {
			out = append(out, e)
		}
	}
	return out, s.head, nil
}

// Verify checks the committed file against this log's head, as
// VerifyAgainst does: it finds damage to the file since it was opened,
// including truncation.
func (l *Log) Verify() (VerifyReport, error) {
	s, err := l.snap()
	if err != nil {
		return VerifyReport{}, err
	}
	return VerifyAgainst(io.NewSectionReader(s.f, 0, s.size), s.head)
}
