package redact

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/policy"
)

// requireFFmpeg is internal/testenv.RequireFFmpeg, which this package's
// tests cannot import: testenv imports ingest, which imports redact (an
// import cycle in package redact's tests; and an external test package
// would not build while ingest does not). Same behaviour: skipped on a
// developer's machine without ffmpeg, failed in CI.
func requireFFmpeg(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("ffmpeg")
	if err != nil {
		msg := "ffmpeg not found on $PATH (apt-get install ffmpeg)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

const (
	gopBase = int64(1764483600_000_000_000)
	gopStep = int64(200 * time.Millisecond) // 5 fps
)

// gopTimes is n frames at 5 fps from gopBase, and when the last stops.
func gopTimes(n int) ([]int64, int64) {
	times := make([]int64, n)
	for i := range times {
		times[i] = gopBase + int64(i)*gopStep
	}
	return times, gopBase + int64(n)*gopStep
}

var testEncoders = map[string]string{"V_VP8": "libvpx", "V_VP9": "libvpx-vp9"}

// makeGOP encodes testsrc2 with a white box (text on it) at box as one
// GOP: a WebM file whose only keyframe is its first frame.
func makeGOP(t testing.TB, ffmpeg, codec string, w, h, secs int, box image.Rectangle) VideoGOP {
	t.Helper()
	file := filepath.Join(t.TempDir(), "gop.webm")
	white := fmt.Sprintf("drawbox=x=%d:y=%d:w=%d:h=%d:color=white@1:t=fill", box.Min.X, box.Min.Y, box.Dx(), box.Dy())
	texts := []string{
		// text, when Debian's ffmpeg finds a font …
		fmt.Sprintf("drawtext=text=hunter2:x=%d:y=%d:fontsize=%d:fontcolor=black", box.Min.X+4, box.Min.Y+4, box.Dy()/3),
		// … or a dark bar standing in for it
		fmt.Sprintf("drawbox=x=%d:y=%d:w=%d:h=%d:color=0x800000@1:t=fill", box.Min.X+4, box.Min.Y+4, box.Dx()/2, box.Dy()/4),
	}
	var out []byte
	var err error
	for _, text := range texts {
		cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-y",
			"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=s=%dx%d:r=5:d=%d", w, h, secs),
			"-vf", white+","+text, "-c:v", testEncoders[codec], "-g", "1000", "-b:v", "2M",
			"-deadline", "realtime", "-cpu-used", "8", "-f", "webm", file)
		if out, err = cmd.CombinedOutput(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("making a test GOP: %v: %s", err, out)
	}
	webm, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	times, end := gopTimes(5 * secs)
	return VideoGOP{Codec: codec, Width: w, Height: h, WebM: webm, Times: times, End: end}
}

// writeIVF wraps frames as IVF, 5 fps.
func writeIVF(codec string, w, h int, frames [][]byte) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	hdr := make([]byte, 32)
	copy(hdr, "DKIF")
	le.PutUint16(hdr[6:], 32)
	copy(hdr[8:], map[string]string{"V_VP8": "VP80", "V_VP9": "VP90"}[codec])
	le.PutUint16(hdr[12:], uint16(w))
	le.PutUint16(hdr[14:], uint16(h))
	le.PutUint32(hdr[16:], 5)
	le.PutUint32(hdr[20:], 1)
	le.PutUint32(hdr[24:], uint32(len(frames)))
	b.Write(hdr)
	for i, f := range frames {
		fh := make([]byte, 12)
		le.PutUint32(fh, uint32(len(f)))
		le.PutUint64(fh[4:], uint64(i))
		b.Write(fh)
		b.Write(f)
	}
	return b.Bytes()
}

// decodeRGB decodes a WebM or IVF stream to rgb24 frames.
func decodeRGB(t testing.TB, ffmpeg, format string, stream []byte, w, h int) [][]byte {
	t.Helper()
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-xerror", "-f", format, "-i", "pipe:0",
		"-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	cmd.Stdin = bytes.NewReader(stream)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("decoding %s: %v: %s", format, err, stderr.Bytes())
	}
	size := w * h * 3
	if len(raw)%size != 0 {
		t.Fatalf("decoded %d bytes, not whole %dx%d frames", len(raw), w, h)
	}
	var frames [][]byte
	for off := 0; off < len(raw); off += size {
		frames = append(frames, raw[off:off+size])
	}
	return frames
}

