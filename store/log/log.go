package log

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/flightrec/flightrec/store/layout"
)

// A log is one recording's append-only sequence of records, kept in a
// directory of segment files 00000001.seg, 00000002.seg, … Each segment is
//
//	"FRLOG\x00\x01\n"                      8-byte magic header
//	frame*                                  back to back, no padding
//
// and each frame is
//
//	uint32 LE  n, the payload length (1 ≤ n ≤ MaxRecordBytes)
//	uint32 LE  CRC-32C (Castagnoli) of the payload
//	n bytes    payload: one Record (see Record.AppendBinary)
//
// A Locator names a frame: segment ordinal (1-based), offset of the frame's
// first byte in that segment, and frame length (8 + n).
const (
	segMagic = "FRLOG\x00\x01\n"
	// SegmentHeaderLen is the size of a segment's magic header.
	SegmentHeaderLen = int64(len(segMagic))
	// FrameHeaderLen is the size of a frame's header (length, CRC).
	FrameHeaderLen = 8

	// MaxRecordBytes bounds one record's payload, so a corrupt length can
	// never make a reader allocate more than this.
	MaxRecordBytes = 64 << 20
	// DefaultSegmentBytes is LogOptions.SegmentBytes when unset.
	DefaultSegmentBytes = 16 << 20
)

