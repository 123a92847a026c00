package webm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"
)

// The shared fixture: 30 s, 6 steps, encoded once for the tests that only
// read the result.
var (
	fixtureOnce sync.Once
	fixtureRec  recording
	fixturePath string
	fixtureData []byte
	fixtureErr  error
)

func fixture(t *testing.T) (recording, string, []byte) {
	t.Helper()
	testenv.RequireFFmpeg(t, "ffmpeg")
	fixtureOnce.Do(func() {
		fixtureRec = synth(t, 30*time.Second, 6, 1)
		var b bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		opt := Options{Start: fixtureRec.start, End: fixtureRec.end}
		if fixtureErr = Encode(ctx, opt, slices.Values(fixtureRec.frames), fixtureRec.chapters, &b); fixtureErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "webm-fixture-*")
		if err != nil {
			fixtureErr = err
			return
		}
		fixturePath = filepath.Join(dir, "fixture.webm")
		fixtureData = b.Bytes()
		fixtureErr = os.WriteFile(fixturePath, fixtureData, 0o644)
	})
	if fixtureErr != nil {
		t.Fatalf("encoding the fixture: %v", fixtureErr)
	}
	return fixtureRec, fixturePath, fixtureData
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixturePath != "" {
		os.RemoveAll(filepath.Dir(fixturePath))
	}
	os.Exit(code)
}

// ffprobeResult is the part of ffprobe's JSON the tests read.
type ffprobeResult struct {
	Format struct {
		Duration string `json:"duration"`
	} `json:"format"`
	Chapters []struct {
		StartTime string            `json:"start_time"`
		EndTime   string            `json:"end_time"`
		Tags      map[string]string `json:"tags"`
	} `json:"chapters"`
	Streams []struct {
		CodecName    string `json:"codec_name"`
		Width        int    `json:"width"`
		Height       int    `json:"height"`
		NbReadFrames string `json:"nb_read_frames"`
	} `json:"streams"`
}

func ffprobe(t *testing.T, path string, args ...string) ffprobeResult {
	t.Helper()
	bin := testenv.RequireFFmpeg(t, "ffprobe")
	args = append(append([]string{"-v", "error"}, args...), "-of", "json", path)
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("ffprobe: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("ffprobe: %v", err)
	}
	var r ffprobeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ffprobe output: %v\n%s", err, out)
	}
	return r
}

func seconds(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not seconds: %q", s)
	}
	return f
}

// ffprobe's view: the duration is the recording's span within a frame,
// and there is a chapter per step starting at the step's start, to the ms.
func TestFFprobeDurationAndChapters(t *testing.T) {
	rec, path, _ := fixture(t)
	r := ffprobe(t, path, "-show_entries", "format=duration", "-show_chapters")
	want := float64(rec.end-rec.start) / 1e9
	if got := seconds(t, r.Format.Duration); math.Abs(got-want) > 1.0/5 {
		t.Errorf("duration %.3f s, want %.3f s within a frame", got, want)
	}
	if len(r.Chapters) != len(rec.chapters) {
		t.Fatalf("%d chapters, want %d", len(r.Chapters), len(rec.chapters))
	}
	for i, c := range r.Chapters {
		ch := rec.chapters[i]
		wantStart := float64(ch.Start-rec.start) / 1e9
		if got := seconds(t, c.StartTime); math.Abs(got-wantStart) > 0.0005 {
			t.Errorf("chapter %d starts at %.6f s, want %.6f s", i+1, got, wantStart)
		}
		wantEnd := float64(ch.End-rec.start) / 1e9
		if got := seconds(t, c.EndTime); math.Abs(got-wantEnd) > 0.0005 {
			t.Errorf("chapter %d ends at %.6f s, want %.6f s", i+1, got, wantEnd)
		}
		if c.Tags["title"] != ch.Title {
			t.Errorf("chapter %d title %q, want %q", i+1, c.Tags["title"], ch.Title)
		}
	}
}