// rgbIn calls f with each pixel of r in an rgb24 frame w wide.
func rgbIn(frame []byte, w int, r image.Rectangle, f func(x, y int, c [3]byte)) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			o := (y*w + x) * 3
			f(x, y, [3]byte{frame[o], frame[o+1], frame[o+2]})
		}
	}
}

// whiteShare is the share of r's pixels that are near white.
func whiteShare(frame []byte, w int, r image.Rectangle) float64 {
	white := 0
	rgbIn(frame, w, r, func(_, _ int, c [3]byte) {
		if c[0] > 200 && c[1] > 200 && c[2] > 200 {
			white++
		}
	})
	return float64(white) / float64(r.Dx()*r.Dy())
}

var (
	testBox  = image.Rect(100, 60, 220, 110) // the white box
	testMask = event.Rect{X: 100, Y: 60, W: 120, H: 50}
	// testBlocks is testMask rounded out to 16-px blocks.
	testBlocks = image.Rect(96, 48, 224, 112)
)

// checkMasked decodes a redacted GOP and checks, frame by frame, that the
// mask is black exactly in the covered frames, the box shows in the
// others, and the picture outside the painted blocks is the input's.
func checkMasked(t *testing.T, ffmpeg string, g VideoGOP, res VideoResult, covered func(i int) bool) {
	t.Helper()
	if res.Drop || len(res.Frames) != len(g.Times) {
		t.Fatalf("got drop=%v, %d frames for a GOP of %d (%+v)", res.Drop, len(res.Frames), len(g.Times), res.Findings)
	}
	if !isKeyframe(g.Codec, res.Frames[0]) {
		t.Error("frame 0 is not a keyframe")
	}
	// Frame 0 alone decodes: it is a keyframe in fact, not only in name.
	if first := decodeRGB(t, ffmpeg, "ivf", writeIVF(g.Codec, g.Width, g.Height, res.Frames[:1]), g.Width, g.Height); len(first) != 1 {
		t.Errorf("frame 0 alone decodes to %d frames", len(first))
	}
	got := decodeRGB(t, ffmpeg, "ivf", writeIVF(g.Codec, g.Width, g.Height, res.Frames), g.Width, g.Height)
	orig := decodeRGB(t, ffmpeg, "webm", g.WebM, g.Width, g.Height)
	if len(got) != len(g.Times) || len(orig) != len(g.Times) {
		t.Fatalf("decoded %d redacted and %d original frames, want %d", len(got), len(orig), len(g.Times))
	}
	mask := image.Rect(testMask.X, testMask.Y, testMask.X+testMask.W, testMask.Y+testMask.H)
	nCovered := 0
	for i, f := range got {
		if share := whiteShare(orig[i], g.Width, testBox); share < 0.4 {
			t.Fatalf("test input: frame %d's box is only %.0f%% white", i, share*100)
		}
		if covered(i) {
			nCovered++
			bad := 0
			rgbIn(f, g.Width, mask, func(x, y int, c [3]byte) {
				if c[0] > 16 || c[1] > 16 || c[2] > 16 {
					if bad++; bad <= 3 {
						t.Errorf("%s frame %d: pixel (%d,%d) in the mask is %v, not black", g.Codec, i, x, y, c)
					}
				}
			})
			if bad > 3 {
				t.Errorf("%s frame %d: %d pixels in the mask are not black", g.Codec, i, bad)
			}
		} else if share := whiteShare(f, g.Width, testBox); share < 0.35 {
			t.Errorf("%s frame %d is not covered, yet only %.0f%% of its box is white", g.Codec, i, share*100)
		}
		// Outside the painted blocks the picture is the input's, give or
		// take lossy re-encoding.
		var diff, n int
		for y := 0; y < g.Height; y++ {
			for x := 0; x < g.Width; x++ {
				if (image.Point{X: x, Y: y}).In(testBlocks) {
					continue
				}
				for c := 0; c < 3; c++ {
					d := int(f[(y*g.Width+x)*3+c]) - int(orig[i][(y*g.Width+x)*3+c])
					diff += max(d, -d)
					n++
				}
			}
		}
		if mean := float64(diff) / float64(n); mean > 6 {
			t.Errorf("%s frame %d differs from the input outside the mask by %.1f on average", g.Codec, i, mean)
		}
	}
	if nCovered == 0 || nCovered == len(got) {
		t.Fatalf("test: %d of %d frames covered; want some, not all", nCovered, len(got))
	}
}