var (
	// ErrTornTail is returned (wrapped) by SegmentReader where the frames
	// stop being whole and valid: a truncated header or payload, an
	// impossible length or a checksum mismatch. At the end of a log's last
	// segment that is the trace of a crash mid-append; anywhere else it is
	// corruption.
	ErrTornTail = errors.New("torn or corrupt log tail")
	// ErrNotSegment is returned for a file without the segment magic.
	ErrNotSegment = errors.New("not a flightrec log segment")
	// ErrCorrupt is returned for damage that recovery must not cut away:
	// a bad frame in a segment other than the last, a missing segment, a
	// frame that does not match its locator.
	ErrCorrupt = errors.New("corrupt log")
	// ErrLogClosed is returned by Append after Close.
	ErrLogClosed = errors.New("log is closed")
	// ErrSeqOrder is returned by Append for records whose seqs do not
	// ascend strictly past the log's last seq.
	ErrSeqOrder = errors.New("record seqs must ascend past the log's last seq")
	// ErrRecordTooLarge is returned by Append for a record whose encoding
	// exceeds MaxRecordBytes.
	ErrRecordTooLarge = errors.New("record exceeds the maximum record size")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// LogOptions configure a Log.
type LogOptions struct {
	// SegmentBytes is the size at which the log rolls to a new segment
	// (default DefaultSegmentBytes). A segment never exceeds it unless a
	// single frame does; such a frame gets a segment of its own.
	SegmentBytes int64
	// DurableElsewhere leaves out the fsync of every append: the caller
	// made the records durable somewhere else first, and discards this
	// log after a crash (a cluster node's copy of a recording whose
	// batches are in the object store: serve's cluster mode). Segments'
	// creation is still synced, and opening still cuts a torn tail.
	DurableElsewhere bool
}

// segFile is the part of *os.File that appending needs (an interface so
// tests can inject write and fsync failures).
type segFile interface {
	WriteAt(p []byte, off int64) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// Log is an open, appendable log. It is safe for concurrent use; appends
// are serialized. One directory must be open in one Log at a time.
type Log struct {
	dir string
	opt LogOptions

	mu        sync.Mutex
	f         segFile // the last segment, nil when there is none
	seg       int     // its ordinal, 0 when there is none
	segSize   int64   // its size (the end of its last good frame)
	prevBytes int64   // total size of the segments before it
	lastSeq   uint64
	cut       int64
	broken    error // set when the log's state on disk is unknown
	closed    bool

	buf   []byte    // encoding buffer, reused between appends
	parts []logPart // reused too

	// wrap, when set (by tests), wraps every segment file Append opens.
	wrap func(seg int, f segFile) segFile
}

// logPart is the run of one Append's frames that goes to one segment.
type logPart struct {
	seg      int
	off      int64 // where in that segment the run starts
	from, to int   // the run in the encoding buffer
	fresh    bool  // the segment must be created first
}

// OpenLog opens the log in dir, creating the directory if needed.
//
// It reads every segment and checks every frame. If the last segment ends
// in a torn final record (a crash mid-append: see logdamage.go), it is
// truncated to the end of the last good frame and fsynced, and Recovered
// reports how many bytes were cut; a last segment whose header never
// became whole is removed. Damage anywhere (a bad frame, in the middle or
// at the end, a torn tail in a segment other than the last) is a
// *DamagedError, wrapping ErrCorrupt, and nothing is changed on disk: the
// records around it were acknowledged. A gap in the ordinals is ErrCorrupt.
func OpenLog(dir string, opt LogOptions) (*Log, error) {
	if opt.SegmentBytes <= 0 {
		opt.SegmentBytes = DefaultSegmentBytes
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: open log: %w", err)
		}
		if err := layout.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("store: open log: %w", err)
	}
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	walks, damage, err := walkLog(dir, nil)
	if err != nil {
		return nil, err
	}
	if len(damage) > 0 {
		return nil, &DamagedError{Dir: dir, Damage: damage}
	}
	l := &Log{dir: dir, opt: opt}
	sizes := make([]int64, len(segs))
	for i, n := range segs {
		w := walks[i]
		sizes[i] = w.end
		if w.records > 0 {
			l.lastSeq = w.lastSeq
		}
		if !w.torn {
			continue
		}
		// Cut the torn tail of the last segment (walkLog made any other
		// segment's torn tail damage); a segment whose header is not
		// whole goes entirely.
		l.cut = w.size - w.end
		if w.end >= SegmentHeaderLen {
			if err := layout.TruncateSync(l.SegmentPath(n), w.end); err != nil {
				return nil, fmt.Errorf("store: log %s: cut torn tail: %w", dir, err)
			}
			continue
		}
		if err := os.Remove(l.SegmentPath(n)); err != nil {
			return nil, fmt.Errorf("store: log %s: remove torn segment: %w", dir, err)
		}
		if err := layout.SyncDir(dir); err != nil {
			return nil, err
		}
		segs, sizes = segs[:i], sizes[:i]
	}
	if len(segs) > 0 {
		n := len(segs)
		f, err := os.OpenFile(l.SegmentPath(n), os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("store: open log: %w", err)
		}
		l.f, l.seg, l.segSize = f, n, sizes[n-1]
		for _, s := range sizes[:n-1] {
			l.prevBytes += s
		}
	}
	return l, nil
}

// listSegments returns the ordinals of dir's segments, checking that they
// are 1…n without gaps. Other files are ignored.
func listSegments(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: log %s: %w", dir, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: log: %w", err)
	}
	var ns []int
	for _, e := range ents {
		if n, ok := layout.SegmentOrdinal(e.Name()); ok && e.Type().IsRegular() {
			ns = append(ns, n)
		}
	}
	sort.Ints(ns)
	for i, n := range ns {
		if n != i+1 {
			return nil, fmt.Errorf("store: log %s: %w: segment %d missing", dir, ErrCorrupt, i+1)
		}
	}
	return ns, nil
}

// SegmentPath is the file of segment n (1-based).
func (l *Log) SegmentPath(n int) string {
	return layout.SegmentIn(l.dir, n)
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Recovered returns how many bytes OpenLog cut from a torn tail (0 if the
// log was clean).
func (l *Log) Recovered() int64 { return l.cut }

// LastSeq is the seq of the last record, 0 if the log is empty.
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSeq
}

// Segments is the number of segment files.
func (l *Log) Segments() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seg
}

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prevBytes + l.segSize
}

