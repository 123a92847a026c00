package webm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"math"
	"math/bits"

	"github.com/at-wat/ebml-go"
)

// Stream describes an already-encoded video track: what the Tracks
// element of a WebM holding its packets must say for a decoder to read
// them.
type Stream struct {
	// Codec is the Matroska CodecID, "V_VP8" or "V_VP9".
	Codec string
	// Width and Height are the frames' size in pixels (the track's
	// PixelWidth and PixelHeight).
	Width, Height int
	// CodecPrivate is the track's CodecPrivate, nil when it had none.
	// VP8 has none; for VP9 it is optional (a list of profile, level,
	// bit depth and chroma subsampling hints), and it is carried over
	// as it came so players see what the encoder wrote.
	CodecPrivate []byte
}

// Packet is one encoded frame.
type Packet struct {
	// Time is in ns: relative to the GOP's first frame in ReadGOP's
	// result; unix ns on the recording's clock when given to Mux.
	Time int64
	// Key marks a keyframe, which decodes without the frames before it.
	Key bool
	// Data is the frame as the encoder wrote it: one VP8 frame, or one
	// VP9 frame or superframe.
	Data []byte
}

// The structs ReadGOP decodes into. Blocks are collected by read hooks,
// in file order (SimpleBlocks and BlockGroups interleave, and separate
// slices would lose their order), so the cluster fields are single values
// overwritten as they come. Fields are only there so that ebml-go calls
// the hooks (it calls them only for elements the struct names) or so
// ReadGOP can refuse what it does not handle; every other element
// ebml-go knows (SeekHead, Cues, Tags, Chapters, Void, …) is read and
// dropped.
type gopFile struct {
	EBML    gopEBML      `ebml:"EBML"`
	Segment []gopSegment `ebml:"Segment"`
}

type gopEBML struct {
	DocType string `ebml:"EBMLDocType"`
}

type gopSegment struct {
	Info    gopInfo    `ebml:"Info"`
	Tracks  gopTracks  `ebml:"Tracks"`
	Cluster gopCluster `ebml:"Cluster"`
}

type gopInfo struct {
	TimecodeScale uint64 `ebml:"TimecodeScale"`
}

type gopTracks struct {
	TrackEntry []gopTrack `ebml:"TrackEntry"`
}

type gopTrack struct {
	TrackNumber      uint64      `ebml:"TrackNumber"`
	TrackType        uint64      `ebml:"TrackType"`
	CodecID          string      `ebml:"CodecID"`
	CodecPrivate     []byte      `ebml:"CodecPrivate"`
	ContentEncodings *struct{}   `ebml:"ContentEncodings"`
	Video            *videoTrack `ebml:"Video"`
}

type gopCluster struct {
	Timecode    uint64        `ebml:"Timecode"`
	SimpleBlock ebml.Block    `ebml:"SimpleBlock"`
	BlockGroup  gopBlockGroup `ebml:"BlockGroup"`
}

type gopBlockGroup struct {
	Block          ebml.Block `ebml:"Block"`
	ReferenceBlock int64      `ebml:"ReferenceBlock"`
}

// gopBlock is a block as read, before the tracks and the time scale
// (which may come after the clusters) are known to check and convert it.
type gopBlock struct {
	ticks int64 // cluster Timecode + block timecode
	track uint64
	key   bool
	data  []byte
}

// defaultTimecodeScale is Matroska's TimecodeScale when Info has none:
// 1 ms per tick.
const defaultTimecodeScale = 1_000_000

