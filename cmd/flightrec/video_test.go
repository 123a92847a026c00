package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"math/bits"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/at-wat/ebml-go"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/playback/webm"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// The synthetic screen video: moving content (testsrc2) at 5 frames a
// second with a keyframe every 2 s, and a white box of "text" (dark bars,
// glyph-like) at boxRect from boxFrom to boxTo seconds.
const (
	synthSeconds = 12
	synthW       = 640
	synthH       = 400
	boxFrom      = 4.0
	boxTo        = 8.0
)

var boxRect = image.Rect(96, 160, 416, 208) // x0,y0 .. x1,y1, 16-px aligned

// videoT0 is the stream's start on the recording's clock: not round, so a
// lost offset shows.
const videoT0 = int64(1_764_483_600_123_456_789)

// synthVideo encodes the test stream with ffmpeg into a seekable file
// (known element sizes, Cues at the end, as ffmpeg writes files).
func synthVideo(t *testing.T, codec string) []byte { return synthStream(t, codec, false) }

// synthStream encodes the test stream, into a file or, live, into a pipe
// (a Segment of unknown size, no Cues: what an executor streams).
func synthStream(t *testing.T, codec string, live bool) []byte {
	t.Helper()
	ff := testenv.RequireFFmpeg(t, "ffmpeg")
	out := filepath.Join(t.TempDir(), "screen.webm")
	en := fmt.Sprintf("enable='between(t,%g,%g)'", boxFrom, boxTo-0.001)
	box := fmt.Sprintf("drawbox=x=%d:y=%d:w=%d:h=%d:color=white:t=fill:%s", boxRect.Min.X, boxRect.Min.Y, boxRect.Dx(), boxRect.Dy(), en)
	// Glyph-like bars inside the box: the box's "known text".
	for i := 0; i < 8; i++ {
		box += fmt.Sprintf(",drawbox=x=%d:y=%d:w=%d:h=%d:color=black:t=fill:%s",
			boxRect.Min.X+12+i*38, boxRect.Min.Y+12, 10+i%3*8, 24, en)
	}
	args := []string{"-hide_banner", "-loglevel", "error", "-f", "lavfi",
		"-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=5", synthW, synthH), "-t", strconv.Itoa(synthSeconds),
		"-vf", box, "-g", "10", "-keyint_min", "10", "-pix_fmt", "yuv420p"}
	if codec == "vp9" {
		args = append(args, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M")
	} else {
		args = append(args, "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M")
	}
	if live {
		args = append(args, "-f", "webm", "pipe:1")
		var stderr bytes.Buffer
		cmd := exec.Command(ff, args...)
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("ffmpeg: %v\n%s", err, stderr.Bytes())
		}
		return b
	}
	args = append(args, "-f", "webm", out)
	if b, err := exec.Command(ff, args...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// inputFrames is the oracle: the input file's frames, parsed whole by
// ebml-go, by time in ns from the stream's start.
type inputFrame struct {
	ts   int64
	key  bool
	data []byte
}

func inputFrames(t *testing.T, b []byte) (frames []inputFrame, blocks [][2]int64) {
	t.Helper()
	var file struct {
		Segment struct {
			Info struct {
				TimecodeScale uint64 `ebml:"TimecodeScale"`
			} `ebml:"Info"`
			Cluster []struct {
				Timecode    uint64       `ebml:"Timecode"`
				SimpleBlock []ebml.Block `ebml:"SimpleBlock"`
			} `ebml:"Cluster"`
		} `ebml:"Segment"`
	}
	var pos []*ebml.Element
	hook := func(e *ebml.Element) {
		if e.Name == "SimpleBlock" {
			pos = append(pos, e)
		}
	}
	if err := ebml.Unmarshal(bytes.NewReader(b), &file, ebml.WithElementReadHooks(hook)); err != nil {
		t.Fatalf("ebml-go reading the input: %v", err)
	}
	scale := int64(file.Segment.Info.TimecodeScale)
	if scale == 0 {
		scale = 1_000_000
	}
	for _, c := range file.Segment.Cluster {
		for _, sb := range c.SimpleBlock {
			frames = append(frames, inputFrame{ts: (int64(c.Timecode) + int64(sb.Timecode)) * scale, key: sb.Keyframe, data: sb.Data[0]})
		}
	}
	for _, e := range pos {
		// Position is the element's ID (A3, one byte); the size vint's
		// length is in its first byte's leading zeros.
		vint := int64(bits.LeadingZeros8(b[e.Position+1])) + 1
		blocks = append(blocks, [2]int64{int64(e.Position), int64(e.Position) + 1 + vint + int64(e.Size)})
	}
	return frames, blocks
}

// videoLines makes the NDJSON of a recording with three steps (receipts
// at 0, 4 and 8 s) and the stream in chunks of the given sizes, the
// masks (if any) in an event of their own before the first chunk.
func videoLines(stream []byte, sizes []int, masks []event.TimedRect, firstSeq uint64) []string {
	var lines []string
	seq := firstSeq
	add := func(ts int64, step int, kind event.Kind, data any) {
		b, _ := json.Marshal(data)
		l, _ := json.Marshal(event.Envelope{Seq: seq, TS: ts, Step: step, Kind: kind, Data: b})
		lines = append(lines, string(l))
		seq++
	}
	stepAt := func(sec float64) int { return 1 + min(int(sec/4), 2) }
	receipt := func(step int) {
		at := videoT0 + int64(step-1)*4e9
		add(at+1, step, event.KindReceipt, map[string]any{"step": step, "action": map[string]any{"verb": "wait"},
			"outcome": "done", "started_at": at, "ended_at": at + 4e9 - 1})
	}
	receipt(1)
	if len(masks) > 0 {
		add(videoT0+2, 1, event.KindVideo, map[string]any{"mime": "video/webm", "stream_start_ts": videoT0, "masks": masks})
	}
	off, i, lastStep := 0, 0, 1
	for off < len(stream) {
		n := sizes[i%len(sizes)]
		i++
		end := min(off+n, len(stream))
		sec := float64(synthSeconds) * float64(off) / float64(len(stream))
		st := stepAt(sec)
		for lastStep < st {
			lastStep++
			receipt(lastStep)
		}
		add(videoT0+int64(sec*1e9)+3, st, event.KindVideo, map[string]any{"mime": "video/webm", "stream_start_ts": videoT0,
			"chunk": base64.StdEncoding.EncodeToString(stream[off:end])})
		off = end
	}
	for lastStep < 3 {
		lastStep++
		receipt(lastStep)
	}
	return lines
}

// chunkSizes are odd sizes, and the cut that falls inside a SimpleBlock
// is checked by the caller.
var chunkSizes = []int{1, 7, 4093, 333, 65537, 17, 12289, 2}

// boxMask is a mask over the box for its whole span.
func boxMask() event.TimedRect {
	return event.TimedRect{Rect: event.Rect{X: boxRect.Min.X, Y: boxRect.Min.Y, W: boxRect.Dx(), H: boxRect.Dy()},
		FromTS: videoT0 + int64(boxFrom*1e9), ToTS: videoT0 + int64(boxTo*1e9)}
}

// storedAnywhere says whether a 32-byte window from the middle of f's
// data is in the corpus: how the tests tell whether a frame was stored.
func storedAnywhere(corpus testenv.Corpus, f inputFrame) bool {
	mid := len(f.data) / 2
	w := f.data[mid-16 : mid+16]
	for _, blob := range corpus.Snapshot() {
		if bytes.Contains(blob, w) {
			return true
		}
	}
	return false
}

// assertBoxFramesNotStored: no input frame that shows the box is in what
// the server wrote (files, decompressed where compressed).
func assertBoxFramesNotStored(t *testing.T, corpus testenv.Corpus, frames []inputFrame) {
	t.Helper()
	searched := 0
	for _, f := range frames {
		sec := float64(f.ts) / 1e9
		if sec < boxFrom || sec >= boxTo || len(f.data) < 64 {
			continue
		}
		searched++
		if storedAnywhere(corpus, f) {
			t.Fatalf("the bytes of the input frame at %.1f s, under the mask, are stored", sec)
		}
	}
	if searched == 0 {
		t.Fatal("no input frame of the box's span to search for")
	}
}

// keyframes counts the keyframes among frames: the GOPs of the stream.
func keyframes(frames []inputFrame) int {
	n := 0
	for _, f := range frames {
		if f.key {
			n++
		}
	}
	return n
}

func splitsInsideBlock(stream []byte, sizes []int, blocks [][2]int64) bool {
	off, i := 0, 0
	for off < len(stream) {
		off += sizes[i%len(sizes)]
		i++
		for _, b := range blocks {
			if int64(off) > b[0]+4 && int64(off) < b[1] {
				return true
			}
		}
	}
	return false
}

func postLines(t *testing.T, base, id string, lines []string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(base+"/v1/recordings/"+id+"/events", "application/x-ndjson", strings.NewReader(strings.Join(lines, "\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func sendAll(t *testing.T, base, id string, lines []string, per int) {
	t.Helper()
	for i := 0; i < len(lines); i += per {
		if code, b := postLines(t, base, id, lines[i:min(i+per, len(lines))]); code != 200 {
			t.Fatalf("append of lines %d…: %d %s", i, code, b)
		}
	}
}

func openRec(t *testing.T, base, project string) string {
	t.Helper()
	rep, err := client.New(base).Open(context.Background(), wire.OpenRequest{Project: project, Flow: "video"})
	if err != nil {
		t.Fatal(err)
	}
	return rep.ID
}

// finishRec finishes recording id and returns the seq it acknowledged
// through.
func finishRec(t *testing.T, base, id string) uint64 {
	t.Helper()
	rep, err := client.New(base).Finish(context.Background(), id, "pass")
	if err != nil {
		t.Fatal(err)
	}
	return rep.AckedThrough
}

// videoEvents reads a recording's stored video events.
func videoEvents(t *testing.T, base, id string) []event.Video {
	t.Helper()
	var page wire.EventPage
	getJSON(t, base+"/v1/recordings/"+id+"/events?kind=video&limit=10000", &page)
	var out []event.Video
	for _, e := range page.Events {
		var v event.Video
		if err := json.Unmarshal(e.Data, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func waitIndexed(t *testing.T, base, id string) {
	t.Helper()
	waitRecording(t, base, id, func(rec store.RecordingRow) bool {
		return rec.State == store.StateFinished && rec.IndexedTo > 0 && int64(rec.IndexedTo) == rec.Events
	})
}

// waitFinishedThrough waits until the index holds recording id finished
// and every event through seq acked: the row's own counters can agree
// with each other while the projector is still behind the log (the row
// says finished as soon as the seal is indexed).
func waitFinishedThrough(t *testing.T, base, id string, acked uint64) {
	t.Helper()
	waitRecording(t, base, id, func(rec store.RecordingRow) bool {
		return rec.State == store.StateFinished && rec.IndexedTo >= acked && int64(rec.IndexedTo) == rec.Events
	})
}

// storedEvents reads a recording's events once the index holds through
// seq.
func storedEvents(t *testing.T, base, id string, seq uint64) []byte {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rec store.RecordingRow
		getJSON(t, base+"/v1/recordings/"+id, &rec)
		if rec.IndexedTo >= seq {
			return getBytes(t, base+"/v1/recordings/"+id+"/events?limit=10000")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index did not reach seq %d: %+v", seq, rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// decodedFrame is one picture of a decoded video with its time.
type decodedFrame struct {
	sec float64
	rgb []byte
}

// decodeVideo decodes every frame of a WebM with ffmpeg (no frame
// dropped or duplicated) into RGB, with each one's time from ffprobe,
// and fails on any decoder complaint.
func decodeVideo(t *testing.T, b []byte, w, h int) []decodedFrame {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.webm")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	probe := testenv.RequireFFmpeg(t, "ffprobe")
	out, err := exec.Command(probe, "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time",
		"-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe frames: %v", err)
	}
	var times []float64
	for _, l := range strings.Fields(string(out)) {
		f, err := strconv.ParseFloat(strings.TrimSuffix(l, ","), 64)
		if err != nil {
			t.Fatalf("ffprobe time %q", l)
		}
		times = append(times, f)
	}
	ff := testenv.RequireFFmpeg(t, "ffmpeg")
	cmd := exec.Command(ff, "-v", "error", "-i", path, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("decoding the stored video: %v %s", err, stderr.String())
	}
	size := w * h * 3
	if len(raw)%size != 0 || len(raw)/size != len(times) {
		t.Fatalf("decoded %d bytes for %d frames of %dx%d", len(raw), len(times), w, h)
	}
	frames := make([]decodedFrame, len(times))
	for i := range frames {
		frames[i] = decodedFrame{sec: times[i], rgb: raw[i*size : (i+1)*size]}
	}
	return frames
}

// boxStats says how the box's pixels look in one frame: the largest
// channel value (0 means solid black) and how many are near white. The
// outermost 2 pixels are not sampled: converting 4:2:0 video to RGB
// interpolates their colour from the neighbours outside the box.
func boxStats(f decodedFrame, w int) (maxChannel byte, mean float64, white int) {
	in := boxRect.Inset(2)
	sum := 0
	for y := in.Min.Y; y < in.Max.Y; y++ {
		for x := in.Min.X; x < in.Max.X; x++ {
			p := f.rgb[(y*w+x)*3:]
			for _, c := range p[:3] {
				maxChannel = max(maxChannel, c)
				sum += int(c)
			}
			if p[0] > 200 && p[1] > 200 && p[2] > 200 {
				white++
			}
		}
	}
	return maxChannel, float64(sum) / float64(3*in.Dx()*in.Dy()), white
}

// TestExecutorVideo streams an executor's WebM in odd chunks (one cut
// inside a SimpleBlock) with a mask over the box: no decoded frame of the
// stored video shows the box, the GOPs outside the mask's span are the
// input's bytes exactly, the video has a chapter per step, and a rerun of
// the same stream stores its GOPs once.
func TestExecutorVideo(t *testing.T) {
	for _, codec := range []string{"vp8", "vp9"} {
		t.Run(codec, func(t *testing.T) { testExecutorVideo(t, codec) })
	}
}

func testExecutorVideo(t *testing.T, codec string) {
	stream := synthVideo(t, codec)
	frames, blocks := inputFrames(t, stream)
	if !splitsInsideBlock(stream, chunkSizes, blocks) {
		t.Fatal("no chunk boundary falls inside a SimpleBlock; change chunkSizes")
	}
	keys := keyframes(frames)
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	defer p.stop()
	base := "http://" + p.addr

	mask := boxMask()
	id := openRec(t, base, "video")
	lines := videoLines(stream, chunkSizes, []event.TimedRect{mask}, 1)
	// The recording holds JPEG frames too (smaller, another size): the
	// executor's own video is preferred.
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewRGBA(image.Rect(0, 0, 320, 200)), nil); err != nil {
		t.Fatal(err)
	}
	frame, _ := json.Marshal(event.Envelope{Seq: uint64(len(lines) + 1), TS: videoT0 + 5e9, Step: 2, Kind: event.KindFrame,
		Data: json.RawMessage(fmt.Sprintf(`{"mime":"image/jpeg","width":320,"height":200,"image":%q}`, base64.StdEncoding.EncodeToString(jpg.Bytes())))})
	sendAll(t, base, id, append(lines, string(frame)), 7)
	waitFinishedThrough(t, base, id, finishRec(t, base, id))

	// Every GOP of the input is stored, masked exactly where the mask's
	// span overlaps it.
	var gops []event.VideoGOP
	for _, v := range videoEvents(t, base, id) {
		if len(v.Dropped) > 0 {
			t.Fatalf("GOPs dropped: %+v", v.Dropped)
		}
		gops = append(gops, v.GOPs...)
	}
	if len(gops) != keys {
		t.Fatalf("%d GOPs stored, the input has %d keyframes", len(gops), keys)
	}
	masked := 0
	for _, g := range gops {
		// to_ts is inclusive: a frame showing at to_ts is covered.
		overlaps := g.StartTS <= mask.ToTS && g.EndTS > mask.FromTS
		if g.Masked != overlaps {
			t.Fatalf("GOP %d…%d masked=%v, mask overlap=%v", g.StartTS-videoT0, g.EndTS-videoT0, g.Masked, overlaps)
		}
		if g.Masked {
			masked++
		}
	}
	if masked == 0 || masked == len(gops) {
		t.Fatalf("%d of %d GOPs masked: the test needs both kinds", masked, len(gops))
	}

	// The served video: plays in ffprobe/ffmpeg without complaint, a
	// chapter per step, and the box never shows in the mask's span.
	video := getBytes(t, base+"/v1/recordings/"+id+"/video.webm")
	info, err := webm.Probe(bytes.NewReader(video), int64(len(video)))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Chapters) != 3 || info.Width != synthW || info.CodecID != map[string]string{"vp8": "V_VP8", "vp9": "V_VP9"}[codec] {
		t.Fatalf("%d chapters, %s %dx%d; want 3 chapters and the executor's video", len(info.Chapters), info.CodecID, info.Width, info.Height)
	}
	// A clip of step 2: from the keyframe of the GOP showing at the
	// step's start to the step's end, one chapter, and it decodes; Range
	// requests work.
	var tl wire.Timeline
	getJSON(t, base+"/v1/recordings/"+id+"/steps", &tl)
	step2 := tl.Steps[1]
	from := int64(0)
	for _, g := range gops {
		if g.StartTS <= step2.StartTS {
			from = g.StartTS
		}
	}
	clip := getBytes(t, base+"/v1/recordings/"+id+"/video.webm?from_step=2&to_step=2")
	ci, err := webm.Probe(bytes.NewReader(clip), int64(len(clip)))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Duration(step2.EndTS - from)
	if len(ci.Chapters) != 1 || ci.Duration < want-time.Millisecond || ci.Duration > want+time.Millisecond {
		t.Fatalf("clip of step 2: %d chapters, %v long; want 1 and %v", len(ci.Chapters), ci.Duration, want)
	}
	inClip := 0
	for _, f := range frames {
		if at := videoT0 + f.ts; at >= from && at < step2.EndTS {
			inClip++
		}
	}
	if n := len(decodeVideo(t, clip, synthW, synthH)); n != inClip {
		t.Fatalf("the clip of step 2 decodes to %d frames, want %d", n, inClip)
	}
	req, _ := http.NewRequest("GET", base+"/v1/recordings/"+id+"/video.webm", nil)
	req.Header.Set("Range", "bytes=100-199")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, video[100:200]) {
		t.Fatalf("Range: %d, %d bytes", resp.StatusCode, len(part))
	}
	decoded := decodeVideo(t, video, synthW, synthH)
	if len(decoded) != len(frames) {
		t.Fatalf("the stored video has %d frames, the input %d", len(decoded), len(frames))
	}
	// Video time 0 is the recording's first event (the first receipt, 1 ns
	// after the stream's start), so stream time ≈ video time.
	shown, hidden := 0, 0
	for _, f := range decoded {
		mx, mean, white := boxStats(f, synthW)
		switch {
		case f.sec > boxFrom-0.01 && f.sec < boxTo-0.01:
			// Lossy re-encoding leaves the black a little ringing from
			// the content around it; the box's white is never there.
			if mx > 64 || mean > 8 || white > 0 {
				t.Fatalf("frame at %.2fs shows the box under the mask: max channel %d, mean %.1f, %d white pixels", f.sec, mx, mean, white)
			}
			hidden++
		case white > boxRect.Dx()*boxRect.Dy()/3:
			shown++
		}
	}
	if hidden == 0 || shown != 0 {
		t.Fatalf("%d frames checked under the mask; %d frames outside its span show the box (want 0: the box is only drawn inside it)", hidden, shown)
	}

	// The unmasked GOPs are the input's frames, bit for bit.
	p.stop()
	// And the input's frames that show the box are nowhere in what the
	// server wrote (files, decompressed where compressed): a 32-byte
	// window from the middle of each would be found if it were.
	corpus := testenv.Corpus{}
	corpus.AddFiles(t, p.data, "after")
	// The search finds what is there: the first frame (kept as received).
	if !storedAnywhere(corpus, frames[0]) {
		t.Fatal("the search does not find the first frame's bytes, which are stored")
	}
	assertBoxFramesNotStored(t, corpus, frames)
	st, err := store.OpenStore(p.data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byTime := map[int64]inputFrame{}
	for _, f := range frames {
		byTime[videoT0+f.ts] = f
	}
	same := 0
	for _, g := range gops {
		if g.Masked {
			continue
		}
		c, _ := store.ParseCID(g.CID)
		rc, err := st.Blobs.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		_, pkts, err := webm.ReadGOP(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, pk := range pkts {
			in, ok := byTime[g.StartTS+pk.Time]
			if !ok || !bytes.Equal(in.data, pk.Data) || in.key != pk.Key {
				t.Fatalf("GOP at %d: frame at +%d is not the input's", g.StartTS-videoT0, pk.Time)
			}
			same++
		}
	}
	st.Close()
	if same == 0 {
		t.Fatal("no unmasked frame compared")
	}

	// A rerun of the same screen: every GOP the first run kept as received
	// is the same blob (stored once).
	p.start()
	id2 := openRec(t, base, "video")
	sendAll(t, base, id2, videoLines(stream, []int{50000}, nil, 1), 50)
	finishRec(t, base, id2)
	first := map[string]bool{}
	for _, g := range gops {
		first[g.CID] = true
	}
	shared := 0
	var second []event.VideoGOP
	for _, v := range videoEvents(t, base, id2) {
		second = append(second, v.GOPs...)
	}
	for _, g := range second {
		if first[g.CID] {
			shared++
		}
	}
	if len(second) != keys || shared != len(gops)-masked {
		t.Fatalf("rerun: %d GOPs, %d shared with the first run; want %d and %d", len(second), shared, keys, len(gops)-masked)
	}
}

// TestExecutorVideoBadInput: each bad stream is refused with its error
// and a next step, and nothing acknowledged before it is lost.
func TestExecutorVideoBadInput(t *testing.T) {
	stream := synthVideo(t, "vp8")
	_, blocks := inputFrames(t, stream)
	const chunkLimit = 256 << 10
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir(),
		args: []string{"--max-video-chunk-bytes", strconv.Itoa(chunkLimit)}}
	p.start()
	defer p.stop()
	base := "http://" + p.addr

	type envelope struct {
		Error struct {
			Code, Message, Next string
		} `json:"error"`
	}
	// Each case: a good prefix acknowledged, then the bad chunk.
	cases := []struct {
		name   string
		status int
		code   string
		mangle func(s []byte) (good, bad []byte)
		end    bool // the bad chunk says the stream ends
	}{
		{"wrong EBML magic", 422, "VIDEO_NOT_WEBM", func(s []byte) ([]byte, []byte) {
			return nil, append([]byte{0x1A, 0x45, 0xDF, 0xA4}, s[4:4096]...)
		}, false},
		{"truncated cluster", 422, "VIDEO_MALFORMED", func(s []byte) ([]byte, []byte) {
			// A cluster cut after one of its blocks, the next cluster
			// following at once: that cluster is shorter than it says.
			k := len(blocks) / 2
			for blocks[k+1][0] != blocks[k][1] {
				k++ // a block with another of the same cluster after it
			}
			next := int(blocks[k][1]) + bytes.Index(s[blocks[k][1]:], []byte{0x1F, 0x43, 0xB6, 0x75})
			return s[:int(blocks[k][0])], append(append([]byte(nil), s[blocks[k][0]:blocks[k][1]]...), s[next:next+4096]...)
		}, false},
		{"stream ends inside a cluster", 422, "VIDEO_MALFORMED", func(s []byte) ([]byte, []byte) {
			b := blocks[len(blocks)/2]
			cut := int(b[0]+b[1]) / 2
			return s[:int(b[0])], s[b[0]:cut]
		}, true},
		{"unknown codec", 415, "VIDEO_CODEC_UNSUPPORTED", func(s []byte) ([]byte, []byte) {
			bad := bytes.Replace(append([]byte(nil), s[:8192]...), []byte("V_VP8"), []byte("V_XYZ"), 1)
			return nil, bad
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := openRec(t, base, "bad")
			good, bad := c.mangle(stream)
			var lines []string
			if len(good) > 0 {
				lines = videoLines(good, []int{3000}, nil, 1)
			} else {
				lines = videoLines(nil, []int{1}, nil, 1) // a receipt only
			}
			sendAll(t, base, id, lines, 5)
			before := storedEvents(t, base, id, uint64(len(lines)))
			badLine, _ := json.Marshal(event.Envelope{Seq: uint64(len(lines) + 1), TS: videoT0 + 9e9, Step: 3, Kind: event.KindVideo,
				Data: json.RawMessage(fmt.Sprintf(`{"mime":"video/webm","stream_start_ts":%d,"chunk":%q,"end":%v}`, videoT0, base64.StdEncoding.EncodeToString(bad), c.end))})
			code, b := postLines(t, base, id, []string{string(badLine)})
			var e envelope
			json.Unmarshal(b, &e)
			if code != c.status || e.Error.Code != c.code || e.Error.Next == "" {
				t.Fatalf("got %d %s, want %d %s with a next", code, b, c.status, c.code)
			}
			if after := storedEvents(t, base, id, uint64(len(lines))); !bytes.Equal(before, after) {
				t.Fatalf("the refused chunk changed what was stored")
			}
			finishRec(t, base, id)
			if len(good) > 0 {
				var n int
				for _, v := range videoEvents(t, base, id) {
					n += len(v.GOPs)
				}
				if n == 0 {
					t.Fatal("the GOPs acknowledged before the bad chunk are gone")
				}
			}
		})
	}
	t.Run("chunk larger than the limit", func(t *testing.T) {
		if len(stream) <= chunkLimit+1 {
			t.Fatalf("the synthetic stream (%d bytes) is not larger than the limit", len(stream))
		}
		id := openRec(t, base, "bad")
		small := videoLines(stream[:40000], []int{4000}, nil, 1)
		sendAll(t, base, id, small, 4)
		before := storedEvents(t, base, id, uint64(len(small)))
		big := videoLines(stream[40000:], []int{chunkLimit + 1}, nil, uint64(len(small)+1))
		code, b := postLines(t, base, id, big[:1+len(big)/2])
		var e envelope
		json.Unmarshal(b, &e)
		if code != 413 || e.Error.Code != "VIDEO_CHUNK_TOO_LARGE" || e.Error.Next == "" {
			t.Fatalf("got %d %s, want 413 VIDEO_CHUNK_TOO_LARGE with a next", code, b)
		}
		if after := storedEvents(t, base, id, uint64(len(small))); !bytes.Equal(before, after) {
			t.Fatalf("the refused chunk changed what was stored")
		}
		// The rest, in chunks within the limit, completes the stream.
		sendAll(t, base, id, videoLines(stream[40000:], []int{chunkLimit / 2}, nil, uint64(len(small)+1)), 4)
		finishRec(t, base, id)
		var n int
		for _, v := range videoEvents(t, base, id) {
			n += len(v.GOPs)
		}
		if n == 0 {
			t.Fatal("no GOP stored")
		}
	})
}

// TestExecutorVideoCrash kills the server with SIGKILL mid-stream and
// resumes: the stored video plays without error in ffprobe and, from
// start to end, in Chromium's <video>.
func TestExecutorVideoCrash(t *testing.T) {
	stream := synthVideo(t, "vp8")
	frames, blocks := inputFrames(t, stream)
	keys := keyframes(frames)
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	base := "http://" + p.addr
	id := openRec(t, base, "crash")
	lines := videoLines(stream, []int{1500, 2500}, nil, 1)
	half := len(lines) / 2
	want := survivingGOPs(t, stream, frames, blocks, chunkBytes(t, lines[:half]))
	if want >= keys || want < keys-2 {
		t.Fatalf("the kill point leaves %d of %d GOPs: the test should lose the one in progress", want, keys)
	}
	sendAll(t, base, id, lines[:half], 3)
	p.kill()
	p.start()
	defer p.stop()
	// The executor resumes after what was acknowledged.
	sendAll(t, base, id, lines[half:], 3)
	waitFinishedThrough(t, base, id, finishRec(t, base, id))
	var gops, resynced int
	for _, v := range videoEvents(t, base, id) {
		gops += len(v.GOPs)
		resynced += v.Resynced
	}
	// The GOP in progress at the kill was held in memory only: it is
	// lost, and the stream resumes at the next cluster.
	if gops != want {
		t.Fatalf("%d GOPs stored of %d (%d frames skipped at the restart): want %d, all but the one in progress", gops, keys, resynced, want)
	}
	video := getBytes(t, base+"/v1/recordings/"+id+"/video.webm")
	decoded := decodeVideo(t, video, synthW, synthH)
	t.Logf("%d GOPs, %d frames lost at the restart, %d frames decoded", gops, resynced, len(decoded))

	// Chromium plays it from start to end.
	ctx := testenv.Chromium(t)
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	// The server's responses are same-origin resources (CORP), so the
	// video is opened as a page of its own: Chromium's media document,
	// one <video> element.
	if err := chromedp.Do(cctx, chromedp.Navigate(base+"/v1/recordings/"+id+"/video.webm")); err != nil {
		t.Fatal(err)
	}
	type played struct {
		Ended    bool    `json:"ended"`
		Error    int     `json:"error"`
		Current  float64 `json:"current"`
		Duration float64 `json:"duration"`
	}
	res, err := chromedp.Run(cctx, chromedp.Evaluate[played](`new Promise(resolve => {
  const v = document.querySelector("video");
  v.muted = true;
  v.pause();
  v.currentTime = 0;
  const done = () => resolve({ended: v.ended, error: v.error ? v.error.code : 0, current: v.currentTime, duration: v.duration});
  v.addEventListener("ended", done);
  v.addEventListener("error", done);
  v.playbackRate = 8;
  v.play().catch(done);
})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ended || res.Error != 0 || res.Duration < synthSeconds-3 || res.Current < res.Duration-0.5 {
		t.Fatalf("Chromium: %+v", res)
	}
}

// TestExecutorVideoStreams: a recording holding two streams one after the
// other. A masks-only event naming another stream leaves the open stream
// alone; the second stream's first chunk completes the first's last GOP;
// an end completes the second; the video holds both.
func TestExecutorVideoStreams(t *testing.T) {
	stream := synthStream(t, "vp8", true)
	frames, _ := inputFrames(t, synthVideo(t, "vp8"))
	keys := keyframes(frames)
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	id := openRec(t, base, "streams")

	// A live stream: its Segment has no size, so only an end or the next
	// stream completes its last GOP.
	first := videoLines(stream, []int{40000}, nil, 1)
	// A masks-only event for an unrelated stream, in the middle.
	other, _ := json.Marshal(event.Envelope{Seq: uint64(len(first)/2 + 1), TS: videoT0 + 6e9, Step: 2, Kind: event.KindVideo,
		Data: json.RawMessage(fmt.Sprintf(`{"mime":"video/webm","stream_start_ts":%d,"masks":[{"x":0,"y":0,"w":8,"h":8,"from_ts":1,"to_ts":2}]}`, videoT0+999))})
	lines := append(first[:len(first)/2:len(first)/2], string(other))
	for i, l := range first[len(first)/2:] {
		var e event.Envelope
		json.Unmarshal([]byte(l), &e)
		e.Seq = uint64(len(first)/2 + 2 + i)
		b, _ := json.Marshal(e)
		lines = append(lines, string(b))
	}
	// The second stream starts 20 s later, then ends.
	second := videoT0 + 20e9
	for _, chunk := range [][]byte{stream[:len(stream)/2], stream[len(stream)/2:]} {
		b, _ := json.Marshal(event.Envelope{Seq: uint64(len(lines) + 1), TS: second + 1, Step: 3, Kind: event.KindVideo,
			Data: json.RawMessage(fmt.Sprintf(`{"mime":"video/webm","stream_start_ts":%d,"chunk":%q}`, second, base64.StdEncoding.EncodeToString(chunk)))})
		lines = append(lines, string(b))
	}
	end, _ := json.Marshal(event.Envelope{Seq: uint64(len(lines) + 1), TS: second + 13e9, Step: 3, Kind: event.KindVideo,
		Data: json.RawMessage(fmt.Sprintf(`{"mime":"video/webm","stream_start_ts":%d,"end":true}`, second))})
	lines = append(lines, string(end))
	sendAll(t, base, id, lines, 3)
	waitFinishedThrough(t, base, id, finishRec(t, base, id))

	perStream := map[int64]int{}
	for _, v := range videoEvents(t, base, id) {
		for _, g := range v.GOPs {
			if g.StartTS >= second {
				perStream[second]++
			} else {
				perStream[videoT0]++
			}
		}
	}
	if perStream[videoT0] != keys || perStream[second] != keys {
		t.Fatalf("GOPs per stream %v, want %d each", perStream, keys)
	}
	video := getBytes(t, base+"/v1/recordings/"+id+"/video.webm")
	decoded := decodeVideo(t, video, synthW, synthH)
	if len(decoded) != 2*len(frames) {
		t.Fatalf("the video has %d frames, the two streams %d", len(decoded), 2*len(frames))
	}
	if last := decoded[len(decoded)-1].sec; last < 20+synthSeconds-1 {
		t.Fatalf("the video's last frame is at %.1f s; the second stream runs to about %d s", last, 20+synthSeconds)
	}
}

// TestExecutorVideoFailsClosed: a server whose ffmpeg is missing cannot
// mask, so the GOPs a mask covers are dropped and counted in the
// redaction report, their pixels written nowhere, and the rest of the
// video is stored and plays.
func TestExecutorVideoFailsClosed(t *testing.T) {
	stream := synthVideo(t, "vp8")
	frames, _ := inputFrames(t, stream)
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir(),
		env: []string{"FFMPEG=" + filepath.Join(t.TempDir(), "no-ffmpeg")}}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	mask := boxMask()
	id := openRec(t, base, "video")
	sendAll(t, base, id, videoLines(stream, []int{30000}, []event.TimedRect{mask}, 1), 5)
	waitFinishedThrough(t, base, id, finishRec(t, base, id))

	var kept, dropped, droppedFrames int
	for _, v := range videoEvents(t, base, id) {
		kept += len(v.GOPs)
		for _, g := range v.Dropped {
			droppedFrames += g.Frames
			if g.Rule != "video:unmaskable" || g.CID != "" || !(g.StartTS <= mask.ToTS && g.EndTS > mask.FromTS) {
				t.Fatalf("dropped GOP %+v", g)
			}
			dropped++
		}
		for _, g := range v.GOPs {
			if g.Masked || (g.StartTS <= mask.ToTS && g.EndTS > mask.FromTS) {
				t.Fatalf("a GOP the mask covers was stored: %+v", g)
			}
		}
	}
	if dropped == 0 || kept+dropped != keyframes(frames) {
		t.Fatalf("%d GOPs kept, %d dropped, of %d", kept, dropped, keyframes(frames))
	}
	var rep store.RedactionReport
	getJSON(t, base+"/v1/recordings/"+id+"/redaction", &rep)
	counted := int64(0)
	for _, r := range rep.Rules {
		if r.Rule == "video:unmaskable" && r.Channel == "video" {
			counted += r.Count
		}
	}
	if counted != int64(dropped) {
		t.Fatalf("the redaction report counts %d unmaskable GOPs, %d were dropped: %+v", counted, dropped, rep.Rules)
	}
	// The rest plays: the frames of the kept GOPs, the dropped span frozen.
	video := getBytes(t, base+"/v1/recordings/"+id+"/video.webm")
	if n := len(decodeVideo(t, video, synthW, synthH)); n != len(frames)-droppedFrames {
		t.Fatalf("the video has %d frames; want the %d of the kept GOPs", n, len(frames)-droppedFrames)
	}
	p.stop()
	corpus := testenv.Corpus{}
	corpus.AddFiles(t, p.data, "after")
	assertBoxFramesNotStored(t, corpus, frames)
	p.start()
}

// chunkBytes is how many stream bytes the video events of lines carry.
func chunkBytes(t *testing.T, lines []string) int64 {
	t.Helper()
	var n int64
	for _, l := range lines {
		var e event.Envelope
		var v struct {
			Chunk []byte `json:"chunk"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind == event.KindVideo {
			if err := json.Unmarshal(e.Data, &v); err != nil {
				t.Fatal(err)
			}
			n += int64(len(v.Chunk))
		}
	}
	return n
}

// survivingGOPs is how many GOPs a crash after the first cut bytes of the
// stream leaves stored: those complete before it (the next keyframe's
// block header, through its flags byte, had arrived), and those whose
// Cluster begins at or after it, where the resumed stream picks up.
func survivingGOPs(t *testing.T, stream []byte, frames []inputFrame, blocks [][2]int64, cut int64) int {
	t.Helper()
	var doc struct {
		Segment struct {
			Cluster []struct {
				Timecode uint64 `ebml:"Timecode"`
			} `ebml:"Cluster"`
		} `ebml:"Segment"`
	}
	var clusters []int64
	hook := func(e *ebml.Element) {
		if e.Name == "Cluster" {
			clusters = append(clusters, int64(e.Position))
		}
	}
	if err := ebml.Unmarshal(bytes.NewReader(stream), &doc, ebml.WithElementReadHooks(hook)); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != len(frames) {
		t.Fatalf("%d blocks, %d frames", len(blocks), len(frames))
	}
	var keys []int
	for i, f := range frames {
		if f.key {
			keys = append(keys, i)
		}
	}
	n := 0
	for j, k := range keys {
		start := int64(-1) // the Cluster holding the keyframe
		for _, c := range clusters {
			if c <= blocks[k][0] {
				start = c
			}
		}
		completeBefore := false
		if j+1 < len(keys) {
			b := blocks[keys[j+1]][0]
			// ID (1), size vint, track (1), timecode (2), flags (1).
			flagsEnd := b + 1 + int64(bits.LeadingZeros8(stream[b+1])+1) + 4
			completeBefore = flagsEnd <= cut
		}
		if completeBefore || start >= cut {
			n++
		}
	}
	return n
}