// Close closes the log; Append fails afterwards.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Append writes recs durably and returns where each one is. The seqs must
// ascend strictly past LastSeq. All frames are encoded into one buffer and
// written with one write and one fsync per segment they land in (one, unless
// the batch crosses a roll; a segment is fsynced before its successor is
// created, so only the last segment can ever have a torn tail).
//
// If a write fails, the segments are truncated back to where they were, so
// no later append follows a partial tail. If an fsync fails (the kernel may
// have dropped the dirty pages, so the file's contents are unknown) or the
// rollback fails, the log is marked broken and every later Append fails;
// reopening it recovers whatever is on disk.
func (l *Log) Append(recs []Record) ([]Locator, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrLogClosed
	}
	if l.broken != nil {
		return nil, fmt.Errorf("store: log %s is unusable after an earlier failure, reopen it: %w", l.dir, l.broken)
	}
	last := l.lastSeq
	for i := range recs {
		if recs[i].Seq <= last {
			return nil, fmt.Errorf("store: log %s: seq %d after %d: %w", l.dir, recs[i].Seq, last, ErrSeqOrder)
		}
		last = recs[i].Seq
	}

	buf, parts := l.buf[:0], l.parts[:0]
	defer func() {
		if cap(buf) <= 8<<20 {
			l.buf = buf
		}
		l.parts = parts
	}()
	locs := make([]Locator, len(recs))
	seg, size := l.seg, l.segSize
	for i := range recs {
		start := len(buf)
		buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
		buf = recs[i].AppendBinary(buf)
		n := len(buf) - start - FrameHeaderLen
		if n > MaxRecordBytes {
			return nil, fmt.Errorf("store: log %s: seq %d: %d bytes: %w", l.dir, recs[i].Seq, n, ErrRecordTooLarge)
		}
		binary.LittleEndian.PutUint32(buf[start:], uint32(n))
		binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+FrameHeaderLen:], castagnoli))
		fl := int64(len(buf) - start)
		if seg == 0 || size > SegmentHeaderLen && size+fl > l.opt.SegmentBytes {
			seg, size = seg+1, SegmentHeaderLen
			parts = append(parts, logPart{seg: seg, off: size, from: start, fresh: true})
		} else if len(parts) == 0 {
			parts = append(parts, logPart{seg: seg, off: size, from: start})
		}
		locs[i] = Locator{Segment: seg, Offset: size, Length: int(fl)}
		size += fl
		parts[len(parts)-1].to = len(buf)
	}
	if err := l.write(buf, parts); err != nil {
		return nil, err
	}
	l.lastSeq = last
	return locs, nil
}

// logState is what write changes and rollback restores.
type logState struct {
	f         segFile
	seg       int
	segSize   int64
	prevBytes int64
}

func (l *Log) write(buf []byte, parts []logPart) error {
	orig := logState{l.f, l.seg, l.segSize, l.prevBytes}
	var created []segFile
	for _, p := range parts {
		if p.fresh {
			f, err := l.createSegment(p.seg)
			if err != nil {
				return l.rollback(orig, created, err, false)
			}
			created = append(created, f)
			if l.seg > 0 {
				l.prevBytes += l.segSize
			}
			l.f, l.seg, l.segSize = f, p.seg, SegmentHeaderLen
		}
		if _, err := l.f.WriteAt(buf[p.from:p.to], p.off); err != nil {
			return l.rollback(orig, created, err, false)
		}
		if !l.opt.DurableElsewhere {
			if err := l.f.Sync(); err != nil {
				return l.rollback(orig, created, fmt.Errorf("fsync: %w", err), true)
			}
		}
		l.segSize = p.off + int64(p.to-p.from)
	}
	// Close the handles of segments that are no longer the last. They are
	// fsynced and never written again, so a failing close loses nothing.
	if len(created) > 0 && orig.f != nil {
		orig.f.Close()
	}
	for i := 0; i < len(created)-1; i++ {
		created[i].Close()
	}
	return nil
}

// createSegment creates segment n with its header, durably (file and
// directory fsynced) before any frame goes in.
func (l *Log) createSegment(n int) (segFile, error) {
	path := l.SegmentPath(n)
	of, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	var f segFile = of
	if l.wrap != nil {
		f = l.wrap(n, f)
	}
	_, err = f.WriteAt([]byte(segMagic), 0)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = layout.SyncDir(l.dir)
	}
	if err != nil {
		f.Close()
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			// The ordinal is taken by a file we cannot remove.
			l.broken = fmt.Errorf("store: log %s: remove failed segment: %w", l.dir, rerr)
		}
		return nil, fmt.Errorf("create segment: %w", err)
	}
	return f, nil
}

