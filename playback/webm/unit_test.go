package webm

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTimeline(t *testing.T) {
	const ms = int64(time.Millisecond)
	// 2.05 s at 5 fps: 11 frames, the last at 2.0 s.
	slots := timeline(2050*ms, 5, []int64{0, 730 * ms, 1400 * ms, 2050 * ms}, int64(10*time.Second))
	if len(slots) != 11 || slots[9].at != 1800*ms || slots[10].at != 2050*ms-1 || slots[10].ms != 2000 {
		t.Fatalf("slots %+v", slots)
	}
	var got []int64
	for _, s := range slots {
		if s.key {
			got = append(got, s.ms)
		}
	}
	// 0; 730 ms → the frame at 600 ms; 1400 ms is on the grid; 2050 ms
	// is the end: no frame.
	if want := []int64{0, 600, 1400}; !equal(got, want) {
		t.Errorf("keyframes at %v ms, want %v", got, want)
	}

	// The interval: at 5 fps, keyframes every 2 s are every 10 frames,
	// counted from the last keyframe whatever made it one.
	slots = timeline(10*int64(time.Second), 5, []int64{3100 * ms}, int64(2*time.Second))
	got = got[:0]
	for _, s := range slots {
		if s.key {
			got = append(got, s.ms)
		}
	}
	if want := []int64{0, 2000, 3000, 5000, 7000, 9000}; !equal(got, want) {
		t.Errorf("keyframes at %v ms, want %v", got, want)
	}
	if f := forceKeyFrames(slots, 5); f != "0.000000,2.000000,3.000000,5.000000,7.000000,9.000000" {
		t.Errorf("-force_key_frames %q", f)
	}

	// A rate that does not divide a second: times round down to the µs.
	slots = timeline(int64(time.Second), 3, nil, int64(time.Second)/3)
	if f := forceKeyFrames(slots, 3); f != "0.000000,0.333333,0.666666" {
		t.Errorf("-force_key_frames at 3 fps %q", f)
	}

	// Absurdly many chapters: the list is thinned to fit one argument.
	var starts []int64
	for i := range 40_000 {
		starts = append(starts, int64(i)*int64(time.Second))
	}
	slots = timeline(40_000*int64(time.Second), 5, starts, int64(10*time.Second))
	if f := forceKeyFrames(slots, 5); len(f) > maxForceArg || !slots[0].key || strings.Count(f, ",") < 1000 {
		t.Errorf("thinned list: %d bytes, %d keyframes", len(f), strings.Count(f, ",")+1)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestChapterAtoms(t *testing.T) {
	const s = int64(time.Second)
	chapters := []Chapter{
		{Step: 3, Title: "third", Start: t0 + 5*s, End: t0 + 9*s},
		{Step: 1, Title: "", Start: t0 - s, End: 0}, // before the start, unfinished
		{Step: 2, Title: "bad\x00utf8 \xff", Start: t0 + 2*s, End: t0 + 99*s},
	}
	atoms, starts := chapterAtoms(chapters, t0, 8*s)
	if len(atoms) != 3 || !equal(starts, []int64{0, 2 * s, 5 * s}) {
		t.Fatalf("atoms %+v starts %v", atoms, starts)
	}
	want := []struct {
		start, end int64
		title      string
	}{{0, 2 * s, "Step 1"}, {2 * s, 8 * s, "badutf8 \uFFFD"}, {5 * s, 8 * s, "third"}}
	for i, a := range atoms {
		w := want[i]
		if a.ChapterUID != uint64(i+1) || a.ChapterTimeStart != uint64(w.start) || a.ChapterTimeEnd != uint64(w.end) ||
			a.ChapterDisplay[0].ChapString != w.title || a.ChapterDisplay[0].ChapLanguage != "eng" {
			t.Errorf("atom %d: %+v, want %+v", i, a, w)
		}
	}
}

func TestCursorSprite(t *testing.T) {
	sprite, probe := cursorImage()
	// The probe point is well inside the fill.
	c := sprite.RGBAAt(probe.X+cursorMargin, probe.Y+cursorMargin)
	if c != (color.RGBA{cursorFill.R, cursorFill.G, cursorFill.B, 255}) {
		t.Errorf("probe point %v is %v", probe, c)
	}
	// The tip is at the margin: the pixel just below-right of it is
	// drawn (outline), the one above-left is not.
	if sprite.RGBAAt(cursorMargin, cursorMargin+1).A < 200 || sprite.RGBAAt(0, 0).A != 0 {
		t.Errorf("tip: %v, corner: %v", sprite.RGBAAt(cursorMargin, cursorMargin+1), sprite.RGBAAt(0, 0))
	}
	if b := sprite.Bounds(); b.Dy() < 24 || b.Dy() > 40 {
		t.Errorf("cursor %v tall", b.Dy())
	}
}

func TestCompose(t *testing.T) {
	canvas := image.NewRGBA(image.Rect(0, 0, 100, 80))
	solid := func(w, h int, c color.RGBA) *image.RGBA {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := 0; i < len(m.Pix); i += 4 {
			copy(m.Pix[i:], []byte{c.R, c.G, c.B, c.A})
		}
		return m
	}
	black := color.RGBA{0, 0, 0, 255}
	// Same size: copied.
	compose(canvas, solid(100, 80, red), nil)
	if canvas.RGBAAt(99, 79) != red {
		t.Errorf("same size: %v", canvas.RGBAAt(99, 79))
	}
	// Smaller: top left, black around.
	compose(canvas, solid(90, 70, green), nil)
	if canvas.RGBAAt(89, 69) != green || canvas.RGBAAt(95, 20) != black || canvas.RGBAAt(20, 75) != black {
		t.Errorf("smaller: %v %v %v", canvas.RGBAAt(89, 69), canvas.RGBAAt(95, 20), canvas.RGBAAt(20, 75))
	}
	// Larger: scaled to fit (200×100 → 100×50), cursor scaled with it.
	big := solid(200, 100, blue)
	cur := image.Pt(100, 50)
	compose(canvas, big, &cur)
	if canvas.RGBAAt(10, 40) != blue || canvas.RGBAAt(10, 60) != black {
		t.Errorf("larger: %v %v", canvas.RGBAAt(10, 40), canvas.RGBAAt(10, 60))
	}
	_, probe := cursorImage()
	fill := color.RGBA{cursorFill.R, cursorFill.G, cursorFill.B, 255}
	if p := image.Pt(50, 25).Add(probe); canvas.RGBAAt(p.X, p.Y) != fill {
		t.Errorf("scaled cursor: %v at %v", canvas.RGBAAt(p.X, p.Y), p)
	}
	if cur != image.Pt(100, 50) {
		t.Errorf("compose changed the frame's cursor to %v", cur)
	}
	// Odd sizes are made even.
	if w, h, err := canvasSize(1279, 801); err != nil || w != 1280 || h != 802 {
		t.Errorf("canvasSize: %d×%d, %v", w, h, err)
	}
	if _, _, err := canvasSize(20000, 10); err == nil {
		t.Error("canvasSize accepted 20000 px")
	}
}

// ivfStream is an IVF file of the given frames.
func ivfStream(frames ...[]byte) []byte {
	var b bytes.Buffer
	h := make([]byte, 32)
	copy(h, "DKIF")
	binary.LittleEndian.PutUint16(h[6:], 32)
	copy(h[8:], "VP80")
	binary.LittleEndian.PutUint16(h[12:], 64)
	binary.LittleEndian.PutUint16(h[14:], 48)
	b.Write(h)
	for i, f := range frames {
		fh := make([]byte, 12)
		binary.LittleEndian.PutUint32(fh, uint32(len(f)))
		binary.LittleEndian.PutUint64(fh[4:], uint64(i))
		b.Write(fh)
		b.Write(f)
	}
	return b.Bytes()
}

func TestIVF(t *testing.T) {
	s := ivfStream([]byte{0x10, 1, 2}, []byte{0x11, 3})
	r, err := newIVFReader(bytes.NewReader(s))
	if err != nil || r.fourcc != "VP80" || r.width != 64 || r.height != 48 {
		t.Fatalf("header: %+v, %v", r, err)
	}
	for i, want := range []bool{true, false} {
		pts, data, err := r.next()
		if err != nil || pts != int64(i) || vp8Keyframe(data) != want {
			t.Errorf("frame %d: pts %d key %v, %v", i, pts, vp8Keyframe(data), err)
		}
	}
	if _, _, err := r.next(); err != io.EOF {
		t.Errorf("end: %v", err)
	}
	// Truncated anywhere: an error, and never io.EOF before the end of a
	// frame's header.
	for n := range len(s) {
		r, err := newIVFReader(bytes.NewReader(s[:n]))
		if n < 32 {
			if err == nil {
				t.Errorf("%d bytes: header accepted", n)
			}
			continue
		}
		var last error
		for last == nil {
			_, _, last = r.next()
		}
		clean := n == 32 || n == 32+12+3 || n == len(s)
		if (last == io.EOF) != clean {
			t.Errorf("%d bytes: %v", n, last)
		}
	}
	if _, err := newIVFReader(strings.NewReader(strings.Repeat("x", 40))); err == nil {
		t.Error("no signature accepted")
	}
}

// writeFake writes a WebM with the muxer and made-up frames: the
// container, without ffmpeg.
func writeFake(t testing.TB, nframes int, chapters []chapterAtom) []byte {
	t.Helper()
	mx, err := newMuxer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer mx.close()
	for i := range nframes {
		key := i%7 == 0
		frame := bytes.Repeat([]byte{byte(i)}, 50+i%13)
		if key {
			frame[0] = 0x10
		} else {
			frame[0] = 0x11
		}
		if err := mx.add(int64(i)*200, key, frame); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	n, err := mx.finish(&b, head{width: 64, height: 48, fps: 5, durationNS: int64(nframes) * 200e6, chapters: chapters})
	if err != nil || n != int64(b.Len()) {
		t.Fatalf("finish: %d of %d bytes, %v", n, b.Len(), err)
	}
	return b.Bytes()
}

func TestMuxProbeRoundTrip(t *testing.T) {
	atoms := []chapterAtom{
		{ChapterUID: 1, ChapterTimeStart: 0, ChapterTimeEnd: 1_400_000_000, ChapterDisplay: []chapterDisplay{{"one", "eng"}}},
		{ChapterUID: 2, ChapterTimeStart: 1_400_000_000, ChapterTimeEnd: 200_000_000_000, ChapterDisplay: []chapterDisplay{{"two", "eng"}}},
	}
	// 1000 frames, a keyframe every 7: a cluster and a cue each.
	data := writeFake(t, 1000, atoms)
	info, err := Probe(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if info.Blocks != 1000 || info.Keyframes != 143 || len(info.Clusters) != 143 || len(info.Cues) != 143 ||
		info.Duration != 200*time.Second || info.LastBlock != 999*200*time.Millisecond || len(info.Chapters) != 2 ||
		info.Chapters[1].Title != "two" || info.Width != 64 || info.Height != 48 {
		t.Errorf("info: blocks %d keys %d clusters %d cues %d dur %v last %v chapters %+v",
			info.Blocks, info.Keyframes, len(info.Clusters), len(info.Cues), info.Duration, info.LastBlock, info.Chapters)
	}
	for i, q := range info.Cues {
		c := info.Clusters[i]
		if q.ClusterPosition != c.Position || q.Time != c.Time || !c.Keyframe {
			t.Errorf("cue %d %+v, cluster %+v", i, q, c)
		}
	}

	// A long run without keyframes: clusters are cut every 30 s so block
	// timestamps stay within 16 bits; those clusters get no cue.
	mx, err := newMuxer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer mx.close()
	for i := range 500 { // 100 s
		if err := mx.add(int64(i)*200, i == 0, []byte{byte(0x10 | min(i, 1)), 0}); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := mx.finish(&b, head{width: 64, height: 48, fps: 5, durationNS: 100e9}); err != nil {
		t.Fatal(err)
	}
	info, err = Probe(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Clusters) != 4 || len(info.Cues) != 1 || info.Blocks != 500 || info.LastBlock != 99800*time.Millisecond || info.Chapters != nil {
		t.Errorf("long run: %d clusters, %d cues, %d blocks, last %v", len(info.Clusters), len(info.Cues), info.Blocks, info.LastBlock)
	}
	for _, e := range info.Layout {
		if e.Name == "Chapters" {
			t.Error("a Chapters element without chapters")
		}
	}
}

func TestProbeRejects(t *testing.T) {
	data := writeFake(t, 30, nil)
	cases := map[string][]byte{
		"empty":   nil,
		"garbage": []byte(strings.Repeat("garbage!", 100)),
		"zeros":   make([]byte, 1000),
		"header only": func() []byte {
			b, _ := marshalElement("EBML", ebmlHeader{DocType: "webm"})
			return b
		}(),
		"other doctype": func() []byte {
			b := bytes.Clone(data)
			i := bytes.Index(b, []byte("webm"))
			copy(b[i:], "xxxx")
			return b
		}(),
	}
	for n := 1; n < len(data); n += 1 + n/3 {
		cases["truncated to "+strconv.Itoa(n)] = data[:n]
	}
	for name, b := range cases {
		if _, err := Probe(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzProbe: whatever the bytes, Probe answers (an error or an Info), and
// never panics or allocates past the input's size.
func FuzzProbe(f *testing.F) {
	f.Add(writeFake(f, 20, []chapterAtom{{ChapterUID: 1, ChapterTimeEnd: 1e9, ChapterDisplay: []chapterDisplay{{"a", "eng"}}}}))
	f.Add(writeFake(f, 3, nil)[:100])
	f.Add([]byte{0x1A, 0x45, 0xDF, 0xA3, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Probe(bytes.NewReader(b), int64(len(b)))
		if err == nil && info.DocType == "" {
			t.Errorf("accepted without a doc type: %+v", info)
		}
	})
}
