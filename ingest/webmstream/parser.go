package webmstream

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/at-wat/ebml-go"
)

// Track is the stream's one video track: what a GOP blob needs besides its
// frames, and what Resume needs to pick a stream up again after a restart.
type Track struct {
	Codec         string // "V_VP8" or "V_VP9"
	Width, Height int    // PixelWidth, PixelHeight
	CodecPrivate  []byte // from the TrackEntry, usually empty for VP8/VP9; copied into every GOP blob
	TimecodeScale int64  // ns per tick, from Info (default 1_000_000)
	FrameDuration int64  // ns, from TrackEntry DefaultDuration; 0 if absent
}

// Frame is one encoded frame. Its Data is shared with the parser and its
// clones and must not be modified.
type Frame struct {
	TS   int64  // ns from the stream's start: (Cluster Timecode + block offset) × TimecodeScale
	Key  bool   // a keyframe: decoding can start here
	Data []byte // the VP8/VP9 frame as its block carried it
}

// GOP is a keyframe and the frames after it up to the next keyframe: the
// smallest run of frames a decoder can start on, so the unit stored and
// served.
type GOP struct {
	Frames []Frame // Frames[0].Key is true
	End    int64   // ns from stream start: the next keyframe's TS, or at stream end the last frame's TS + FrameDuration (200 ms if unknown)
}

// Limits bounds what a Parser holds in memory, so that a hostile or broken
// stream costs at most MaxGOP + MaxBlock + HeldOverhead bytes.
type Limits struct {
	MaxBlock int // largest SimpleBlock/BlockGroup payload held (default 16 MiB)
	MaxGOP   int // largest GOP held, summed frame bytes (default 64 MiB)
}

// Defaults for a zero (or negative) Limits field. A VP9 keyframe of a 4K
// screen is a few MiB, so 16 MiB refuses only bogus blocks; 64 MiB lets a
// long GOP of a busy screen through while bounding a stream that never
// sends another keyframe.
const (
	DefaultMaxBlock = 16 << 20
	DefaultMaxGOP   = 64 << 20
)

// HeldOverhead is the most Held can exceed MaxGOP + MaxBlock by: a partial
// element header, the few bytes of a possible Cluster header Resume keeps
// across a chunk boundary, and the header of a buffered element.
const HeldOverhead = 64

// maxHeaderElement bounds the EBML header, Info and Tracks, which are
// buffered whole (also never more than MaxBlock). Real ones are a few
// hundred bytes; the bound only stops a bogus size from holding memory.
const maxHeaderElement = 1 << 20

// defaultFrameDuration is the last frame's duration when the track does not
// declare one: executors encode at about 5 fps.
const defaultFrameDuration = 200_000_000

// Error codes, the values of Error.Code, so that callers can map them to
// responses without matching strings they might misspell.
const (
	CodeNotWebM      = "not_webm"      // the stream is not WebM/Matroska at all
	CodeUnknownCodec = "unknown_codec" // the track is not VP8 or VP9
	CodeTruncated    = "truncated"     // an element stops before its declared end
	CodeMalformed    = "malformed"     // the bytes break WebM's structure or this package's expectations
	CodeTooLarge     = "too_large"     // a block, GOP or header element exceeds Limits
)

const (
	defaultTimescale  = 1_000_000 // Matroska's default TimecodeScale: 1 ms ticks
	maxTimescale      = math.MaxInt32
	maxDimension      = 1 << 16
	maxCodecIDInError = 32
)

// Error is a stream failure at a byte offset of the stream.
type Error struct {
	Offset int64  // the start of the element at fault (0 for not_webm; for a truncation found by End, the innermost incomplete element); for a Resume parser, counted from its first byte
	Code   string // "not_webm", "unknown_codec", "truncated", "malformed", "too_large"
	Msg    string // never quotes stream bytes
}

// Error formats the failure with its code and offset, so that logs carry
// everything needed to find the place in a stored stream.
func (e *Error) Error() string {
	return fmt.Sprintf("webmstream: %s at offset %d: %s", e.Code, e.Offset, e.Msg)
}

// EBML element IDs the parser acts on, with their marker bits as the
// Matroska specification writes them.
const (
	idEBML           = 0x1A45DFA3
	idSegment        = 0x18538067
	idSeekHead       = 0x114D9B74
	idInfo           = 0x1549A966
	idTracks         = 0x1654AE6B
	idCluster        = 0x1F43B675
	idCues           = 0x1C53BB6B
	idTags           = 0x1254C367
	idChapters       = 0x1043A770
	idAttachments    = 0x1941A469
	idTimecode       = 0xE7
	idSimpleBlock    = 0xA3
	idBlockGroup     = 0xA0
	idBlock          = 0xA1
	idReferenceBlock = 0xFB
	idVoid           = 0xEC
	idCRC32          = 0xBF
)

var ebmlMagic = [4]byte{0x1A, 0x45, 0xDF, 0xA3}
var clusterMagic = []byte{0x1F, 0x43, 0xB6, 0x75}

// unknownSize marks an element (Segment or Cluster) whose size field is all
// ones: it ends where its parent does or where an element of a higher
// level begins.
const unknownSize = -1

// mode is what the parser does with the next byte.
type mode uint8

