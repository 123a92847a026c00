package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"

	"github.com/flightrec/flightrec/store/layout"
)

// Damage in a log is told apart from a torn tail by what follows it. Only
// a torn final record may be cut at open: a frame that runs past the end
// of the last segment, a frame header that is not whole, or bytes that are
// zero from a block boundary to the end (a crash after the size grew and
// before the data landed). A bad frame (a checksum mismatch, an impossible
// length) is damage, wherever it is: the records before and after it were
// acknowledged and stay readable. The next frame boundary after a bad
// frame is found by resync: the first offset where a frame of sane length
// ends inside the segment, its checksum holds and it decodes.

// ErrDamaged is wrapped by DamagedError.
var ErrDamaged = errors.New("log is damaged")

// LogDamage is one region of a log that holds no readable record.
type LogDamage struct {
	Segment int   `json:"segment"`
	Offset  int64 `json:"offset"` // the region's first byte in the segment
	End     int64 `json:"end"`    // the byte after its last
	// AfterSeq is the seq of the last good record before the region (0:
	// none); BeforeSeq the first good record's after it (0: none, the
	// region runs to the end of the log). The seqs in between are lost.
	AfterSeq  uint64 `json:"after_seq"`
	BeforeSeq uint64 `json:"before_seq"`
	Why       string `json:"why"`
}

// Lost is the seq range the region took, as far as the records around it
// tell: From..To inclusive, To 0 when it runs to the end of the log.
func (d LogDamage) Lost() (from, to uint64) {
	from = d.AfterSeq + 1
	if d.BeforeSeq > 0 {
		to = d.BeforeSeq - 1
	}
	return from, to
}

func (d LogDamage) String() string {
	from, to := d.Lost()
	lost := fmt.Sprintf("seqs %d–%d lost", from, to)
	switch {
	case to == 0:
		lost = fmt.Sprintf("seqs from %d lost", from)
	case to < from:
		lost = "no seq lost"
	}
	return fmt.Sprintf("segment %d bytes %d–%d: %s (%s)", d.Segment, d.Offset, d.End, d.Why, lost)
}

// DamagedError is a log with damage that recovery must not cut: a bad
// frame with intact frames after it, or in a segment other than the last.
// It wraps ErrDamaged and ErrCorrupt.
type DamagedError struct {
	Dir    string
	Damage []LogDamage
}

func (e *DamagedError) Error() string {
	parts := make([]string, len(e.Damage))
	for i, d := range e.Damage {
		parts[i] = d.String()
	}
	return fmt.Sprintf("store: log %s is damaged: %s", e.Dir, strings.Join(parts, "; "))
}

func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, ErrCorrupt} }

// segWalk is what walkSegment found in one segment.
type segWalk struct {
	end      int64 // the end of the last good frame (0: the header is not whole)
	size     int64
	records  int
	firstSeq uint64
	lastSeq  uint64
	damage   []LogDamage // Segment and seqs filled in by the caller
	torn     bool        // from end on: a torn final record
}

// frameState is what lies at an offset of a segment.
type frameState int

const (
	frameGood  frameState = iota
	frameBad              // whole, but an impossible length or a checksum mismatch
	frameShort            // a header that is not whole, or a frame past the end
)

func frameAt(b []byte, off int64) (frameState, int64) {
	if int64(len(b))-off < FrameHeaderLen {
		return frameShort, 0
	}
	n := int64(binary.LittleEndian.Uint32(b[off:]))
	if n == 0 {
		return frameBad, 0
	}
	if off+FrameHeaderLen+n > int64(len(b)) {
		return frameShort, n
	}
	if n > MaxRecordBytes {
		return frameBad, 0
	}
	p := b[off+FrameHeaderLen : off+FrameHeaderLen+n]
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(b[off+4:]) {
		return frameBad, n
	}
	return frameGood, n
}

// resyncLog returns the offset of the first good, decodable frame at or
// after from, or -1.
func resyncLog(b []byte, from int64) int64 {
	for o := from; o+FrameHeaderLen < int64(len(b)); o++ {
		// A payload starts with a record version: most offsets are
		// ruled out before any checksum is computed.
		if v := b[o+FrameHeaderLen]; v != recordV1 && v != recordV2 && v != recordV3 {
			continue
		}
		if st, n := frameAt(b, o); st == frameGood {
			if _, err := decodeRecord(b[o+FrameHeaderLen:o+FrameHeaderLen+n], true); err == nil {
				return o
			}
		}
	}
	return -1
}

// zeroTail reports whether b is zero from off, or from a 512-byte
// boundary after off, to its end: what a crash leaves where the file grew
// and the data never landed.
func zeroTail(b []byte, off int64) bool {
	z := int64(len(b)) - 1
	for z >= off && b[z] == 0 {
		z--
	}
	if z < off {
		return true
	}
	a := (z + 1 + 511) / 512 * 512
	return a < int64(len(b))
}