// ReadGOP parses a GOP blob: a WebM file with one VP8 or VP9 video track
// whose first frame is a keyframe, as ingest stores each group of
// pictures an executor sent. It returns the track's description and its
// frames in file order, each Time relative to the first frame's in ns
// (ticks × the file's TimecodeScale, which need not be 1 ms).
//
// Any single-video-track WebM with known element sizes is accepted, so a
// short file ffmpeg wrote is a GOP blob too; elements that do not bear on
// the frames (SeekHead, Cues, Chapters, Tags, Void, Info's other fields)
// are ignored. Frames may be SimpleBlocks or Blocks in BlockGroups (a
// Block without a ReferenceBlock is a keyframe); their Invisible and
// Discardable flags are not kept (the decoder knows an invisible frame
// from its own header).
//
// ReadGOP refuses, with an error saying why: bytes that are not WebM
// (no EBML header, another DocType, malformed or truncated elements);
// an element of unknown size (a live stream's, which needs a muxer that
// guesses where it ends); more or fewer than one track, a track that is
// not video or whose codec is not V_VP8/V_VP9, or whose frames are
// compressed or encrypted (ContentEncodings); laced blocks (one block
// holding several frames: WebM video never needs them); blocks of another
// track; no frames; and a first frame that is not a keyframe (the GOP
// could not be decoded on its own). Any error means the blob is unusable:
// ReadGOP does no I/O.
func ReadGOP(b []byte) (Stream, []Packet, error) {
	fail := func(format string, a ...any) (Stream, []Packet, error) {
		return Stream{}, nil, fmt.Errorf("webm: gop: "+format, a...)
	}
	var (
		blocks    []gopBlock
		hookErr   error
		clusterEl *ebml.Element // the cluster whose Timecode was read last
		clusterTC int64
		group     *ebml.Element // the BlockGroup being read
		groupBlk  = -1          // its Block's index in blocks
		groupRef  bool          // it has a ReferenceBlock
		ebmlEnd   = -1          // where the EBML header ends: the Segment begins
		segments  int
		liveSeg   bool
	)
	setErr := func(format string, a ...any) {
		if hookErr == nil {
			hookErr = fmt.Errorf(format, a...)
		}
	}
	// add checks one block of the cluster parent, records it and
	// returns its index (-1 if refused).
	add := func(parent *ebml.Element, blk ebml.Block, key bool) int {
		if parent == nil || parent != clusterEl {
			setErr("a block before its cluster's Timecode")
			return -1
		}
		if blk.Lacing != ebml.LacingNo || len(blk.Data) != 1 {
			setErr("laced block of %d frames at tick %d: lacing is not supported", len(blk.Data), clusterTC+int64(blk.Timecode))
			return -1
		}
		blocks = append(blocks, gopBlock{
			ticks: clusterTC + int64(blk.Timecode), track: blk.TrackNumber, key: key, data: blk.Data[0],
		})
		return len(blocks) - 1
	}
	hook := func(el *ebml.Element) {
		switch el.Type {
		case ebml.ElementEBML:
			if end, ok := elementEnd(b, el.Position, el.Size); ok && ebmlEnd < 0 {
				ebmlEnd = int(min(end, uint64(len(b))))
			}
		case ebml.ElementSegment:
			segments++
			liveSeg = liveSeg || el.Size == ebml.SizeUnknown
		case ebml.ElementCluster:
			if el.Size == ebml.SizeUnknown {
				setErr("a cluster of unknown size (a live stream's): element sizes must be known")
			}
		case ebml.ElementTimecode:
			if el.Parent == nil || el.Parent.Type != ebml.ElementCluster {
				return
			}
			v, _ := el.Value.(uint64)
			if v > math.MaxInt64/2 {
				setErr("cluster timecode %d out of range", v)
				return
			}
			clusterEl, clusterTC = el.Parent, int64(v)
		case ebml.ElementSimpleBlock:
			if blk, ok := el.Value.(ebml.Block); ok {
				add(el.Parent, blk, blk.Keyframe)
			}
		case ebml.ElementBlock:
			// Its BlockGroup decides whether it is a keyframe, once
			// the group's ReferenceBlocks (before or after it) are read.
			if blk, ok := el.Value.(ebml.Block); ok && el.Parent != nil {
				group = el.Parent
				groupBlk = add(el.Parent.Parent, blk, false)
			}
		case ebml.ElementReferenceBlock:
			if el.Parent != nil {
				if el.Parent != group {
					group, groupBlk = el.Parent, -1
				}
				groupRef = true
			}
		case ebml.ElementBlockGroup:
			if el == group && groupBlk >= 0 {
				blocks[groupBlk].key = !groupRef
			}
			group, groupBlk, groupRef = nil, -1, false
		}
	}
	var f gopFile
	err := ebml.Unmarshal(bytes.NewReader(b), &f,
		ebml.WithElementReadHooks(hook),
		ebml.WithMaxLeafElementSize(uint64(max(len(b), 1))),
	)
	// ebml-go takes the input's end between two elements for the end of
	// the element holding them, so a blob cut there reads without error
	// and its last frames are silently lost; cut inside an element it
	// fails with a size error. The Segment's own size tells either way.
	var segEnd uint64
	if ebmlEnd >= 0 && f.EBML.DocType == "webm" && bytes.HasPrefix(b[ebmlEnd:], idSegment) {
		if size, n, ok := readVint(b[ebmlEnd+len(idSegment):]); ok && size != ebml.SizeUnknown {
			segEnd = uint64(ebmlEnd+len(idSegment)+n) + size
		}
	}
	switch {
	case segEnd > uint64(len(b)):
		return fail("truncated: the Segment ends at byte %d, the blob at %d", segEnd, len(b))
	case err != nil && f.EBML.DocType == "":
		return fail("not a WebM file: %v", err)
	case err != nil:
		return fail("malformed WebM: %v", err)
	case f.EBML.DocType == "":
		return fail("not a WebM file: no EBML header")
	case f.EBML.DocType != "webm":
		return fail("not a WebM file: DocType %q", f.EBML.DocType)
	case segments == 0:
		return fail("no Segment")
	case segments > 1:
		return fail("%d Segments, want one", segments)
	case liveSeg:
		return fail("a Segment of unknown size (a live stream's): element sizes must be known")
	case hookErr != nil:
		return fail("%v", hookErr)
	}
	seg := f.Segment[0]
	switch n := len(seg.Tracks.TrackEntry); {
	case n == 0:
		return fail("no track")
	case n > 1:
		return fail("%d tracks, want one video track", n)
	}
	t := seg.Tracks.TrackEntry[0]
	switch {
	case t.TrackType != 1 || t.Video == nil:
		return fail("track %d is not video (type %d)", t.TrackNumber, t.TrackType)
	case t.CodecID != codecVP8 && t.CodecID != codecVP9:
		return fail("codec %q, want %s or %s", t.CodecID, codecVP8, codecVP9)
	case t.ContentEncodings != nil:
		return fail("track %d has ContentEncodings: compressed or encrypted frames are not supported", t.TrackNumber)
	case t.Video.PixelWidth == 0 || t.Video.PixelHeight == 0 || t.Video.PixelWidth > math.MaxInt32 || t.Video.PixelHeight > math.MaxInt32:
		return fail("video size %d×%d", t.Video.PixelWidth, t.Video.PixelHeight)
	}
	if len(blocks) == 0 {
		return fail("no frames")
	}
	if !blocks[0].key {
		return fail("the first frame is not a keyframe")
	}
	scale := seg.Info.TimecodeScale
	if scale == 0 {
		scale = defaultTimecodeScale
	}
	if scale > math.MaxInt32 {
		return fail("TimecodeScale %d out of range", scale)
	}
	s := Stream{
		Codec:        t.CodecID,
		Width:        int(t.Video.PixelWidth),
		Height:       int(t.Video.PixelHeight),
		CodecPrivate: t.CodecPrivate,
	}
	first := blocks[0].ticks
	packets := make([]Packet, len(blocks))
	for i, blk := range blocks {
		if blk.track != t.TrackNumber {
			return fail("frame %d belongs to track %d, the file's track is %d", i, blk.track, t.TrackNumber)
		}
		d := blk.ticks - first
		if d > math.MaxInt64/int64(scale) || d < math.MinInt64/int64(scale) {
			return fail("frame %d's time %d ticks × %d ns is out of range", i, d, scale)
		}
		packets[i] = Packet{Time: d * int64(scale), Key: blk.key, Data: blk.data}
	}
	return s, packets, nil
}