const (
	modeHeader mode = iota // reading an element's ID and size
	modeSkip               // streaming past the data of an element not needed
	modeBuffer             // collecting the data of an element needed whole
	modeResync             // Resume: looking for a Cluster
	modeDone               // the stream is over: a known-size Segment completed, or End was called
)

// kind is what a buffered element is decoded as once complete.
type kind uint8

const (
	kindEBMLHeader kind = iota
	kindInfo
	kindTracks
	kindTimecode
	kindSimpleBlock
	kindBlockGroup
)

// element is the element whose data is being skipped or buffered.
type element struct {
	id     uint32
	start  int64 // offset of its ID
	hdrLen int
	size   int64
	kind   kind
}

// level is an open master element: the Segment, or a Cluster in it.
type level struct {
	start int64
	size  int64 // unknownSize or the declared data size
	end   int64 // offset just past its data; -1 if its size is unknown
}

// Parser reassembles one WebM stream from chunks and cuts it into GOPs. It
// is not safe for concurrent use; Clone gives an independent copy.
type Parser struct {
	lim  Limits
	off  int64 // stream offset of the next byte (in modeResync, of tail[0])
	mode mode
	err  *Error // sticky: once failed, every call returns it

	hdr  [12]byte // the element header being read (ID ≤ 4 bytes, size ≤ 8)
	hdrN int

	cur       element
	remain    int64  // data bytes of cur still to skip or buffer
	buf       []byte // data of cur being buffered (with its header for kinds ebml-go decodes)
	bufTotal  int    // len(buf) once cur is complete; cap(buf) never exceeds it
	bufShared bool   // buf's array is shared with a clone: copy before appending
	peeked    bool   // cur's block header was looked at for a keyframe (peekKeyframe)

	stack [2]level // stack[0] the Segment, stack[1] a Cluster
	depth int

	sawEBML, sawSegment, sawInfo, sawTracks, sawCluster bool

	track     Track
	haveTrack bool
	trackNum  uint64 // the track's number; 0 until known (Resume takes the first block's)
	scale     int64  // TimecodeScale

	clusterTC int64 // the current cluster's Timecode in ticks; -1 until read

	gop      []Frame // the open GOP; its array may be shared with a clone (cap clipped)
	gopBytes int
	lastTS   int64 // TS of the last frame kept
	haveLast bool
	skipped  int

	tail []byte // modeResync: bytes that may begin a Cluster header, kept across chunks
}

func (l Limits) withDefaults() Limits {
	if l.MaxBlock <= 0 {
		l.MaxBlock = DefaultMaxBlock
	}
	if l.MaxGOP <= 0 {
		l.MaxGOP = DefaultMaxGOP
	}
	return l
}

// NewParser makes a parser for a stream from its first byte. Zero Limits
// fields take their defaults.
func NewParser(lim Limits) *Parser {
	return &Parser{lim: lim.withDefaults(), scale: defaultTimescale, clusterTC: -1}
}

// Resume makes a parser for a stream whose header was parsed before a
// restart but whose position is lost: it discards bytes until a Cluster
// element (ID 1F43B675) that is followed by a plausible size and a Timecode
// child (ID E7) with a small size, then continues from there, and discards
// frames until the first keyframe (counted by Skipped). t is the Track an
// earlier parser of the same stream reported.
//
// The seven or more bytes matched (ID, size, Timecode ID and size) make a
// false match inside frame data possible but improbable (a frame would have
// to contain exactly that pattern). After one,
// the parser reads frame bytes as elements: almost always it soon fails with
// a "malformed" or "truncated" Error (the caller may Resume again from a
// later offset); only if the garbage happened to form valid blocks for the
// track would it emit a bogus frame, and even then it waits for a keyframe
// flag first.
//
// The resumed parser does not know where the Segment ends, so its last GOP
// comes from End; a track number is not part of Track, so it takes the first
// block's and refuses blocks of any other. Its Offset and Error offsets count
// from the first byte written to it. A zero TimecodeScale in t means the
// default 1 ms; a Track that is not VP8/VP9 or has a TimecodeScale out of
// range makes a parser that fails on its first call.
func Resume(t Track, lim Limits) *Parser {
	p := NewParser(lim)
	p.mode = modeResync
	p.sawEBML, p.sawSegment, p.sawInfo, p.sawTracks, p.sawCluster = true, true, true, true, true
	p.stack[0] = level{start: -1, size: unknownSize, end: -1}
	p.depth = 1
	p.track, p.haveTrack = t, true
	if t.TimecodeScale > 0 {
		p.scale = t.TimecodeScale
	}
	switch {
	case t.Codec != "V_VP8" && t.Codec != "V_VP9":
		p.err = &Error{Code: CodeUnknownCodec, Msg: fmt.Sprintf("Resume: track codec %s is not V_VP8 or V_VP9", sanitizeCodec(t.Codec))}
	case t.TimecodeScale < 0 || t.TimecodeScale > maxTimescale || t.FrameDuration < 0:
		p.err = &Error{Code: CodeMalformed, Msg: "Resume: the track's TimecodeScale or FrameDuration is out of range"}
	}
	return p
}

// Track returns the stream's video track, known once Tracks was parsed (at
// once for a Resume parser). Its CodecPrivate is shared and must not be
// modified.
func (p *Parser) Track() (Track, bool) {
	if !p.haveTrack {
		return Track{}, false
	}
	t := p.track
	t.TimecodeScale = p.scale
	return t, true
}

