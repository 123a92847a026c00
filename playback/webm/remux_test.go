package webm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/at-wat/ebml-go"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/internal/testenv"
)

// The executor's side, played by ffmpeg: a synthetic clip of gopCount
// GOPs of gopFrames frames at 5 fps (one keyframe each, every 2 s), cut
// at its keyframes into one WebM file per GOP by the segment muxer, each
// with timestamps starting at 0. Encoded once per encoder.
const (
	gopFrames = 10
	gopCount  = 4
	gopSpan   = int64(2 * time.Second)
	frameSpan = int64(200 * time.Millisecond)
)

var (
	gopsMu    sync.Mutex
	gopsCache = map[string][][]byte{}
)

func ffmpegGOPs(t testing.TB, encoder string) [][]byte {
	t.Helper()
	bin := testenv.RequireFFmpeg(t, "ffmpeg")
	gopsMu.Lock()
	defer gopsMu.Unlock()
	if g, ok := gopsCache[encoder]; ok {
		return g
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "-nostdin", "-v", "error",
		"-f", "lavfi", "-i", "testsrc2=size=320x200:rate=5",
		"-t", strconv.Itoa(gopCount*gopFrames/5),
		"-c:v", encoder, "-b:v", "300k", "-g", strconv.Itoa(gopFrames),
		"-force_key_frames", fmt.Sprintf("expr:eq(mod(n,%d),0)", gopFrames),
		"-f", "segment", "-segment_format", "webm", "-segment_time", "2", "-reset_timestamps", "1",
		filepath.Join(dir, "gop%03d.webm"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %s: %v: %s", encoder, err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "gop*.webm"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	if len(files) != gopCount {
		t.Fatalf("ffmpeg wrote %d GOP files, want %d", len(files), gopCount)
	}
	var gops [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		gops = append(gops, b)
	}
	gopsCache[encoder] = gops
	return gops
}

// absPacket is a packet with its time on the recording's clock, and
// where it came from.
type absPacket struct {
	Packet
	gop int
}

// readGOPs reads the GOP files with ReadGOP, checks what ffmpeg's
// settings promise (the codec, the size, a keyframe first, then
// gopFrames−1 delta frames 200 ms apart) and places GOP i at
// t0 + i×2 s, leaving out the GOPs in lost.
func readGOPs(t *testing.T, gops [][]byte, codec string, lost ...int) (Stream, []absPacket) {
	t.Helper()
	var s0 Stream
	var all []absPacket
	for i, g := range gops {
		s, ps, err := ReadGOP(g)
		if err != nil {
			t.Fatalf("GOP %d: %v", i, err)
		}
		if s.Codec != codec || s.Width != 320 || s.Height != 200 {
			t.Fatalf("GOP %d: stream %+v, want %s 320×200", i, s, codec)
		}
		if i == 0 {
			s0 = s
		} else if !bytes.Equal(s.CodecPrivate, s0.CodecPrivate) {
			t.Errorf("GOP %d: CodecPrivate %x, GOP 0's %x", i, s.CodecPrivate, s0.CodecPrivate)
		}
		if len(ps) != gopFrames {
			t.Fatalf("GOP %d: %d frames, want %d", i, len(ps), gopFrames)
		}
		for k, p := range ps {
			if p.Key != (k == 0) || p.Time != int64(k)*frameSpan || len(p.Data) == 0 {
				t.Fatalf("GOP %d frame %d: key %v at %v, %d bytes", i, k, p.Key, time.Duration(p.Time), len(p.Data))
			}
		}
		if slices.Contains(lost, i) {
			continue
		}
		for _, p := range ps {
			p.Time += t0 + int64(i)*gopSpan
			all = append(all, absPacket{p, i})
		}
	}
	return s0, all
}

// packetSeq yields ps, counting how many were asked for.
func packetSeq(ps []absPacket, asked *int) iter.Seq2[Packet, error] {
	return func(yield func(Packet, error) bool) {
		for _, p := range ps {
			if asked != nil {
				*asked++
			}
			if !yield(p.Packet, nil) {
				return
			}
		}
	}
}

// runClean runs a tool that must succeed and write nothing to stderr,
// and returns its stdout.
func runClean(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// checkDecodes has ffprobe count the frames (and nothing said on
// stderr) and ffmpeg decode them all without a complaint, and returns
// ffprobe's view.
func checkDecodes(t *testing.T, path string) ffprobeResult {
	t.Helper()
	probe := testenv.RequireFFmpeg(t, "ffprobe")
	out := runClean(t, probe, "-v", "error", "-count_frames", "-select_streams", "v:0",
		"-show_entries", "stream=codec_name,width,height,nb_read_frames:format=duration",
		"-show_chapters", "-of", "json", path)
	var r ffprobeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ffprobe output: %v\n%s", err, out)
	}
	runClean(t, testenv.RequireFFmpeg(t, "ffmpeg"), "-nostdin", "-v", "error", "-i", path, "-f", "null", "-")
	return r
}

// checkSamePackets reads the output back with ReadGOP: the same stream,
// and exactly the packets given (bytes, keyframe flags), at video times
// wantMS.
func checkSamePackets(t *testing.T, out []byte, s Stream, want []absPacket, wantMS []int64) {
	t.Helper()
	gs, got, err := ReadGOP(out)
	if err != nil {
		t.Fatalf("ReadGOP of the output: %v", err)
	}
	if gs.Codec != s.Codec || gs.Width != s.Width || gs.Height != s.Height || !bytes.Equal(gs.CodecPrivate, s.CodecPrivate) {
		t.Errorf("output stream %+v, want %+v", gs, s)
	}
	if len(got) != len(want) {
		t.Fatalf("%d packets in the output, want %d", len(got), len(want))
	}
	for i, p := range got {
		w := want[i]
		if !bytes.Equal(p.Data, w.Data) || p.Key != w.Key || p.Time != wantMS[i]*1e6 {
			t.Errorf("packet %d: key %v at %v, %d bytes; want GOP %d's: key %v at %d ms, %d bytes (same bytes: %v)",
				i, p.Key, time.Duration(p.Time), len(p.Data), w.gop, w.Key, wantMS[i], len(w.Data), bytes.Equal(p.Data, w.Data))
		}
	}
}

// checkLayout checks what Encode's files promise too: the head's
// elements in order where the SeekHead says, every cluster beginning with
// a keyframe and every cue pointing at the cluster of its time.
func checkLayout(t *testing.T, info Info, withChapters bool) {
	t.Helper()
	var names []string
	pos := map[string]int64{}
	for _, e := range info.Layout {
		names = append(names, e.Name)
		pos[e.Name] = e.Position
	}
	want := []string{"SeekHead", "Info", "Tracks", "Chapters", "Cues", "Cluster"}
	if !withChapters {
		want = slices.DeleteFunc(want, func(s string) bool { return s == "Chapters" })
	}
	if !slices.Equal(names, want) {
		t.Fatalf("layout %v, want %v", names, want)
	}
	for _, name := range want[1 : len(want)-1] {
		if got, ok := info.Seeks[name]; !ok || got != pos[name] {
			t.Errorf("SeekHead puts %s at %d (listed %v), it is at %d", name, got, ok, pos[name])
		}
	}
	if info.DocType != "webm" || info.TimecodeScale != 1_000_000 || info.MuxingApp != "flightrec" || info.DefaultDuration != 0 {
		t.Errorf("info: doc type %q, scale %d, app %q, default duration %v", info.DocType, info.TimecodeScale, info.MuxingApp, info.DefaultDuration)
	}
	clusterAt := map[int64]ClusterInfo{}
	for _, c := range info.Clusters {
		if !c.Keyframe {
			t.Errorf("cluster at %v does not begin with a keyframe", c.Time)
		}
		clusterAt[c.Position] = c
	}
	if len(info.Cues) != len(info.Clusters) || len(info.Cues) != info.Keyframes {
		t.Errorf("%d cues for %d clusters and %d keyframes", len(info.Cues), len(info.Clusters), info.Keyframes)
	}
	for _, q := range info.Cues {
		if c, ok := clusterAt[q.ClusterPosition]; !ok || c.Time != q.Time || q.Track != 1 {
			t.Errorf("cue %+v points at no cluster of its time (%+v)", q, c)
		}
	}
}

// GOPs an executor encoded (VP8 and VP9, as ffmpeg writes them), one of
// them lost, remuxed into one file: the layout Encode writes, the
// packets' bytes untouched, and ffmpeg decodes every frame.
func TestMuxGOPs(t *testing.T) {
	for _, tc := range []struct{ encoder, codec, ffName string }{
		{"libvpx", "V_VP8", "vp8"},
		{"libvpx-vp9", "V_VP9", "vp9"},
	} {
		t.Run(tc.ffName, func(t *testing.T) {
			t.Parallel()
			gops := ffmpegGOPs(t, tc.encoder)
			// GOP 2 (4–6 s) never arrived.
			s, packets := readGOPs(t, gops, tc.codec, 2)
			const sec = int64(time.Second)
			opt := MuxOptions{Start: t0, End: t0 + gopCount*gopSpan, TempDir: t.TempDir()}
			chapters := []Chapter{
				{Step: 3, Title: "third, in the last GOP", Start: t0 + 6*sec + 300e6},
				{Step: 1, Title: "first", Start: t0 - sec, End: t0 + 3*sec}, // begins before the video
				{Step: 2, Title: "", Start: t0 + 3*sec},                     // unfinished, untitled
			}
			var out bytes.Buffer
			if err := Mux(context.Background(), opt, s, packetSeq(packets, nil), chapters, &out); err != nil {
				t.Fatal(err)
			}
			info, err := Probe(bytes.NewReader(out.Bytes()), int64(out.Len()))
			if err != nil {
				t.Fatal(err)
			}
			checkLayout(t, info, true)
			dur := time.Duration(opt.End - opt.Start)
			if info.CodecID != tc.codec || info.Width != 320 || info.Height != 200 || info.Duration != dur {
				t.Errorf("codec %q %d×%d, duration %v; want %s 320×200, %v", info.CodecID, info.Width, info.Height, info.Duration, tc.codec, dur)
			}
			wantKeys := []time.Duration{0, 2 * time.Second, 6 * time.Second}
			if info.Blocks != len(packets) || !slices.Equal(info.KeyframeTimes, wantKeys) || len(info.Clusters) != 3 ||
				info.LastBlock != dur-200*time.Millisecond {
				t.Errorf("%d blocks (want %d), keyframes at %v (want %v), %d clusters, last block at %v",
					info.Blocks, len(packets), info.KeyframeTimes, wantKeys, len(info.Clusters), info.LastBlock)
			}
			wantChapters := []ChapterInfo{
				{UID: 1, Start: 0, End: 3 * time.Second, Title: "first", Language: "eng"},
				{UID: 2, Start: 3 * time.Second, End: 6300 * time.Millisecond, Title: "Step 2", Language: "eng"},
				{UID: 3, Start: 6300 * time.Millisecond, End: dur, Title: "third, in the last GOP", Language: "eng"},
			}
			if !slices.Equal(info.Chapters, wantChapters) {
				t.Errorf("chapters %+v\nwant %+v", info.Chapters, wantChapters)
			}

			var wantMS []int64
			for _, p := range packets {
				wantMS = append(wantMS, (p.Time-t0)/1e6)
			}
			checkSamePackets(t, out.Bytes(), s, packets, wantMS)

			path := filepath.Join(t.TempDir(), "out.webm")
			if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			r := checkDecodes(t, path)
			if len(r.Streams) != 1 || r.Streams[0].CodecName != tc.ffName || r.Streams[0].Width != 320 ||
				r.Streams[0].NbReadFrames != strconv.Itoa(len(packets)) {
				t.Errorf("ffprobe: streams %+v, want one %s stream of %d frames", r.Streams, tc.ffName, len(packets))
			}
			if d := seconds(t, r.Format.Duration); math.Abs(d-dur.Seconds()) > 0.001 {
				t.Errorf("ffprobe: duration %.3f s, want %.3f s", d, dur.Seconds())
			}
			if len(r.Chapters) != 3 || r.Chapters[1].Tags["title"] != "Step 2" || seconds(t, r.Chapters[2].StartTime) != 6.3 {
				t.Errorf("ffprobe: chapters %+v", r.Chapters)
			}
		})
	}
}

// A span that starts in the middle of a GOP starts at the next keyframe
// (the delta frames before it could not be decoded), shown from time 0;
// one that ends in the middle of a GOP ends before End, and the GOPs
// after it are never asked for.
func TestMuxSpanMidGOP(t *testing.T) {
	gops := ffmpegGOPs(t, "libvpx")
	s, packets := readGOPs(t, gops, "V_VP8")
	const ms = int64(time.Millisecond)
	opt := MuxOptions{Start: t0 + 2500*ms, End: t0 + 7100*ms, TempDir: t.TempDir()}
	chapters := []Chapter{{Step: 7, Title: "clip", Start: t0 + 2*gopSpan, End: t0 + 7*int64(time.Second)}}
	asked := 0
	var out bytes.Buffer
	if err := Mux(context.Background(), opt, s, packetSeq(packets, &asked), chapters, &out); err != nil {
		t.Fatal(err)
	}
	// GOP 2 (its keyframe at 4 s, 1.5 s into the clip) and GOP 3's frames
	// up to 7.0 s.
	var want []absPacket
	var wantMS []int64
	for _, p := range packets {
		if p.Time >= t0+2*gopSpan && p.Time < opt.End {
			want = append(want, p)
			wantMS = append(wantMS, (p.Time-opt.Start)/ms)
		}
	}
	wantMS[0] = 0
	if len(want) != 16 || wantMS[1] != 1700 || wantMS[len(wantMS)-1] != 4500 {
		t.Fatalf("test setup: %d packets, at %v ms", len(want), wantMS)
	}
	checkSamePackets(t, out.Bytes(), s, want, wantMS)
	// Mux stopped at the first packet at or after End (7.2 s).
	if wantAsked := 3*gopFrames + 7; asked != wantAsked {
		t.Errorf("Mux asked for %d packets, want %d", asked, wantAsked)
	}
	info, err := Probe(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, info, true)
	if info.Duration != 4600*time.Millisecond || !slices.Equal(info.KeyframeTimes, []time.Duration{0, 3500 * time.Millisecond}) ||
		len(info.Chapters) != 1 || info.Chapters[0].Start != 1500*time.Millisecond || info.Chapters[0].End != 4500*time.Millisecond {
		t.Errorf("duration %v, keyframes at %v, chapters %+v", info.Duration, info.KeyframeTimes, info.Chapters)
	}
	path := filepath.Join(t.TempDir(), "clip.webm")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := checkDecodes(t, path); len(r.Streams) != 1 || r.Streams[0].NbReadFrames != "16" {
		t.Errorf("ffprobe: %+v", r.Streams)
	}

	// A span starting on a keyframe starts there, keeping every time.
	opt.Start = t0 + gopSpan
	out.Reset()
	if err := Mux(context.Background(), opt, s, packetSeq(packets, nil), nil, &out); err != nil {
		t.Fatal(err)
	}
	if info, err := Probe(bytes.NewReader(out.Bytes()), int64(out.Len())); err != nil || info.Blocks != 26 ||
		!slices.Equal(info.KeyframeTimes, []time.Duration{0, 2 * time.Second, 4 * time.Second}) {
		t.Errorf("from a keyframe: %d blocks, keyframes %v, %v", info.Blocks, info.KeyframeTimes, err)
	}

	// A span inside the last GOP after its keyframe: nothing decodable.
	opt = MuxOptions{Start: t0 + 6500*ms, End: t0 + 8*int64(time.Second)}
	if err := Mux(context.Background(), opt, s, packetSeq(packets, nil), nil, &out); !errors.Is(err, ErrNoFrames) {
		t.Errorf("span after the last keyframe: %v, want ErrNoFrames", err)
	}
}

// fakePackets are n packets 200 ms apart from t0, a keyframe every
// keyEvery, with made-up VP8-like data (the muxer does not look at it).
func fakePackets(n, keyEvery int) []absPacket {
	var ps []absPacket
	for i := range n {
		key := i%keyEvery == 0
		data := bytes.Repeat([]byte{byte(i)}, 40+i%17)
		data[0] = 0x11
		if key {
			data[0] = 0x10
		}
		ps = append(ps, absPacket{Packet{Time: t0 + int64(i)*frameSpan, Key: key, Data: data}, i / keyEvery})
	}
	return ps
}

var vp8Stream = Stream{Codec: "V_VP8", Width: 64, Height: 48}

func TestMuxErrors(t *testing.T) {
	ctx := context.Background()
	ps := fakePackets(20, 5)
	opt := MuxOptions{Start: t0, End: t0 + 4e9, TempDir: t.TempDir()}
	var out bytes.Buffer
	for name, c := range map[string]struct {
		opt MuxOptions
		s   Stream
	}{
		"empty span":  {MuxOptions{Start: t0, End: t0}, vp8Stream},
		"codec":       {opt, Stream{Codec: "V_AV1", Width: 64, Height: 48}},
		"no codec":    {opt, Stream{Width: 64, Height: 48}},
		"no size":     {opt, Stream{Codec: "V_VP9"}},
		"negative":    {opt, Stream{Codec: "V_VP9", Width: -1, Height: 48}},
		"end < start": {MuxOptions{Start: t0, End: t0 - 1}, vp8Stream},
	} {
		if err := Mux(ctx, c.opt, c.s, packetSeq(ps, nil), nil, &out); err == nil || errors.Is(err, ErrNoFrames) {
			t.Errorf("%s: %v", name, err)
		}
	}

	back := slices.Clone(ps)
	back[7].Time = back[6].Time - 1
	if err := Mux(ctx, opt, vp8Stream, packetSeq(back, nil), nil, &out); err == nil || !strings.Contains(err.Error(), "goes back") {
		t.Errorf("time going back: %v", err)
	}
	// Even before the span: the order is the iterator's promise.
	back = slices.Clone(ps)
	back[1].Time = back[0].Time - 1
	opt2 := opt
	opt2.Start = t0 + 1e9
	if err := Mux(ctx, opt2, vp8Stream, packetSeq(back, nil), nil, &out); err == nil || !strings.Contains(err.Error(), "goes back") {
		t.Errorf("time going back before the start: %v", err)
	}

	boom := errors.New("blob store down")
	failing := func(yield func(Packet, error) bool) {
		for i, p := range ps {
			if i == 12 {
				yield(Packet{}, boom)
				return
			}
			if !yield(p.Packet, nil) {
				return
			}
		}
	}
	if err := Mux(ctx, opt, vp8Stream, failing, nil, &out); !errors.Is(err, boom) {
		t.Errorf("iterator error: %v, want %v wrapped", err, boom)
	}

	for name, c := range map[string]struct {
		opt MuxOptions
		ps  []absPacket
	}{
		"no packets":         {opt, nil},
		"only delta frames":  {opt, fakePackets(20, 1000)[1:]},
		"all before start":   {MuxOptions{Start: t0 + 10e9, End: t0 + 20e9}, ps},
		"all after end":      {MuxOptions{Start: t0 - 20e9, End: t0}, ps},
		"no keyframe inside": {MuxOptions{Start: t0 + 1e9 + 1, End: t0 + 2e9}, ps},
	} {
		if err := Mux(ctx, c.opt, vp8Stream, packetSeq(c.ps, nil), nil, &out); !errors.Is(err, ErrNoFrames) {
			t.Errorf("%s: %v, want ErrNoFrames", name, err)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	cancelling := func(yield func(Packet, error) bool) {
		for i, p := range ps {
			if i == 3 {
				cancel()
			}
			if !yield(p.Packet, nil) {
				return
			}
		}
	}
	if err := Mux(cctx, opt, vp8Stream, cancelling, nil, &out); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("%d bytes written by failed Muxes", out.Len())
	}
}

// The iterator may reuse its buffer: Mux keeps a copy of each packet.
// Long runs without keyframes and long gaps are cut into clusters of at
// most 30 s (block times are 16-bit ms), which get no cue.
func TestMuxBuffersAndLongRuns(t *testing.T) {
	ps := fakePackets(20, 5)
	reuse := func(yield func(Packet, error) bool) {
		buf := make([]byte, 0, 1024)
		for _, p := range ps {
			buf = append(buf[:0], p.Data...)
			if !yield(Packet{Time: p.Time, Key: p.Key, Data: buf}, nil) {
				return
			}
		}
	}
	var out bytes.Buffer
	opt := MuxOptions{Start: t0, End: t0 + 4e9, TempDir: t.TempDir()}
	if err := Mux(context.Background(), opt, vp8Stream, reuse, nil, &out); err != nil {
		t.Fatal(err)
	}
	var wantMS []int64
	for i := range ps {
		wantMS = append(wantMS, int64(i)*200)
	}
	checkSamePackets(t, out.Bytes(), vp8Stream, ps, wantMS)
	info, err := Probe(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, info, false)

	// One keyframe, 100 s of delta frames at 1 fps, then a 50 s gap and
	// a delta frame, then a keyframe after a 40 s gap.
	const sec = int64(time.Second)
	var long []absPacket
	for i := range 100 {
		long = append(long, absPacket{Packet{Time: t0 + int64(i)*sec, Key: i == 0, Data: []byte{0x11, byte(i)}}, 0})
	}
	long = append(long,
		absPacket{Packet{Time: t0 + 150*sec, Data: []byte{0x11, 1}}, 0},
		absPacket{Packet{Time: t0 + 190*sec, Key: true, Data: []byte{0x10, 2}}, 1},
	)
	out.Reset()
	opt = MuxOptions{Start: t0, End: t0 + 200*sec}
	if err := Mux(context.Background(), opt, Stream{Codec: "V_VP9", Width: 64, Height: 48, CodecPrivate: []byte{1, 1, 0}}, packetSeq(long, nil), nil, &out); err != nil {
		t.Fatal(err)
	}
	info, err = Probe(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var keyClusters, times []time.Duration
	for _, c := range info.Clusters {
		times = append(times, c.Time)
		if c.Keyframe {
			keyClusters = append(keyClusters, c.Time)
		}
	}
	wantTimes := []time.Duration{0, 31 * time.Second, 62 * time.Second, 93 * time.Second, 150 * time.Second, 190 * time.Second}
	if !slices.Equal(times, wantTimes) || len(info.Cues) != 2 || info.Cues[1].Time != 190*time.Second ||
		info.Blocks != 102 || info.CodecID != "V_VP9" {
		t.Errorf("clusters at %v (want %v), cues %+v, %d blocks, codec %s", times, wantTimes, info.Cues, info.Blocks, info.CodecID)
	}
	if _, got, err := ReadGOP(out.Bytes()); err != nil || len(got) != 102 || got[101].Time != 190*sec || !got[101].Key {
		t.Errorf("read back: %d packets, %v", len(got), err)
	}
	if s, _, _ := ReadGOP(out.Bytes()); !bytes.Equal(s.CodecPrivate, []byte{1, 1, 0}) {
		t.Errorf("CodecPrivate %x", s.CodecPrivate)
	}
}

// Hand-made GOP blobs, as ebml-go writes them: ReadGOP's reading of
// TimecodeScale, cluster and block times, BlockGroups, and its refusals.

type blobFile struct {
	EBML    ebmlHeader  `ebml:"EBML"`
	Segment blobSegment `ebml:"Segment"`
}

type blobSegment struct {
	Info    segmentInfo   `ebml:"Info"`
	Tracks  blobTracks    `ebml:"Tracks"`
	Cluster []blobCluster `ebml:"Cluster"`
}

type blobTracks struct {
	TrackEntry []blobTrack `ebml:"TrackEntry"`
}

type blobTrack struct {
	TrackNumber      uint64     `ebml:"TrackNumber"`
	TrackUID         uint64     `ebml:"TrackUID"`
	CodecID          string     `ebml:"CodecID"`
	CodecPrivate     []byte     `ebml:"CodecPrivate,omitempty"`
	TrackType        uint64     `ebml:"TrackType"`
	ContentEncodings *blobEnc   `ebml:"ContentEncodings,omitempty"`
	Video            videoTrack `ebml:"Video"`
}

type blobEnc struct {
	ContentEncoding struct {
		ContentEncodingScope uint64 `ebml:"ContentEncodingScope"`
	} `ebml:"ContentEncoding"`
}

type blobCluster struct {
	Timecode    uint64           `ebml:"Timecode"`
	SimpleBlock []ebml.Block     `ebml:"SimpleBlock,omitempty"`
	BlockGroup  []blobBlockGroup `ebml:"BlockGroup,omitempty"`
}

type blobBlockGroup struct {
	Block          ebml.Block `ebml:"Block"`
	ReferenceBlock []int64    `ebml:"ReferenceBlock,omitempty"`
}

var blobHeader = ebmlHeader{
	EBMLVersion: 1, EBMLReadVersion: 1, EBMLMaxIDLength: 4, EBMLMaxSizeLength: 8,
	DocType: "webm", DocTypeVersion: 4, DocTypeReadVersion: 2,
}

func vp9Track() blobTrack {
	return blobTrack{
		TrackNumber: 1, TrackUID: 1, CodecID: "V_VP9", CodecPrivate: []byte{1, 1, 2}, TrackType: 1,
		Video: videoTrack{PixelWidth: 64, PixelHeight: 48},
	}
}

// validBlob: TimecodeScale 0.1 ms, the first cluster at tick 50, a
// SimpleBlock cluster and a BlockGroup one.
func validBlob() blobFile {
	return blobFile{
		EBML: blobHeader,
		Segment: blobSegment{
			Info:   segmentInfo{TimecodeScale: 100_000, MuxingApp: "test", WritingApp: "test", Duration: 6000},
			Tracks: blobTracks{TrackEntry: []blobTrack{vp9Track()}},
			Cluster: []blobCluster{
				{Timecode: 50, SimpleBlock: []ebml.Block{
					{TrackNumber: 1, Timecode: 0, Keyframe: true, Data: [][]byte{{0x82, 1}}},
					{TrackNumber: 1, Timecode: 2000, Data: [][]byte{{0x86, 2}}},
				}},
				{Timecode: 4050, BlockGroup: []blobBlockGroup{
					{Block: ebml.Block{TrackNumber: 1, Timecode: 0, Data: [][]byte{{0x82, 3}}}},
					{Block: ebml.Block{TrackNumber: 1, Timecode: 2000, Data: [][]byte{{0x86, 4}}}, ReferenceBlock: []int64{-2000}},
				}},
			},
		},
	}
}

func marshalBlob(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ebml.Marshal(v, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadGOP(t *testing.T) {
	b := marshalBlob(t, ptr(validBlob()))
	s, ps, err := ReadGOP(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Codec != "V_VP9" || s.Width != 64 || s.Height != 48 || !bytes.Equal(s.CodecPrivate, []byte{1, 1, 2}) {
		t.Errorf("stream %+v", s)
	}
	want := []Packet{
		{Time: 0, Key: true, Data: []byte{0x82, 1}},
		{Time: 200e6, Data: []byte{0x86, 2}},
		{Time: 400e6, Key: true, Data: []byte{0x82, 3}},
		{Time: 600e6, Data: []byte{0x86, 4}},
	}
	if fmt.Sprint(ps) != fmt.Sprint(want) {
		t.Errorf("packets %v\nwant %v", ps, want)
	}

	// Mux writes GOP blobs too: its output reads back the same.
	var out bytes.Buffer
	seq := func(yield func(Packet, error) bool) {
		for _, p := range ps {
			p.Time += t0
			if !yield(p, nil) {
				return
			}
		}
	}
	if err := Mux(context.Background(), MuxOptions{Start: t0, End: t0 + 1e9}, s, seq, nil, &out); err != nil {
		t.Fatal(err)
	}
	if s2, ps2, err := ReadGOP(out.Bytes()); err != nil || fmt.Sprint(s2) != fmt.Sprint(s) || fmt.Sprint(ps2) != fmt.Sprint(ps) {
		t.Errorf("Mux's output reads back as %+v %v, %v", s2, ps2, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestReadGOPRejects(t *testing.T) {
	valid := marshalBlob(t, ptr(validBlob()))
	edit := func(f func(*blobFile)) []byte {
		v := validBlob()
		f(&v)
		return marshalBlob(t, &v)
	}
	// The valid blob's Segment, without its size: ebml-go's "unknown".
	type liveFile struct {
		EBML    ebmlHeader  `ebml:"EBML"`
		Segment blobSegment `ebml:"Segment,size=unknown"`
	}
	type twoSegments struct {
		EBML    ebmlHeader    `ebml:"EBML"`
		Segment []blobSegment `ebml:"Segment"`
	}
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "not a WebM file"},
		{"text", []byte("this is not a video, just some text\n"), "not a WebM file"},
		{"png", solidPNG(t, 8, 8, red), "not a WebM file"},
		{"zeros", make([]byte, 100), "not a WebM file"},
		{"header only", valid[:bytes.Index(valid, idSegment)], "no Segment"},
		{"matroska", edit(func(f *blobFile) { f.EBML.DocType = "matroska" }), `DocType "matroska"`},
		{"live", marshalBlob(t, &liveFile{EBML: blobHeader, Segment: validBlob().Segment}), "unknown size"},
		{"two segments", marshalBlob(t, &twoSegments{EBML: blobHeader, Segment: []blobSegment{validBlob().Segment, validBlob().Segment}}), "2 Segments"},
		{"truncated in a block", valid[:len(valid)-9], "truncated"},
		{"truncated between clusters", valid[:bytes.LastIndex(valid, []byte{0x1F, 0x43, 0xB6, 0x75})], "truncated"},
		{"no track", edit(func(f *blobFile) { f.Segment.Tracks.TrackEntry = nil }), "no track"},
		{"two tracks", edit(func(f *blobFile) {
			t2 := vp9Track()
			t2.TrackNumber, t2.TrackUID = 2, 2
			f.Segment.Tracks.TrackEntry = append(f.Segment.Tracks.TrackEntry, t2)
		}), "2 tracks"},
		{"audio", edit(func(f *blobFile) { f.Segment.Tracks.TrackEntry[0].TrackType = 2 }), "not video"},
		{"av1", edit(func(f *blobFile) { f.Segment.Tracks.TrackEntry[0].CodecID = "V_AV1" }), `codec "V_AV1"`},
		{"h264", edit(func(f *blobFile) { f.Segment.Tracks.TrackEntry[0].CodecID = "V_MPEG4/ISO/AVC" }), "codec"},
		{"encrypted", edit(func(f *blobFile) {
			f.Segment.Tracks.TrackEntry[0].ContentEncodings = &blobEnc{}
			f.Segment.Tracks.TrackEntry[0].ContentEncodings.ContentEncoding.ContentEncodingScope = 1
		}), "ContentEncodings"},
		{"no size", edit(func(f *blobFile) { f.Segment.Tracks.TrackEntry[0].Video = videoTrack{} }), "video size"},
		{"no frames", edit(func(f *blobFile) { f.Segment.Cluster = nil }), "no frames"},
		{"empty clusters", edit(func(f *blobFile) {
			f.Segment.Cluster = []blobCluster{{Timecode: 0}, {Timecode: 10}}
		}), "no frames"},
		{"delta first", edit(func(f *blobFile) { f.Segment.Cluster[0].SimpleBlock[0].Keyframe = false }), "first frame is not a keyframe"},
		{"referencing first", edit(func(f *blobFile) { f.Segment.Cluster = f.Segment.Cluster[1:] }), ""},
		{"laced", edit(func(f *blobFile) {
			f.Segment.Cluster[0].SimpleBlock[1].Lacing = ebml.LacingXiph
			f.Segment.Cluster[0].SimpleBlock[1].Data = [][]byte{{0x86, 2}, {0x86, 3}}
		}), "lacing"},
		{"laced, one frame", edit(func(f *blobFile) { f.Segment.Cluster[0].SimpleBlock[0].Lacing = ebml.LacingEBML }), "lacing"},
		{"other track's block", edit(func(f *blobFile) { f.Segment.Cluster[1].BlockGroup[1].Block.TrackNumber = 2 }), "track 2"},
	}
	for _, c := range cases {
		s, ps, err := ReadGOP(c.b)
		if c.want == "" {
			// A blob starting with a BlockGroup without a
			// ReferenceBlock: its first frame is a keyframe.
			if err != nil || len(ps) != 2 || !ps[0].Key || ps[1].Key || ps[1].Time != 200e6 {
				t.Errorf("%s: %v %v", c.name, ps, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "webm: gop: ") {
			t.Errorf("%s: %+v, %d packets, error %v; want one saying %q", c.name, s, len(ps), err, c.want)
		}
	}
	// Cut anywhere: an error, never frames missing without one; once
	// the Segment's header is there, one saying so.
	segAt := bytes.Index(valid, idSegment)
	_, n, _ := readVint(valid[segAt+4:])
	for cut := range len(valid) {
		_, _, err := ReadGOP(valid[:cut])
		if err == nil || (cut >= segAt+4+n && !strings.Contains(err.Error(), "truncated")) {
			t.Errorf("cut to %d of %d bytes: %v", cut, len(valid), err)
		}
	}
}

// FuzzReadGOP: whatever the bytes, ReadGOP returns an error or a valid
// GOP (a keyframe first), and never panics.
func FuzzReadGOP(f *testing.F) {
	f.Add(marshalBlob(f, ptr(validBlob())))
	f.Add([]byte{0x1A, 0x45, 0xDF, 0xA3, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ps, err := ReadGOP(b)
		if err == nil && (len(ps) == 0 || !ps[0].Key || ps[0].Time != 0 || (s.Codec != "V_VP8" && s.Codec != "V_VP9")) {
			t.Errorf("accepted %+v with %d packets", s, len(ps))
		}
	})
}

// Real Chromium plays what Mux wrote from VP8 and from VP9 GOPs (one of
// them lost) over HTTP from start to end without a media error, and
// seeks into the gap and to a chapter.
func TestChromiumPlaysMux(t *testing.T) {
	for _, tc := range []struct{ encoder, codec string }{{"libvpx", "V_VP8"}, {"libvpx-vp9", "V_VP9"}} {
		t.Run(tc.codec, func(t *testing.T) {
			gops := ffmpegGOPs(t, tc.encoder)
			s, packets := readGOPs(t, gops, tc.codec, 2)
			opt := MuxOptions{Start: t0, End: t0 + gopCount*gopSpan}
			chapters := []Chapter{{Step: 1, Title: "a", Start: t0}, {Step: 2, Title: "b", Start: t0 + 6500e6}}
			var out bytes.Buffer
			if err := Mux(context.Background(), opt, s, packetSeq(packets, nil), chapters, &out); err != nil {
				t.Fatal(err)
			}
			p := playInChromium(t, out.Bytes(), []float64{5, 6.5})
			want := float64(opt.End-opt.Start) / 1e9
			if p.Err != "" || !p.Ended || math.Abs(p.Duration-want) > 0.2 || math.Abs(p.Time-p.Duration) > 0.2 ||
				p.Width != 320 || p.Height != 200 || p.Frames == 0 {
				t.Errorf("playing: %+v; want it to end at %.1f s without error", p, want)
			}
			for i, sk := range p.Seeks {
				if sk.Err != "" || sk.Ready < 2 || math.Abs(sk.Time-[]float64{5, 6.5}[i]) > 0.2 {
					t.Errorf("seek %d: %+v", i, sk)
				}
			}
		})
	}
}

// played is what the page reports after playing a video to its end.
type played struct {
	Ended           bool
	Err             string
	Duration, Time  float64
	Width, Height   int
	Frames, Dropped int
	Seeks           []seekResult
}

type seekResult struct {
	Time  float64
	Ready int
	Err   string
}

// playInChromium serves data as video/webm (with Range, as a browser
// fetches media) to a <video> in a fresh Chromium, plays it from start
// to end at 4× speed, then seeks to each of seeks (s), and reports.
func playInChromium(t *testing.T, data []byte, seeks []float64) played {
	t.Helper()
	ctx := testenv.Chromium(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/video.webm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "video/webm")
		http.ServeContent(w, r, "video.webm", time.Unix(0, t0), bytes.NewReader(data))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><video id="v" src="/video.webm" preload="auto" muted></video>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	seekList, _ := json.Marshal(seeks)
	p, err := chromedp.Run(cctx, chromedp.Evaluate[played](`new Promise((resolve) => {
		const v = document.getElementById('v');
		const err = () => v.error ? 'error ' + v.error.code + ' ' + v.error.message : '';
		const report = async (ended) => {
			const q = v.getVideoPlaybackQuality();
			const r = {
				Ended: ended, Err: err(), Duration: v.duration, Time: v.currentTime,
				Width: v.videoWidth, Height: v.videoHeight,
				Frames: q.totalVideoFrames, Dropped: q.droppedVideoFrames, Seeks: [],
			};
			if (!ended) { resolve(r); return; }
			for (const at of `+string(seekList)+`) {
				await new Promise((done) => {
					v.addEventListener('seeked', done, {once: true});
					v.addEventListener('error', done, {once: true});
					v.currentTime = at;
				});
				for (let i = 0; i < 100 && v.readyState < 2 && !v.error; i++) await new Promise(r => setTimeout(r, 50));
				r.Seeks.push({Time: v.currentTime, Ready: v.readyState, Err: err()});
			}
			resolve(r);
		};
		v.addEventListener('ended', () => report(true), {once: true});
		v.addEventListener('error', () => report(false), {once: true});
		v.playbackRate = 4;
		v.play().catch((e) => resolve({Err: 'play: ' + e}));
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return p
}

// BenchmarkMux remuxes 10 minutes of packets held in memory (5 fps, a
// keyframe of 30 kB every 10 s, delta frames of 6 kB, as a screencast's
// VP8 might be) and reports MB/s of packet data: the cost of serving an
// executor's video, which is the container's, the temporary file's and
// the copy's.
func BenchmarkMux(b *testing.B) {
	const frames = 10 * 60 * 5
	ps := make([]absPacket, frames)
	var total int64
	for i := range ps {
		key := i%50 == 0
		size := 6_000 + i%1000
		if key {
			size = 30_000
		}
		ps[i] = absPacket{Packet{Time: t0 + int64(i)*frameSpan, Key: key, Data: bytes.Repeat([]byte{byte(i)}, size)}, i / 50}
		total += int64(size)
	}
	opt := MuxOptions{Start: t0, End: t0 + frames*frameSpan, TempDir: b.TempDir()}
	chapters := []Chapter{{Step: 1, Title: "one", Start: t0}, {Step: 2, Title: "two", Start: t0 + 300e9}}
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		var w countingWriter
		if err := Mux(context.Background(), opt, vp8Stream, packetSeq(ps, nil), chapters, &w); err != nil {
			b.Fatal(err)
		}
		if w.n < total {
			b.Fatalf("%d bytes written for %d of packets", w.n, total)
		}
	}
}
