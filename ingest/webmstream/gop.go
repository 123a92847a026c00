package webmstream

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/at-wat/ebml-go"
)

// Element IDs of a GOP blob beyond those the parser knows.
const (
	idEBMLVersion        = 0x4286
	idEBMLReadVersion    = 0x42F7
	idEBMLMaxIDLength    = 0x42F2
	idEBMLMaxSizeLength  = 0x42F3
	idDocType            = 0x4282
	idDocTypeVersion     = 0x4287
	idDocTypeReadVersion = 0x4285
	idTimecodeScale      = 0x2AD7B1
	idMuxingApp          = 0x4D80
	idWritingApp         = 0x5741
	idDuration           = 0x4489
	idTrackEntry         = 0xAE
	idTrackNumber        = 0xD7
	idTrackUID           = 0x73C5
	idTrackType          = 0x83
	idFlagLacing         = 0x9C
	idCodecID            = 0x86
	idCodecPrivate       = 0x63A2
	idDefaultDuration    = 0x23E383
	idVideo              = 0xE0
	idPixelWidth         = 0xB0
	idPixelHeight        = 0xBA
)

// blobApp is the MuxingApp and WritingApp of a GOP blob. It carries no
// version so that a rebuilt flightrec writes the same bytes.
const blobApp = "flightrec"

// EncodeGOP returns the GOP blob: a standalone WebM file of the GOP's frames
// that any player decodes, with times relative to its first frame. It is
// deterministic: the same Track and frames (times relative to the first)
// give the same bytes, so identical GOPs across reruns have the same content
// address.
//
// Layout (another package reads it independently with ebml-go; keep to it):
//   - EBML header: EBMLVersion 1, EBMLReadVersion 1, EBMLMaxIDLength 4,
//     EBMLMaxSizeLength 8, DocType "webm", DocTypeVersion 4,
//     DocTypeReadVersion 2.
//   - Segment of known size, containing in order:
//   - Info: TimecodeScale = t.TimecodeScale, MuxingApp and WritingApp
//     "flightrec", Duration (8-byte float, in ticks) = (End −
//     Frames[0].TS) / TimecodeScale.
//   - Tracks: one TrackEntry: TrackNumber 1, TrackUID 1, TrackType 1,
//     FlagLacing 0, CodecID, CodecPrivate only if non-empty,
//     DefaultDuration only if FrameDuration > 0, Video {PixelWidth,
//     PixelHeight}.
//   - Clusters: the first with Timecode 0; each frame a SimpleBlock
//     (track 1, flag 0x80 only on keyframes, no lacing) at tick time
//     (frame.TS − Frames[0].TS) / TimecodeScale relative to its cluster; a
//     frame whose offset from the cluster's Timecode would leave the int16
//     range (in practice: exceed 32767 ticks) starts a new Cluster with
//     Timecode = its tick time.
//
// Every size is written in its shortest form and every unsigned integer in
// its fewest bytes (the encoding ebml-go's Marshal also produces). Tick times
// are rounded down. It refuses a GOP without frames, one not starting with a
// keyframe, an empty frame, a frame or End before Frames[0].TS, and a Track
// that is not VP8/VP9 or lacks a positive TimecodeScale.
func EncodeGOP(t Track, g GOP) ([]byte, error) {
	if err := checkBlob(t, g); err != nil {
		return nil, err
	}
	scale := t.TimecodeScale
	t0 := g.Frames[0].TS

	hdr := appendMaster(nil, idEBML, func(b []byte) []byte {
		b = appendUint(b, idEBMLVersion, 1)
		b = appendUint(b, idEBMLReadVersion, 1)
		b = appendUint(b, idEBMLMaxIDLength, 4)
		b = appendUint(b, idEBMLMaxSizeLength, 8)
		b = appendBytes(b, idDocType, []byte("webm"))
		b = appendUint(b, idDocTypeVersion, 4)
		return appendUint(b, idDocTypeReadVersion, 2)
	})
	info := appendMaster(nil, idInfo, func(b []byte) []byte {
		b = appendUint(b, idTimecodeScale, uint64(scale))
		b = appendBytes(b, idMuxingApp, []byte(blobApp))
		b = appendBytes(b, idWritingApp, []byte(blobApp))
		return appendFloat(b, idDuration, float64(g.End-t0)/float64(scale))
	})
	tracks := appendMaster(nil, idTracks, func(b []byte) []byte {
		return appendMaster(b, idTrackEntry, func(b []byte) []byte {
			b = appendUint(b, idTrackNumber, 1)
			b = appendUint(b, idTrackUID, 1)
			b = appendUint(b, idTrackType, 1)
			b = appendUint(b, idFlagLacing, 0)
			b = appendBytes(b, idCodecID, []byte(t.Codec))
			if len(t.CodecPrivate) > 0 {
				b = appendBytes(b, idCodecPrivate, t.CodecPrivate)
			}
			if t.FrameDuration > 0 {
				b = appendUint(b, idDefaultDuration, uint64(t.FrameDuration))
			}
			return appendMaster(b, idVideo, func(b []byte) []byte {
				b = appendUint(b, idPixelWidth, uint64(t.Width))
				return appendUint(b, idPixelHeight, uint64(t.Height))
			})
		})
	})

	// Plan the clusters first so that the frames are copied once, into an
	// output of the exact size.
	type cluster struct {
		tc          int64
		first, last int // frames [first, last)
		size        uint64
	}
	ticks := make([]int64, len(g.Frames))
	var clusters []cluster
	for i, f := range g.Frames {
		ticks[i] = (f.TS - t0) / scale
		if i == 0 || ticks[i]-clusters[len(clusters)-1].tc > math.MaxInt16 || ticks[i]-clusters[len(clusters)-1].tc < math.MinInt16 {
			clusters = append(clusters, cluster{tc: ticks[i], first: i})
			c := &clusters[len(clusters)-1]
			c.size = uint64(len(appendUint(nil, idTimecode, uint64(c.tc))))
		}
		c := &clusters[len(clusters)-1]
		c.last = i + 1
		c.size += elementLen(1, uint64(simpleBlockHeader+len(f.Data)))
	}
	segSize := uint64(len(info) + len(tracks))
	for _, c := range clusters {
		segSize += elementLen(4, c.size)
	}
	out := make([]byte, 0, uint64(len(hdr))+elementLen(4, segSize))
	out = append(out, hdr...)
	out = appendID(out, idSegment)
	out = appendSize(out, segSize)
	out = append(out, info...)
	out = append(out, tracks...)
	for _, c := range clusters {
		out = appendID(out, idCluster)
		out = appendSize(out, c.size)
		out = appendUint(out, idTimecode, uint64(c.tc))
		for i := c.first; i < c.last; i++ {
			f := g.Frames[i]
			out = appendID(out, idSimpleBlock)
			out = appendSize(out, uint64(simpleBlockHeader+len(f.Data)))
			var flags byte
			if f.Key {
				flags = 0x80
			}
			rel := uint16(int16(ticks[i] - c.tc))
			out = append(out, 0x81, byte(rel>>8), byte(rel), flags)
			out = append(out, f.Data...)
		}
	}
	return out, nil
}