// Clone returns an independent snapshot of the parser, so that a caller can
// roll back a chunk it refuses: Clone, Write, and on failure go on with the
// clone. It is cheap: frame data and a partial element's bytes are shared
// (frames are never modified; the partial element is copied by whichever
// parser appends to it first).
func (p *Parser) Clone() *Parser {
	q := *p
	n := len(p.gop)
	p.gop = p.gop[:n:n]
	q.gop = p.gop
	if p.buf != nil {
		p.bufShared, q.bufShared = true, true
	}
	q.tail = bytes.Clone(p.tail)
	return &q
}

// Offset returns the stream bytes consumed so far (for a Resume parser,
// since its first byte). After a failure it stays where the failure was
// found.
func (p *Parser) Offset() int64 { return p.off + int64(len(p.tail)) }

// Held returns the bytes the parser holds in memory: the open GOP's frames,
// the buffer of a partial element, and a partial element header. It never
// exceeds MaxGOP + MaxBlock + HeldOverhead.
func (p *Parser) Held() int { return p.gopBytes + cap(p.buf) + p.hdrN + len(p.tail) }

// Skipped returns how many frames were discarded because no keyframe
// preceded them: before the stream's first keyframe, or after Resume until
// its first keyframe.
func (p *Parser) Skipped() int { return p.skipped }

// Write parses the next chunk of the stream and returns the GOPs it
// completed, in order. A GOP completes when the next keyframe arrives, and
// the last one when a known-size Segment's last byte arrives (so a seekable
// file's every GOP is out by its last byte).
//
// On failure it returns an *Error together with the GOPs the chunk completed
// before the failing byte; the parser stays failed (every later call returns
// the same error). A caller that refuses the whole chunk discards those GOPs
// and continues with a Clone taken before the Write, which will emit them
// again from the corrected bytes.
func (p *Parser) Write(chunk []byte) ([]GOP, error) {
	if p.err != nil {
		return nil, p.err
	}
	var out []GOP
	err := p.write(chunk, &out)
	if err != nil {
		p.err = err
		return out, err
	}
	return out, nil
}

func (p *Parser) write(chunk []byte, out *[]GOP) *Error {
	if p.mode == modeResync {
		chunk = p.resync(chunk)
		if chunk == nil {
			return nil
		}
	}
	return p.feed(chunk, out)
}

// End tells the parser the stream is over and returns the open GOP (nil if
// none), ended at its last frame's TS + FrameDuration (200 ms if unknown).
// It returns nil, nil after a known-size Segment completed, since Write
// emitted everything then.
//
// A stream that stopped mid-element, or inside a known-size Cluster or
// Segment, is an Error "truncated"; a stream that stops between elements
// inside an unknown-size Cluster or Segment (a live stream's normal end) is
// fine. With a "truncated" error End still returns the open GOP of the
// frames that were complete, which are intact, for a caller that keeps
// what it can. After End, the parser takes no more bytes.
func (p *Parser) End() (*GOP, error) {
	if p.err != nil {
		return nil, p.err
	}
	err := p.endErr()
	g := p.flush()
	p.mode = modeDone
	p.off += int64(len(p.tail)) // Offset stays the bytes consumed
	p.buf, p.tail, p.hdrN = nil, nil, 0
	if err != nil {
		p.err = err
		return g, err
	}
	return g, nil
}

func (p *Parser) endErr() *Error {
	switch p.mode {
	case modeDone, modeResync:
		return nil
	case modeSkip, modeBuffer:
		return p.fail(p.cur.start, CodeTruncated, fmt.Sprintf("the stream ended %d bytes into the data of the %s at offset %d, which declared %d bytes",
			p.cur.size-p.remain, elementName(p.cur.id), p.cur.start, p.cur.size))
	}
	if p.hdrN > 0 {
		return p.fail(p.off-int64(p.hdrN), CodeTruncated, "the stream ended inside an element header")
	}
	if !p.sawEBML {
		return p.fail(0, CodeTruncated, fmt.Sprintf("the stream ended after %d bytes, before the EBML header", p.off))
	}
	if !p.sawSegment {
		return p.fail(p.off, CodeTruncated, "the stream ended before the Segment")
	}
	for i := p.depth - 1; i >= 0; i-- {
		l := p.stack[i]
		if l.end >= 0 && p.off < l.end {
			name := "Segment"
			if i == 1 {
				name = "Cluster"
			}
			return p.fail(l.start, CodeTruncated, fmt.Sprintf("the stream ended at offset %d inside the %s at offset %d, which declared %d bytes",
				p.off, name, l.start, l.size))
		}
	}
	return nil
}

func (p *Parser) fail(off int64, code, msg string) *Error {
	return &Error{Offset: off, Code: code, Msg: msg}
}