func videoEvent(t testing.TB, seq uint64, masks []event.TimedRect) *event.Decoded {
	data := obj{"mime": "video/webm", "stream_start_ts": gopBase, "masks": masks}
	return decoded(t, seq, event.KindVideo, mustJSON(t, data))
}

func newVideoRedactor(t testing.TB) *Redactor {
	t.Helper()
	r, err := New(testPlan(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRedactGOPPaintsMasks(t *testing.T) {
	ffmpeg := requireFFmpeg(t)
	for _, codec := range []string{"V_VP8", "V_VP9"} {
		t.Run(codec, func(t *testing.T) {
			g := makeGOP(t, ffmpeg, codec, 320, 200, 3, testBox)
			r := newVideoRedactor(t)
			// Frames 5 to 9: from inside frame 5 to inside frame 9.
			m := event.TimedRect{Rect: testMask, FromTS: g.Times[5] + 50e6, ToTS: g.Times[9] + 10e6}
			res, err := r.Redact(videoEvent(t, 1, []event.TimedRect{m}))
			if err != nil || res.Changed() || res.Findings != nil {
				t.Fatalf("the video event: %+v, %v; want stored unchanged", res, err)
			}
			var logs []string
			r.Video.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
			vr, err := r.RedactGOP(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			if len(logs) > 0 {
				t.Errorf("ffmpeg complained: %q", logs)
			}
			want := []Finding{{Rule: "video:mask", Channel: "video"}}
			if !slices.Equal(vr.Findings, want) {
				t.Errorf("findings %+v, want %+v", vr.Findings, want)
			}
			checkMasked(t, ffmpeg, g, vr, func(i int) bool { return i >= 5 && i <= 9 })
		})
	}
}

func TestRedactGOPKeptWithoutMask(t *testing.T) {
	ffmpeg := requireFFmpeg(t)
	g := makeGOP(t, ffmpeg, "V_VP8", 320, 200, 1, testBox)
	r := newVideoRedactor(t)
	masks := []event.TimedRect{
		{Rect: testMask, FromTS: gopBase - 10e9, ToTS: g.Times[0] - 1}, // ends just before
		{Rect: testMask, FromTS: g.End, ToTS: g.End + 10e9},            // starts as the GOP stops showing
	}
	if _, err := r.Redact(videoEvent(t, 1, masks)); err != nil {
		t.Fatal(err)
	}
	res, err := r.RedactGOP(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if res.Drop || res.Frames != nil || res.Findings != nil {
		t.Errorf("no mask overlaps: %+v, want kept as received", res)
	}
}

func TestRedactGOPDropsUnmaskedWhileMaskedFieldShows(t *testing.T) {
	rc := newRecorder(t, nil)
	times, end := gopTimes(5)
	g := VideoGOP{Codec: "V_VP8", Width: 320, Height: 200, WebM: []byte("\x1a\x45\xdf\xa3not parsed"), Times: times, End: end}
	if res, err := rc.r.RedactGOP(context.Background(), g); err != nil || res.Drop || res.Frames != nil {
		t.Fatalf("no masked field: %+v, %v; want kept", res, err)
	}
	rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	res, err := rc.r.RedactGOP(context.Background(), g)
	want := []Finding{{Rule: "video:dropped-unmasked", Channel: "video"}}
	if err != nil || !res.Drop || !slices.Equal(res.Findings, want) {
		t.Errorf("masked field on the page: %+v, %v; want dropped", res, err)
	}
	rc2 := newRecorder(t, func(p *policy.Plan) { p.DropUnmaskedFrames = false })
	rc2.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	if res, err := rc2.r.RedactGOP(context.Background(), g); err != nil || res.Drop {
		t.Errorf("plan keeps unmasked frames: %+v, %v", res, err)
	}
}

func TestRedactGOPUnmaskableWithoutFFmpeg(t *testing.T) {
	times, end := gopTimes(5)
	g := VideoGOP{Codec: "V_VP8", Width: 320, Height: 200, WebM: []byte("\x1a\x45\xdf\xa3"), Times: times, End: end}
	r := newVideoRedactor(t)
	r.Video.FFmpeg = filepath.Join(t.TempDir(), "no-ffmpeg-here")
	if _, err := r.Redact(videoEvent(t, 1, []event.TimedRect{{Rect: testMask, FromTS: times[2], ToTS: times[2]}})); err != nil {
		t.Fatal(err)
	}
	res, err := r.RedactGOP(context.Background(), g)
	want := []Finding{{Rule: "video:unmaskable", Channel: "video"}}
	if err != nil || !res.Drop || res.Frames != nil || !slices.Equal(res.Findings, want) {
		t.Errorf("no ffmpeg: %+v, %v; want dropped as unmaskable", res, err)
	}
	// Without a configured binary, "ffmpeg" on $PATH: none there either.
	r.Video.FFmpeg = ""
	t.Run("none on PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		if res, err := r.RedactGOP(context.Background(), g); err != nil || !res.Drop || !slices.Equal(res.Findings, want) {
			t.Errorf("no ffmpeg on $PATH: %+v, %v", res, err)
		}
	})
	// A codec ffmpeg is not asked to encode.
	g.Codec = "V_AV1"
	if res, err := r.RedactGOP(context.Background(), g); err != nil || !res.Drop || !slices.Equal(res.Findings, want) {
		t.Errorf("AV1: %+v, %v", res, err)
	}
}

func TestRedactGOPUndecodable(t *testing.T) {
	requireFFmpeg(t)
	times, end := gopTimes(5)
	const marker = "PIXELS-NOT-FOR-LOGS"
	garbage := []byte("\x1a\x45\xdf\xa3\x9f" + strings.Repeat(marker, 200))
	r := newVideoRedactor(t)
	var logs []string
	r.Video.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	if _, err := r.Redact(videoEvent(t, 1, []event.TimedRect{{Rect: testMask, FromTS: times[0], ToTS: end}})); err != nil {
		t.Fatal(err)
	}
	want := []Finding{{Rule: "video:undecodable", Channel: "video"}}
	for _, codec := range []string{"V_VP8", "V_VP9"} {
		g := VideoGOP{Codec: codec, Width: 320, Height: 200, WebM: garbage, Times: times, End: end}
		res, err := r.RedactGOP(context.Background(), g)
		if err != nil || !res.Drop || res.Frames != nil || !slices.Equal(res.Findings, want) {
			t.Errorf("%s garbage: %+v, %v; want dropped as undecodable", codec, res, err)
		}
	}
	if len(logs) == 0 {
		t.Error("ffmpeg's failure was not logged")
	}
	for _, l := range logs {
		if strings.Contains(l, "PIXELS") {
			t.Errorf("a log line carries stream bytes: %q", l)
		}
	}
}

func TestRedactGOPFrameCountMismatchDrops(t *testing.T) {
	ffmpeg := requireFFmpeg(t)
	g := makeGOP(t, ffmpeg, "V_VP8", 320, 200, 1, testBox)
	r := newVideoRedactor(t)
	if _, err := r.Redact(videoEvent(t, 1, []event.TimedRect{{Rect: testMask, FromTS: g.Times[0], ToTS: g.End}})); err != nil {
		t.Fatal(err)
	}
	// Ingest says the GOP has one frame more than the blob holds.
	g.Times = append(g.Times, g.End)
	g.End += gopStep
	res, err := r.RedactGOP(context.Background(), g)
	want := []Finding{{Rule: "video:undecodable", Channel: "video"}}
	if err != nil || !res.Drop || !slices.Equal(res.Findings, want) {
		t.Errorf("frame count differs: %+v, %v; want dropped", res, err)
	}
}

func TestObserveRebuildsVideoMasks(t *testing.T) {
	ffmpeg := requireFFmpeg(t)
	g := makeGOP(t, ffmpeg, "V_VP8", 320, 200, 2, testBox)
	m := event.TimedRect{Rect: testMask, FromTS: g.Times[3], ToTS: g.Times[6]}
	first := newVideoRedactor(t)
	d := videoEvent(t, 7, []event.TimedRect{m})
	res, err := first.Redact(d)
	if err != nil || res.Changed() {
		t.Fatalf("%+v, %v", res, err)
	}
	stored := d.Data // unchanged: what the log holds

	restarted := newVideoRedactor(t)
	restarted.Observe(event.KindDOM, fullSnapshot(t, page()))
	restarted.Observe(event.KindVideo, stored)
	vr, err := restarted.RedactGOP(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	checkMasked(t, ffmpeg, g, vr, func(i int) bool { return i >= 3 && i <= 6 })

	// Without the stored event the same GOP would be kept: the masks came
	// from Observe.
	if res, err := newVideoRedactor(t).RedactGOP(context.Background(), g); err != nil || res.Frames != nil || res.Drop {
		t.Errorf("a redactor that observed nothing: %+v, %v", res, err)
	}
	// Stored data that cannot be read leaves the masks unknown: fail closed.
	broken := newVideoRedactor(t)
	broken.Observe(event.KindVideo, []byte(`{"masks":"?"}`))
	if res, err := broken.RedactGOP(context.Background(), g); err != nil || !res.Drop {
		t.Errorf("masks lost: %+v, %v; want dropped", res, err)
	}
}

func TestVideoMasksApplying(t *testing.T) {
	times, end := gopTimes(5) // frames show at 0, 200, 400, 600, 800 ms; end 1000 ms
	ms := func(v int64) int64 { return gopBase + v*1e6 }
	for _, c := range []struct {
		name     string
		from, to int64
		want     []frameRun
	}{
		{"before", ms(-500), ms(0) - 1, nil},
		{"touches the first frame's start", ms(-500), ms(0), []frameRun{{0, 0}}},
		{"instant inside frame 1", ms(300), ms(300), []frameRun{{1, 1}}},
		{"ends at frame 2's start", ms(100), ms(400), []frameRun{{0, 2}}},
		{"starts at frame 2's start", ms(400), ms(500), []frameRun{{2, 2}}},
		{"starts just before frame 2", ms(400) - 1, ms(400) - 1, []frameRun{{1, 1}}},
		{"last frame until end", ms(999), ms(5000), []frameRun{{4, 4}}},
		{"starts at end", ms(1000), ms(5000), nil},
		{"whole GOP", ms(-1), ms(2000), []frameRun{{0, 4}}},
	} {
		var v videoMasks
		if err := v.add([]event.TimedRect{{Rect: testMask, FromTS: c.from, ToTS: c.to}}, true); err != nil {
			t.Fatal(err)
		}
		var got []frameRun
		for _, a := range v.applying(times, end) {
			got = append(got, a.runs...)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: runs %v, want %v", c.name, got, c.want)
		}
	}
	// Frames at the same time (an empty interval) count as that instant.
	same := []int64{ms(0), ms(200), ms(200), ms(400)}
	var v videoMasks
	v.add([]event.TimedRect{{Rect: testMask, FromTS: ms(200), ToTS: ms(200)}}, true)
	if a := v.applying(same, ms(600)); len(a) != 1 || !slices.Equal(a[0].runs, []frameRun{{1, 2}}) {
		t.Errorf("same-time frames: %+v", a)
	}
}

func TestVideoBoxes(t *testing.T) {
	applied := []appliedMask{
		{rect: testMask, runs: []frameRun{{0, 2}}},
		{rect: event.Rect{X: 101, Y: 61, W: 118, H: 48}, runs: []frameRun{{3, 4}, {8, 9}}}, // same blocks
		{rect: event.Rect{X: 300, Y: 190, W: 100, H: 100}, runs: []frameRun{{1, 1}}},       // clipped
		{rect: event.Rect{X: -50, Y: -50, W: 20, H: 20}, runs: []frameRun{{0, 9}}},         // off the frame
		{rect: event.Rect{X: 1 << 62, Y: 0, W: 1 << 62, H: 10}, runs: []frameRun{{0, 9}}},  // off, no overflow
	}
	got := videoBoxes(applied, 320, 200)
	want := []box{
		{x: 96, y: 48, w: 128, h: 64, run: frameRun{0, 4}},
		{x: 96, y: 48, w: 128, h: 64, run: frameRun{8, 9}},
		{x: 288, y: 176, w: 32, h: 24, run: frameRun{1, 1}},
	}
	if !slices.Equal(got, want) {
		t.Errorf("boxes %+v, want %+v", got, want)
	}
	f := videoFilter(320, 200, want[:1])
	if wantF := "scale=320:200,format=yuv420p,drawbox=x=96:y=48:w=128:h=64:color=0x000000@1:t=fill:enable='between(n,0,4)'"; f != wantF {
		t.Errorf("filter %q, want %q", f, wantF)
	}
}

func TestVideoMasksBounded(t *testing.T) {
	r := newVideoRedactor(t)
	masks := make([]event.TimedRect, 0, maxVideoMasks)
	for i := range maxVideoMasks {
		masks = append(masks, event.TimedRect{Rect: event.Rect{X: i, Y: 0, W: 1, H: 1}, FromTS: 1, ToTS: 2})
	}
	send := func(m []event.TimedRect) error {
		_, err := r.Redact(&event.Decoded{Envelope: event.Envelope{Seq: 1, TS: gopBase, Kind: event.KindVideo},
			Payload: &event.Video{Mime: "video/webm", StreamStartTS: gopBase, Masks: m}})
		return err
	}
	if err := send(masks); err != nil {
		t.Fatalf("%d masks: %v", maxVideoMasks, err)
	}
	if err := send(masks[:10]); err != nil {
		t.Errorf("duplicates count once: %v", err)
	}
	extra := []event.TimedRect{{Rect: event.Rect{X: -1, Y: 0, W: 1, H: 1}, FromTS: 1, ToTS: 2}}
	if err := send(extra); err == nil {
		t.Error("one mask too many was accepted")
	}
	for _, bad := range []event.TimedRect{
		{Rect: event.Rect{W: 0, H: 1}, FromTS: 1, ToTS: 2},
		{Rect: event.Rect{W: 1, H: 1}, FromTS: 3, ToTS: 2},
	} {
		if err := send([]event.TimedRect{bad}); err == nil {
			t.Errorf("invalid mask %+v accepted", bad)
		}
	}
}

func TestRedactGOPRefusesMalformed(t *testing.T) {
	r := newVideoRedactor(t)
	times, end := gopTimes(3)
	for name, g := range map[string]VideoGOP{
		"no frames":            {Codec: "V_VP8", Width: 16, Height: 16, End: end},
		"times not ascending":  {Codec: "V_VP8", Width: 16, Height: 16, Times: []int64{times[1], times[0]}, End: end},
		"ends before its last": {Codec: "V_VP8", Width: 16, Height: 16, Times: times, End: times[2] - 1},
	} {
		if _, err := r.RedactGOP(context.Background(), g); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.RedactGOP(ctx, VideoGOP{Codec: "V_VP8", Width: 16, Height: 16, Times: times, End: end}); err == nil {
		t.Error("a cancelled context: no error")
	}
}

func TestReadIVFChecks(t *testing.T) {
	key := []byte{0x50, 0x00, 0x00, 0x9d, 0x01, 0x2a, 0x10, 0x00, 0x10, 0x00}
	delta := []byte{0x51, 0x00, 0x00, 0x00}
	times := []int64{0, 200e6, 400e6}
	g := VideoGOP{Codec: "V_VP8", Width: 16, Height: 16, Times: times, End: 600e6}
	ok := writeIVF("V_VP8", 16, 16, [][]byte{key, delta, delta})
	if frames, err := readIVF(ok, g); err != nil || len(frames) != 3 {
		t.Fatalf("%d frames, %v", len(frames), err)
	}
	for name, b := range map[string][]byte{
		"not a keyframe first": writeIVF("V_VP8", 16, 16, [][]byte{delta, delta, delta}),
		"a frame short":        writeIVF("V_VP8", 16, 16, [][]byte{key, delta}),
		"other size":           writeIVF("V_VP8", 32, 16, [][]byte{key, delta, delta}),
		"other codec":          writeIVF("V_VP9", 16, 16, [][]byte{key, delta, delta}),
		"cut short":            ok[:len(ok)-1],
		"not IVF":              []byte("RIFF"),
	} {
		if _, err := readIVF(b, g); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Frames out of step with the input's times (one skipped, one extra).
	shifted := VideoGOP{Codec: "V_VP8", Width: 16, Height: 16, Times: []int64{0, 400e6, 600e6}, End: 800e6}
	if _, err := readIVF(ok, shifted); err == nil {
		t.Error("frame times that differ from the input's: accepted")
	}
	// VP9: frame_marker 2, profile 0, show_existing_frame 0, frame_type 0.
	if !isKeyframe("V_VP9", []byte{0x82, 0x49, 0x83, 0x42}) || isKeyframe("V_VP9", []byte{0x86, 0, 0, 0}) {
		t.Error("VP9 frame type misread")
	}
}

// BenchmarkRedactGOP masks a 1280×800, 10-s GOP at 5 fps (half its frames
// covered) and reports video seconds redacted per wall-clock second.
func BenchmarkRedactGOP(b *testing.B) {
	ffmpeg := requireFFmpeg(b)
	for _, codec := range []string{"V_VP8", "V_VP9"} {
		b.Run(codec, func(b *testing.B) {
			g := makeGOP(b, ffmpeg, codec, 1280, 800, 10, image.Rect(200, 300, 520, 332))
			r := newVideoRedactor(b)
			m := event.TimedRect{Rect: event.Rect{X: 200, Y: 300, W: 320, H: 32}, FromTS: g.Times[10], ToTS: g.Times[35]}
			if _, err := r.Redact(videoEvent(b, 1, []event.TimedRect{m})); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(g.WebM)))
			n := 0
			start := time.Now()
			for b.Loop() {
				res, err := r.RedactGOP(context.Background(), g)
				if err != nil || res.Drop || len(res.Frames) != len(g.Times) {
					b.Fatalf("%+v, %v", res.Findings, err)
				}
				n++
			}
			videoSecs := float64(g.End-g.Times[0]) / 1e9
			b.ReportMetric(videoSecs*float64(n)/time.Since(start).Seconds(), "video-s/s")
		})
	}
}

// TestRedactGOPWaitsForASlot: with every ffmpeg slot taken, a GOP that
// needs masking waits, and a request that gives up gets its context's
// error (no verdict: the batch fails), never a kept or dropped GOP; a GOP
// no mask touches needs no slot.
func TestRedactGOPWaitsForASlot(t *testing.T) {
	ffmpeg := requireFFmpeg(t)
	g := makeGOP(t, ffmpeg, "V_VP8", 320, 200, 1, testBox)
	r := newVideoRedactor(t)
	r.Video.Slots = make(chan struct{}, 1)
	r.Video.Slots <- struct{}{} // taken by someone else
	if _, err := r.RedactGOP(context.Background(), g); err != nil {
		t.Fatalf("unmasked GOP with no free slot: %v", err)
	}
	if _, err := r.Redact(videoEvent(t, 1, []event.TimedRect{{Rect: testMask, FromTS: g.Times[0], ToTS: g.End}})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := r.RedactGOP(ctx, g)
	if !errors.Is(err, context.DeadlineExceeded) || res.Drop || res.Frames != nil {
		t.Fatalf("masked GOP with no free slot: %+v, %v; want the context's error", res, err)
	}
	<-r.Video.Slots
	res, err = r.RedactGOP(context.Background(), g)
	if err != nil || res.Frames == nil || len(r.Video.Slots) != 0 {
		t.Fatalf("with a free slot: %+v, %v, %d slots held after", res.Findings, err, len(r.Video.Slots))
	}
}