// simpleBlockHeader is the length of a blob's SimpleBlock header: track
// number 1 as a one-byte vint, the int16 offset, the flags.
const simpleBlockHeader = 4

func checkBlob(t Track, g GOP) error {
	bad := func(code, msg string) error { return &Error{Code: code, Msg: "EncodeGOP: " + msg} }
	switch {
	case t.Codec != "V_VP8" && t.Codec != "V_VP9":
		return bad(CodeUnknownCodec, fmt.Sprintf("codec %s is not V_VP8 or V_VP9", sanitizeCodec(t.Codec)))
	case t.TimecodeScale <= 0:
		return bad(CodeMalformed, "the track has no positive TimecodeScale")
	case t.Width < 0 || t.Height < 0 || t.FrameDuration < 0:
		return bad(CodeMalformed, "the track has negative dimensions or FrameDuration")
	case len(g.Frames) == 0:
		return bad(CodeMalformed, "a GOP without frames")
	case !g.Frames[0].Key:
		return bad(CodeMalformed, "a GOP not starting with a keyframe")
	}
	t0 := g.Frames[0].TS
	if g.End < t0 || (t0 < 0 && g.End > math.MaxInt64+t0) {
		return bad(CodeMalformed, "the GOP's End is before its first frame or too far after it")
	}
	for _, f := range g.Frames {
		if len(f.Data) == 0 {
			return bad(CodeMalformed, "an empty frame")
		}
		if f.TS < t0 || (t0 < 0 && f.TS > math.MaxInt64+t0) {
			return bad(CodeMalformed, "a frame before the GOP's first frame or too far after it")
		}
	}
	return nil
}