// resync consumes chunk while looking for a Cluster (Resume) and returns the
// bytes from the Cluster's first byte on, or nil if none was found yet.
func (p *Parser) resync(chunk []byte) []byte {
	data := chunk
	if len(p.tail) > 0 {
		data = append(p.tail[:len(p.tail):len(p.tail)], chunk...)
	}
	base := p.off
	for i := 0; ; i++ {
		j := bytes.Index(data[i:], clusterMagic)
		if j < 0 {
			k := max(len(data)-(len(clusterMagic)-1), i)
			p.tail = bytes.Clone(data[k:])
			p.off = base + int64(k)
			return nil
		}
		i += j
		switch clusterCandidate(data[i:]) {
		case candidateNeedMore:
			p.tail = bytes.Clone(data[i:])
			p.off = base + int64(i)
			return nil
		case candidateYes:
			p.tail = nil
			p.off = base + int64(i)
			p.mode = modeHeader
			return data[i:]
		}
	}
}

const (
	candidateNo = iota
	candidateYes
	candidateNeedMore
)

// maxPlausibleCluster is the largest known Cluster size Resume accepts as a
// real Cluster: muxers close clusters after seconds or megabytes.
const maxPlausibleCluster = 1 << 30

// clusterCandidate tells whether b, which starts with a Cluster ID, looks
// like a real Cluster: a plausible size, then a Timecode with a 1–8 byte
// value that fits in it.
func clusterCandidate(b []byte) int {
	const idLen = 4
	if len(b) <= idLen {
		return candidateNeedMore
	}
	n := vintLen(b[idLen])
	if n == 0 {
		return candidateNo
	}
	if len(b) < idLen+n+2 {
		return candidateNeedMore
	}
	size, unknown := vintValue(b[idLen : idLen+n])
	tc := b[idLen+n:]
	if tc[0] != idTimecode || tc[1] < 0x81 || tc[1] > 0x88 {
		return candidateNo
	}
	if !unknown && (size > maxPlausibleCluster || size < 2+uint64(tc[1]&0x7F)) {
		return candidateNo
	}
	return candidateYes
}

// vintLen returns the length of the variable-length integer whose first
// byte is c (1–8), or 0 if c is 0, which starts none.
func vintLen(c byte) int {
	for n := 1; n <= 8; n++ {
		if c&(0x80>>(n-1)) != 0 {
			return n
		}
	}
	return 0
}

// vintValue decodes a complete variable-length integer without its marker
// bit; unknown is true when all its value bits are ones (an unknown size).
func vintValue(b []byte) (v uint64, unknown bool) {
	n := len(b)
	v = uint64(b[0]) & (0xFF >> n)
	for _, c := range b[1:] {
		v = v<<8 | uint64(c)
	}
	return v, v == 1<<(7*n)-1
}

// feed runs the tokenizer over b.
func (p *Parser) feed(b []byte, out *[]GOP) *Error {
	for {
		switch {
		case p.mode == modeHeader && p.hdrN == 0:
			p.closeEnded(out)
		case p.mode == modeSkip && p.remain == 0:
			p.mode = modeHeader
			continue
		case p.mode == modeBuffer && p.remain == 0:
			if err := p.finish(out); err != nil {
				return err
			}
			continue
		}
		if len(b) == 0 {
			return nil
		}
		switch p.mode {
		case modeDone:
			return p.fail(p.off, CodeMalformed, "bytes follow the end of the stream (the end of a known-size Segment, or End); a new stream needs a new Parser")
		case modeHeader:
			c := b[0]
			if !p.sawEBML && p.off < int64(len(ebmlMagic)) && c != ebmlMagic[p.off] {
				return p.fail(0, CodeNotWebM, "the stream does not start with an EBML header")
			}
			b = b[1:]
			p.hdr[p.hdrN] = c
			p.hdrN++
			p.off++
			if err := p.header(); err != nil {
				return err
			}
		case modeSkip:
			n := min(int64(len(b)), p.remain)
			b = b[n:]
			p.off += n
			p.remain -= n
		case modeBuffer:
			n := min(int64(len(b)), p.remain)
			p.appendBuf(b[:n])
			b = b[n:]
			p.off += n
			p.remain -= n
			if p.cur.kind == kindSimpleBlock && !p.peeked && len(p.gop) > 0 {
				p.peekKeyframe(out)
			}
		}
	}
}

// appendBuf adds data to the partial element, growing its buffer at most to
// the element's size, so that cap(buf), which Held counts, is what is held.
func (p *Parser) appendBuf(data []byte) {
	need := len(p.buf) + len(data)
	if p.bufShared || need > cap(p.buf) {
		c := min(max(2*cap(p.buf), need, 4096), p.bufTotal)
		nb := make([]byte, len(p.buf), c)
		copy(nb, p.buf)
		p.buf, p.bufShared = nb, false
	}
	p.buf = append(p.buf, data...)
}

// closeEnded closes the Segment or Cluster whose known end the stream has
// reached (an unknown-size Cluster closes with its Segment). The Segment's
// end is the stream's end: the open GOP is emitted then.
func (p *Parser) closeEnded(out *[]GOP) {
	for i := 0; i < p.depth; i++ {
		if e := p.stack[i].end; e >= 0 && p.off >= e {
			p.depth = i
			if i == 0 {
				if g := p.flush(); g != nil {
					*out = append(*out, *g)
				}
				p.mode = modeDone
			}
			return
		}
	}
}

