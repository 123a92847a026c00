package webmstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/at-wat/ebml-go"
	"github.com/at-wat/ebml-go/webm"

	"github.com/flightrec/flightrec/ingest/webmstream"
	"github.com/flightrec/flightrec/internal/testenv"
)

// ---- fixtures: real streams from ffmpeg ----

var (
	encMu    sync.Mutex
	encCache = map[string][]byte{}
)

// encode runs ffmpeg (once per argument list per test binary) and returns
// the WebM it wrote: to a file (seekable: known sizes, Cues at the end) or,
// with pipe, to a pipe (the Segment's size unknown).
func encode(t testing.TB, pipe bool, args ...string) []byte {
	t.Helper()
	ff := testenv.RequireFFmpeg(t, "ffmpeg")
	key := fmt.Sprint(pipe, args)
	encMu.Lock()
	defer encMu.Unlock()
	if b, ok := encCache[key]; ok {
		return b
	}
	args = append([]string{"-v", "error", "-nostdin", "-y"}, args...)
	var b []byte
	if pipe {
		cmd := exec.Command(ff, append(args, "-f", "webm", "pipe:1")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ffmpeg %v: %v\n%s", args, err, stderr.Bytes())
		}
		b = out
	} else {
		dir, err := os.MkdirTemp("", "webmstream")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		f := filepath.Join(dir, "out.webm")
		if out, err := exec.Command(ff, append(args, "-f", "webm", f)...).CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
		}
		if b, err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	encCache[key] = b
	return b
}

// testsrc is 12 s of ffmpeg's test pattern at 5 fps with a keyframe every
// 10 frames: 60 frames in 6 GOPs, like an executor's screen recording.
func testsrc(codec string) []string {
	return []string{"-f", "lavfi", "-i", "testsrc2=size=320x200:rate=5", "-t", "12", "-c:v", codec, "-g", "10"}
}

func vp8File(t testing.TB) []byte { return encode(t, false, testsrc("libvpx")...) }
func vp9File(t testing.TB) []byte { return encode(t, false, testsrc("libvpx-vp9")...) }
func vp8Pipe(t testing.TB) []byte { return encode(t, true, testsrc("libvpx")...) }

type namedStream struct {
	name     string
	b        []byte
	seekable bool   // known-size Segment: every GOP comes out of Write
	src      []byte // what the oracle reads: b, or b before its sizes were made unknown (same offsets)
}

func allStreams(t *testing.T) []namedStream {
	return []namedStream{
		{"vp8", vp8File(t), true, vp8File(t)},
		{"vp9", vp9File(t), true, vp9File(t)},
		{"vp8-pipe", vp8Pipe(t), false, vp8Pipe(t)},
		// ebml-go misplaces the elements after an unknown-size one, so
		// the oracle reads these from the original file.
		{"vp8-unknown-sizes", unknownSizes(t, vp8File(t), true), false, vp8File(t)},
		{"vp8-unknown-clusters", unknownSizes(t, vp8File(t), false), true, vp8File(t)},
	}
}

// ---- the oracle: ebml-go's Unmarshal of the whole file ----

type oFrame struct {
	webmstream.Frame
	pos int64 // the SimpleBlock's offset
}

type oracleResult struct {
	scale, frameDur int64
	codec           string
	width, height   int
	frames          []oFrame
	segment         int64
	clusters        []int64 // Cluster offsets
}

func oracle(t testing.TB, b []byte) oracleResult {
	t.Helper()
	var doc struct {
		Segment struct {
			Info struct {
				TimecodeScale uint64 `ebml:"TimecodeScale"`
			} `ebml:"Info"`
			Tracks struct {
				TrackEntry []struct {
					TrackNumber     uint64 `ebml:"TrackNumber"`
					CodecID         string `ebml:"CodecID"`
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
				BlockGroup  []struct{}   `ebml:"BlockGroup"`
			} `ebml:"Cluster"`
		} `ebml:"Segment"`
	}
	pos := map[string][]int64{}
	hook := func(e *ebml.Element) { pos[e.Name] = append(pos[e.Name], int64(e.Position)) }
	if err := ebml.Unmarshal(bytes.NewReader(b), &doc, ebml.WithElementReadHooks(hook)); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	seg := doc.Segment
	if len(seg.Tracks.TrackEntry) != 1 {
		t.Fatalf("oracle: %d tracks", len(seg.Tracks.TrackEntry))
	}
	te := seg.Tracks.TrackEntry[0]
	o := oracleResult{
		scale: int64(seg.Info.TimecodeScale), frameDur: int64(te.DefaultDuration), codec: te.CodecID,
		width: int(te.Video.PixelWidth), height: int(te.Video.PixelHeight),
	}
	if o.scale == 0 {
		o.scale = 1_000_000
	}
	blocks := pos["SimpleBlock"]
	sort.Slice(blocks, func(i, j int) bool { return blocks[i] < blocks[j] })
	o.clusters = pos["Cluster"]
	sort.Slice(o.clusters, func(i, j int) bool { return o.clusters[i] < o.clusters[j] })
	o.segment = pos["Segment"][0]
	for _, c := range seg.Cluster {
		if len(c.BlockGroup) > 0 {
			t.Fatal("oracle: the fixture has BlockGroups")
		}
		for _, blk := range c.SimpleBlock {
			if blk.TrackNumber != te.TrackNumber || len(blk.Data) != 1 {
				t.Fatal("oracle: unexpected block")
			}
			p := blocks[len(o.frames)]
			if b[p] != 0xA3 {
				t.Fatalf("oracle: no SimpleBlock ID at %d", p)
			}
			o.frames = append(o.frames, oFrame{webmstream.Frame{
				TS: (int64(c.Timecode) + int64(blk.Timecode)) * o.scale, Key: blk.Keyframe, Data: blk.Data[0],
			}, p})
		}
	}
	return o
}

// gops groups frames as the package must: a GOP per keyframe, frames before
// the first keyframe dropped (returned as skipped).
func (o oracleResult) gops(frames []oFrame) (gops []webmstream.GOP, skipped int) {
	var cur []webmstream.Frame
	for _, f := range frames {
		switch {
		case f.Key:
			if len(cur) > 0 {
				gops = append(gops, webmstream.GOP{Frames: cur, End: f.TS})
			}
			cur = []webmstream.Frame{f.Frame}
		case len(cur) > 0:
			cur = append(cur, f.Frame)
		default:
			skipped++
		}
	}
	if len(cur) > 0 {
		d := o.frameDur
		if d == 0 {
			d = 200_000_000
		}
		gops = append(gops, webmstream.GOP{Frames: cur, End: cur[len(cur)-1].TS + d})
	}
	return gops, skipped
}

// elemLen is the total length of the element at pos: header and data.
func elemLen(t testing.TB, b []byte, pos int64) int64 {
	t.Helper()
	idLen := 1
	for b[pos]&(0x80>>(idLen-1)) == 0 {
		idLen++
	}
	c := b[pos+int64(idLen)]
	n := 1
	for c&(0x80>>(n-1)) == 0 {
		n++
	}
	v := uint64(c) & (0xFF >> n)
	for _, x := range b[pos+int64(idLen)+1 : pos+int64(idLen+n)] {
		v = v<<8 | uint64(x)
	}
	return int64(idLen+n) + int64(v)
}

// unknownSizes rewrites, in place in a copy, the size of every Cluster and
// (if segment) of the Segment to "unknown" (all ones, same length), as a
// live muxer writes them.
func unknownSizes(t testing.TB, b []byte, segment bool) []byte {
	t.Helper()
	o := oracle(t, b)
	out := bytes.Clone(b)
	at := o.clusters
	if segment {
		at = append([]int64{o.segment}, at...)
	}
	for _, p := range at {
		s := p + 4
		n := 1
		for out[s]&(0x80>>(n-1)) == 0 {
			n++
		}
		out[s] = 0xFF >> (n - 1)
		for i := 1; i < n; i++ {
			out[s+int64(i)] = 0xFF
		}
	}
	return out
}

// ---- feeding ----

// chunker returns the next chunk size.
type chunker func() int

func fixed(n int) chunker { return func() int { return n } }

func random(seed uint64, maxN int) chunker {
	r := rand.New(rand.NewPCG(seed, 1))
	return func() int { return 1 + r.IntN(maxN) }
}

// splitAt feeds the stream in chunks ending at the given offsets.
func splitAt(offs ...int64) chunker {
	i, last := 0, int64(0)
	return func() int {
		if i < len(offs) {
			n := offs[i] - last
			last = offs[i]
			i++
			return int(n)
		}
		return 1 << 30
	}
}

type outcome struct {
	gops      []webmstream.GOP
	fromWrite int // GOPs Write returned (the rest came from End)
	err       error
	skipped   int
	track     webmstream.Track
}

// feed writes b to p in chunks, checking the invariants every Write keeps,
// then ends the stream unless a Write failed.
func feed(t testing.TB, p *webmstream.Parser, b []byte, next chunker, lim webmstream.Limits) outcome {
	t.Helper()
	var o outcome
	bound := lim.MaxGOP + lim.MaxBlock + webmstream.HeldOverhead
	if lim.MaxGOP == 0 {
		bound = webmstream.DefaultMaxGOP + webmstream.DefaultMaxBlock + webmstream.HeldOverhead
	}
	base := p.Offset()
	fed := int64(0)
	for len(b) > 0 {
		n := min(max(next(), 1), len(b))
		g, err := p.Write(b[:n])
		o.gops = append(o.gops, g...)
		if err != nil {
			o.err = err
			o.fromWrite = len(o.gops)
			return o
		}
		b = b[n:]
		fed += int64(n)
		if p.Offset()-base != fed {
			t.Fatalf("Offset %d after %d bytes", p.Offset()-base, fed)
		}
		if h := p.Held(); h > bound {
			t.Fatalf("Held %d > %d", h, bound)
		}
	}
	o.fromWrite = len(o.gops)
	g, err := p.End()
	if g != nil {
		o.gops = append(o.gops, *g)
	}
	o.err = err
	o.skipped = p.Skipped()
	o.track, _ = p.Track()
	return o
}

func parse(t testing.TB, b []byte, next chunker) outcome {
	t.Helper()
	return feed(t, webmstream.NewParser(webmstream.Limits{}), b, next, webmstream.Limits{})
}

// diffGOPs describes the first difference between two GOP lists, "" if none.
func diffGOPs(got, want []webmstream.GOP) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d GOPs, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.End != w.End {
			return fmt.Sprintf("GOP %d: End %d, want %d", i, g.End, w.End)
		}
		if len(g.Frames) != len(w.Frames) {
			return fmt.Sprintf("GOP %d: %d frames, want %d", i, len(g.Frames), len(w.Frames))
		}
		for j := range g.Frames {
			gf, wf := g.Frames[j], w.Frames[j]
			if gf.TS != wf.TS || gf.Key != wf.Key || !bytes.Equal(gf.Data, wf.Data) {
				return fmt.Sprintf("GOP %d frame %d: TS %d key %v %d bytes, want TS %d key %v %d bytes (data equal: %v)",
					i, j, gf.TS, gf.Key, len(gf.Data), wf.TS, wf.Key, len(wf.Data), bytes.Equal(gf.Data, wf.Data))
			}
		}
	}
	return ""
}

