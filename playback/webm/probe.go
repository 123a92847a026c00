package webm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/at-wat/ebml-go"
)

// Info is what Probe reads from a WebM: enough to check a file without
// ffprobe, and to answer questions about one (its chapters) without
// decoding video.
type Info struct {
	DocType string
	// Duration is Info's Duration scaled by TimecodeScale.
	Duration      time.Duration
	TimecodeScale uint64
	MuxingApp     string
	// Video track (the first track with video settings).
	CodecID         string
	Width, Height   int
	DefaultDuration time.Duration
	Chapters        []ChapterInfo
	Cues            []CueInfo
	// Seeks are the SeekHead's entries: element name → position
	// (relative to the Segment's data, like all positions here).
	Seeks map[string]int64
	// Layout is the Segment's children in file order, a run of clusters
	// as one "Cluster" entry (at the first one's position).
	Layout   []Element
	Clusters []ClusterInfo
	// Blocks counts SimpleBlocks and Blocks; Keyframes those flagged key,
	// whose times are KeyframeTimes.
	Blocks        int
	Keyframes     int
	KeyframeTimes []time.Duration
	// LastBlock is the last block's time.
	LastBlock time.Duration
}

// Element is a Segment child's name and position.
type Element struct {
	Name     string
	Position int64
}

// ChapterInfo is one ChapterAtom of the first edition.
type ChapterInfo struct {
	UID        uint64
	Start, End time.Duration
	Title      string
	Language   string
}

// CueInfo is one CuePoint's first track position.
type CueInfo struct {
	Time            time.Duration
	Track           uint64
	ClusterPosition int64
}

// ClusterInfo is one Cluster.
type ClusterInfo struct {
	Position int64
	Time     time.Duration
	Blocks   int
	// Keyframe: the cluster's first block is a keyframe.
	Keyframe bool
}

// The structs Probe decodes into. Clusters and blocks land in single
// values, overwritten as they come, and are accounted for by read hooks:
// a file's video is never held in memory.
type probeFile struct {
	EBML    probeEBML    `ebml:"EBML"`
	Segment probeSegment `ebml:"Segment"`
}

type probeEBML struct {
	DocType string `ebml:"EBMLDocType"`
}

type probeSegment struct {
	SeekHead    seekHead     `ebml:"SeekHead"`
	Info        probeInfo    `ebml:"Info"`
	Tracks      probeTracks  `ebml:"Tracks"`
	Chapters    probeChaps   `ebml:"Chapters"`
	Cues        cuesElement  `ebml:"Cues"`
	Cluster     probeCluster `ebml:"Cluster"`
	Tags        struct{}     `ebml:"Tags"`
	Attachments struct{}     `ebml:"Attachments"`
	Void        []byte       `ebml:"Void"`
	CRC32       []byte       `ebml:"CRC32"`
}

type probeInfo struct {
	TimecodeScale uint64  `ebml:"TimecodeScale"`
	Duration      float64 `ebml:"Duration"`
	MuxingApp     string  `ebml:"MuxingApp"`
}

type probeTracks struct {
	TrackEntry []probeTrack `ebml:"TrackEntry"`
}

type probeTrack struct {
	TrackNumber     uint64      `ebml:"TrackNumber"`
	CodecID         string      `ebml:"CodecID"`
	DefaultDuration uint64      `ebml:"DefaultDuration"`
	Video           *videoTrack `ebml:"Video"`
}

type probeChaps struct {
	EditionEntry []editionEntry `ebml:"EditionEntry"`
}

type probeCluster struct {
	Timecode    uint64     `ebml:"Timecode"`
	SimpleBlock ebml.Block `ebml:"SimpleBlock"`
	BlockGroup  struct {
		Block ebml.Block `ebml:"Block"`
	} `ebml:"BlockGroup"`
}

// segmentChildren are the Segment's children Probe knows; any of them may
// be the first, whose position is where the Segment's data begins.
var segmentChildren = map[ebml.ElementType]bool{
	ebml.ElementSeekHead: true, ebml.ElementInfo: true, ebml.ElementTracks: true,
	ebml.ElementChapters: true, ebml.ElementCues: true, ebml.ElementCluster: true,
	ebml.ElementTags: true, ebml.ElementAttachments: true, ebml.ElementVoid: true,
	ebml.ElementCRC32: true,
}

// maxProbeLeaf bounds one element's size: a VP8 frame is far smaller,
// and a corrupt size must not make Probe allocate more.
const maxProbeLeaf = 64 << 20