func appendID(b []byte, id uint32) []byte {
	switch {
	case id >= 1<<24:
		return append(b, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	case id >= 1<<16:
		return append(b, byte(id>>16), byte(id>>8), byte(id))
	case id >= 1<<8:
		return append(b, byte(id>>8), byte(id))
	}
	return append(b, byte(id))
}

// sizeLen is the length of v's shortest size vint (all ones is reserved for
// an unknown size, so 2^(7n) − 1 needs n+1 bytes).
func sizeLen(v uint64) int {
	for n := 1; n < 8; n++ {
		if v < 1<<(7*n)-1 {
			return n
		}
	}
	return 8
}

func appendSize(b []byte, v uint64) []byte {
	n := sizeLen(v)
	v |= 1 << (7 * n)
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// elementLen is the length of an element with an idLen-byte ID and size
// bytes of data.
func elementLen(idLen int, size uint64) uint64 {
	return uint64(idLen+sizeLen(size)) + size
}

func appendUint(b []byte, id uint32, v uint64) []byte {
	n := 1
	for n < 8 && v>>(8*n) != 0 {
		n++
	}
	b = appendID(b, id)
	b = append(b, 0x80|byte(n))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

func appendFloat(b []byte, id uint32, f float64) []byte {
	b = appendID(b, id)
	b = append(b, 0x88)
	return binary.BigEndian.AppendUint64(b, math.Float64bits(f))
}

func appendBytes(b []byte, id uint32, data []byte) []byte {
	b = appendID(b, id)
	b = appendSize(b, uint64(len(data)))
	return append(b, data...)
}

// appendMaster appends a master element whose children body appends; for
// the small header elements only (the children are copied once more).
func appendMaster(b []byte, id uint32, body func([]byte) []byte) []byte {
	c := body(nil)
	b = appendID(b, id)
	b = appendSize(b, uint64(len(c)))
	return append(b, c...)
}

// blobDoc is what DecodeGOP reads of a GOP blob with ebml-go.
type blobDoc struct {
	EBML struct {
		DocType string `ebml:"EBMLDocType"`
	} `ebml:"EBML"`
	Segment []struct {
		Info struct {
			TimecodeScale []uint64  `ebml:"TimecodeScale"`
			Duration      []float64 `ebml:"Duration"`
		} `ebml:"Info"`
		Tracks struct {
			TrackEntry []struct {
				TrackNumber     uint64 `ebml:"TrackNumber"`
				TrackType       uint64 `ebml:"TrackType"`
				CodecID         string `ebml:"CodecID"`
				CodecPrivate    []byte `ebml:"CodecPrivate"`
				DefaultDuration uint64 `ebml:"DefaultDuration"`
				Video           struct {
					PixelWidth  uint64 `ebml:"PixelWidth"`
					PixelHeight uint64 `ebml:"PixelHeight"`
				} `ebml:"Video"`
			} `ebml:"TrackEntry"`
		} `ebml:"Tracks"`
		Cluster []struct {
			Timecode    uint64       `ebml:"Timecode"`
			SimpleBlock []ebml.Block `ebml:"SimpleBlock"`
		} `ebml:"Cluster"`
	} `ebml:"Segment"`
}

// DecodeGOP reads a GOP blob back (see EncodeGOP for the layout): the
// Track, and the GOP with Frames' TS relative to the first frame (so TS of
// Frames[0] is 0) and End relative too. It decodes with ebml-go, as an
// independent reader would, and checks what EncodeGOP guarantees: one VP8 or
// VP9 track numbered 1, unlaced blocks of that track, a first frame that is
// a keyframe, no frame before it and a Duration not before it, and that
// the Segment's declared size is exactly the rest of b (a blob cut at an
// element boundary is "truncated", not a shorter GOP). Errors are *Error
// with Offset 0.
func DecodeGOP(b []byte) (Track, GOP, error) {
	bad := func(code, msg string) (Track, GOP, error) {
		return Track{}, GOP{}, &Error{Code: code, Msg: "GOP blob: " + msg}
	}
	if !bytes.HasPrefix(b, ebmlMagic[:]) {
		return bad(CodeNotWebM, "does not start with an EBML header")
	}
	// ebml-go takes a document that stops between elements as complete, so
	// check first that the Segment's declared size is exactly what follows.
	if _, size, n, ok := childHeader(b); !ok || size > uint64(len(b)-n) {
		return bad(CodeMalformed, "the EBML header does not fit the blob")
	} else if rest := b[n+int(size):]; true {
		id, size, n, ok := childHeader(rest)
		switch {
		case !ok || id != idSegment:
			return bad(CodeMalformed, "no Segment of known size after the EBML header")
		case size > uint64(len(rest)-n):
			return bad(CodeTruncated, fmt.Sprintf("the Segment declares %d bytes; %d follow", size, len(rest)-n))
		case size < uint64(len(rest)-n):
			return bad(CodeMalformed, "bytes follow the Segment")
		}
	}
	var doc blobDoc
	if err := unmarshal(b, &doc); err != nil {
		return bad(CodeMalformed, "does not decode: "+ebmlErrClass(err))
	}
	if doc.EBML.DocType != "webm" {
		return bad(CodeNotWebM, "the DocType is not webm")
	}
	if len(doc.Segment) != 1 {
		return bad(CodeMalformed, fmt.Sprintf("%d Segments, not one", len(doc.Segment)))
	}
	seg := doc.Segment[0]
	if len(seg.Info.TimecodeScale) != 1 || len(seg.Info.Duration) != 1 {
		return bad(CodeMalformed, "Info lacks a TimecodeScale or Duration, or has two")
	}
	scale := seg.Info.TimecodeScale[0]
	if scale == 0 || scale > maxTimescale {
		return bad(CodeMalformed, fmt.Sprintf("a TimecodeScale of %d ns", scale))
	}
	if len(seg.Tracks.TrackEntry) != 1 {
		return bad(CodeMalformed, fmt.Sprintf("%d tracks, not one", len(seg.Tracks.TrackEntry)))
	}
	te := seg.Tracks.TrackEntry[0]
	switch {
	case te.CodecID != "V_VP8" && te.CodecID != "V_VP9":
		return bad(CodeUnknownCodec, fmt.Sprintf("codec %s is not V_VP8 or V_VP9", sanitizeCodec(te.CodecID)))
	case te.TrackNumber != 1 || te.TrackType != 1:
		return bad(CodeMalformed, "the track is not video track number 1")
	case te.Video.PixelWidth > maxDimension || te.Video.PixelHeight > maxDimension:
		return bad(CodeMalformed, "the track's dimensions are out of range")
	case te.DefaultDuration > math.MaxInt32*uint64(time1s):
		return bad(CodeMalformed, "the track's DefaultDuration is absurdly long")
	}
	t := Track{
		Codec:         te.CodecID,
		Width:         int(te.Video.PixelWidth),
		Height:        int(te.Video.PixelHeight),
		CodecPrivate:  te.CodecPrivate,
		TimecodeScale: int64(scale),
		FrameDuration: int64(te.DefaultDuration),
	}
	maxTC := uint64(math.MaxInt64/int64(scale) - math.MaxInt16 - 1)
	var g GOP
	var t0 int64
	for _, c := range seg.Cluster {
		if c.Timecode > maxTC {
			return bad(CodeMalformed, "a Cluster Timecode too large to express in nanoseconds")
		}
		for _, blk := range c.SimpleBlock {
			if blk.TrackNumber != 1 || blk.Lacing != ebml.LacingNo || len(blk.Data) != 1 || len(blk.Data[0]) == 0 {
				return bad(CodeMalformed, "a block that is not one unlaced frame of track 1")
			}
			ts := (int64(c.Timecode) + int64(blk.Timecode)) * int64(scale)
			if len(g.Frames) == 0 {
				if !blk.Keyframe {
					return bad(CodeMalformed, "the first frame is not a keyframe")
				}
				t0 = ts
			}
			if ts < t0 {
				return bad(CodeMalformed, "a frame before the first frame")
			}
			g.Frames = append(g.Frames, Frame{TS: ts - t0, Key: blk.Keyframe, Data: blk.Data[0]})
		}
	}
	if len(g.Frames) == 0 {
		return bad(CodeMalformed, "no frames")
	}
	d := seg.Info.Duration[0] * float64(scale)
	if math.IsNaN(d) || d < 0 || d >= math.MaxInt64/2 {
		return bad(CodeMalformed, "the Duration is out of range")
	}
	g.End = int64(math.Round(d))
	return t, g, nil
}
