package log

import (
	"bytes"
	"errors"
	"io"
)

// Locator says where an event's record lives: segment ordinal (1-based) in
// the recording's log, byte offset of the record and its length. After
// finish the same ordinals name the manifest's segment blobs.
type Locator struct {
	Segment int   `json:"segment"`
	Offset  int64 `json:"offset"`
	Length  int   `json:"length"`
}

// SegmentFile is an open segment: a file of the log or a segment blob.
type SegmentFile interface {
	io.Reader
	io.ReaderAt
	io.Closer
}

// Pos is a position in a recording's log: the next frame to read is at
// Offset of segment Segment. The zero Pos is the start.
type Pos struct {
	Segment int
	Offset  int64
}

// ScanSegment calls fn for every record of segment f (ordinal pos.Segment)
// with seq > after, from pos.Offset on, reading past a bad frame with good
// frames after it (damage, which CheckLog reports) and stopping at a torn
// tail (the unacknowledged end of a log being written). It returns the
// position after the last record read.
func ScanSegment(f SegmentFile, pos Pos, after uint64, fn func(Record, Locator) error) (Pos, error) {
	sr, err := NewSegmentReaderAt(f, pos.Offset)
	if err != nil {
		return pos, err
	}
	for {
		rec, loc, err := sr.Next()
		if err == io.EOF {
			return pos, nil
		}
		if errors.Is(err, ErrTornTail) {
			// A torn tail is the unacknowledged end of an open log
			// being written right now: stop there, resume later. A bad
			// frame with good frames after it is damage: read past it
			// (CheckLog reports it).
			bad := sr.Offset()
			next, rerr := nextFrameAfter(f, bad)
			if rerr != nil {
				return pos, rerr
			}
			if next < 0 {
				return pos, nil
			}
			if sr, err = NewSegmentReaderAt(f, next); err != nil {
				return pos, err
			}
			continue
		}
		if err != nil {
			return pos, err
		}
		loc.Segment = pos.Segment
		pos.Offset = loc.Offset + int64(loc.Length)
		if rec.Seq <= after {
			continue
		}
		if err := fn(rec, loc); err != nil {
			return pos, err
		}
	}
}

// RecordEnds returns the offsets in segment data where its whole, valid
// records end, up to the first that is not: where a compressed copy of
// the segment may cut a frame so that one record decodes from one frame.
func RecordEnds(data []byte) []int64 {
	sr, err := NewSegmentReaderAt(bytes.NewReader(data), 0)
	if err != nil {
		return nil
	}
	var ends []int64
	for {
		_, loc, err := sr.Next()
		if err != nil {
			return ends
		}
		ends = append(ends, loc.Offset+int64(loc.Length))
	}
}
