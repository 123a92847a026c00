package blobs

import (
	"bytes"
	_ "embed" // the built-in dictionary
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// A seekable blob is a blob kept compressed at rest (DIR/<xy>/<cid>.zst)
// and read at any offset by decoding one frame. Its CID is still the
// sha2-256 of the uncompressed bytes: the compressed form is only how the
// blob store keeps it, so CIDs, manifests, verify, bundles and
// attestations never see it, and a change of compressor changes no name.
//
//	"FRZSEK\x00\x03"                       8-byte magic (version 3)
//	frame*                                  zstd frames, back to back, each with
//	                                        its content checksum, of the frame's
//	                                        bytes after crcFilter; frame 0
//	                                        compressed with the built-in
//	                                        dictionary (zdict1.txt) as a raw
//	                                        dictionary (ID zBuiltinID), every
//	                                        later one with the built-in
//	                                        dictionary followed by the first
//	                                        zDictMax bytes of frame 0 (ID
//	                                        zBuiltinFirstID)
//	n × (u32 LE compressed length,          the seek table: frame i covers the
//	     u32 LE uncompressed length)        uncompressed bytes after frames 0…i-1
//	u32 LE n                                the number of frames
//	u32 LE CRC-32C of the table and n
//	"FRZTAB\x00\x01"                        8-byte magic
//
// The writer cuts frames only where the caller says a unit ends (a log
// record), so one record is decoded from one frame (and frame 0, which a
// reader keeps once decoded).
//
// Why frame 0 as a dictionary: each frame starting cold costs the
// repetition between frames (a HAR entry's header names, a page's text in
// every snapshot). A demo run's log in 64 KiB frames compressed to 26 KB
// alone, 18.8 KB with frame 0 as their dictionary, 18.4 KB as one stream.
// The dictionary is the blob's own bytes, so a blob still decodes alone.
//
// Why a built-in dictionary too (version 3): frame 0 still starts cold,
// and most of what it spells first is not the recording's but the
// vocabulary every recording shares: flightrec's record framing and JSON
// keys, rrweb's event shapes, Chromium's request headers, the manifest's
// keys and redaction rules. zdict1.txt holds that vocabulary and nothing
// of any recording (it is source, reviewed like code), so it outlives no
// deleted recording and no damaged blob can take it away. With it and
// zstd's "better" level a demo rerun's log takes 15.5 KB instead of 18.3
// (14.1 KB after crcFilter) and its manifest 2.0 KB instead of 2.5 (issue
// 19's 5 runs ÷ one run).
// The dictionary is part of the format: it never changes; another one
// would be zdict2.txt, under new IDs and a new version, with this one
// kept to read what it wrote (TestBuiltinDictionaryIsFixed pins it).
//
// Versions 1 (magic "FRZSEK\x00\x01", every frame independent) and 2
// (frame 0 alone, later frames against frame 0's start as dictionary ID
// zDictID) are still read.
const (
	zMagic     = "FRZSEK\x00\x03"
	zMagicV2   = "FRZSEK\x00\x02"
	zMagicV1   = "FRZSEK\x00\x01"
	zTailMagic = "FRZTAB\x00\x01"
	// zTailLen is n, the CRC and the tail magic.
	zTailLen = 4 + 4 + 8
	// zEntryLen is one seek-table entry.
	zEntryLen = 8
	// ZFrameTarget is the uncompressed size a frame grows to before the
	// writer closes it at the next cut: big enough that zstd finds the
	// repetition between records, small enough that reading one record
	// decodes little more than it. (128 KiB frames encode a 1 MB segment
	// 4% faster, since the "better" level resets a 4 MiB match table
	// before every frame; reading one record cold then takes 1.7× as
	// long.)
	ZFrameTarget = 64 << 10
	// zMaxFrame bounds one frame's uncompressed length, so a corrupt
	// table can never make a reader allocate more (a frame holds whole
	// records, and a record is at most 64 MiB).
	zMaxFrame = 80 << 20
	// zDictID names frame 0 as the dictionary in a version-2 blob's later
	// frames' headers; zDictMax is how much of frame 0 is the dictionary.
	zDictID  = 3
	zDictMax = 64 << 10 // part of the format: never ZFrameTarget's
	// zBuiltinID names the built-in dictionary in a version-3 blob's frame
	// 0; zBuiltinFirstID the built-in dictionary and frame 0's start in
	// its later frames.
	zBuiltinID      = 4
	zBuiltinFirstID = 5
	// zLevel is version 3's compression level. "Better" is about 2.5×
	// the CPU of the default (130 against 340 MB/s of log here, paid once
	// when a segment is sealed) for 6% fewer bytes.
	zLevel = zstd.SpeedBetterCompression
)

// zBuiltin is the built-in dictionary of version 3 (see above). It must
// never change.
//
//go:embed zdict1.txt
var zBuiltin []byte

// ErrBadSeekable is returned for a compressed blob whose framing, table or
// frames do not check out.
var ErrBadSeekable = errors.New("compressed blob is damaged")

var (
	zEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		return e
	})
	zDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(zMaxFrame), zstd.WithDecoderConcurrency(0))
		if err != nil {
			panic(err)
		}
		return d
	})
	// zDictEncoders code a version-2 blob's frames against frame 0 (only
	// tests write version 2 now), zFirstEncoders a version-3 blob's against
	// the built-in dictionary and frame 0 (dictDecoders decode them).
	zDictEncoders = &kept[*zstd.Encoder]{max: 2, new: func() *zstd.Encoder {
		return newEncoder(zstd.WithEncoderLevel(zstd.SpeedDefault))
	}}
	zFirstEncoders = &kept[*zstd.Encoder]{max: 2, new: func() *zstd.Encoder {
		return newEncoder(zstd.WithEncoderLevel(zLevel))
	}}
	// zBuiltinEncoder codes a version-3 blob's frame 0, zBuiltinDecoder
	// decodes it.
	zBuiltinEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zLevel), zstd.WithEncoderCRC(true),
			zstd.WithEncoderDictRaw(zBuiltinID, zBuiltin))
		if err != nil {
			panic(err)
		}
		return e
	})
	zBuiltinDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(zMaxFrame), zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderDictRaw(zBuiltinID, zBuiltin))
		if err != nil {
			panic(err)
		}
		return d
	})
	zCastagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// kept holds up to max idle values (zstd encoders and decoders) across