// header parses the element header read so far and starts the element
// once it is complete.
func (p *Parser) header() *Error {
	start := p.off - int64(p.hdrN)
	idLen := vintLen(p.hdr[0])
	if idLen == 0 || idLen > 4 {
		return p.fail(start, CodeMalformed, "invalid element ID")
	}
	if p.hdrN <= idLen {
		return nil
	}
	sizeLen := vintLen(p.hdr[idLen])
	if sizeLen == 0 {
		return p.fail(start, CodeMalformed, "invalid element size")
	}
	if p.hdrN < idLen+sizeLen {
		return nil
	}
	var id uint32
	for _, c := range p.hdr[:idLen] {
		id = id<<8 | uint32(c)
	}
	v, unknown := vintValue(p.hdr[idLen:p.hdrN])
	size := int64(v)
	if unknown {
		size = unknownSize
	}
	p.cur = element{id: id, start: start, hdrLen: p.hdrN, size: size}
	err := p.start()
	p.hdrN = 0
	return err
}

// isUpperLevel tells whether id is an element of the Segment's level or
// above, which ends an unknown-size Cluster.
func isUpperLevel(id uint32) bool {
	switch id {
	case idEBML, idSegment, idSeekHead, idInfo, idTracks, idCluster, idCues, idTags, idChapters, idAttachments:
		return true
	}
	return false
}

// start decides what to do with the element whose header was just read.
func (p *Parser) start() *Error {
	e := p.cur
	if p.depth == 2 {
		if !isUpperLevel(e.id) {
			return p.clusterChild()
		}
		if cl := p.stack[1]; cl.end >= 0 {
			return p.fail(e.start, CodeTruncated, fmt.Sprintf("the Cluster at offset %d declared %d bytes, but a %s starts at offset %d inside it: the cluster was cut short",
				cl.start, cl.size, elementName(e.id), e.start))
		}
		p.depth = 1 // an unknown-size Cluster ends where an upper-level element begins
	}
	if p.depth == 1 {
		return p.segmentChild()
	}
	return p.topLevel()
}

func (p *Parser) topLevel() *Error {
	e := p.cur
	if !p.sawEBML {
		// The magic was checked byte by byte: e is the EBML header.
		if e.size == unknownSize {
			return p.fail(e.start, CodeMalformed, "the EBML header has an unknown size")
		}
		return p.buffer(kindEBMLHeader, true)
	}
	switch e.id {
	case idSegment:
		p.sawSegment = true
		l := level{start: e.start, size: e.size, end: -1}
		if e.size != unknownSize {
			l.end = p.off + e.size
		}
		p.stack[0], p.depth = l, 1
		p.mode = modeHeader
		return nil
	case idVoid, idCRC32:
		if e.size == unknownSize {
			return p.fail(e.start, CodeMalformed, "a Void element has an unknown size")
		}
		return p.skip()
	case idEBML:
		return p.fail(e.start, CodeMalformed, "a second EBML header before any Segment")
	}
	return p.fail(e.start, CodeMalformed, fmt.Sprintf("expected a Segment after the EBML header, found a %s", elementName(e.id)))
}

func (p *Parser) segmentChild() *Error {
	e := p.cur
	switch e.id {
	case idEBML, idSegment:
		return p.fail(e.start, CodeMalformed, fmt.Sprintf("a %s inside the Segment: a new stream starts here and needs a new Parser", elementName(e.id)))
	case idCluster:
		if !p.haveTrack {
			return p.fail(e.start, CodeMalformed, "a Cluster before the Tracks element")
		}
		l := level{start: e.start, size: e.size, end: -1}
		if e.size != unknownSize {
			if err := p.checkFits(); err != nil {
				return err
			}
			l.end = p.off + e.size
		}
		p.stack[1], p.depth = l, 2
		p.sawCluster = true
		p.clusterTC = -1
		p.mode = modeHeader
		return nil
	}
	if e.size == unknownSize {
		return p.fail(e.start, CodeMalformed, fmt.Sprintf("a %s inside the Segment has an unknown size", elementName(e.id)))
	}
	if err := p.checkFits(); err != nil {
		return err
	}
	switch e.id {
	case idInfo:
		if p.sawInfo || p.sawCluster {
			return p.fail(e.start, CodeMalformed, "an Info element after the first Info or after a Cluster")
		}
		return p.buffer(kindInfo, true)
	case idTracks:
		if p.sawTracks {
			return p.fail(e.start, CodeMalformed, "a second Tracks element")
		}
		return p.buffer(kindTracks, true)
	}
	return p.skip()
}

func (p *Parser) clusterChild() *Error {
	e := p.cur
	if e.size == unknownSize {
		return p.fail(e.start, CodeMalformed, fmt.Sprintf("a %s inside a Cluster has an unknown size", elementName(e.id)))
	}
	if err := p.checkFits(); err != nil {
		return err
	}
	switch e.id {
	case idTimecode:
		if e.size > 8 {
			return p.fail(e.start, CodeMalformed, fmt.Sprintf("a Cluster Timecode of %d bytes", e.size))
		}
		return p.buffer(kindTimecode, false)
	case idSimpleBlock, idBlockGroup:
		if e.size > int64(p.lim.MaxBlock) {
			return p.fail(e.start, CodeTooLarge, fmt.Sprintf("a %s of %d bytes exceeds the %d-byte block limit", elementName(e.id), e.size, p.lim.MaxBlock))
		}
		if p.clusterTC < 0 {
			return p.fail(e.start, CodeMalformed, fmt.Sprintf("a %s before its Cluster's Timecode", elementName(e.id)))
		}
		if e.id == idSimpleBlock {
			return p.buffer(kindSimpleBlock, false)
		}
		return p.buffer(kindBlockGroup, false)
	}
	return p.skip()
}