// MuxOptions configures Mux.
type MuxOptions struct {
	// Start and End are unix ns: video time 0 is Start, and the video
	// lasts End−Start (Info's Duration says so exactly).
	Start, End int64
	// TempDir holds the clusters while the head, which needs their
	// positions, is computed (default os.TempDir()).
	TempDir string
}

// Mux writes already-encoded packets of stream s as one WebM file, laid
// out as Encode's output is (see the package comment): SeekHead, Info
// (Duration End−Start), Tracks (s's codec, CodecPrivate and size, no
// DefaultDuration since packets come at any times), Chapters (one per
// chapter, clamped to the span, as Encode writes them), Cues before the
// clusters, then the clusters. Each keyframe begins a cluster and has a
// cue; a run of more than 30 s without a keyframe is cut into clusters
// without cues, as Encode's are.
//
// packets come in time order (Time never decreasing, else an error) and
// are usually GOP blobs read lazily: ReadGOP's Packets with the GOP's
// start added to Time. Gaps between them (a GOP lost) are allowed: the
// frame before the gap stays on screen. Mux stops iterating at the first
// packet at or after End, so blobs after the span are never read; a
// non-nil error from packets ends Mux with that error wrapped.
//
// Packets before Start are skipped, and so are those after it up to the
// first keyframe at or after Start: a delta frame cannot be decoded
// without the keyframe it follows. That keyframe is placed at video time
// 0 (as Encode shows its first frame from 0 when the first input frame
// comes after the start), so the file starts at 0 as players expect, and
// the packets after it keep their times (ms after Start). A Start in the
// middle of a GOP therefore shows the next GOP's first picture from time
// 0. When no keyframe at or after Start precedes End, Mux returns
// ErrNoFrames.
//
// Data is copied: the iterator may reuse its buffers once the next
// packet is asked for. Nothing is written to w until all packets are
// read, so on error w is untouched.
func Mux(ctx context.Context, opt MuxOptions, s Stream, packets iter.Seq2[Packet, error], chapters []Chapter, w io.Writer) error {
	if opt.End <= opt.Start {
		return fmt.Errorf("webm: mux: end %d is not after start %d", opt.End, opt.Start)
	}
	if s.Codec != codecVP8 && s.Codec != codecVP9 {
		return fmt.Errorf("webm: mux: codec %q, want %s or %s", s.Codec, codecVP8, codecVP9)
	}
	if s.Width <= 0 || s.Height <= 0 {
		return fmt.Errorf("webm: mux: video size %d×%d", s.Width, s.Height)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dur := opt.End - opt.Start
	// Chapter starts would be where Encode forces keyframes; here the
	// keyframes are the executor's, so they are not needed.
	atoms, _ := chapterAtoms(chapters, opt.Start, dur)

	mx, err := newMuxer(opt.TempDir)
	if err != nil {
		return err
	}
	defer mx.close()

	var (
		started bool
		last    int64
		n       int
	)
	for p, err := range packets {
		if err != nil {
			return fmt.Errorf("webm: mux: reading packets: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if n > 0 && p.Time < last {
			return fmt.Errorf("webm: mux: packet %d at %d goes back before %d", n, p.Time, last)
		}
		last = p.Time
		n++
		if p.Time >= opt.End {
			break
		}
		if !started && (p.Time < opt.Start || !p.Key) {
			continue
		}
		ms := (p.Time - opt.Start) / 1e6
		if !started {
			ms, started = 0, true
		}
		if err := mx.add(ms, p.Key, bytes.Clone(p.Data)); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !started {
		return ErrNoFrames
	}
	_, err = mx.finish(w, head{
		codec: s.Codec, codecPrivate: s.CodecPrivate,
		width: s.Width, height: s.Height, durationNS: dur, chapters: atoms,
	})
	return err
}

// readVint reads an EBML variable-size integer (an element's size) at
// the start of b: its length is its first byte's leading zeros plus one,
// and the marker bit is dropped. A size of all ones is "unknown"
// (ebml.SizeUnknown).
func readVint(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, false
	}
	n = bits.LeadingZeros8(b[0]) + 1
	if len(b) < n {
		return 0, 0, false
	}
	v = uint64(b[0]) & (0xFF >> n)
	allOnes := v == 0xFF>>n
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
		allOnes = allOnes && c == 0xFF
	}
	if allOnes {
		return ebml.SizeUnknown, n, true
	}
	return v, n, true
}

// elementEnd is where the element whose header starts at pos in b, with
// a data size of size, ends: after its ID (a vint, 1 to 4 bytes), its
// size's vint and its data.
func elementEnd(b []byte, pos, size uint64) (uint64, bool) {
	if pos >= uint64(len(b)) || size == ebml.SizeUnknown {
		return 0, false
	}
	_, idLen, ok := readVint(b[pos:])
	if !ok || pos+uint64(idLen) >= uint64(len(b)) {
		return 0, false
	}
	_, sizeLen, ok := readVint(b[pos+uint64(idLen):])
	if !ok {
		return 0, false
	}
	return pos + uint64(idLen) + uint64(sizeLen) + size, true
}