// garbage collections, where a sync.Pool empties at every other one. A new
// encoder of later frames at the "better" level allocates and clears about
// 8.5 MiB of match tables: a 1 MB segment sealed after a collection took 16
// ms with a new one and 5.8 ms with a kept one, and seals come seconds
// apart, with collections between them. Dictionary decoders are kept the
// same way, for reads that come after a quiet while. What is kept is let
// go after keptIdle without a put.
type kept[T any] struct {
	max  int
	new  func() T
	mu   sync.Mutex
	free []T
	idle *time.Timer
}

// keptIdle is how long unused values are kept.
const keptIdle = time.Minute

func (c *kept[T]) get() T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.free); n > 0 {
		v := c.free[n-1]
		var zero T
		c.free[n-1] = zero
		c.free = c.free[:n-1]
		return v
	}
	return c.new()
}

func (c *kept[T]) put(v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.free) < c.max {
		c.free = append(c.free, v)
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(keptIdle, c.drop)
	} else {
		c.idle.Reset(keptIdle)
	}
}

// drop lets the kept values go.
func (c *kept[T]) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.free)
	c.free = c.free[:0]
}

func newEncoder(level zstd.EOption) *zstd.Encoder {
	e, err := zstd.NewWriter(nil, level, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err) // only for invalid options
	}
	return e
}

// EncodeSeekable compresses data into the seekable form (version 3). cuts are the
// offsets (ascending, within data) where a frame may end; a frame ends at
// the first cut at or past ZFrameTarget bytes after its start, or at the
// end of data. Without cuts frames are cut every ZFrameTarget bytes.
func EncodeSeekable(data []byte, cuts []int64) []byte {
	return encodeSeekable(data, cuts, ZFrameTarget, 3)
}