// checkFits refuses an element that overruns the innermost open element of
// known size: that element was cut short (or the stream is corrupt).
func (p *Parser) checkFits() *Error {
	e := p.cur
	for i := p.depth - 1; i >= 0; i-- {
		l := p.stack[i]
		if l.end < 0 {
			continue
		}
		if p.off+e.size > l.end {
			name := "Segment"
			if i == 1 {
				name = "Cluster"
			}
			return p.fail(e.start, CodeTruncated, fmt.Sprintf("the %s at offset %d declared %d bytes, but the %s at offset %d overruns it by %d bytes: it was cut short",
				name, l.start, l.size, elementName(e.id), e.start, p.off+e.size-l.end))
		}
		return nil
	}
	return nil
}

func (p *Parser) skip() *Error {
	p.remain = p.cur.size
	p.mode = modeSkip
	return nil
}

// buffer collects the element's data (with its header when ebml-go will
// decode it as a document).
func (p *Parser) buffer(k kind, withHeader bool) *Error {
	e := &p.cur
	e.kind = k
	if k == kindEBMLHeader || k == kindInfo || k == kindTracks {
		if lim := min(int64(maxHeaderElement), int64(p.lim.MaxBlock)); e.size > lim {
			return p.fail(e.start, CodeTooLarge, fmt.Sprintf("a %s of %d bytes exceeds the %d-byte limit for header elements", elementName(e.id), e.size, lim))
		}
	}
	p.remain = e.size
	p.bufTotal = int(e.size)
	p.buf, p.bufShared, p.peeked = nil, false, false
	if withHeader {
		p.bufTotal += e.hdrLen
		p.buf = make([]byte, e.hdrLen, min(p.bufTotal, e.hdrLen+4096))
		copy(p.buf, p.hdr[:e.hdrLen])
	}
	p.mode = modeBuffer
	return nil
}

// finish decodes the complete buffered element.
func (p *Parser) finish(out *[]GOP) *Error {
	data := p.buf
	p.buf, p.bufShared, p.bufTotal = nil, false, 0
	p.mode = modeHeader
	e := p.cur
	switch e.kind {
	case kindEBMLHeader:
		return p.ebmlHeader(data)
	case kindInfo:
		return p.info(data)
	case kindTracks:
		return p.tracks(data)
	case kindTimecode:
		var v uint64
		for _, c := range data {
			v = v<<8 | uint64(c)
		}
		if lim := math.MaxInt64/p.scale - math.MaxInt16 - 1; lim < 0 || v > uint64(lim) {
			return p.fail(e.start, CodeMalformed, "a Cluster Timecode too large to express in nanoseconds")
		}
		p.clusterTC = int64(v)
		return nil
	case kindSimpleBlock:
		return p.block(data, true, false, out)
	case kindBlockGroup:
		return p.blockGroup(data, out)
	}
	return nil
}

// unmarshal decodes the complete bytes of a header element with ebml-go.
func unmarshal(b []byte, v any) error {
	return ebml.Unmarshal(bytes.NewReader(b), v, ebml.WithMaxLeafElementSize(uint64(max(len(b), 1))))
}

func (p *Parser) ebmlHeader(b []byte) *Error {
	var doc struct {
		EBML struct {
			DocType string `ebml:"EBMLDocType"`
		} `ebml:"EBML"`
	}
	if err := unmarshal(b, &doc); err != nil {
		return p.fail(0, CodeMalformed, "the EBML header does not decode: "+ebmlErrClass(err))
	}
	if dt := doc.EBML.DocType; dt != "webm" && dt != "matroska" {
		return p.fail(0, CodeNotWebM, "the EBML header's DocType is not webm or matroska")
	}
	p.sawEBML = true
	return nil
}

func (p *Parser) info(b []byte) *Error {
	var doc struct {
		Info struct {
			TimecodeScale []uint64 `ebml:"TimecodeScale"`
		} `ebml:"Info"`
	}
	if err := unmarshal(b, &doc); err != nil {
		return p.fail(p.cur.start, CodeMalformed, "the Info element does not decode: "+ebmlErrClass(err))
	}
	if s := doc.Info.TimecodeScale; len(s) > 0 {
		v := s[len(s)-1]
		if v == 0 || v > maxTimescale {
			return p.fail(p.cur.start, CodeMalformed, fmt.Sprintf("a TimecodeScale of %d ns", v))
		}
		p.scale = int64(v)
	}
	p.sawInfo = true
	return nil
}