// Probe reads the WebM (or Matroska) of size bytes in r. It reads the
// whole file once, keeping one block at a time. Malformed, truncated or
// foreign input is an error, never a panic.
func Probe(r io.ReaderAt, size int64) (Info, error) {
	var (
		info      Info
		dataStart = int64(-1)
		clusterEl *ebml.Element // the cluster of the blocks being counted
		cl        *ClusterInfo
		lastBlock int64
		scale     = uint64(1_000_000) // TimecodeScale's default, until read
		segSize   = uint64(ebml.SizeUnknown)
	)
	block := func(b ebml.Block) {
		if cl == nil {
			return
		}
		if cl.Blocks == 0 {
			cl.Keyframe = b.Keyframe
		}
		cl.Blocks++
		info.Blocks++
		t := int64(cl.Time) + int64(b.Timecode)*int64(scale)
		if b.Keyframe {
			info.Keyframes++
			info.KeyframeTimes = append(info.KeyframeTimes, time.Duration(t))
		}
		lastBlock = max(lastBlock, t)
	}
	hook := func(el *ebml.Element) {
		if el.Parent != nil && el.Parent.Type == ebml.ElementSegment && segmentChildren[el.Type] {
			if dataStart < 0 {
				dataStart = int64(el.Position)
			}
			if n := len(info.Layout); n == 0 || info.Layout[n-1].Name != el.Name || el.Type != ebml.ElementCluster {
				info.Layout = append(info.Layout, Element{Name: el.Name, Position: int64(el.Position)})
			}
		}
		switch el.Type {
		case ebml.ElementSegment:
			segSize = el.Size
		case ebml.ElementTimecodeScale:
			// (A master element's hook value is its state before its
			// children were read, so the scale is taken from the leaf.)
			if v, ok := el.Value.(uint64); ok && v != 0 {
				scale = v
			}
		case ebml.ElementTimecode:
			if el.Parent == nil || el.Parent.Type != ebml.ElementCluster {
				return
			}
			v, _ := el.Value.(uint64)
			clusterEl = el.Parent
			info.Clusters = append(info.Clusters, ClusterInfo{
				Position: int64(el.Parent.Position),
				Time:     time.Duration(v * scale),
			})
			cl = &info.Clusters[len(info.Clusters)-1]
		case ebml.ElementSimpleBlock, ebml.ElementBlock:
			b, ok := el.Value.(ebml.Block)
			p := el.Parent
			if p != nil && p.Type == ebml.ElementBlockGroup {
				p = p.Parent
			}
			if ok && p == clusterEl {
				block(b)
			}
		}
	}
	var f probeFile
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16)
	err := ebml.Unmarshal(br, &f,
		ebml.WithElementReadHooks(hook),
		ebml.WithMaxLeafElementSize(uint64(min(max(size, 1), maxProbeLeaf))),
	)
	if err != nil {
		return Info{}, fmt.Errorf("webm: probe: %w", err)
	}
	if f.EBML.DocType != "webm" && f.EBML.DocType != "matroska" {
		return Info{}, fmt.Errorf("webm: probe: doc type %q", f.EBML.DocType)
	}
	if dataStart < 0 || len(f.Segment.Tracks.TrackEntry) == 0 {
		return Info{}, errors.New("webm: probe: no segment with tracks")
	}
	// ebml-go takes the input's end between two elements for the end of
	// the element holding them, so a file cut there reads without error:
	// the Segment's own size tells.
	if segSize != ebml.SizeUnknown && uint64(dataStart)+segSize > uint64(size) {
		return Info{}, fmt.Errorf("webm: probe: truncated: the segment ends at %d, the input at %d", uint64(dataStart)+segSize, size)
	}
	info.DocType = f.EBML.DocType
	info.TimecodeScale = scale
	info.MuxingApp = f.Segment.Info.MuxingApp
	info.Duration = time.Duration(f.Segment.Info.Duration * float64(scale))
	for _, t := range f.Segment.Tracks.TrackEntry {
		if t.Video != nil {
			info.CodecID = t.CodecID
			info.Width, info.Height = int(t.Video.PixelWidth), int(t.Video.PixelHeight)
			info.DefaultDuration = time.Duration(t.DefaultDuration)
			break
		}
	}
	if eds := f.Segment.Chapters.EditionEntry; len(eds) > 0 {
		for _, a := range eds[0].ChapterAtom {
			c := ChapterInfo{
				UID:   a.ChapterUID,
				Start: time.Duration(a.ChapterTimeStart),
				End:   time.Duration(a.ChapterTimeEnd),
			}
			if len(a.ChapterDisplay) > 0 {
				c.Title, c.Language = a.ChapterDisplay[0].ChapString, a.ChapterDisplay[0].ChapLanguage
			}
			info.Chapters = append(info.Chapters, c)
		}
	}
	for _, p := range f.Segment.Cues.CuePoint {
		c := CueInfo{Time: time.Duration(p.CueTime * scale)}
		if len(p.CueTrackPositions) > 0 {
			c.Track = p.CueTrackPositions[0].CueTrack
			c.ClusterPosition = int64(p.CueTrackPositions[0].CueClusterPosition)
		}
		info.Cues = append(info.Cues, c)
	}
	info.Seeks = make(map[string]int64)
	for _, s := range f.Segment.SeekHead.Seek {
		info.Seeks[seekName(s.SeekID)] = int64(s.SeekPosition)
	}
	for i := range info.Clusters {
		info.Clusters[i].Position -= dataStart
	}
	for i := range info.Layout {
		info.Layout[i].Position -= dataStart
	}
	info.LastBlock = time.Duration(lastBlock)
	return info, nil
}

// seekName names a SeekID: one of the top-level elements, or its hex.
func seekName(id []byte) string {
	for name, b := range map[string][]byte{
		"Info": idInfo, "Tracks": idTracks, "Chapters": idChapters, "Cues": idCues,
		"Cluster": {0x1F, 0x43, 0xB6, 0x75}, "Tags": {0x12, 0x54, 0xC3, 0x67},
		"SeekHead": {0x11, 0x4D, 0x9B, 0x74}, "Attachments": {0x19, 0x41, 0xA4, 0x69},
	} {
		if string(b) == string(id) {
			return name
		}
	}
	return fmt.Sprintf("%X", id)
}