func checkGOPShape(t testing.TB, gops []webmstream.GOP) {
	t.Helper()
	for i, g := range gops {
		if len(g.Frames) == 0 || !g.Frames[0].Key {
			t.Fatalf("GOP %d does not start with a keyframe", i)
		}
		for _, f := range g.Frames[1:] {
			if f.Key {
				t.Fatalf("GOP %d has a second keyframe", i)
			}
		}
		if g.End < g.Frames[len(g.Frames)-1].TS {
			t.Fatalf("GOP %d ends at %d before its last frame", i, g.End)
		}
		if i > 0 && gops[i-1].End != g.Frames[0].TS {
			t.Fatalf("GOP %d starts at %d, the previous ended at %d", i, g.Frames[0].TS, gops[i-1].End)
		}
	}
}

func wantCode(t testing.TB, err error, code string) *webmstream.Error {
	t.Helper()
	var e *webmstream.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want a *webmstream.Error %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
	return e
}

// ---- parsing real streams ----

func TestWholeStreamMatchesOracle(t *testing.T) {
	for _, s := range allStreams(t) {
		t.Run(s.name, func(t *testing.T) {
			o := oracle(t, s.src)
			want, skipped := o.gops(o.frames)
			got := parse(t, s.b, fixed(len(s.b)))
			if got.err != nil {
				t.Fatal(got.err)
			}
			if d := diffGOPs(got.gops, want); d != "" {
				t.Fatal(d)
			}
			checkGOPShape(t, got.gops)
			if len(o.frames) != 60 || len(got.gops) < 2 {
				t.Fatalf("%d frames in %d GOPs; the fixture should have 60 frames, a keyframe every 10", len(o.frames), len(got.gops))
			}
			keys := 0
			for _, f := range o.frames {
				if f.Key {
					keys++
				}
			}
			if keys != len(got.gops) || got.skipped != skipped || skipped != 0 {
				t.Fatalf("%d keyframes, %d GOPs, %d skipped (oracle %d)", keys, len(got.gops), got.skipped, skipped)
			}
			// A seekable file's known-size Segment ends with its last byte:
			// Write emits every GOP; a live stream's last GOP comes from End.
			if wantW := len(want) - 1; s.seekable {
				wantW++
				if got.fromWrite != wantW {
					t.Fatalf("Write emitted %d GOPs, want %d", got.fromWrite, wantW)
				}
			} else if got.fromWrite != wantW {
				t.Fatalf("Write emitted %d GOPs, want %d (the last from End)", got.fromWrite, wantW)
			}
			tr := got.track
			if tr.Codec != o.codec || tr.Width != 320 || tr.Height != 200 || tr.TimecodeScale != o.scale || tr.FrameDuration != o.frameDur {
				t.Fatalf("track %+v, oracle %+v", tr, o)
			}
		})
	}
}