func (p *Parser) tracks(b []byte) *Error {
	var doc struct {
		Tracks struct {
			TrackEntry []struct {
				TrackNumber      uint64    `ebml:"TrackNumber"`
				TrackType        uint64    `ebml:"TrackType"`
				CodecID          string    `ebml:"CodecID"`
				CodecPrivate     []byte    `ebml:"CodecPrivate"`
				DefaultDuration  uint64    `ebml:"DefaultDuration"`
				ContentEncodings *struct{} `ebml:"ContentEncodings"`
				Video            *struct {
					PixelWidth  uint64 `ebml:"PixelWidth"`
					PixelHeight uint64 `ebml:"PixelHeight"`
				} `ebml:"Video"`
			} `ebml:"TrackEntry"`
		} `ebml:"Tracks"`
	}
	start := p.cur.start
	if err := unmarshal(b, &doc); err != nil {
		return p.fail(start, CodeMalformed, "the Tracks element does not decode: "+ebmlErrClass(err))
	}
	te := doc.Tracks.TrackEntry
	if len(te) != 1 {
		return p.fail(start, CodeMalformed, fmt.Sprintf("the Tracks element has %d tracks; exactly one video track is expected", len(te)))
	}
	t := te[0]
	if t.CodecID != "V_VP8" && t.CodecID != "V_VP9" {
		return p.fail(start, CodeUnknownCodec, fmt.Sprintf("the track's codec %s is not V_VP8 or V_VP9", sanitizeCodec(t.CodecID)))
	}
	switch {
	case t.TrackType != 1:
		return p.fail(start, CodeMalformed, fmt.Sprintf("the track has type %d, not video (1)", t.TrackType))
	case t.TrackNumber == 0:
		return p.fail(start, CodeMalformed, "the track has number 0")
	case t.ContentEncodings != nil:
		return p.fail(start, CodeMalformed, "the track's frames are compressed or encrypted (ContentEncodings), which is not supported")
	case t.Video == nil || t.Video.PixelWidth == 0 || t.Video.PixelHeight == 0 ||
		t.Video.PixelWidth > maxDimension || t.Video.PixelHeight > maxDimension:
		return p.fail(start, CodeMalformed, "the track has no valid PixelWidth and PixelHeight")
	case t.DefaultDuration > math.MaxInt32*uint64(time1s):
		return p.fail(start, CodeMalformed, "the track's DefaultDuration is absurdly long")
	}
	p.track = Track{
		Codec:         t.CodecID,
		Width:         int(t.Video.PixelWidth),
		Height:        int(t.Video.PixelHeight),
		CodecPrivate:  t.CodecPrivate,
		FrameDuration: int64(t.DefaultDuration),
	}
	p.trackNum = t.TrackNumber
	p.haveTrack, p.sawTracks = true, true
	return nil
}

const time1s = 1_000_000_000

// ebmlErrClass names the kind of an ebml-go decoding failure without its
// text, which may quote element IDs read from the stream.
func ebmlErrClass(err error) string {
	switch {
	case errors.Is(err, ebml.ErrUnknownElement):
		return "unknown element"
	case errors.Is(err, ebml.ErrInvalidElementSize):
		return "invalid element size"
	case errors.Is(err, ebml.ErrTooLargeElement):
		return "element too large"
	case errors.Is(err, ebml.ErrIncompatibleType):
		return "element of the wrong type"
	case errors.Is(err, ebml.ErrElementTooDeep):
		return "elements nested too deep"
	case errors.Is(err, ebml.ErrInvalidFloatSize):
		return "invalid float size"
	}
	return "invalid data"
}

// sanitizeCodec makes a codec ID read from the stream safe to show: letters,
// digits and _ / . - kept, anything else replaced by ?, and truncated.
func sanitizeCodec(s string) string {
	if s == "" {
		return "(empty)"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if b.Len() >= maxCodecIDInError {
			b.WriteString("...")
			break
		}
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '/', c == '.', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('?')
		}
	}
	return `"` + b.String() + `"`
}

// blockGroup finds the Block in a BlockGroup: a keyframe unless a
// ReferenceBlock names an earlier frame it depends on.
func (p *Parser) blockGroup(b []byte, out *[]GOP) *Error {
	start := p.cur.start
	var blk []byte
	refs := false
	for len(b) > 0 {
		id, size, n, ok := childHeader(b)
		if !ok || size > uint64(len(b)-n) {
			return p.fail(start, CodeMalformed, "a BlockGroup whose children do not fit it")
		}
		switch id {
		case idBlock:
			if blk != nil {
				return p.fail(start, CodeMalformed, "a BlockGroup with two Blocks")
			}
			blk = b[n : n+int(size)]
		case idReferenceBlock:
			refs = true
		}
		b = b[n+int(size):]
	}
	if blk == nil {
		return p.fail(start, CodeMalformed, "a BlockGroup without a Block")
	}
	// Copy the frame out so that the group's other children are not held.
	return p.block(bytes.Clone(blk), false, !refs, out)
}

// childHeader reads a complete element header from b: its ID, size and
// length. ok is false for an invalid or incomplete one, or an unknown size.
func childHeader(b []byte) (id uint32, size uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, 0, false
	}
	idLen := vintLen(b[0])
	if idLen == 0 || idLen > 4 || len(b) <= idLen {
		return 0, 0, 0, false
	}
	sizeLen := vintLen(b[idLen])
	if sizeLen == 0 || len(b) < idLen+sizeLen {
		return 0, 0, 0, false
	}
	for _, c := range b[:idLen] {
		id = id<<8 | uint32(c)
	}
	size, unknown := vintValue(b[idLen : idLen+sizeLen])
	return id, size, idLen + sizeLen, !unknown
}