// rollback undoes a failed write: it removes the segments this append
// created and truncates the segment it started in back to its old end.
func (l *Log) rollback(orig logState, created []segFile, cause error, fsyncFailed bool) error {
	broken := fsyncFailed
	for i := len(created) - 1; i >= 0; i-- {
		created[i].Close()
		if err := os.Remove(l.SegmentPath(orig.seg + 1 + i)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			broken = true
		}
	}
	if len(created) > 0 && layout.SyncDir(l.dir) != nil {
		broken = true
	}
	if orig.f != nil {
		if err := orig.f.Truncate(orig.segSize); err != nil {
			broken = true
		} else if err := orig.f.Sync(); err != nil {
			broken = true
		}
	}
	l.f, l.seg, l.segSize, l.prevBytes = orig.f, orig.seg, orig.segSize, orig.prevBytes
	err := fmt.Errorf("store: log %s: append: %w", l.dir, cause)
	if broken && l.broken == nil {
		l.broken = err
	}
	return err
}

// ReadRecordAt reads the one frame at loc (loc.Segment is not looked at:
// r is that segment), checks its length and checksum and decodes it.
func ReadRecordAt(r io.ReaderAt, loc Locator) (Record, error) {
	if loc.Offset < SegmentHeaderLen || loc.Length <= FrameHeaderLen || loc.Length > FrameHeaderLen+MaxRecordBytes {
		return Record{}, fmt.Errorf("store: %w: invalid locator %d+%d", ErrCorrupt, loc.Offset, loc.Length)
	}
	buf := make([]byte, loc.Length)
	n, err := r.ReadAt(buf, loc.Offset)
	if n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Record{}, fmt.Errorf("store: read record at %d+%d: %w", loc.Offset, loc.Length, err)
	}
	if got := binary.LittleEndian.Uint32(buf); int64(got) != int64(loc.Length-FrameHeaderLen) {
		return Record{}, fmt.Errorf("store: %w: frame at %d has length %d, locator says %d", ErrCorrupt, loc.Offset, got, loc.Length-FrameHeaderLen)
	}
	payload := buf[FrameHeaderLen:]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(buf[4:]) {
		return Record{}, fmt.Errorf("store: %w: checksum mismatch in frame at %d", ErrCorrupt, loc.Offset)
	}
	rec, err := decodeRecord(payload, true)
	if err != nil {
		return Record{}, fmt.Errorf("store: frame at %d: %w", loc.Offset, err)
	}
	return rec, nil
}

// SegmentReader reads a segment's frames in order.
type SegmentReader struct {
	r       io.Reader
	off     int64 // end of the last good frame (or of the header)
	started bool  // header read
	err     error // sticky
	hdr     [FrameHeaderLen]byte
	buf     []byte
}

// NewSegmentReader reads a segment from its first byte (the header).
func NewSegmentReader(r io.Reader) *SegmentReader {
	return &SegmentReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// NewSegmentReaderAt reads a segment's frames from off, the start of a
// frame (as a previous reader's Offset or a Locator gave), after checking
// the header; off 0 reads from the start like NewSegmentReader.
func NewSegmentReaderAt(r io.ReaderAt, off int64) (*SegmentReader, error) {
	if off == 0 {
		return NewSegmentReader(io.NewSectionReader(r, 0, math.MaxInt64)), nil
	}
	if off < SegmentHeaderLen {
		return nil, fmt.Errorf("store: segment offset %d is inside the header", off)
	}
	var h [SegmentHeaderLen]byte
	if n, err := r.ReadAt(h[:], 0); n < len(h) {
		if err == nil || err == io.EOF {
			return nil, fmt.Errorf("%w: segment header is %d bytes", ErrTornTail, n)
		}
		return nil, fmt.Errorf("store: read segment: %w", err)
	}
	if string(h[:]) != segMagic {
		return nil, ErrNotSegment
	}
	s := NewSegmentReader(io.NewSectionReader(r, off, math.MaxInt64-off))
	s.started, s.off = true, off
	return s, nil
}

// Offset is the end of the last frame Next returned (or of the header):
// after a torn tail, the length to truncate the segment to.
func (s *SegmentReader) Offset() int64 { return s.off }

// Next returns the next record and its locator (Segment left 0 for the
// caller to fill). At a clean end it returns io.EOF; where the frames stop
// being whole and valid, an error wrapping ErrTornTail; for a file that is
// not a segment, ErrNotSegment; for a frame whose checksum holds but whose
// payload does not decode (a newer format, or a bug: never cut that away),
// an error wrapping ErrBadRecord. Errors are sticky.
//
// The record does not alias the reader's buffer (see DecodeRecord).
func (s *SegmentReader) Next() (Record, Locator, error) {
	if s.err != nil {
		return Record{}, Locator{}, s.err
	}
	rec, loc, err := s.next()
	if err != nil {
		s.err = err
	}
	return rec, loc, err
}

func (s *SegmentReader) torn(why string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrTornTail, why, s.off)
}