// walkSegment reads a whole segment b, calling fn (if set) with every good
// record, resyncing past bad frames. The error is ErrBadRecord (a frame
// whose checksum holds but that does not decode: a newer format or a bug,
// never cut or skipped) or fn's.
func walkSegment(b []byte, fn func(Record, Locator) error) (segWalk, error) {
	w := segWalk{size: int64(len(b))}
	if w.size < SegmentHeaderLen {
		w.torn = true
		return w, nil
	}
	off := SegmentHeaderLen
	if string(b[:SegmentHeaderLen]) != segMagic {
		if zeroTail(b, 0) && len(bytes.Trim(b[:SegmentHeaderLen], "\x00")) == 0 {
			w.torn = true // a header a crash left as zeros: nothing was written
			return w, nil
		}
		next := resyncLog(b, SegmentHeaderLen)
		if next < 0 {
			next = w.size
		}
		w.damage = append(w.damage, LogDamage{Offset: 0, End: next, Why: "not a segment header"})
		off = next
	}
	w.end = off
	for off < w.size {
		st, n := frameAt(b, off)
		if st == frameGood {
			loc := Locator{Offset: off, Length: int(FrameHeaderLen + n)}
			rec, err := decodeRecord(b[off+FrameHeaderLen:off+FrameHeaderLen+n], true)
			if err != nil {
				return w, fmt.Errorf("store: frame at offset %d: %w", off, err)
			}
			if w.records == 0 {
				w.firstSeq = rec.Seq
			}
			for j := range w.damage {
				if w.damage[j].BeforeSeq == 0 {
					w.damage[j].BeforeSeq = rec.Seq
				}
			}
			w.records++
			w.lastSeq = rec.Seq
			if fn != nil {
				if err := fn(rec, loc); err != nil {
					return w, err
				}
			}
			off += int64(loc.Length)
			w.end = off
			continue
		}
		next := resyncLog(b, off+1)
		if next < 0 {
			if st == frameShort || zeroTail(b, off) {
				w.torn = true
				return w, nil
			}
			next = w.size
		}
		why := "checksum mismatch"
		if st == frameShort {
			why = "frame runs past the next frame"
		} else if n == 0 {
			why = "impossible frame length"
		}
		w.damage = append(w.damage, LogDamage{Offset: off, End: next, AfterSeq: w.lastSeq, Why: why})
		off = next
	}
	return w, nil
}

// walkLog walks every segment of the log in dir (see walkSegment), filling
// in the damage's segments and seqs. A torn tail of a segment other than
// the last is damage too: a segment is fsynced before the next is made.
// It returns the walks, one per segment; a missing directory is
// ErrNotFound.
func walkLog(dir string, fn func(Record, Locator) error) ([]segWalk, []LogDamage, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return nil, nil, err
	}
	walks := make([]segWalk, len(segs))
	var damage []LogDamage
	var lastSeq uint64
	for i, n := range segs {
		b, err := os.ReadFile(layout.SegmentIn(dir, n))
		if err != nil {
			return nil, nil, fmt.Errorf("store: log %s: %w", dir, err)
		}
		seg := n
		w, err := walkSegment(b, func(r Record, loc Locator) error {
			loc.Segment = seg
			if fn != nil {
				return fn(r, loc)
			}
			return nil
		})
		if err != nil {
			if errors.Is(err, ErrBadRecord) {
				err = fmt.Errorf("store: log %s: segment %d: %w: %w", dir, n, ErrCorrupt, err)
			}
			return nil, nil, err
		}
		if w.torn && i < len(segs)-1 {
			w.damage = append(w.damage, LogDamage{Offset: w.end, End: w.size, Why: "torn tail in a segment that is not the last"})
		}
		walks[i] = w
		// Seqs around each region that its own segment cannot tell: the
		// last good one in an earlier segment, the first in a later one.
		for j := range w.damage {
			if w.damage[j].AfterSeq == 0 {
				w.damage[j].AfterSeq = lastSeq
			}
			w.damage[j].Segment = n
		}
		if w.records > 0 {
			for k := range damage {
				if damage[k].BeforeSeq == 0 {
					damage[k].BeforeSeq = w.firstSeq
				}
			}
			lastSeq = w.lastSeq
		}
		damage = append(damage, w.damage...)
	}
	return walks, damage, nil
}

// nextFrameAfter is Scan's resync over a segment file: the offset of the
// first good frame after a bad one at off, or -1 (the bad frame is a tail:
// torn, or being written right now).
func nextFrameAfter(f SegmentFile, off int64) (int64, error) {
	rest, err := io.ReadAll(io.NewSectionReader(f, off, 1<<62))
	if err != nil {
		return -1, err
	}
	next := resyncLog(rest, 1)
	if next < 0 {
		return -1, nil
	}
	// A frame being appended right now can look bad to a reader that saw
	// part of it, while the frames after it are whole by the time it
	// reads them: look at it again, in this read and in a fresh one (the
	// frame after it was whole, so an append in progress has finished it).
	if st, _ := frameAt(rest, 0); st == frameGood {
		return off, nil
	}
	again := make([]byte, next)
	if n, _ := f.ReadAt(again, off); n == len(again) {
		if st, _ := frameAt(again, 0); st == frameGood {
			return off, nil
		}
	}
	return off + next, nil
}

// Walk calls fn (if set) with every intact record of the log in dir, in
// order, resyncing past damage, and returns the damage it found. It only
// reads. A missing log is ErrNotFound.
func Walk(dir string, fn func(Record, Locator) error) ([]LogDamage, error) {
	_, damage, err := walkLog(dir, fn)
	return damage, err
}

// Intact is segment b without its damage: the header and the intact
// frames, in order (a torn tail left out too). Repair rewrites a damaged
// segment with it once the damaged bytes are in quarantine.
func Intact(b []byte) ([]byte, error) {
	clean := append([]byte(nil), segMagic...)
	_, err := walkSegment(b, func(_ Record, loc Locator) error {
		clean = append(clean, b[loc.Offset:loc.Offset+int64(loc.Length)]...)
		return nil
	})
	return clean, err
}