// block turns a SimpleBlock's or Block's data into a frame. For a
// SimpleBlock the keyframe flag is its own; a Block's comes from its group.
func (p *Parser) block(b []byte, simple, groupKey bool, out *[]GOP) *Error {
	start := p.cur.start
	num, rel, flags, n, ok := blockHeader(b)
	if !ok {
		return p.fail(start, CodeMalformed, "a block too short for its header or with an invalid track number")
	}
	data := b[n:]
	switch {
	case flags&0x06 != 0:
		return p.fail(start, CodeMalformed, "a laced block (VP8/VP9 WebM never laces video)")
	case len(data) == 0:
		return p.fail(start, CodeMalformed, "a block without frame data")
	case p.trackNum == 0:
		p.trackNum = num // Resume: the stream's one track is the first block's
	case num != p.trackNum:
		return p.fail(start, CodeMalformed, fmt.Sprintf("a block of track %d; the stream's video track is %d", num, p.trackNum))
	}
	key := groupKey
	if simple {
		key = flags&0x80 != 0
	}
	ts := (p.clusterTC + rel) * p.scale // cannot overflow: Timecode was bounded
	return p.frame(Frame{TS: ts, Key: key, Data: data}, start, out)
}

// blockHeader reads the header at the start of a Block's or SimpleBlock's
// data: the track number (a vint), the timecode relative to the cluster
// (int16) and the flags byte; n is the header's length. ok is false while
// b is shorter than that, or when the track number is not a vint.
func blockHeader(b []byte) (track uint64, rel int64, flags byte, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, 0, 0, false
	}
	v := vintLen(b[0])
	if v == 0 || len(b) < v+3 {
		return 0, 0, 0, 0, false
	}
	track, _ = vintValue(b[:v])
	return track, int64(int16(uint16(b[v])<<8 | uint16(b[v+1]))), b[v+2], v + 3, true
}

// peekKeyframe completes the open GOP as soon as the SimpleBlock being
// buffered shows, in its header, that it is a keyframe: the GOP needs
// nothing of that frame but its time, and emitting it now rather than at
// the keyframe's last byte (a keyframe is the largest frame) shortens
// what a crash loses. Anything odd in the header is left to block(),
// which fails the element when it is complete.
func (p *Parser) peekKeyframe(out *[]GOP) {
	num, rel, flags, _, ok := blockHeader(p.buf)
	if !ok {
		return
	}
	p.peeked = true
	if flags&0x80 == 0 || flags&0x06 != 0 || (p.trackNum != 0 && num != p.trackNum) {
		return
	}
	ts := (p.clusterTC + rel) * p.scale
	if p.haveLast && ts < p.lastTS {
		return
	}
	*out = append(*out, GOP{Frames: p.gop, End: ts})
	p.gop, p.gopBytes = nil, 0
}

// frame adds a frame to the open GOP, completing it on a keyframe.
func (p *Parser) frame(f Frame, start int64, out *[]GOP) *Error {
	if !f.Key && len(p.gop) == 0 {
		p.skipped++
		return nil
	}
	if p.haveLast && f.TS < p.lastTS {
		return p.fail(start, CodeMalformed, fmt.Sprintf("a frame at %d ns follows one at %d ns: timestamps go backwards", f.TS, p.lastTS))
	}
	if f.Key && len(p.gop) > 0 {
		*out = append(*out, GOP{Frames: p.gop, End: f.TS})
		p.gop, p.gopBytes = nil, 0
	}
	if p.gopBytes+len(f.Data) > p.lim.MaxGOP {
		return p.fail(start, CodeTooLarge, fmt.Sprintf("the GOP starting at %d ns grows past the %d-byte limit with the block at offset %d",
			gopStart(p.gop, f), p.lim.MaxGOP, start))
	}
	p.gop = append(p.gop, f)
	p.gopBytes += len(f.Data)
	p.lastTS, p.haveLast = f.TS, true
	return nil
}

func gopStart(g []Frame, f Frame) int64 {
	if len(g) > 0 {
		return g[0].TS
	}
	return f.TS
}

// flush takes the open GOP at the stream's end.
func (p *Parser) flush() *GOP {
	if len(p.gop) == 0 {
		return nil
	}
	d := p.track.FrameDuration
	if d <= 0 {
		d = defaultFrameDuration
	}
	end := p.lastTS + d
	if end < p.lastTS {
		end = math.MaxInt64
	}
	g := &GOP{Frames: p.gop, End: end}
	p.gop, p.gopBytes = nil, 0
	return g
}

// elementName names an element in messages; IDs the parser does not know
// are not spelled out, since they may be stream bytes that are not IDs.
func elementName(id uint32) string {
	switch id {
	case idEBML:
		return "EBML header"
	case idSegment:
		return "Segment"
	case idSeekHead:
		return "SeekHead"
	case idInfo:
		return "Info"
	case idTracks:
		return "Tracks"
	case idCluster:
		return "Cluster"
	case idCues:
		return "Cues"
	case idTags:
		return "Tags"
	case idChapters:
		return "Chapters"
	case idAttachments:
		return "Attachments"
	case idTimecode:
		return "Timecode"
	case idSimpleBlock:
		return "SimpleBlock"
	case idBlockGroup:
		return "BlockGroup"
	case idVoid:
		return "Void"
	case idCRC32:
		return "CRC-32"
	}
	return "element of an unknown kind"
}