// encodeSeekable is EncodeSeekable with frames of target bytes (small in
// the fuzz target, so that small inputs have many frames), in format
// version 3, or 2 or 1 (which tests write, as older binaries did).
func encodeSeekable(data []byte, cuts []int64, target int64, version int) []byte {
	magic, pool, dictID := zMagic, zFirstEncoders, uint32(zBuiltinFirstID)
	switch version {
	case 1:
		magic = zMagicV1
	case 2:
		magic, pool, dictID = zMagicV2, zDictEncoders, zDictID
	}
	out := append(make([]byte, 0, len(data)/3+64), magic...)
	var table []byte
	var frame0 []byte // frame 0's bytes once emitted
	var withDict *zstd.Encoder
	defer func() {
		if withDict != nil {
			pool.put(withDict)
		}
	}()
	var filtered []byte // a version-3 frame's bytes through crcFilter
	emit := func(from, to int64) {
		before := len(out)
		src := data[from:to]
		if version == 3 {
			filtered = append(filtered[:0], src...)
			crcFilter(filtered)
			src = filtered
		}
		switch {
		case from == 0 && version == 3:
			out = zBuiltinEncoder().EncodeAll(src, out)
			frame0 = data[from:to]
		case from == 0 || version == 1:
			out = zEncoder().EncodeAll(src, out)
			frame0 = data[from:to]
		default:
			if withDict == nil {
				withDict = pool.get()
				// A copy: the pooled encoder keeps its dictionary, and
				// must not keep data (a whole segment) alive with it.
				dict := laterFramesDict(version, frame0)
				if err := withDict.ResetWithOptions(nil, zstd.WithEncoderDictRaw(dictID, dict)); err != nil {
					panic(err) // a raw dictionary of any bytes is valid
				}
			}
			out = withDict.EncodeAll(src, out)
		}
		table = binary.LittleEndian.AppendUint32(table, uint32(len(out)-before))
		table = binary.LittleEndian.AppendUint32(table, uint32(to-from))
	}
	var start int64
	n := int64(len(data))
	if len(cuts) == 0 {
		for c := target; c < n; c += target {
			cuts = append(cuts, c)
		}
	}
	for _, c := range cuts {
		if c <= start || c >= n {
			continue
		}
		if c-start >= target {
			emit(start, c)
			start = c
		}
	}
	if start < n {
		emit(start, n)
	}
	frames := len(table) / zEntryLen
	table = binary.LittleEndian.AppendUint32(table, uint32(frames))
	out = append(out, table...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(table, zCastagnoli))
	return append(out, zTailMagic...)
}

// crcFilter is version 3's filter of a frame's bytes, its own inverse:
// wherever the bytes hold a record framed as a log segment frames one (a
// u32 LE length n ≥ 1, a u32 LE CRC-32C, n bytes that fit in the frame),
// it XORs the stored CRC with the CRC of those n bytes, so a record whose
// checksum matches stores 4 zero bytes where 4 random ones were (1.4 KB
// of a demo run's 18 KB compressed log). The walk reads only lengths,
// which it never changes, and skips the bytes of each record it took, so
// the decoder walks the same records and the XOR restores every CRC,
// matching or not: any bytes round-trip. Where no record fits it moves one
// byte on: text never looks like one (its 4 bytes read as a length of at
// least 0x20202020, past any frame), a segment's magic neither.
//
// The XOR leaves the records' own checksums no check of the stored
// bytes: zstd's checksum of every frame, and the CID of the whole, are.
func crcFilter(b []byte) {
	for p := 0; p+8 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[p:]))
		if n < 1 || n > len(b)-p-8 {
			p++
			if len(b) < 1<<24 {
				// In a frame under 16 MiB a record's length has a zero
				// high byte, and text has none: jump to the next place
				// where one could start (the walk is the same, only
				// faster: about 60 times on text).
				z := bytes.IndexByte(b[min(p+3, len(b)):], 0)
				if z < 0 {
					return
				}
				p += z
			}
			continue
		}
		c := crc32.Checksum(b[p+8:p+8+n], zCastagnoli)
		binary.LittleEndian.PutUint32(b[p+4:], binary.LittleEndian.Uint32(b[p+4:])^c)
		p += 8 + n
	}
}

