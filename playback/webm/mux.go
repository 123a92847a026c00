package webm

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/at-wat/ebml-go"
)

// The elements written, as ebml-go tagged structs. ebml-go's own webm
// package has no Chapters and writes its Cues after the clusters, so the
// file is assembled from these. Only elements WebM allows are used (its
// chapter subset has no edition flags or UIDs, hence the bare
// EditionEntry).

type ebmlHeader struct {
	EBMLVersion        uint64 `ebml:"EBMLVersion"`
	EBMLReadVersion    uint64 `ebml:"EBMLReadVersion"`
	EBMLMaxIDLength    uint64 `ebml:"EBMLMaxIDLength"`
	EBMLMaxSizeLength  uint64 `ebml:"EBMLMaxSizeLength"`
	DocType            string `ebml:"EBMLDocType"`
	DocTypeVersion     uint64 `ebml:"EBMLDocTypeVersion"`
	DocTypeReadVersion uint64 `ebml:"EBMLDocTypeReadVersion"`
}

type seekHead struct {
	Seek []seekEntry `ebml:"Seek"`
}

type seekEntry struct {
	SeekID       []byte `ebml:"SeekID"`
	SeekPosition uint64 `ebml:"SeekPosition"`
}

type segmentInfo struct {
	TimecodeScale uint64  `ebml:"TimecodeScale"`
	MuxingApp     string  `ebml:"MuxingApp"`
	WritingApp    string  `ebml:"WritingApp"`
	Duration      float64 `ebml:"Duration"`
}

type tracks struct {
	TrackEntry []trackEntry `ebml:"TrackEntry"`
}

// trackEntry is the one track written. CodecPrivate and DefaultDuration
// are omitted when empty: Encode's VP8 has no private data, and Mux's
// packets come at whatever rate the executor sent them, so a
// DefaultDuration would be a false promise (players then take a frame's
// duration from the next frame's time). Encode's output keeps its bytes:
// it writes no CodecPrivate and a non-zero DefaultDuration.
type trackEntry struct {
	TrackNumber     uint64     `ebml:"TrackNumber"`
	TrackUID        uint64     `ebml:"TrackUID"`
	FlagLacing      uint64     `ebml:"FlagLacing"`
	CodecID         string     `ebml:"CodecID"`
	CodecPrivate    []byte     `ebml:"CodecPrivate,omitempty"`
	TrackType       uint64     `ebml:"TrackType"`
	DefaultDuration uint64     `ebml:"DefaultDuration,omitempty"`
	Video           videoTrack `ebml:"Video"`
}

type videoTrack struct {
	PixelWidth  uint64 `ebml:"PixelWidth"`
	PixelHeight uint64 `ebml:"PixelHeight"`
}

type chaptersElement struct {
	EditionEntry []editionEntry `ebml:"EditionEntry"`
}

type editionEntry struct {
	ChapterAtom []chapterAtom `ebml:"ChapterAtom"`
}

type chapterAtom struct {
	ChapterUID       uint64           `ebml:"ChapterUID"`
	ChapterTimeStart uint64           `ebml:"ChapterTimeStart"`
	ChapterTimeEnd   uint64           `ebml:"ChapterTimeEnd"`
	ChapterDisplay   []chapterDisplay `ebml:"ChapterDisplay"`
}

type chapterDisplay struct {
	ChapString   string `ebml:"ChapString"`
	ChapLanguage string `ebml:"ChapLanguage"`
}

type cuesElement struct {
	CuePoint []cuePoint `ebml:"CuePoint"`
}

type cuePoint struct {
	CueTime           uint64              `ebml:"CueTime"`
	CueTrackPositions []cueTrackPositions `ebml:"CueTrackPositions"`
}

type cueTrackPositions struct {
	CueTrack           uint64 `ebml:"CueTrack"`
	CueClusterPosition uint64 `ebml:"CueClusterPosition"`
}

type clusterElement struct {
	Timecode    uint64       `ebml:"Timecode"`
	SimpleBlock []ebml.Block `ebml:"SimpleBlock"`
}

// Element IDs the SeekHead names, and the Segment's, whose header is
// written by hand (its size is only known once the clusters are).
var (
	idSegment  = []byte{0x18, 0x53, 0x80, 0x67}
	idInfo     = []byte{0x15, 0x49, 0xA9, 0x66}
	idTracks   = []byte{0x16, 0x54, 0xAE, 0x6B}
	idChapters = []byte{0x10, 0x43, 0xA7, 0x70}
	idCues     = []byte{0x1C, 0x53, 0xBB, 0x6B}
)

// The codecs a track may hold: the two WebM video codecs browsers play
// from a Matroska container and that the muxer needs nothing to know
// about (no codec-specific headers, one packet per frame).
const (
	codecVP8 = "V_VP8"
	codecVP9 = "V_VP9"
)