// Every frame decodes, and there are as many as the timeline has.
func TestDecodesCleanly(t *testing.T) {
	rec, path, _ := fixture(t)
	ffmpeg := testenv.RequireFFmpeg(t, "ffmpeg")
	cmd := exec.Command(ffmpeg, "-v", "error", "-i", path, "-f", "null", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("decoding: %v: %s", err, stderr.String())
	}
	r := ffprobe(t, path, "-count_frames", "-select_streams", "v:0",
		"-show_entries", "stream=codec_name,width,height,nb_read_frames")
	if len(r.Streams) != 1 {
		t.Fatalf("%d streams", len(r.Streams))
	}
	s := r.Streams[0]
	starts := chapterStarts(rec)
	want := len(timeline(rec.end-rec.start, 5, starts, int64(10*time.Second)))
	if s.CodecName != "vp8" || s.Width != synthW || s.Height != synthH || s.NbReadFrames != strconv.Itoa(want) {
		t.Errorf("stream %+v, want vp8 %dx%d with %d frames", s, synthW, synthH, want)
	}
}

func chapterStarts(rec recording) []int64 {
	var s []int64
	for _, c := range rec.chapters {
		s = append(s, c.Start-rec.start)
	}
	return s
}

// The layout the package comment promises, read back with Probe: head
// elements where the SeekHead says, Cues before the clusters pointing at
// clusters that begin with a keyframe, a keyframe at every chapter start.
func TestLayout(t *testing.T) {
	rec, _, data := fixture(t)
	info, err := Probe(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	pos := map[string]int64{}
	for _, e := range info.Layout {
		names = append(names, e.Name)
		pos[e.Name] = e.Position
	}
	if want := []string{"SeekHead", "Info", "Tracks", "Chapters", "Cues", "Cluster"}; !slices.Equal(names, want) {
		t.Fatalf("layout %v, want %v", names, want)
	}
	for _, name := range []string{"Info", "Tracks", "Chapters", "Cues"} {
		if got, ok := info.Seeks[name]; !ok || got != pos[name] {
			t.Errorf("SeekHead puts %s at %d (listed %v), it is at %d", name, got, ok, pos[name])
		}
	}
	dur := rec.end - rec.start
	if info.DocType != "webm" || info.CodecID != "V_VP8" || info.Width != synthW || info.Height != synthH ||
		info.TimecodeScale != 1_000_000 || info.MuxingApp != "flightrec" || info.DefaultDuration != 200*time.Millisecond {
		t.Errorf("info %+v", info)
	}
	if info.Duration != time.Duration(dur) {
		t.Errorf("duration %v, want exactly %v", info.Duration, time.Duration(dur))
	}
	if info.LastBlock >= time.Duration(dur) || info.LastBlock < time.Duration(dur)-200*time.Millisecond {
		t.Errorf("last block at %v, want within the last frame before %v", info.LastBlock, time.Duration(dur))
	}
	clusterAt := map[int64]ClusterInfo{}
	for _, c := range info.Clusters {
		if !c.Keyframe {
			t.Errorf("cluster at %v does not begin with a keyframe", c.Time)
		}
		clusterAt[c.Position] = c
	}
	if len(info.Cues) != len(info.Clusters) {
		t.Errorf("%d cues for %d clusters", len(info.Cues), len(info.Clusters))
	}
	for _, q := range info.Cues {
		c, ok := clusterAt[q.ClusterPosition]
		if !ok || c.Time != q.Time || q.Track != 1 {
			t.Errorf("cue %+v points at no cluster of its time (%+v)", q, c)
		}
	}
	keys := map[time.Duration]bool{}
	for _, k := range info.KeyframeTimes {
		keys[k] = true
	}
	for i, c := range rec.chapters {
		// The frame on screen at the chapter's start: the last at or
		// before it on the 200 ms grid.
		ms := time.Duration((c.Start-rec.start)/200e6) * 200 * time.Millisecond
		if !keys[ms] {
			t.Errorf("chapter %d starts at %v: no keyframe there (keyframes %v)", i+1, ms, info.KeyframeTimes)
		}
		got := info.Chapters[i]
		if got.UID != uint64(i+1) || got.Start != time.Duration(c.Start-rec.start) ||
			got.End != time.Duration(c.End-rec.start) || got.Title != c.Title || got.Language != "eng" {
			t.Errorf("chapter %d: %+v", i+1, got)
		}
	}
	if info.Blocks != len(timeline(dur, 5, chapterStarts(rec), int64(10*time.Second))) {
		t.Errorf("%d blocks", info.Blocks)
	}
}

// grabFrame decodes the picture at video time at (s) with ffmpeg.
func grabFrame(t *testing.T, path string, at float64) *image.RGBA {
	t.Helper()
	ffmpeg := testenv.RequireFFmpeg(t, "ffmpeg")
	cmd := exec.Command(ffmpeg, "-v", "error", "-ss", strconv.FormatFloat(at, 'f', 3, 64), "-i", path,
		"-frames:v", "1", "-f", "image2pipe", "-c:v", "png", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("grabbing the frame at %.3f s: %v: %s", at, err, stderr.String())
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return toRGBA(img)
}

func near(a, b color.RGBA, tol int) bool {
	d := func(x, y uint8) int { return int(math.Abs(float64(int(x) - int(y)))) }
	return d(a.R, b.R) <= tol && d(a.G, b.G) <= tol && d(a.B, b.B) <= tol
}

// The agent's cursor is drawn where the frame says: the pixel inside the
// arrow is the cursor's colour in the decoded video, not the page's.
func TestCursorDrawn(t *testing.T) {
	rec, path, _ := fixture(t)
	_, probe := cursorImage()
	fill := color.RGBA{cursorFill.R, cursorFill.G, cursorFill.B, 255}
	for _, at := range []float64{2.4, 11.2, 23.6} {
		f := shownAt(rec.frames, rec.start, int64(math.Round(at*1e9)))
		src, err := decodeImage(f.Image)
		if err != nil {
			t.Fatal(err)
		}
		got := grabFrame(t, path, at)
		p := f.Cursor.Add(probe)
		srcPx := toRGBA(src).RGBAAt(p.X, p.Y)
		gotPx := got.RGBAAt(p.X, p.Y)
		if !near(gotPx, fill, 40) || near(gotPx, srcPx, 40) {
			t.Errorf("at %.1f s, cursor %v: pixel %v is %v; want the cursor's %v (page: %v)", at, *f.Cursor, p, gotPx, fill, srcPx)
		}
		// Away from the cursor the picture is the source frame's: the
		// right frame was checked.
		far := image.Pt(40, 100)
		if !near(got.RGBAAt(far.X, far.Y), toRGBA(src).RGBAAt(far.X, far.Y), 12) {
			t.Errorf("at %.1f s the background %v is not the frame's %v", at, got.RGBAAt(far.X, far.Y), toRGBA(src).RGBAAt(far.X, far.Y))
		}
	}
}

// A clip of steps 2–4 (their chapters, their frames, their span) starts at
// 0 with three chapters and lasts the span.
func TestClip(t *testing.T) {
	rec, _, _ := fixture(t)
	from, to := rec.chapters[1], rec.chapters[3]
	clip := recording{start: from.Start, end: to.End, chapters: rec.chapters[1:4]}
	for _, f := range rec.frames {
		if f.Time >= clip.start && f.Time < clip.end {
			clip.frames = append(clip.frames, f)
		}
	}
	path, data := encodeFile(t, clip, Options{})
	info, err := Probe(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	dur := time.Duration(clip.end - clip.start)
	if info.Duration != dur || len(info.Chapters) != 3 || info.Chapters[0].Start != 0 ||
		info.Chapters[2].End != dur || info.KeyframeTimes[0] != 0 {
		t.Errorf("clip: duration %v (want %v), chapters %+v, keyframes %v", info.Duration, dur, info.Chapters, info.KeyframeTimes)
	}
	for i, c := range info.Chapters {
		if want := time.Duration(clip.chapters[i].Start - clip.start); c.Start != want || c.Title != clip.chapters[i].Title {
			t.Errorf("clip chapter %d: %+v, want start %v", i+1, c, want)
		}
	}
	r := ffprobe(t, path, "-show_entries", "format=duration", "-show_chapters")
	if got := seconds(t, r.Format.Duration); math.Abs(got-dur.Seconds()) > 0.2 || len(r.Chapters) != 3 ||
		seconds(t, r.Chapters[0].StartTime) != 0 {
		t.Errorf("ffprobe: duration %s (want %.3f), %d chapters", r.Format.Duration, dur.Seconds(), len(r.Chapters))
	}
	// Time 0 shows step 2's picture.
	got := grabFrame(t, path, 0)
	if c := got.RGBAAt(40, 100); !near(c, stepColor(2), 12) {
		t.Errorf("clip's first picture has background %v, want step 2's %v", c, stepColor(2))
	}
}

// solidPNG is a w×h picture of one colour.
func solidPNG(t testing.TB, w, h int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var (
	red   = color.RGBA{220, 30, 30, 255}
	green = color.RGBA{30, 200, 60, 255}
	blue  = color.RGBA{30, 60, 220, 255}
)

// A span that begins between frames opens on the newest frame before it;
// given no frame before it, on its first frame. Frames superseded before
// they are shown are never loaded.
func TestSpanStartAndLazyLoading(t *testing.T) {
	testenv.RequireFFmpeg(t, "ffmpeg")
	const s = int64(time.Second)
	loads := map[string]int{}
	var mu sync.Mutex
	frame := func(at int64, name string, c color.RGBA) Frame {
		b := solidPNG(t, 320, 240, c)
		return Frame{Time: t0 + at, Load: func() ([]byte, error) {
			mu.Lock()
			loads[name]++
			mu.Unlock()
			return b, nil
		}}
	}
	frames := []Frame{
		frame(0, "early", green),        // first frame: decoded for the size
		frame(s/2, "skipped", green),    // superseded before the span
		frame(s, "red", red),            // the newest before the span
		frame(2900e6, "blue", blue),     // shown at 1.0 s (t0+3 s)
		frame(3050e6, "flicker", green), // superseded before 1.2 s
		frame(3100e6, "blue2", blue),    // shown from 1.2 s
		frame(5*s, "after", green),      // after the end: not even looked at
	}
	opt := Options{Start: t0 + 2*s, End: t0 + 4*s}
	var b bytes.Buffer
	if err := Encode(context.Background(), opt, slices.Values(frames), nil, &b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "span.webm")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := grabFrame(t, path, 0).RGBAAt(160, 120); !near(c, red, 20) {
		t.Errorf("time 0 shows %v, want the frame before the span (red)", c)
	}
	if c := grabFrame(t, path, 1.5).RGBAAt(160, 120); !near(c, blue, 20) {
		t.Errorf("time 1.5 s shows %v, want blue", c)
	}
	want := map[string]int{"red": 1, "blue": 1, "blue2": 1}
	if fmt.Sprint(loads) != fmt.Sprint(want) {
		t.Errorf("loads %v, want %v", loads, want)
	}

	// Only frames inside the span: the first one fills in before it.
	inside := []Frame{frame(3*s, "blue", blue)}
	b.Reset()
	if err := Encode(context.Background(), opt, slices.Values(inside), nil, &b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := grabFrame(t, path, 0).RGBAAt(160, 120); !near(c, blue, 20) {
		t.Errorf("time 0 shows %v, want the first frame (blue)", c)
	}
	info, err := Probe(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Duration != 2*time.Second || info.Blocks != 10 || info.Width != 320 || info.Height != 240 || len(info.Chapters) != 0 {
		t.Errorf("info %+v", info)
	}
}

// Frames that do not decode are passed over; a frame that fails to load
// ends the encoding with its error.
func TestBadFrames(t *testing.T) {
	testenv.RequireFFmpeg(t, "ffmpeg")
	const s = int64(time.Second)
	good := solidPNG(t, 64, 48, red)
	frames := []Frame{
		{Time: t0, Image: []byte("not an image")},
		{Time: t0 + s/10, Image: good},
		{Time: t0 + s/2, Image: good[:len(good)/2]}, // truncated PNG
	}
	opt := Options{Start: t0, End: t0 + s}
	var b bytes.Buffer
	if err := Encode(context.Background(), opt, slices.Values(frames), nil, &b); err != nil {
		t.Fatalf("undecodable frames: %v", err)
	}
	if info, err := Probe(bytes.NewReader(b.Bytes()), int64(b.Len())); err != nil || info.Width != 64 || info.Blocks != 5 {
		t.Errorf("probe: %+v, %v", info, err)
	}

	// The picture before the start does not decode: the first frame
	// after it opens the video.
	frames2 := []Frame{{Time: t0 - s, Image: []byte("junk")}, {Time: t0 + s/2, Image: good}}
	b.Reset()
	if err := Encode(context.Background(), opt, slices.Values(frames2), nil, &b); err != nil {
		t.Fatalf("undecodable frame before the start: %v", err)
	}

	boom := errors.New("blob store down")
	frames = append(frames, Frame{Time: t0 + s*3/4, Load: func() ([]byte, error) { return nil, boom }})
	b.Reset()
	if err := Encode(context.Background(), opt, slices.Values(frames), nil, &b); !errors.Is(err, boom) {
		t.Errorf("load failure: %v, want %v", err, boom)
	}
	if b.Len() != 0 {
		t.Errorf("%d bytes written on failure", b.Len())
	}

	frames = []Frame{{Time: t0, Image: []byte("junk")}}
	if err := Encode(context.Background(), opt, slices.Values(frames), nil, &b); !errors.Is(err, ErrNoFrames) {
		t.Errorf("no decodable frame: %v, want ErrNoFrames", err)
	}
	if err := Encode(context.Background(), opt, slices.Values([]Frame{}), nil, &b); !errors.Is(err, ErrNoFrames) {
		t.Errorf("no frame: %v, want ErrNoFrames", err)
	}
}

func TestNoFFmpeg(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := FFmpegPath(""); !errors.Is(err, ErrNoFFmpeg) {
		t.Errorf("FFmpegPath: %v, want ErrNoFFmpeg", err)
	}
	frames := []Frame{{Time: t0, Image: solidPNG(t, 8, 8, red)}}
	opt := Options{Start: t0, End: t0 + 1e9}
	var b bytes.Buffer
	err := Encode(context.Background(), opt, slices.Values(frames), nil, &b)
	if !errors.Is(err, ErrNoFFmpeg) || !strings.Contains(err.Error(), "apt-get install ffmpeg") {
		t.Errorf("Encode: %v, want ErrNoFFmpeg naming the package", err)
	}
	opt.FFmpeg = "/nonexistent/ffmpeg"
	if err := Encode(context.Background(), opt, slices.Values(frames), nil, &b); !errors.Is(err, ErrNoFFmpeg) {
		t.Errorf("Encode with a missing Options.FFmpeg: %v, want ErrNoFFmpeg", err)
	}
}

// An ffmpeg that fails is reported with its stderr.
func TestFFmpegFails(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "ffmpeg")
	script := "#!/bin/sh\necho 'Unknown encoder libvpx' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	frames := []Frame{{Time: t0, Image: solidPNG(t, 8, 8, red)}}
	opt := Options{Start: t0, End: t0 + 60e9, FFmpeg: fake}
	var b bytes.Buffer
	err := Encode(context.Background(), opt, slices.Values(frames), nil, &b)
	if err == nil || !strings.Contains(err.Error(), "Unknown encoder libvpx") {
		t.Errorf("Encode: %v, want ffmpeg's message", err)
	}
}

// Cancelling stops the encoding promptly, with the context's error.
func TestCancel(t *testing.T) {
	testenv.RequireFFmpeg(t, "ffmpeg")
	img := solidPNG(t, 640, 400, red)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	frames := func(yield func(Frame) bool) {
		for i := range 100_000 {
			n++
			if i == 50 {
				cancel()
			}
			if !yield(Frame{Time: t0 + int64(i)*200e6, Image: img}) {
				return
			}
		}
	}
	err := Encode(ctx, Options{Start: t0, End: t0 + 20_000e9}, frames, nil, &bytes.Buffer{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Encode: %v, want context.Canceled", err)
	}
	// Frames taken after the cancel say whether it stopped; how long the
	// 50 before took is the machine's load (a CI run under -race took 24 s).
	if n > 52 {
		t.Errorf("went on for %d frames after the cancel at frame 51", n-51)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{
		{Start: 10, End: 10},
		{Start: 0, End: 1e9, FPS: 61},
		{Start: 0, End: 1e9, CRF: 64},
		{Start: 0, End: 1e9, KeyframeInterval: time.Millisecond},
		{Start: 0, End: 1e9, KeyframeInterval: time.Minute},
	} {
		if err := Encode(context.Background(), o, slices.Values([]Frame{}), nil, &bytes.Buffer{}); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// The video ends on the recording's final state, even when that frame
// came after the last output frame's time; a frame at the end itself is
// outside the span.
func TestEndsOnFinalState(t *testing.T) {
	testenv.RequireFFmpeg(t, "ffmpeg")
	const s = int64(time.Second)
	frames := []Frame{
		{Time: t0, Image: solidPNG(t, 160, 120, red)},
		{Time: t0 + 2*s - 50e6, Image: solidPNG(t, 160, 120, blue)}, // after the last frame's 1.8 s
		{Time: t0 + 2*s, Image: solidPNG(t, 160, 120, green)},       // at the end: not shown
	}
	var b bytes.Buffer
	if err := Encode(context.Background(), Options{Start: t0, End: t0 + 2*s}, slices.Values(frames), nil, &b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "end.webm")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := grabFrame(t, path, 1.6).RGBAAt(80, 60); !near(c, red, 20) {
		t.Errorf("at 1.6 s: %v, want red", c)
	}
	if c := grabFrame(t, path, 1.8).RGBAAt(80, 60); !near(c, blue, 20) {
		t.Errorf("the last frame: %v, want the final state (blue)", c)
	}
}