// zDict is the start of frame 0 that a blob's later frames are
// compressed against.
func zDict(frame0 []byte) []byte { return frame0[:min(len(frame0), zDictMax)] }

// laterFramesDict is the raw dictionary of a version-2 or -3 blob's
// frames after frame 0 (a new slice: it never aliases frame0).
func laterFramesDict(version int, frame0 []byte) []byte {
	if version == 2 {
		return bytes.Clone(zDict(frame0))
	}
	return append(append(make([]byte, 0, len(zBuiltin)+zDictMax), zBuiltin...), zDict(frame0)...)
}

// zFrame is one frame of a seekable blob.
type zFrame struct {
	coff, uoff int64 // where it starts, compressed and uncompressed
	clen, ulen int64
}

// Seekable reads a seekable blob's uncompressed bytes at any offset. It is
// safe for concurrent use; it keeps the last frame it decoded.
type Seekable struct {
	r      io.ReaderAt
	c      io.Closer
	frames []zFrame
	size   int64
	// version is the format's; dict, for versions 2 and 3, the later
	// frames' dictionary once one of them needed it.
	version int
	dict    []byte

	mu     sync.Mutex
	pos    int64 // for Read and Seek
	cached int   // index of the frame in buf, -1 for none
	buf    []byte
}

var _ BlobReader = (*Seekable)(nil)

// OpenSeekable reads the seek table of the seekable blob r of stored size
// n. closer, when set, is closed by Close.
func OpenSeekable(r io.ReaderAt, n int64, closer io.Closer) (*Seekable, error) {
	if n < int64(len(zMagic)+zTailLen) {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadSeekable, n)
	}
	var head [len(zMagic)]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSeekable, err)
	}
	var tail [zTailLen]byte
	if _, err := r.ReadAt(tail[:], n-zTailLen); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSeekable, err)
	}
	var version int
	switch string(head[:]) {
	case zMagic:
		version = 3
	case zMagicV2:
		version = 2
	case zMagicV1:
		version = 1
	default:
		return nil, fmt.Errorf("%w: bad magic", ErrBadSeekable)
	}
	if string(tail[8:]) != zTailMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrBadSeekable)
	}
	count := int64(binary.LittleEndian.Uint32(tail[0:]))
	body := n - int64(len(zMagic)) - zTailLen // frames and table entries
	if count > body/zEntryLen {
		return nil, fmt.Errorf("%w: %d frames cannot fit", ErrBadSeekable, count)
	}
	table := make([]byte, count*zEntryLen+4)
	if _, err := r.ReadAt(table, n-zTailLen-count*zEntryLen); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSeekable, err)
	}
	copy(table[count*zEntryLen:], tail[0:4])
	if crc32.Checksum(table, zCastagnoli) != binary.LittleEndian.Uint32(tail[4:]) {
		return nil, fmt.Errorf("%w: seek table checksum mismatch", ErrBadSeekable)
	}
	s := &Seekable{r: r, c: closer, frames: make([]zFrame, count), cached: -1, version: version}
	coff := int64(len(zMagic))
	for i := range s.frames {
		clen := int64(binary.LittleEndian.Uint32(table[i*zEntryLen:]))
		ulen := int64(binary.LittleEndian.Uint32(table[i*zEntryLen+4:]))
		if clen == 0 || ulen == 0 || ulen > zMaxFrame {
			return nil, fmt.Errorf("%w: frame %d: bad lengths", ErrBadSeekable, i)
		}
		s.frames[i] = zFrame{coff: coff, uoff: s.size, clen: clen, ulen: ulen}
		coff += clen
		s.size += ulen
	}
	if coff != n-zTailLen-count*zEntryLen {
		return nil, fmt.Errorf("%w: frames do not fill the blob", ErrBadSeekable)
	}
	return s, nil
}