// TestFramesMatchFFprobe checks timestamps, keyframe flags and sizes against
// a second independent reader, ffprobe's packet list.
func TestFramesMatchFFprobe(t *testing.T) {
	probe := testenv.RequireFFmpeg(t, "ffprobe")
	b := vp9File(t)
	f := filepath.Join(t.TempDir(), "in.webm")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(probe, "-v", "error", "-show_entries", "packet=pts,flags,size", "-of", "csv=p=0", f).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := parse(t, b, fixed(4096))
	if got.err != nil {
		t.Fatal(got.err)
	}
	var frames []webmstream.Frame
	for _, g := range got.gops {
		frames = append(frames, g.Frames...)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(frames) {
		t.Fatalf("ffprobe lists %d packets, the parser %d frames", len(lines), len(frames))
	}
	for i, l := range lines {
		parts := strings.Split(l, ",") // pts,size,flags (ffprobe's field order)
		if len(parts) != 3 {
			t.Fatalf("ffprobe line %q", l)
		}
		pts, _ := strconv.ParseInt(parts[0], 10, 64)
		size, _ := strconv.Atoi(parts[1])
		key := strings.HasPrefix(parts[2], "K")
		fr := frames[i]
		if fr.TS != pts*1_000_000 || len(fr.Data) != size || fr.Key != key {
			t.Fatalf("frame %d: TS %d key %v %d bytes; ffprobe %q", i, fr.TS, fr.Key, len(fr.Data), l)
		}
	}
}

func TestChunkedMatchesWhole(t *testing.T) {
	for _, s := range allStreams(t) {
		t.Run(s.name, func(t *testing.T) {
			whole := parse(t, s.b, fixed(len(s.b)))
			if whole.err != nil {
				t.Fatal(whole.err)
			}
			o := oracle(t, s.src)
			mid := o.frames[len(o.frames)/2].pos // a SimpleBlock in the middle
			cases := map[string]chunker{
				"1":                fixed(1),
				"7":                fixed(7),
				"333":              fixed(333),
				"random-small":     random(1, 64),
				"random-large":     random(2, 20000),
				"inside-block":     splitAt(mid + 9),
				"inside-header":    splitAt(mid+1, mid+2, o.clusters[1]+3),
				"at-block-borders": splitAt(o.frames[3].pos, o.frames[4].pos, o.clusters[2]),
			}
			for name, c := range cases {
				got := parse(t, s.b, c)
				if got.err != nil {
					t.Fatalf("%s: %v", name, got.err)
				}
				if d := diffGOPs(got.gops, whole.gops); d != "" {
					t.Fatalf("%s: %s", name, d)
				}
				if got.fromWrite != whole.fromWrite {
					t.Fatalf("%s: Write emitted %d GOPs, whole %d", name, got.fromWrite, whole.fromWrite)
				}
			}
		})
	}
}

// TestGOPsOutAsSoonAsComplete checks that a GOP comes out with the next
// keyframe's last byte, not later.
// A GOP comes out as soon as the next keyframe's block header (its flags
// byte) arrives, before that keyframe's data: the GOP is complete then, and
// the sooner it is stored the less a crash loses.
func TestGOPsOutAsSoonAsComplete(t *testing.T) {
	b := vp8File(t)
	o := oracle(t, b)
	p := webmstream.NewParser(webmstream.Limits{})
	at := int64(0)
	emitted := 0
	for i, f := range o.frames {
		end := f.pos + elemLen(t, b, f.pos)
		// ID A3, the size vint, then track number (one byte here),
		// timecode (2) and flags (1).
		flags := f.pos + 1 + int64(bits.LeadingZeros8(b[f.pos+1])+1) + 1 + 2 + 1
		first, err := p.Write(b[at:flags])
		if err != nil {
			t.Fatal(err)
		}
		rest, err := p.Write(b[flags:end])
		if err != nil {
			t.Fatal(err)
		}
		at = end
		if len(rest) != 0 {
			t.Fatalf("frame %d: %d GOPs out after its header", i, len(rest))
		}
		if f.Key && i > 0 {
			if len(first) != 1 {
				t.Fatalf("keyframe %d: %d GOPs out at its header, want 1", i, len(first))
			}
			emitted++
		} else if len(first) != 0 {
			t.Fatalf("frame %d: %d GOPs out", i, len(first))
		}
		// One byte short of the flags, nothing comes out yet.
	}
	if emitted != 5 {
		t.Fatalf("%d GOPs out before the end, want 5", emitted)
	}
}

// ---- GOP blobs ----

func allGOPs(t *testing.T, b []byte) (webmstream.Track, []webmstream.GOP) {
	t.Helper()
	got := parse(t, b, fixed(len(b)))
	if got.err != nil {
		t.Fatal(got.err)
	}
	return got.track, got.gops
}

func relative(g webmstream.GOP) webmstream.GOP {
	t0 := g.Frames[0].TS
	r := webmstream.GOP{End: g.End - t0}
	for _, f := range g.Frames {
		f.TS -= t0
		r.Frames = append(r.Frames, f)
	}
	return r
}

func sameTrack(a, b webmstream.Track) bool {
	return a.Codec == b.Codec && a.Width == b.Width && a.Height == b.Height && bytes.Equal(a.CodecPrivate, b.CodecPrivate) &&
		a.TimecodeScale == b.TimecodeScale && a.FrameDuration == b.FrameDuration
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, name := range []string{"vp8", "vp9"} {
		t.Run(name, func(t *testing.T) {
			b := vp8File(t)
			if name == "vp9" {
				b = vp9File(t)
			}
			tr, gops := allGOPs(t, b)
			for i, g := range gops {
				blob, err := webmstream.EncodeGOP(tr, g)
				if err != nil {
					t.Fatal(err)
				}
				again, err := webmstream.EncodeGOP(tr, g)
				if err != nil || !bytes.Equal(blob, again) {
					t.Fatalf("GOP %d: a second EncodeGOP differs (%v)", i, err)
				}
				// Times relative to the first frame make the blob: the same
				// GOP later in another stream has the same bytes.
				shifted := relative(g)
				for j := range shifted.Frames {
					shifted.Frames[j].TS += 7_000_000_000
				}
				shifted.End += 7_000_000_000
				if s, err := webmstream.EncodeGOP(tr, shifted); err != nil || !bytes.Equal(blob, s) {
					t.Fatalf("GOP %d: shifted in time, the blob differs (%v)", i, err)
				}
				dt, dg, err := webmstream.DecodeGOP(blob)
				if err != nil {
					t.Fatalf("GOP %d: %v", i, err)
				}
				if !sameTrack(dt, tr) {
					t.Fatalf("GOP %d: track %+v, want %+v", i, dt, tr)
				}
				if d := diffGOPs([]webmstream.GOP{dg}, []webmstream.GOP{relative(g)}); d != "" {
					t.Fatalf("GOP %d: %s", i, d)
				}
				if i > 0 {
					prev, _ := webmstream.EncodeGOP(tr, gops[i-1])
					if bytes.Equal(prev, blob) {
						t.Fatalf("GOPs %d and %d have the same blob", i-1, i)
					}
				}
			}
		})
	}
}

// blobDoc is the blob layout the spec defines, for ebml-go's Marshal.
type blobDoc struct {
	Header  webm.EBMLHeader `ebml:"EBML"`
	Segment struct {
		Info struct {
			TimecodeScale uint64  `ebml:"TimecodeScale"`
			MuxingApp     string  `ebml:"MuxingApp"`
			WritingApp    string  `ebml:"WritingApp"`
			Duration      float64 `ebml:"Duration"`
		} `ebml:"Info"`
		Tracks struct {
			TrackEntry struct {
				TrackNumber     uint64 `ebml:"TrackNumber"`
				TrackUID        uint64 `ebml:"TrackUID"`
				TrackType       uint64 `ebml:"TrackType"`
				FlagLacing      uint64 `ebml:"FlagLacing"`
				CodecID         string `ebml:"CodecID"`
				CodecPrivate    []byte `ebml:"CodecPrivate,omitempty"`
				DefaultDuration uint64 `ebml:"DefaultDuration,omitempty"`
				Video           struct {
					PixelWidth  uint64 `ebml:"PixelWidth"`
					PixelHeight uint64 `ebml:"PixelHeight"`
				} `ebml:"Video"`
			} `ebml:"TrackEntry"`
		} `ebml:"Tracks"`
		Cluster []blobCluster `ebml:"Cluster"`
	} `ebml:"Segment"`
}

type blobCluster struct {
	Timecode    uint64       `ebml:"Timecode"`
	SimpleBlock []ebml.Block `ebml:"SimpleBlock"`
}

// marshalBlob builds the blob with ebml-go from the spec, as an independent
// writer; clusters are split where the spec says.
func marshalBlob(t testing.TB, tr webmstream.Track, g webmstream.GOP) []byte {
	t.Helper()
	var d blobDoc
	d.Header = *webm.DefaultEBMLHeader
	d.Segment.Info.TimecodeScale = uint64(tr.TimecodeScale)
	d.Segment.Info.MuxingApp, d.Segment.Info.WritingApp = "flightrec", "flightrec"
	t0 := g.Frames[0].TS
	d.Segment.Info.Duration = float64(g.End-t0) / float64(tr.TimecodeScale)
	te := &d.Segment.Tracks.TrackEntry
	te.TrackNumber, te.TrackUID, te.TrackType = 1, 1, 1
	te.CodecID, te.CodecPrivate, te.DefaultDuration = tr.Codec, tr.CodecPrivate, uint64(tr.FrameDuration)
	te.Video.PixelWidth, te.Video.PixelHeight = uint64(tr.Width), uint64(tr.Height)
	for _, f := range g.Frames {
		tick := (f.TS - t0) / tr.TimecodeScale
		if n := len(d.Segment.Cluster); n == 0 || tick-int64(d.Segment.Cluster[n-1].Timecode) > 32767 {
			d.Segment.Cluster = append(d.Segment.Cluster, blobCluster{Timecode: uint64(tick)})
		}
		c := &d.Segment.Cluster[len(d.Segment.Cluster)-1]
		c.SimpleBlock = append(c.SimpleBlock, ebml.Block{
			TrackNumber: 1, Timecode: int16(tick - int64(c.Timecode)), Keyframe: f.Key, Data: [][]byte{f.Data},
		})
	}
	var buf bytes.Buffer
	if err := ebml.Marshal(&d, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func synthGOP(n int, step int64, seed uint64) webmstream.GOP {
	r := rand.New(rand.NewPCG(seed, 2))
	var g webmstream.GOP
	ts := int64(3_000_000_000)
	for i := range n {
		d := make([]byte, 1+r.IntN(300))
		for j := range d {
			d[j] = byte(r.Uint32())
		}
		g.Frames = append(g.Frames, webmstream.Frame{TS: ts, Key: i == 0, Data: d})
		ts += step
	}
	g.End = ts
	return g
}

func TestEncodeGOPMatchesEbmlGoMarshal(t *testing.T) {
	tr, gops := allGOPs(t, vp9File(t))
	cases := []struct {
		name string
		tr   webmstream.Track
		g    webmstream.GOP
	}{
		{"vp9", tr, gops[2]},
		{"private-no-duration", webmstream.Track{Codec: "V_VP8", Width: 7, Height: 9000, CodecPrivate: []byte{1, 2, 3},
			TimecodeScale: 1_000_000}, synthGOP(5, 200_000_000, 1)},
		// 40 frames 2 s apart: 78 s, more than the 32.767 s a cluster spans.
		{"clusters", webmstream.Track{Codec: "V_VP9", Width: 320, Height: 200, TimecodeScale: 1_000_000, FrameDuration: 2_000_000_000},
			synthGOP(40, 2_000_000_000, 2)},
		{"fine-scale", webmstream.Track{Codec: "V_VP8", Width: 1, Height: 1, TimecodeScale: 1000, FrameDuration: 33_333_333},
			synthGOP(3, 33_333_000, 3)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := webmstream.EncodeGOP(c.tr, c.g)
			if err != nil {
				t.Fatal(err)
			}
			if want := marshalBlob(t, c.tr, c.g); !bytes.Equal(got, want) {
				t.Fatalf("EncodeGOP wrote %d bytes differing from ebml-go's Marshal of the spec (%d bytes)", len(got), len(want))
			}
			var d blobDoc
			if err := ebml.Unmarshal(bytes.NewReader(got), &d); err != nil {
				t.Fatal(err)
			}
			if c.name == "clusters" && (len(d.Segment.Cluster) < 3 || d.Segment.Cluster[0].Timecode != 0) {
				t.Fatalf("%d clusters", len(d.Segment.Cluster))
			}
			dt, dg, err := webmstream.DecodeGOP(got)
			if err != nil {
				t.Fatal(err)
			}
			if !sameTrack(dt, c.tr) {
				t.Fatalf("track %+v, want %+v", dt, c.tr)
			}
			if d := diffGOPs([]webmstream.GOP{dg}, []webmstream.GOP{relative(c.g)}); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestGOPBlobPlaysInFFmpeg(t *testing.T) {
	ff := testenv.RequireFFmpeg(t, "ffmpeg")
	probe := testenv.RequireFFmpeg(t, "ffprobe")
	for _, name := range []string{"vp8", "vp9"} {
		t.Run(name, func(t *testing.T) {
			b := vp8File(t)
			if name == "vp9" {
				b = vp9File(t)
			}
			tr, gops := allGOPs(t, b)
			for _, i := range []int{0, len(gops) / 2, len(gops) - 1} {
				g := gops[i]
				blob, err := webmstream.EncodeGOP(tr, g)
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(t.TempDir(), "gop.webm")
				if err := os.WriteFile(f, blob, 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(probe, "-v", "error", "-count_frames", "-show_entries",
					"stream=codec_name,width,height,nb_read_frames:format=duration", "-of", "default=nw=1", f)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil || stderr.Len() > 0 {
					t.Fatalf("GOP %d: ffprobe: %v\n%s", i, err, stderr.Bytes())
				}
				want := fmt.Sprintf("codec_name=%s\nwidth=320\nheight=200\nnb_read_frames=%d\nduration=%.6f\n",
					map[string]string{"vp8": "vp8", "vp9": "vp9"}[name], len(g.Frames), float64(g.End-g.Frames[0].TS)/1e9)
				if string(out) != want {
					t.Fatalf("GOP %d: ffprobe says\n%s\nwant\n%s", i, out, want)
				}
				dec, err := exec.Command(ff, "-v", "error", "-nostdin", "-i", f, "-f", "null", "-").CombinedOutput()
				if err != nil || len(dec) > 0 {
					t.Fatalf("GOP %d: ffmpeg decoding: %v\n%s", i, err, dec)
				}
			}
		})
	}
}

func TestEncodeGOPRefuses(t *testing.T) {
	tr := webmstream.Track{Codec: "V_VP8", Width: 2, Height: 2, TimecodeScale: 1_000_000}
	ok := synthGOP(3, 200_000_000, 4)
	if _, err := webmstream.EncodeGOP(tr, ok); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(*webmstream.Track, *webmstream.GOP)) (webmstream.Track, webmstream.GOP) {
		t2, g2 := tr, relative(ok)
		f(&t2, &g2)
		return t2, g2
	}
	cases := map[string]func(*webmstream.Track, *webmstream.GOP){
		"codec":       func(t *webmstream.Track, _ *webmstream.GOP) { t.Codec = "V_AV1" },
		"scale":       func(t *webmstream.Track, _ *webmstream.GOP) { t.TimecodeScale = 0 },
		"no frames":   func(_ *webmstream.Track, g *webmstream.GOP) { g.Frames = nil },
		"not key":     func(_ *webmstream.Track, g *webmstream.GOP) { g.Frames[0].Key = false },
		"empty frame": func(_ *webmstream.Track, g *webmstream.GOP) { g.Frames[1].Data = nil },
		"early frame": func(_ *webmstream.Track, g *webmstream.GOP) { g.Frames[2].TS = -1 },
		"early end":   func(_ *webmstream.Track, g *webmstream.GOP) { g.End = -1 },
	}
	for name, f := range cases {
		t2, g2 := mod(f)
		if _, err := webmstream.EncodeGOP(t2, g2); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			var e *webmstream.Error
			if !errors.As(err, &e) {
				t.Errorf("%s: %T", name, err)
			}
		}
	}
}

// ---- hand-built streams ----

type hsBlockGroup struct {
	Block          ebml.Block `ebml:"Block"`
	ReferenceBlock []int64    `ebml:"ReferenceBlock,omitempty"`
}

type hsCluster struct {
	Timecode    uint64         `ebml:"Timecode"`
	BlockGroup  []hsBlockGroup `ebml:"BlockGroup,omitempty"`
	SimpleBlock []ebml.Block   `ebml:"SimpleBlock,omitempty"`
}

type hsStream struct {
	Header  webm.EBMLHeader `ebml:"EBML"`
	Segment struct {
		Info    webm.Info   `ebml:"Info"`
		Tracks  webm.Tracks `ebml:"Tracks"`
		Cluster []hsCluster `ebml:"Cluster"`
	} `ebml:"Segment,size=unknown"`
}

func hsTrack(codec string) webm.TrackEntry {
	return webm.TrackEntry{TrackNumber: 1, TrackUID: 9, CodecID: codec, TrackType: 1,
		DefaultDuration: 200_000_000, Video: &webm.Video{PixelWidth: 64, PixelHeight: 48}}
}

// handStream marshals a live-style stream (unknown-size Segment) with ebml-go.
func handStream(t testing.TB, te webm.TrackEntry, clusters ...hsCluster) []byte {
	t.Helper()
	return handStreamTracks(t, []webm.TrackEntry{te}, clusters...)
}

func handStreamTracks(t testing.TB, te []webm.TrackEntry, clusters ...hsCluster) []byte {
	t.Helper()
	var s hsStream
	s.Header = *webm.DefaultEBMLHeader
	s.Segment.Info = webm.Info{TimecodeScale: 1_000_000, MuxingApp: "test", WritingApp: "test"}
	s.Segment.Tracks.TrackEntry = te
	s.Segment.Cluster = clusters
	var buf bytes.Buffer
	if err := ebml.Marshal(&s, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sb(tc int16, key bool, data ...byte) ebml.Block {
	return ebml.Block{TrackNumber: 1, Timecode: tc, Keyframe: key, Data: [][]byte{data}}
}

func TestBlockGroups(t *testing.T) {
	b := handStream(t, hsTrack("V_VP8"),
		hsCluster{Timecode: 1000, BlockGroup: []hsBlockGroup{
			{Block: sb(0, false, 1, 1)}, // no ReferenceBlock: a keyframe
			{Block: sb(200, false, 2), ReferenceBlock: []int64{-200}},
			{Block: sb(400, false, 3, 3, 3), ReferenceBlock: []int64{-200}},
		}},
		hsCluster{Timecode: 1600, BlockGroup: []hsBlockGroup{
			{Block: sb(0, false, 4)},
		}},
	)
	for _, c := range []chunker{fixed(len(b)), fixed(1), fixed(5)} {
		got := parse(t, b, c)
		if got.err != nil {
			t.Fatal(got.err)
		}
		want := []webmstream.GOP{
			{Frames: []webmstream.Frame{{TS: 1_000_000_000, Key: true, Data: []byte{1, 1}},
				{TS: 1_200_000_000, Data: []byte{2}}, {TS: 1_400_000_000, Data: []byte{3, 3, 3}}}, End: 1_600_000_000},
			{Frames: []webmstream.Frame{{TS: 1_600_000_000, Key: true, Data: []byte{4}}}, End: 1_800_000_000},
		}
		if d := diffGOPs(got.gops, want); d != "" {
			t.Fatal(d)
		}
	}
}

func TestSkipsFramesBeforeFirstKeyframe(t *testing.T) {
	b := handStream(t, hsTrack("V_VP9"),
		hsCluster{Timecode: 0, SimpleBlock: []ebml.Block{sb(0, false, 1), sb(200, false, 2), sb(400, true, 3), sb(600, false, 4)}},
	)
	got := parse(t, b, fixed(3))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.skipped != 2 || len(got.gops) != 1 || len(got.gops[0].Frames) != 2 || got.gops[0].Frames[0].TS != 400_000_000 {
		t.Fatalf("skipped %d, GOPs %+v", got.skipped, got.gops)
	}
}

// ---- errors ----

func TestNotWebM(t *testing.T) {
	// A near miss of the magic is refused once its 4th byte arrives, before
	// any more of the stream.
	p := webmstream.NewParser(webmstream.Limits{})
	for i, c := range []byte{0x1A, 0x45, 0xDF} {
		if _, err := p.Write([]byte{c}); err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
	}
	_, err := p.Write([]byte{0xA4})
	if e := wantCode(t, err, webmstream.CodeNotWebM); e.Offset != 0 {
		t.Fatalf("offset %d", e.Offset)
	}
	// Sticky: the parser stays failed.
	if _, err2 := p.Write([]byte{0}); err2 != err {
		t.Fatalf("after a failure: %v", err2)
	}
	if g, err2 := p.End(); g != nil || err2 != err {
		t.Fatalf("End after a failure: %v %v", g, err2)
	}

	_, err = webmstream.NewParser(webmstream.Limits{}).Write([]byte("GIF89a"))
	wantCode(t, err, webmstream.CodeNotWebM)

	// The right magic but another DocType.
	b := bytes.Clone(vp8File(t))
	i := bytes.Index(b[:64], []byte("webm"))
	copy(b[i:], "SECR")
	got := parse(t, b, fixed(1))
	if e := wantCode(t, got.err, webmstream.CodeNotWebM); e.Offset != 0 || strings.Contains(e.Error(), "SECR") {
		t.Fatalf("%v", e)
	}
}

// cutBlock returns the stream with the last SimpleBlock of cluster k removed
// from byte keep of its element on, and that block's offset.
func cutBlock(t testing.TB, b []byte, k int, keep int64) ([]byte, int64) {
	t.Helper()
	o := oracle(t, b)
	next := o.clusters[k+1]
	var last int64
	for _, f := range o.frames {
		if f.pos < next {
			last = f.pos
		}
	}
	if last+elemLen(t, b, last) != next {
		t.Fatal("the cluster does not end with its last block")
	}
	return append(bytes.Clone(b[:last+keep]), b[next:]...), last
}

func TestTruncatedCluster(t *testing.T) {
	for _, name := range []string{"vp8", "vp8-pipe"} {
		t.Run(name, func(t *testing.T) {
			b := vp8File(t)
			if name == "vp8-pipe" {
				b = vp8Pipe(t)
			}
			full := parse(t, b, fixed(len(b)))
			// The cluster lost its last block: the next Cluster starts
			// where the known-size cluster says a child is.
			cut, at := cutBlock(t, b, 1, 0)
			for _, c := range []chunker{fixed(len(cut)), fixed(1), random(3, 500)} {
				got := parse(t, cut, c)
				e := wantCode(t, got.err, webmstream.CodeTruncated)
				if e.Offset != at || !strings.Contains(e.Msg, "Cluster") {
					t.Fatalf("%v, want the offset %d of the next Cluster", e, at)
				}
			}
			// Cut inside the block: the block's declared size swallows the
			// next cluster's start and the stream breaks down after it.
			cut, at = cutBlock(t, b, 1, 40)
			got := parse(t, cut, random(4, 300))
			var e *webmstream.Error
			if !errors.As(got.err, &e) || (e.Code != webmstream.CodeTruncated && e.Code != webmstream.CodeMalformed) || e.Offset <= at {
				t.Fatalf("cut inside a block: %v", got.err)
			}
			// The GOPs that end before the damaged frame are intact (the
			// damaged frame itself is indistinguishable from a real one).
			var damaged int64
			for _, f := range oracle(t, b).frames {
				if f.pos == at {
					damaged = f.TS
				}
			}
			n := 0
			for n < len(got.gops) && got.gops[n].End <= damaged {
				n++
			}
			if n == 0 && damaged >= full.gops[0].End {
				t.Fatalf("no GOP before the damaged frame at %d ns", damaged)
			}
			if d := diffGOPs(got.gops[:n], full.gops[:n]); d != "" {
				t.Fatalf("GOPs before the cut: %s", d)
			}
		})
	}
}

func TestUnknownCodec(t *testing.T) {
	t.Run("av1", func(t *testing.T) {
		b := encode(t, false, "-f", "lavfi", "-i", "testsrc2=size=64x64:rate=5", "-t", "1", "-c:v", "libaom-av1", "-cpu-used", "8")
		got := parse(t, b, fixed(100))
		e := wantCode(t, got.err, webmstream.CodeUnknownCodec)
		if !strings.Contains(e.Msg, `"V_AV1"`) {
			t.Fatalf("%v does not name the codec", e)
		}
	})
	t.Run("hostile", func(t *testing.T) {
		id := "V_\x01\n<script>" + strings.Repeat("A", 200)
		b := handStream(t, hsTrack(id), hsCluster{SimpleBlock: []ebml.Block{sb(0, true, 1)}})
		got := parse(t, b, fixed(len(b)))
		e := wantCode(t, got.err, webmstream.CodeUnknownCodec)
		if strings.ContainsAny(e.Msg, "\x00\n<>") || len(e.Msg) > 120 || !strings.Contains(e.Msg, `"V_??`) {
			t.Fatalf("codec id not sanitized: %q", e.Msg)
		}
	})
}

func TestTooLarge(t *testing.T) {
	b := vp8File(t)
	o := oracle(t, b)
	t.Run("block", func(t *testing.T) {
		lim := webmstream.Limits{MaxBlock: 4000, MaxGOP: 1 << 20}
		var want int64 = -1
		for _, f := range o.frames {
			if elemLen(t, b, f.pos)-3 > 4000 { // SimpleBlock ID and a 2-byte size
				want = f.pos
				break
			}
		}
		for _, c := range []chunker{fixed(len(b)), fixed(1)} {
			got := feed(t, webmstream.NewParser(lim), b, c, lim)
			if e := wantCode(t, got.err, webmstream.CodeTooLarge); e.Offset != want {
				t.Fatalf("%v, want offset %d", e, want)
			}
		}
	})
	t.Run("gop", func(t *testing.T) {
		lim := webmstream.Limits{MaxBlock: 1 << 20, MaxGOP: 12000}
		// The first block that takes its GOP past 12000 bytes.
		var want int64 = -1
		sum := 0
		for _, f := range o.frames {
			if f.Key {
				sum = 0
			}
			sum += len(f.Data)
			if sum > 12000 {
				want = f.pos
				break
			}
		}
		got := feed(t, webmstream.NewParser(lim), b, fixed(77), lim)
		if e := wantCode(t, got.err, webmstream.CodeTooLarge); e.Offset != want {
			t.Fatalf("%v, want offset %d", e, want)
		}
	})
}

func TestEnd(t *testing.T) {
	b := vp8File(t)
	o := oracle(t, b)
	full := parse(t, b, fixed(len(b)))
	blk := o.frames[13] // inside the second GOP
	t.Run("mid-block", func(t *testing.T) {
		got := parse(t, b[:blk.pos+50], fixed(999))
		e := wantCode(t, got.err, webmstream.CodeTruncated)
		if e.Offset != blk.pos {
			t.Fatalf("%v, want the block's offset %d", e, blk.pos)
		}
		// End still hands out the complete frames of the open GOP.
		if len(got.gops) != 2 || len(got.gops[1].Frames) != 3 ||
			diffGOPs(got.gops[:1], full.gops[:1]) != "" ||
			!bytes.Equal(got.gops[1].Frames[2].Data, full.gops[1].Frames[2].Data) {
			t.Fatalf("GOPs %d", len(got.gops))
		}
	})
	t.Run("mid-header", func(t *testing.T) {
		got := parse(t, b[:blk.pos+1], fixed(999))
		if e := wantCode(t, got.err, webmstream.CodeTruncated); e.Offset != blk.pos {
			t.Fatalf("%v", e)
		}
	})
	t.Run("known-size-cluster", func(t *testing.T) {
		// Between blocks, but the cluster declared more.
		got := parse(t, b[:blk.pos], fixed(999))
		e := wantCode(t, got.err, webmstream.CodeTruncated)
		var cl int64
		for _, c := range o.clusters {
			if c < blk.pos {
				cl = c
			}
		}
		if e.Offset != cl {
			t.Fatalf("%v, want the cluster's offset %d", e, cl)
		}
	})
	t.Run("known-size-segment", func(t *testing.T) {
		got := parse(t, b[:o.clusters[2]], fixed(999))
		if e := wantCode(t, got.err, webmstream.CodeTruncated); e.Offset != o.segment {
			t.Fatalf("%v, want the Segment's offset %d", e, o.segment)
		}
	})
	t.Run("between-clusters-live", func(t *testing.T) {
		p := vp8Pipe(t)
		po := oracle(t, p)
		got := parse(t, p[:po.clusters[2]], fixed(999))
		if got.err != nil {
			t.Fatal(got.err)
		}
		var before []oFrame
		for _, f := range po.frames {
			if f.pos < po.clusters[2] {
				before = append(before, f)
			}
		}
		want, _ := po.gops(before)
		if d := diffGOPs(got.gops, want); d != "" || len(want) == 0 {
			t.Fatal(d)
		}
	})
	t.Run("between-blocks-unknown-cluster", func(t *testing.T) {
		u := unknownSizes(t, b, true)
		got := parse(t, u[:blk.pos], fixed(999))
		if got.err != nil || len(got.gops) != 2 || len(got.gops[1].Frames) != 3 {
			t.Fatalf("%v, %d GOPs", got.err, len(got.gops))
		}
	})
	t.Run("empty", func(t *testing.T) {
		_, err := webmstream.NewParser(webmstream.Limits{}).End()
		wantCode(t, err, webmstream.CodeTruncated)
	})
	t.Run("after-end", func(t *testing.T) {
		p := webmstream.NewParser(webmstream.Limits{})
		if _, err := p.Write(b); err != nil {
			t.Fatal(err)
		}
		if g, err := p.End(); g != nil || err != nil {
			t.Fatalf("End after a complete seekable file: %v %v", g, err)
		}
		_, err := p.Write([]byte{0x1A})
		wantCode(t, err, webmstream.CodeMalformed)
	})
}

func TestAfterTheStream(t *testing.T) {
	// A new EBML stream after a complete known-size Segment, or inside an
	// unknown-size one, is refused: it needs a new Parser.
	for _, b := range [][]byte{vp8File(t), vp8Pipe(t)} {
		two := append(bytes.Clone(b), b...)
		got := parse(t, two, fixed(1000))
		if e := wantCode(t, got.err, webmstream.CodeMalformed); e.Offset != int64(len(b)) {
			t.Fatalf("%v, want offset %d", e, len(b))
		}
		if len(got.gops) < 5 {
			t.Fatalf("%d GOPs before the second stream", len(got.gops))
		}
	}
}

func TestMalformedBlocks(t *testing.T) {
	laced := ebml.Block{TrackNumber: 1, Keyframe: true, Lacing: ebml.LacingXiph, Data: [][]byte{{1, 2}, {3}}}
	other := sb(0, true, 1)
	other.TrackNumber = 2
	cases := map[string][]byte{
		"laced":       handStream(t, hsTrack("V_VP8"), hsCluster{SimpleBlock: []ebml.Block{laced}}),
		"other-track": handStream(t, hsTrack("V_VP8"), hsCluster{SimpleBlock: []ebml.Block{sb(0, true, 1), other}}),
		"backwards":   handStream(t, hsTrack("V_VP8"), hsCluster{Timecode: 500, SimpleBlock: []ebml.Block{sb(0, true, 1), sb(-200, false, 2)}}),
	}
	for name, b := range cases {
		for _, c := range []chunker{fixed(len(b)), fixed(1)} {
			got := parse(t, b, c)
			if e := wantCode(t, got.err, webmstream.CodeMalformed); !strings.Contains(e.Error(), "block") && !strings.Contains(e.Error(), "backwards") {
				t.Fatalf("%s: %v", name, e)
			}
		}
	}
}

// TestErrorsDoNotQuoteStreamBytes plants a marker where each failure is
// found and checks no message repeats it.
func TestErrorsDoNotQuoteStreamBytes(t *testing.T) {
	marker := []byte("SECRETSECRET")
	b := vp8File(t)
	o := oracle(t, b)
	blk := o.frames[5].pos
	var cases [][]byte
	// An unknown element inside the cluster whose size overruns it.
	x := bytes.Clone(b[:blk])
	x = append(x, 0x81, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	x = append(x, marker...)
	cases = append(cases, x)
	// Garbage where an element ID should be.
	cases = append(cases, append(bytes.Clone(b[:blk]), append([]byte{0x00}, marker...)...))
	// A block too large whose data is the marker.
	big := handStream(t, hsTrack("V_VP8"), hsCluster{SimpleBlock: []ebml.Block{sb(0, true, bytes.Repeat(marker, 5000)...)}})
	cases = append(cases, big)
	for i, c := range cases {
		got := feed(t, webmstream.NewParser(webmstream.Limits{MaxBlock: 1000}), c, fixed(64), webmstream.Limits{MaxBlock: 1000, MaxGOP: webmstream.DefaultMaxGOP})
		if got.err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if strings.Contains(got.err.Error(), "SECRET") {
			t.Fatalf("case %d: %v", i, got.err)
		}
	}
}

// ---- Clone: rolling back a refused chunk ----

func TestCloneRollback(t *testing.T) {
	b := vp8File(t)
	o := oracle(t, b)
	whole := parse(t, b, fixed(len(b)))

	// The bad chunk starts at a block boundary with an invalid ID byte.
	at := o.frames[25].pos
	p := webmstream.NewParser(webmstream.Limits{})
	var gops []webmstream.GOP
	g, err := p.Write(b[:at])
	if err != nil {
		t.Fatal(err)
	}
	gops = append(gops, g...)
	snap := p.Clone()
	if _, err := p.Write(append([]byte{0x00}, b[at+1:at+500]...)); err == nil {
		t.Fatal("corrupt chunk accepted")
	} else if e := wantCode(t, err, webmstream.CodeMalformed); e.Offset != at {
		t.Fatalf("%v, want offset %d", e, at)
	}
	rest := feed(t, snap, b[at:], fixed(1000), webmstream.Limits{})
	if rest.err != nil {
		t.Fatal(rest.err)
	}
	if d := diffGOPs(append(gops, rest.gops...), whole.gops); d != "" {
		t.Fatal(d)
	}

	// A chunk that completes a GOP and then fails returns that GOP with the
	// error; the clone emits it again from the corrected chunk.
	key := o.frames[30] // a keyframe
	if !key.Key {
		t.Fatal("frame 30 is not a keyframe")
	}
	from := o.frames[27].pos + 20 // inside a block
	p = webmstream.NewParser(webmstream.Limits{})
	if _, err := p.Write(b[:from]); err != nil {
		t.Fatal(err)
	}
	snap = p.Clone()
	end := key.pos + elemLen(t, b, key.pos)
	bad := append(bytes.Clone(b[from:end]), 0x00)
	g, err = p.Write(bad)
	wantCode(t, err, webmstream.CodeMalformed)
	if len(g) != 1 || diffGOPs(g, whole.gops[2:3]) != "" {
		t.Fatalf("%d GOPs with the error", len(g))
	}
	g2, err := snap.Write(b[from:end])
	if err != nil || diffGOPs(g2, g) != "" {
		t.Fatalf("the clone: %v, %d GOPs", err, len(g2))
	}

	// Clones are independent: what one writes never shows in another's
	// frames, though they share the partial block's buffer and the open
	// GOP's array. Clone inside a block small enough that its buffer is
	// never regrown, with the open GOP's array not full (3 frames).
	mid := o.frames[43].pos + 100
	p = webmstream.NewParser(webmstream.Limits{})
	if _, err := p.Write(b[:mid]); err != nil {
		t.Fatal(err)
	}
	junk, c2 := p.Clone(), p.Clone()
	r1 := feed(t, p, b[mid:], fixed(17), webmstream.Limits{})
	r2 := feed(t, c2, b[mid:], fixed(5000), webmstream.Limits{})
	_, _ = junk.Write(bytes.Repeat([]byte{0xAB}, 5000)) // completes the block with junk, whatever else it does
	if r1.err != nil || r2.err != nil {
		t.Fatal(r1.err, r2.err)
	}
	// Frame 40 started GOP 4; its end is frame 50.
	if d := diffGOPs(r1.gops, whole.gops[4:]); d != "" {
		t.Fatal("original:", d)
	}
	if d := diffGOPs(r2.gops, whole.gops[4:]); d != "" {
		t.Fatal("clone:", d)
	}

	// At a block boundary: the original appends the real frame to the open
	// GOP, then a clone appends another; the original's GOP keeps its own.
	at = o.frames[43].pos
	end = at + elemLen(t, b, at)
	p = webmstream.NewParser(webmstream.Limits{})
	if _, err := p.Write(b[:at]); err != nil {
		t.Fatal(err)
	}
	other := p.Clone()
	if _, err := p.Write(b[at:end]); err != nil {
		t.Fatal(err)
	}
	alt := bytes.Clone(b[at:end])
	for i := len(alt) - 50; i < len(alt); i++ {
		alt[i] ^= 0xFF
	}
	if _, err := other.Write(alt); err != nil {
		t.Fatal(err)
	}
	r3 := feed(t, p, b[end:], fixed(1000), webmstream.Limits{})
	if d := diffGOPs(r3.gops, whole.gops[4:]); r3.err != nil || d != "" {
		t.Fatal("after a clone appended a frame:", r3.err, d)
	}
}

// ---- Resume ----

func TestResume(t *testing.T) {
	for _, s := range allStreams(t)[:3] {
		t.Run(s.name, func(t *testing.T) {
			b := s.b
			o := oracle(t, s.src)
			full := parse(t, b, fixed(len(b)))
			if full.err != nil {
				t.Fatal(full.err)
			}
			// The track as a restarted ingest has it: from the first parser,
			// which saw half the stream.
			first := webmstream.NewParser(webmstream.Limits{})
			if _, err := first.Write(b[:len(b)/2]); err != nil {
				t.Fatal(err)
			}
			tr, ok := first.Track()
			if !ok {
				t.Fatal("no track")
			}
			offs := []int64{1, int64(len(b) / 3), int64(len(b) / 2), o.clusters[2], o.clusters[2] + 1,
				o.frames[33].pos + 7, int64(len(b) - 20)}
			r := rand.New(rand.NewPCG(5, 5))
			for range 5 {
				offs = append(offs, 1+r.Int64N(int64(len(b)-1)))
			}
			for _, off := range offs {
				p := webmstream.Resume(tr, webmstream.Limits{})
				got := feed(t, p, b[off:], random(uint64(off), 800), webmstream.Limits{})
				if got.err != nil {
					t.Fatalf("from %d: %v", off, got.err)
				}
				var after []oFrame
				for _, f := range o.frames {
					if f.pos > off {
						after = append(after, f)
					}
				}
				// Frames from the first Cluster at or after off.
				var cl int64 = -1
				for _, c := range o.clusters {
					if c >= off {
						cl = c
						break
					}
				}
				var from []oFrame
				for _, f := range after {
					if cl >= 0 && f.pos > cl {
						from = append(from, f)
					}
				}
				want, skipped := o.gops(from)
				if d := diffGOPs(got.gops, want); d != "" {
					t.Fatalf("from %d: %s", off, d)
				}
				if got.skipped != skipped {
					t.Fatalf("from %d: skipped %d, want %d", off, got.skipped, skipped)
				}
				if len(want) > 0 && diffGOPs(want, full.gops[len(full.gops)-len(want):]) != "" {
					t.Fatalf("from %d: not a suffix of the full parse", off)
				}
				if p.Offset() != int64(len(b))-off {
					t.Fatalf("from %d: Offset %d", off, p.Offset())
				}
			}
		})
	}
	t.Run("bad-track", func(t *testing.T) {
		_, err := webmstream.Resume(webmstream.Track{Codec: "V_AV1"}, webmstream.Limits{}).Write([]byte{1})
		wantCode(t, err, webmstream.CodeUnknownCodec)
	})
	t.Run("decoy", func(t *testing.T) {
		// Frame data holding a Cluster ID not followed by a Timecode is
		// passed over: the parser locks on the real Cluster after it.
		decoy := []byte{0x1F, 0x43, 0xB6, 0x75, 0x90, 0xA3, 0x81, 0x05, 0x00, 0x11, 0x22}
		b := handStream(t, hsTrack("V_VP8"),
			hsCluster{SimpleBlock: []ebml.Block{sb(0, true, append([]byte{9, 9, 9}, decoy...)...)}},
			hsCluster{Timecode: 200, SimpleBlock: []ebml.Block{sb(0, false, 1), sb(200, true, 2)}})
		at := int64(bytes.Index(b, decoy))
		p := webmstream.Resume(webmstream.Track{Codec: "V_VP8", Width: 64, Height: 48}, webmstream.Limits{})
		got := feed(t, p, b[at-3:], fixed(4), webmstream.Limits{})
		want := []webmstream.GOP{{Frames: []webmstream.Frame{{TS: 400_000_000, Key: true, Data: []byte{2}}}, End: 600_000_000}}
		if d := diffGOPs(got.gops, want); got.err != nil || d != "" || got.skipped != 1 {
			t.Fatalf("%v %s, skipped %d", got.err, d, got.skipped)
		}
	})
	t.Run("false-match", func(t *testing.T) {
		// A frame holding a Cluster header with a Timecode, then a byte no
		// element starts with: the resumed parser locks on it and fails.
		fake := []byte{0x1F, 0x43, 0xB6, 0x75, 0x90, 0xE7, 0x81, 0x05, 0x00, 0x11, 0x22}
		b := handStream(t, hsTrack("V_VP8"),
			hsCluster{SimpleBlock: []ebml.Block{sb(0, true, append([]byte{9, 9, 9}, fake...)...)}},
			hsCluster{Timecode: 200, SimpleBlock: []ebml.Block{sb(0, true, 1)}})
		at := int64(bytes.Index(b, fake))
		p := webmstream.Resume(webmstream.Track{Codec: "V_VP8", Width: 64, Height: 48}, webmstream.Limits{})
		got := feed(t, p, b[at-3:], fixed(4), webmstream.Limits{})
		if e := wantCode(t, got.err, webmstream.CodeMalformed); e.Offset != 3+8 {
			t.Fatalf("%v", e)
		}
	})
}

// ---- bounded memory ----

// longStream writes a live-style stream to fn cluster by cluster: header,
// then gops clusters of 8 frames up to maxFrame bytes, each a GOP if keys
// (else only the first frame is a keyframe), with a large Void (streamed
// past, never held) between some clusters.
func longStream(t testing.TB, gops, maxFrame int, keys bool, fn func([]byte)) (frames [][]byte) {
	t.Helper()
	fn(handStream(t, hsTrack("V_VP8")))
	r := rand.New(rand.NewPCG(7, 7))
	for i := range gops {
		c := hsCluster{Timecode: uint64(i) * 1600}
		for j := range 8 {
			d := make([]byte, 1+r.IntN(maxFrame))
			d[0] = byte(i)
			d[len(d)-1] = byte(j)
			frames = append(frames, d)
			c.SimpleBlock = append(c.SimpleBlock, sb(int16(j*200), j == 0 && (keys || i == 0), d...))
		}
		var buf bytes.Buffer
		if err := ebml.Marshal(&struct {
			Cluster hsCluster `ebml:"Cluster"`
		}{c}, &buf); err != nil {
			t.Fatal(err)
		}
		fn(buf.Bytes())
		if i%10 == 5 {
			void := []byte{0xEC, 0x01, 0, 0, 0, 0, 0x20, 0, 0} // 2 MiB
			fn(append(void, make([]byte, 2<<20)...))
		}
	}
	return frames
}

func TestBoundedMemory(t *testing.T) {
	lim := webmstream.Limits{MaxBlock: 64 << 10, MaxGOP: 512 << 10}
	bound := lim.MaxGOP + lim.MaxBlock + webmstream.HeldOverhead
	p := webmstream.NewParser(lim)
	r := rand.New(rand.NewPCG(8, 8))
	var got []webmstream.GOP
	maxHeld := 0
	total := 0
	frames := longStream(t, 150, 60000, true, func(b []byte) {
		total += len(b)
		for len(b) > 0 {
			n := min(1+r.IntN(3000), len(b))
			g, err := p.Write(b[:n])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, g...)
			b = b[n:]
			maxHeld = max(maxHeld, p.Held())
		}
	})
	g, err := p.End()
	if err != nil || g == nil {
		t.Fatal(g, err)
	}
	got = append(got, *g)
	if maxHeld > bound {
		t.Fatalf("held %d bytes, bound %d", maxHeld, bound)
	}
	if maxHeld < 60000 {
		t.Fatalf("held at most %d bytes: the stream did not exercise the bound", maxHeld)
	}
	if len(got) != 150 || p.Offset() != int64(total) || total < 40<<20 {
		t.Fatalf("%d GOPs of %d bytes", len(got), total)
	}
	i := 0
	for _, g := range got {
		for _, f := range g.Frames {
			if !bytes.Equal(f.Data, frames[i]) {
				t.Fatalf("frame %d differs", i)
			}
			i++
		}
	}

	// A stream whose GOP never ends is refused before it holds more.
	p = webmstream.NewParser(lim)
	var ferr error
	longStream(t, 40, 60000, false, func(b []byte) {
		for len(b) > 0 && ferr == nil {
			n := min(1000, len(b))
			_, ferr = p.Write(b[:n])
			b = b[n:]
			if h := p.Held(); h > bound {
				t.Fatalf("held %d", h)
			}
		}
	})
	wantCode(t, ferr, webmstream.CodeTooLarge)
}

// ---- header elements ----

func TestMalformedHeaders(t *testing.T) {
	vp8 := hsTrack("V_VP8")
	second := hsTrack("V_VP8")
	second.TrackNumber = 2
	audio := hsTrack("A_OPUS")
	audio.TrackType, audio.Video = 2, nil
	notVideo := hsTrack("V_VP8")
	notVideo.TrackType = 2
	noSize := hsTrack("V_VP9")
	noSize.Video = nil
	cluster := hsCluster{SimpleBlock: []ebml.Block{sb(0, true, 1)}}
	withTracks := func(te ...webm.TrackEntry) []byte { return handStreamTracks(t, te, cluster) }
	corrupt := handStream(t, vp8, cluster)
	i := bytes.Index(corrupt, []byte("\x86\x85V_VP8"))
	corrupt[i+1] = 0x9F // the CodecID overruns its TrackEntry
	noTracks := handStream(t, vp8, cluster)
	j := bytes.Index(noTracks, []byte{0x16, 0x54, 0xAE, 0x6B})
	noTracks[j] = 0x12 // Tracks becomes an element the parser skips: Tags
	noTracks[j+1], noTracks[j+2], noTracks[j+3] = 0x54, 0xC3, 0x67

	cases := []struct {
		name, code, msg string
		b               []byte
	}{
		{"two tracks", webmstream.CodeMalformed, "2 tracks", withTracks(vp8, second)},
		{"no track", webmstream.CodeMalformed, "0 tracks", withTracks()},
		{"audio", webmstream.CodeUnknownCodec, `"A_OPUS"`, withTracks(audio)},
		{"not video", webmstream.CodeMalformed, "type 2", withTracks(notVideo)},
		{"no dimensions", webmstream.CodeMalformed, "PixelWidth", withTracks(noSize)},
		{"undecodable", webmstream.CodeMalformed, "does not decode: invalid element size", corrupt},
		{"cluster first", webmstream.CodeMalformed, "before the Tracks", noTracks},
	}
	for _, c := range cases {
		for _, ch := range []chunker{fixed(len(c.b)), fixed(1)} {
			got := parse(t, c.b, ch)
			if e := wantCode(t, got.err, c.code); !strings.Contains(e.Msg, c.msg) {
				t.Fatalf("%s: %v, want a message with %q", c.name, e, c.msg)
			}
		}
	}
}

func TestDecodeGOPRefuses(t *testing.T) {
	tr := webmstream.Track{Codec: "V_VP8", Width: 2, Height: 2, TimecodeScale: 1_000_000}
	blob, err := webmstream.EncodeGOP(tr, synthGOP(3, 200_000_000, 6))
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func([]byte) []byte) []byte { return f(bytes.Clone(blob)) }
	var lastBlock int
	hook := func(e *ebml.Element) {
		if e.Name == "SimpleBlock" {
			lastBlock = max(lastBlock, int(e.Position))
		}
	}
	var d blobDoc
	if err := ebml.Unmarshal(bytes.NewReader(blob), &d, ebml.WithElementReadHooks(hook)); err != nil || blob[lastBlock] != 0xA3 {
		t.Fatal("no last SimpleBlock", err)
	}
	// The first SimpleBlock follows the first Cluster's header and its
	// Timecode 0 (E7 81 00); its flags follow its size, track and offset.
	key := bytes.Index(blob, []byte{0x1F, 0x43, 0xB6, 0x75}) + 4
	for n := 1; ; n++ {
		if blob[key]&(0x80>>(n-1)) != 0 {
			key += n + 3
			break
		}
	}
	if blob[key] != 0xA3 {
		t.Fatal("no SimpleBlock where expected")
	}
	cases := []struct {
		name, code string
		b          []byte
	}{
		{"empty", webmstream.CodeNotWebM, nil},
		{"text", webmstream.CodeNotWebM, []byte("not a webm file")},
		{"truncated", webmstream.CodeTruncated, blob[:len(blob)-10]},
		{"last frame cut off", webmstream.CodeTruncated, blob[:lastBlock]},
		{"trailing bytes", webmstream.CodeMalformed, append(bytes.Clone(blob), 0xEC, 0x80)},
		{"codec", webmstream.CodeUnknownCodec, mod(func(b []byte) []byte {
			i := bytes.Index(b, []byte("V_VP8"))
			b[i+2] = 'X'
			return b
		})},
		{"doctype", webmstream.CodeNotWebM, mod(func(b []byte) []byte {
			i := bytes.Index(b, []byte("webm"))
			b[i] = 'x'
			return b
		})},
		{"first not key", webmstream.CodeMalformed, mod(func(b []byte) []byte {
			n := 1
			for b[key+1]&(0x80>>(n-1)) == 0 {
				n++
			}
			b[key+1+n+3] &^= 0x80
			return b
		})},
	}
	for _, c := range cases {
		_, g, err := webmstream.DecodeGOP(c.b)
		if err == nil {
			t.Fatalf("%s: decoded %d frames", c.name, len(g.Frames))
		}
		wantCode(t, err, c.code)
	}
}