const (
	trackNumber = 1
	// maxClusterSpan keeps every block's timestamp, relative to its
	// cluster's as a signed 16-bit count of ms, in range: a cluster longer
	// than this is cut even without a keyframe.
	maxClusterSpan = 30_000
)

// marshalElement encodes v as the single element named name. ebml-go
// marshals a struct's fields, so v is wrapped in a one-field struct whose
// tag names the element.
func marshalElement(name string, v any) ([]byte, error) {
	wrapper := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "E", Type: reflect.TypeOf(v), Tag: reflect.StructTag(`ebml:"` + name + `"`),
	}})).Elem()
	wrapper.Field(0).Set(reflect.ValueOf(v))
	var b bytes.Buffer
	if err := ebml.Marshal(wrapper.Addr().Interface(), &b); err != nil {
		return nil, fmt.Errorf("webm: marshal %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// clusterRef is what the Cues need of a written cluster.
type clusterRef struct {
	off int64 // from the first cluster's start
	ms  int64
	key bool // begins with a keyframe: it gets a cue
}

// muxer writes clusters to a temporary file as blocks arrive, then the
// head (which needs their positions) and the clusters to the output.
type muxer struct {
	tmp      *os.File
	bw       *bufio.Writer
	off      int64
	clusters []clusterRef
	cur      clusterElement
	curMS    int64
	curKey   bool
	open     bool
	blocks   int
}

func newMuxer(dir string) (*muxer, error) {
	f, err := os.CreateTemp(dir, "flightrec-webm-*")
	if err != nil {
		return nil, fmt.Errorf("webm: temporary file: %w", err)
	}
	return &muxer{tmp: f, bw: bufio.NewWriterSize(f, 1<<20)}, nil
}

// close removes the temporary file.
func (m *muxer) close() {
	m.tmp.Close()
	os.Remove(m.tmp.Name())
}

// add appends one frame at ms. A keyframe begins a new cluster, so every
// cluster but a cut-long one starts with a keyframe and gets a cue.
func (m *muxer) add(ms int64, key bool, frame []byte) error {
	if m.open && (key || ms-m.curMS > maxClusterSpan) {
		if err := m.flush(); err != nil {
			return err
		}
	}
	if !m.open {
		m.cur = clusterElement{Timecode: uint64(ms)}
		m.curMS, m.curKey, m.open = ms, key, true
	}
	m.cur.SimpleBlock = append(m.cur.SimpleBlock, ebml.Block{
		TrackNumber: trackNumber,
		Timecode:    int16(ms - m.curMS),
		Keyframe:    key,
		Data:        [][]byte{frame},
	})
	m.blocks++
	return nil
}

func (m *muxer) flush() error {
	if !m.open {
		return nil
	}
	b, err := marshalElement("Cluster", m.cur)
	if err != nil {
		return err
	}
	if _, err := m.bw.Write(b); err != nil {
		return fmt.Errorf("webm: temporary file: %w", err)
	}
	m.clusters = append(m.clusters, clusterRef{off: m.off, ms: m.curMS, key: m.curKey})
	m.off += int64(len(b))
	m.cur, m.open = clusterElement{}, false
	return nil
}

// head is what the elements before the clusters say. Encode and Mux
// share it, and so the whole container writer: they differ only in the
// track's codec, private data and frame rate.
type head struct {
	// codec is the track's CodecID; "" is Encode's "V_VP8".
	codec string
	// codecPrivate is the track's CodecPrivate, written only when set.
	codecPrivate  []byte
	width, height int
	// fps, when non-zero, is the constant frame rate the track's
	// DefaultDuration states; 0 (Mux: packets at any times) writes none.
	fps        int
	durationNS int64
	chapters   []chapterAtom
}

// finish writes the whole file to w: EBML header, Segment header, SeekHead,
// Info, Tracks, Chapters, Cues, then the clusters copied from the
// temporary file. It returns the bytes written.
func (m *muxer) finish(w io.Writer, h head) (int64, error) {
	if err := m.flush(); err != nil {
		return 0, err
	}
	if err := m.bw.Flush(); err != nil {
		return 0, fmt.Errorf("webm: temporary file: %w", err)
	}
	if len(m.clusters) == 0 {
		return 0, errors.New("webm: no frames encoded")
	}
	headBytes, err := m.segmentHead(h)
	if err != nil {
		return 0, err
	}
	hdr, err := marshalElement("EBML", ebmlHeader{
		EBMLVersion: 1, EBMLReadVersion: 1, EBMLMaxIDLength: 4, EBMLMaxSizeLength: 8,
		DocType: "webm", DocTypeVersion: 4, DocTypeReadVersion: 2,
	})
	if err != nil {
		return 0, err
	}
	// The Segment's size as an 8-byte vint (0x01 marker, 56 bits): the
	// size every muxer uses when it fills the size in afterwards.
	seg := make([]byte, 12)
	copy(seg, idSegment)
	binary.BigEndian.PutUint64(seg[4:], uint64(len(headBytes))+uint64(m.off))
	seg[4] = 0x01
	var n int64
	for _, b := range [][]byte{hdr, seg, headBytes} {
		k, err := w.Write(b)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	if _, err := m.tmp.Seek(0, io.SeekStart); err != nil {
		return n, fmt.Errorf("webm: temporary file: %w", err)
	}
	k, err := io.Copy(w, io.LimitReader(m.tmp, m.off))
	n += k
	if err != nil {
		return n, err
	}
	if k != m.off {
		return n, fmt.Errorf("webm: temporary file: read %d of %d bytes", k, m.off)
	}
	return n, nil
}

// segmentHead encodes the Segment's children before the clusters. The
// SeekHead holds the others' positions and the Cues the clusters', which
// follow all of them, so the sizes feed back into the positions: they are
// recomputed until no size changes (sizes only grow with the positions, so
// this ends, in two or three rounds).
func (m *muxer) segmentHead(h head) ([]byte, error) {
	info, err := marshalElement("Info", segmentInfo{
		TimecodeScale: 1_000_000,
		MuxingApp:     "flightrec",
		WritingApp:    "flightrec",
		Duration:      float64(h.durationNS) / 1e6,
	})
	if err != nil {
		return nil, err
	}
	codec := cmp.Or(h.codec, codecVP8)
	var defaultDuration uint64
	if h.fps > 0 {
		defaultDuration = uint64(1e9 / h.fps)
	}
	trk, err := marshalElement("Tracks", tracks{TrackEntry: []trackEntry{{
		TrackNumber:     trackNumber,
		TrackUID:        1,
		FlagLacing:      0,
		CodecID:         codec,
		CodecPrivate:    h.codecPrivate,
		TrackType:       1, // video
		DefaultDuration: defaultDuration,
		Video:           videoTrack{PixelWidth: uint64(h.width), PixelHeight: uint64(h.height)},
	}}})
	if err != nil {
		return nil, err
	}
	var chp []byte
	if len(h.chapters) > 0 {
		chp, err = marshalElement("Chapters", chaptersElement{
			EditionEntry: []editionEntry{{ChapterAtom: h.chapters}},
		})
		if err != nil {
			return nil, err
		}
	}
	var sh, cues []byte
	for range 16 {
		posInfo := uint64(len(sh))
		posTracks := posInfo + uint64(len(info))
		posChapters := posTracks + uint64(len(trk))
		posCues := posChapters + uint64(len(chp))
		first := posCues + uint64(len(cues))
		seeks := []seekEntry{
			{SeekID: idInfo, SeekPosition: posInfo},
			{SeekID: idTracks, SeekPosition: posTracks},
		}
		if chp != nil {
			seeks = append(seeks, seekEntry{SeekID: idChapters, SeekPosition: posChapters})
		}
		seeks = append(seeks, seekEntry{SeekID: idCues, SeekPosition: posCues})
		sh2, err := marshalElement("SeekHead", seekHead{Seek: seeks})
		if err != nil {
			return nil, err
		}
		var cs cuesElement
		for _, c := range m.clusters {
			if !c.key {
				continue
			}
			cs.CuePoint = append(cs.CuePoint, cuePoint{
				CueTime: uint64(c.ms),
				CueTrackPositions: []cueTrackPositions{{
					CueTrack: trackNumber, CueClusterPosition: first + uint64(c.off),
				}},
			})
		}
		cues2, err := marshalElement("Cues", cs)
		if err != nil {
			return nil, err
		}
		if len(sh2) == len(sh) && len(cues2) == len(cues) {
			out := make([]byte, 0, len(sh)+len(info)+len(trk)+len(chp)+len(cues))
			for _, b := range [][]byte{sh2, info, trk, chp, cues2} {
				out = append(out, b...)
			}
			return out, nil
		}
		sh, cues = sh2, cues2
	}
	return nil, errors.New("webm: segment head layout does not settle")
}

// chapterTitle makes a title fit ChapString: valid UTF-8, no NUL (readers
// cut strings there), at most 256 runes.
func chapterTitle(s string, step int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if utf8.RuneCountInString(s) > 256 {
		r := []rune(s)
		s = string(r[:255]) + "…"
	}
	if strings.TrimSpace(s) == "" {
		s = fmt.Sprintf("Step %d", step)
	}
	return s
}