// Size is the uncompressed size.
func (s *Seekable) Size() int64 { return s.size }

// Frames is the number of frames.
func (s *Seekable) Frames() int { return len(s.frames) }

// frame returns frame i decoded; s.mu is held.
func (s *Seekable) frame(i int) ([]byte, error) {
	if s.cached == i {
		return s.buf, nil
	}
	f := s.frames[i]
	src := make([]byte, f.clen)
	if _, err := s.r.ReadAt(src, f.coff); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: frame %d: %v", ErrBadSeekable, i, err)
	}
	var out []byte
	var want uint32 // the dictionary frame i must name
	switch {
	case s.version == 3 && i == 0:
		want = zBuiltinID
	case s.version == 3:
		want = zBuiltinFirstID
	case s.version == 2 && i > 0:
		want = zDictID
	}
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return nil, fmt.Errorf("%w: frame %d: %v", ErrBadSeekable, i, err)
	}
	if h.DictionaryID != want {
		return nil, fmt.Errorf("%w: frame %d names dictionary %d, want %d", ErrBadSeekable, i, h.DictionaryID, want)
	}
	// No buffer sized from the table: a damaged table must not make the
	// reader allocate what it claims (every decoder is bounded by
	// zMaxFrame). Not decodeAgainst: a frame need not name its size here
	// (the table does).
	var err error
	switch want {
	case 0:
		out, err = zDecoder().DecodeAll(src, nil)
	case zBuiltinID:
		out, err = zBuiltinDecoder().DecodeAll(src, nil)
	default:
		if s.dict == nil {
			f0, err := s.frame(0)
			if err != nil {
				return nil, err
			}
			s.dict = laterFramesDict(s.version, f0)
		}
		d := dictDecoders.get()
		if err = d.ResetWithOptions(nil, zstd.WithDecoderDictRaw(want, s.dict)); err == nil {
			out, err = d.DecodeAll(src, nil)
		}
		dictDecoders.put(d)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: frame %d: %v", ErrBadSeekable, i, err)
	}
	if s.version == 3 {
		crcFilter(out)
	}
	if int64(len(out)) != f.ulen {
		return nil, fmt.Errorf("%w: frame %d: %d bytes, the table says %d", ErrBadSeekable, i, len(out), f.ulen)
	}
	s.cached, s.buf = i, out
	return out, nil
}

// ReadAt reads uncompressed bytes at off, decoding only the frames that
// hold them.
func (s *Seekable) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("blob: negative offset %d", off)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= s.size {
			return n, io.EOF
		}
		i := sort.Search(len(s.frames), func(i int) bool { return s.frames[i].uoff+s.frames[i].ulen > at })
		data, err := s.frame(i)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], data[at-s.frames[i].uoff:])
	}
	return n, nil
}

// Read reads from the current position.
func (s *Seekable) Read(p []byte) (int, error) {
	s.mu.Lock()
	pos := s.pos
	s.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	n, err := s.ReadAt(p, pos)
	s.mu.Lock()
	s.pos = pos + int64(n)
	s.mu.Unlock()
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek sets the position for Read.
func (s *Seekable) Seek(off int64, whence int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += s.pos
	case io.SeekEnd:
		off += s.size
	default:
		return 0, fmt.Errorf("blob: bad whence %d", whence)
	}
	if off < 0 {
		return 0, fmt.Errorf("blob: negative position %d", off)
	}
	s.pos = off
	return off, nil
}

// Close closes what the blob was opened from.
func (s *Seekable) Close() error {
	if s.c == nil {
		return nil
	}
	return s.c.Close()
}

// DecodeSeekable decodes a whole seekable blob (the round-trip check of
// PutSeekable, and tests).
func DecodeSeekable(enc []byte) ([]byte, error) {
	s, err := OpenSeekable(bytes.NewReader(enc), int64(len(enc)), nil)
	if err != nil {
		return nil, err
	}
	out := make([]byte, s.size)
	if _, err := s.ReadAt(out, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return out, nil
}