func isShort(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }

func (s *SegmentReader) next() (Record, Locator, error) {
	if !s.started {
		var h [SegmentHeaderLen]byte
		if _, err := io.ReadFull(s.r, h[:]); err != nil {
			if isShort(err) {
				return Record{}, Locator{}, s.torn("truncated segment header")
			}
			return Record{}, Locator{}, fmt.Errorf("store: read segment: %w", err)
		}
		if string(h[:]) != segMagic {
			return Record{}, Locator{}, ErrNotSegment
		}
		s.started, s.off = true, SegmentHeaderLen
	}
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		switch err {
		case io.EOF:
			return Record{}, Locator{}, io.EOF
		case io.ErrUnexpectedEOF:
			return Record{}, Locator{}, s.torn("truncated frame header")
		}
		return Record{}, Locator{}, fmt.Errorf("store: read segment: %w", err)
	}
	n := binary.LittleEndian.Uint32(s.hdr[:])
	if n == 0 || n > MaxRecordBytes {
		return Record{}, Locator{}, s.torn("impossible frame length")
	}
	var err error
	s.buf, err = ReadN(s.r, s.buf, int(n))
	if err != nil {
		if isShort(err) {
			return Record{}, Locator{}, s.torn("truncated frame")
		}
		return Record{}, Locator{}, fmt.Errorf("store: read segment: %w", err)
	}
	if crc32.Checksum(s.buf, castagnoli) != binary.LittleEndian.Uint32(s.hdr[4:]) {
		return Record{}, Locator{}, s.torn("checksum mismatch")
	}
	rec, err := DecodeRecord(s.buf)
	if cap(s.buf) > 4<<20 {
		s.buf = nil // do not keep a rare huge buffer
	}
	if err != nil {
		return Record{}, Locator{}, fmt.Errorf("store: frame at offset %d: %w", s.off, err)
	}
	loc := Locator{Offset: s.off, Length: FrameHeaderLen + int(n)}
	s.off += int64(loc.Length)
	return rec, loc, nil
}

// ReadN reads exactly n bytes into buf (reused), growing it only as data
// arrives, so a corrupt length over a short input allocates little.
func ReadN(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) >= n || n <= 1<<20 {
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf = buf[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), max(len(buf), 1<<20))
		buf = append(buf, make([]byte, chunk)...)
		if _, err := io.ReadFull(r, buf[len(buf)-chunk:]); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// ScanLog calls fn with every record of the log in dir, in order, with its
// full locator. It only reads, so it may run while a Log appends: a torn
// tail of the last segment (an append in progress, or a crash that OpenLog
// has not yet cut) ends the scan without error. Damage is read around: fn
// hears every intact record, and then the scan returns a *DamagedError
// (wrapping ErrCorrupt). An error from fn stops the scan and is returned
// as is. A missing directory is ErrNotFound.
func ScanLog(dir string, fn func(Record, Locator) error) error {
	_, damage, err := walkLog(dir, fn)
	if err != nil {
		return err
	}
	if len(damage) > 0 {
		return &DamagedError{Dir: dir, Damage: damage}
	}
	return nil
}
