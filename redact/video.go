package redact

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
)

// Video redaction. An executor's WebM stream arrives in chunks (video
// events) that carry mask rectangles over time ranges; ingest splits the
// stream into GOPs (a keyframe and the frames up to the next) and hands
// each complete GOP to RedactGOP. The masks are learned from the events
// (redactVideo, Observe) and applied to whichever GOP they overlap, so a
// mask may arrive in any event before the GOP it covers is complete.
//
// Painting decodes the GOP with ffmpeg, draws the rectangles opaque and
// re-encodes every frame of the GOP (its delta frames depend on the
// keyframe, so none can be kept). The GOP goes to ffmpeg on stdin and the
// frames come back on stdout: no pixel of it is ever written to disk.

// maxVideoMasks bounds the distinct mask rectangles a recording remembers.
// Masks are never pruned — a mask that ended long ago can still cover a
// GOP completed later (a long GOP, a late keyframe), and forgetting it
// would store its pixels — so a recording that sends more is refused
// (redactVideo returns an error: ingest refuses the batch). Exact
// duplicates (the same rectangle over the same time range, as an executor
// that resends its masks produces) count once.
const maxVideoMasks = 100_000

// maxVideoBoxes bounds the drawbox filters one GOP needs (rectangles
// rounded to blocks, runs of frames merged). The filter chain is one
// argument of ffmpeg's command line, which Linux caps at 128 KiB (a box
// takes about 100 bytes), and every box is one more filter per frame. A
// GOP that needs more is dropped as unmaskable.
const maxVideoBoxes = 512

// videoBlock is the block size mask rectangles are rounded out to, as
// for JPEG: a VP8 macroblock, a VP9 block up to 64 px is split along the
// 16-px grid often enough that lossy re-encoding keeps a box solid.
const videoBlock = 16

// maxVideoSide is VP8's and VP9's largest frame side (14 and 16 bits,
// kept to VP8's).
const maxVideoSide = 16383

// ffmpegStderrMax bounds how much of ffmpeg's stderr is kept.
const ffmpegStderrMax = 2048

// VideoConfig says how RedactGOP runs ffmpeg. The zero value is the default.
type VideoConfig struct {
	// FFmpeg is the ffmpeg binary, a path or a name looked up on $PATH;
	// "" is "ffmpeg".
	FFmpeg string
	// Threads is ffmpeg's decoding, filtering and encoding threads; 0 means 1.
	Threads int
	// Logf, when set, is told when ffmpeg fails: its exit status and the
	// start of its stderr (bounded, printable ASCII only). It never gets
	// stream or pixel bytes.
	Logf func(format string, args ...any)
	// Slots, when set, bounds the ffmpeg processes running at once: one
	// is taken for each run, so a server shares its cores among the
	// recordings masking video. A GOP no mask touches takes none.
	Slots chan struct{}
}

// VideoGOP is one GOP to redact.
type VideoGOP struct {
	Codec         string // "V_VP8" or "V_VP9"
	Width, Height int
	WebM          []byte  // the GOP blob (standalone WebM)
	Times         []int64 // each frame's time, unix ns on the recording's clock, ascending
	End           int64   // when the last frame stops showing, unix ns
}

// VideoResult is what redaction decided for a GOP.
type VideoResult struct {
	// Frames are the re-encoded frames, one per input frame, Frames[0] a
	// keyframe and the others delta frames; nil when the GOP is kept as
	// received.
	//
	// Only Frames[0] may be marked a keyframe in the container. libvpx
	// starts every stream with a keyframe, and RedactGOP checks that the
	// first frame is one. It is asked for no other (-g/-keyint_min past
	// the GOP's end), but should it make one anyway, marking that frame
	// as a delta frame is harmless: a decoder reads the frame type from
	// the bitstream and decodes it in sequence either way; the frame is
	// merely not offered as a seek point. The reverse would not be: a
	// delta frame marked as a keyframe is where a player seeks to, or a
	// GOP splitter starts a blob, and it cannot be decoded there without
	// the frames it refers to.
	Frames [][]byte
	// Drop says the GOP must not be stored (fail closed).
	Drop bool
	// Findings are Channel "video" with Pointer "" (ingest fills in where
	// the GOP is listed): "video:mask" once per mask applied (also when
	// every one lies outside the picture and Frames stays nil), or, when
	// dropped, the one reason: "video:dropped-unmasked" (no mask, a masked
	// field on the page), "video:unmaskable" (no ffmpeg, a codec other
	// than VP8/VP9, too many boxes, ffmpeg's output too large, or a
	// stored event's masks unreadable after a restart) or
	// "video:undecodable" (ffmpeg failed, or its output is not the GOP
	// frame for frame).
	Findings []Finding
}

// videoMasks is what a recording's video events said to mask.
type videoMasks struct {
	list []event.TimedRect
	seen map[event.TimedRect]struct{}
	// lost says a stored video event's masks could not be read back
	// (Observe): which pixels to mask is unknown, so every GOP is dropped.
	lost bool
}

// add validates and remembers masks, all or none. With capped it refuses
// to grow past maxVideoMasks.
func (v *videoMasks) add(masks []event.TimedRect, capped bool) error {
	fresh := 0
	var batch map[event.TimedRect]struct{}
	for i, m := range masks {
		if m.W <= 0 || m.H <= 0 {
			return fmt.Errorf("redact: video mask %d has no area", i)
		}
		if m.ToTS < m.FromTS {
			return fmt.Errorf("redact: video mask %d ends before it starts", i)
		}
		if _, ok := v.seen[m]; ok {
			continue
		}
		if _, ok := batch[m]; ok {
			continue
		}
		if batch == nil {
			batch = map[event.TimedRect]struct{}{}
		}
		batch[m] = struct{}{}
		fresh++
	}
	if fresh == 0 {
		return nil
	}
	if capped && len(v.list)+fresh > maxVideoMasks {
		return fmt.Errorf("redact: a recording may carry at most %d distinct video masks", maxVideoMasks)
	}
	if v.seen == nil {
		v.seen = map[event.TimedRect]struct{}{}
	}
	for _, m := range masks {
		if _, ok := v.seen[m]; !ok {
			v.seen[m] = struct{}{}
			v.list = append(v.list, m)
		}
	}
	return nil
}

// observe re-learns the masks of a stored video event. The log holds only
// events redactVideo accepted, so the cap is not applied again (a lowered
// cap must not forget masks already relied on).
func (v *videoMasks) observe(data json.RawMessage) {
	var stored struct {
		Masks []event.TimedRect `json:"masks"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		v.lost = true
		return
	}
	for _, m := range stored.Masks {
		// One by one: a malformed mask (none passes validation) covers
		// no pixel or no time, so skipping it loses nothing, and the
		// others are kept.
		_ = v.add([]event.TimedRect{m}, false)
	}
}

// frameRun is a run of frames, first to last inclusive.
type frameRun struct{ first, last int }

// box is one drawbox: a rectangle in pixels over a run of frames.
type box struct {
	x, y, w, h int
	run        frameRun
}

// RedactGOP paints the masks that overlap a GOP's frames and re-encodes it,
// keeps it as received when none does, or drops it when it cannot be
// masked. Frame i shows during [Times[i], Times[i+1]) (the last until
// End; an empty interval counts as the instant Times[i]), and a mask
// applies to it when the mask's [FromTS, ToTS] overlaps that.
//
// An error says the GOP is malformed (times not ascending) or ctx ended
// while ffmpeg ran: that is no verdict on the GOP, and it must not be
// stored.
func (r *Redactor) RedactGOP(ctx context.Context, g VideoGOP) (VideoResult, error) {
	if err := ctx.Err(); err != nil {
		return VideoResult{}, err
	}
	n := len(g.Times)
	if n == 0 {
		return VideoResult{}, fmt.Errorf("redact: a GOP without frames")
	}
	for i := 1; i < n; i++ {
		if g.Times[i] < g.Times[i-1] {
			return VideoResult{}, fmt.Errorf("redact: GOP frame %d's time precedes frame %d's", i, i-1)
		}
	}
	if g.End < g.Times[n-1] {
		return VideoResult{}, fmt.Errorf("redact: a GOP that ends before its last frame")
	}
	if r.vmasks.lost {
		return dropGOP("video:unmaskable"), nil
	}
	applied := r.vmasks.applying(g.Times, g.End)
	if len(applied) == 0 {
		if r.plan.DropUnmaskedFrames && r.dom.maskedOnPage() {
			return dropGOP("video:dropped-unmasked"), nil
		}
		return VideoResult{}, nil
	}
	var encoder string
	switch g.Codec {
	case "V_VP8":
		encoder = "libvpx"
	case "V_VP9":
		encoder = "libvpx-vp9"
	default:
		return dropGOP("video:unmaskable"), nil
	}
	if g.Width <= 0 || g.Height <= 0 || g.Width > maxVideoSide || g.Height > maxVideoSide ||
		int64(g.Width)*int64(g.Height) > maxFramePixels {
		return dropGOP("video:undecodable"), nil
	}
	findings := make([]Finding, len(applied))
	for i := range findings {
		findings[i] = Finding{Rule: "video:mask", Channel: string(event.KindVideo)}
	}
	boxes := videoBoxes(applied, g.Width, g.Height)
	if len(boxes) == 0 {
		// Every mask that applies lies outside the picture: no pixel
		// changes.
		return VideoResult{Findings: findings}, nil
	}
	if len(boxes) > maxVideoBoxes {
		return dropGOP("video:unmaskable"), nil
	}
	bin := r.Video.FFmpeg
	if bin == "" {
		bin = "ffmpeg"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return dropGOP("video:unmaskable"), nil
	}
	frames, rule, err := r.encodeMasked(ctx, path, encoder, g, boxes)
	if err != nil {
		return VideoResult{}, err
	}
	if rule != "" {
		return dropGOP(rule), nil
	}
	return VideoResult{Frames: frames, Findings: findings}, nil
}

func dropGOP(rule string) VideoResult {
	return VideoResult{Drop: true, Findings: []Finding{{Rule: rule, Channel: string(event.KindVideo)}}}
}

// appliedMask is a mask and the frames it covers.
type appliedMask struct {
	rect event.Rect
	runs []frameRun
}

// applying returns the masks that cover a frame of a GOP, in the order
// they were learned.
func (v *videoMasks) applying(times []int64, end int64) []appliedMask {
	n := len(times)
	// interval returns frame i's [lo, hi); an empty one is the instant lo.
	interval := func(i int) (lo, hi int64) {
		lo, hi = times[i], end
		if i+1 < n {
			hi = times[i+1]
		}
		if hi <= lo {
			hi = lo + 1
		}
		return lo, hi
	}
	gopLo := times[0]
	gopHi := end
	if gopHi <= times[n-1] {
		gopHi = times[n-1] + 1
	}
	var out []appliedMask
	for _, m := range v.list {
		if m.FromTS >= gopHi || m.ToTS < gopLo {
			continue
		}
		var runs []frameRun
		for i := 0; i < n; i++ {
			lo, hi := interval(i)
			if m.FromTS >= hi || m.ToTS < lo {
				continue
			}
			if k := len(runs) - 1; k >= 0 && runs[k].last == i-1 {
				runs[k].last = i
			} else {
				runs = append(runs, frameRun{i, i})
			}
		}
		if len(runs) > 0 {
			out = append(out, appliedMask{rect: m.Rect, runs: runs})
		}
	}
	return out
}

// videoBoxes turns the applied masks into drawbox rectangles: each rounded
// out to videoBlock and clipped to the frame; masks with the same
// rectangle share one box per run of frames (runs that overlap or touch
// are merged). Masks wholly outside the frame give none.
func videoBoxes(applied []appliedMask, width, height int) []box {
	runsOf := map[image.Rectangle][]frameRun{}
	var order []image.Rectangle
	for _, a := range applied {
		r := maskRect(a.rect, 1, 1, videoBlock, width, height)
		// drawbox reads a width or height of 0 as the whole frame: an
		// empty rectangle must not become a box.
		if r.Empty() {
			continue
		}
		if _, ok := runsOf[r]; !ok {
			order = append(order, r)
		}
		runsOf[r] = append(runsOf[r], a.runs...)
	}
	var boxes []box
	for _, r := range order {
		runs := runsOf[r]
		slices.SortFunc(runs, func(a, b frameRun) int { return a.first - b.first })
		merged := runs[:1]
		for _, u := range runs[1:] {
			last := &merged[len(merged)-1]
			if u.first <= last.last+1 {
				last.last = max(last.last, u.last)
				continue
			}
			merged = append(merged, u)
		}
		for _, u := range merged {
			boxes = append(boxes, box{x: r.Min.X, y: r.Min.Y, w: r.Dx(), h: r.Dy(), run: u})
		}
	}
	return boxes
}

// videoFilter is the filter chain: the decoded frames scaled to the
// track's size (a no-op unless the stream's frames differ from what its
// header says, so the rectangles always mean the track's pixels), 4:2:0
// (so the 16-px grid is whole chroma blocks too), then one opaque drawbox
// per box, enabled by frame index.
func videoFilter(width, height int, boxes []box) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "scale=%d:%d,format=yuv420p", width, height)
	c := MaskColor
	for _, b := range boxes {
		fmt.Fprintf(&sb, ",drawbox=x=%d:y=%d:w=%d:h=%d:color=0x%02x%02x%02x@1:t=fill:enable='between(n,%d,%d)'",
			b.x, b.y, b.w, b.h, c.R, c.G, c.B, b.run.first, b.run.last)
	}
	return sb.String()
}

// videoBitrateCap is the bitrate the re-encoding may not exceed: twice the
// GOP's own (so quality follows what the executor chose and the stored GOP
// stays near its size), at least 1 Mbit/s, at most 100 Mbit/s.
func videoBitrateCap(g VideoGOP) int64 {
	dur := float64(g.End - g.Times[0])
	if dur < 1e6 {
		dur = 1e6
	}
	bps := 2 * float64(len(g.WebM)) * 8 * 1e9 / dur
	return int64(min(max(bps, 1e6), 100e6))
}

// ffmpegArgs is the command line that decodes a GOP blob from stdin,
// paints the boxes and writes the re-encoded frames as IVF to stdout.
func ffmpegArgs(encoder string, threads int, g VideoGOP, boxes []box) []string {
	th := strconv.Itoa(threads)
	gop := strconv.Itoa(len(g.Times) + 1)
	return []string{
		"-hide_banner", "-nostdin", "-nostats", "-loglevel", "error",
		// Any decoding error fails the run: a frame the decoder skipped
		// would shift the frame indexes the boxes are enabled by.
		"-xerror",
		"-threads", th,
		"-max_pixels", strconv.Itoa(maxFramePixels),
		"-protocol_whitelist", "pipe",
		"-f", "webm", "-i", "pipe:0",
		"-map", "0:v:0",
		"-filter_threads", th,
		"-vf", videoFilter(g.Width, g.Height, boxes),
		// Output frame i is input frame i, with its timestamp in the
		// input's time base (checked against Times).
		"-fps_mode", "passthrough", "-enc_time_base", "-1",
		"-c:v", encoder,
		"-deadline", "realtime", "-cpu-used", "8",
		"-crf", "10", "-b:v", strconv.FormatInt(videoBitrateCap(g), 10),
		// One packet per frame (no hidden alt-ref frames), and one
		// keyframe, the first: keyint_min = g stops scene-cut keyframes.
		"-auto-alt-ref", "0", "-lag-in-frames", "0",
		"-g", gop, "-keyint_min", gop,
		"-threads", th,
		"-f", "ivf", "pipe:1",
	}
}

// encodeMasked runs ffmpeg. It returns the frames, or the rule a GOP is
// dropped by, or an error when ctx ended.
func (r *Redactor) encodeMasked(ctx context.Context, path, encoder string, g VideoGOP, boxes []box) ([][]byte, string, error) {
	threads := r.Video.Threads
	if threads <= 0 {
		threads = 1
	}
	if r.Video.Slots != nil {
		select {
		case r.Video.Slots <- struct{}{}:
			defer func() { <-r.Video.Slots }()
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	cmd := exec.CommandContext(ctx, path, ffmpegArgs(encoder, threads, g, boxes)...)
	cmd.Stdin = bytes.NewReader(g.WebM)
	out := &cappedBuffer{max: 64<<20 + 16*len(g.WebM)}
	cmd.Stdout = out
	stderr := &cappedBuffer{max: ffmpegStderrMax, truncate: true}
	cmd.Stderr = stderr
	// No environment (FFREPORT would make ffmpeg write a log file), and
	// no working directory it could write to by accident.
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		r.logf("redact: starting ffmpeg failed: %v", err)
		return nil, "video:unmaskable", nil
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		return nil, "", ctx.Err()
	}
	if out.over {
		r.logf("redact: ffmpeg's output exceeded %d bytes", out.max)
		return nil, "video:unmaskable", nil
	}
	if err != nil {
		r.logf("redact: ffmpeg failed to mask a GOP (%v): %s", err, printable(stderr.b))
		return nil, "video:undecodable", nil
	}
	frames, err := readIVF(out.b, g)
	if err != nil {
		r.logf("redact: ffmpeg's output is unusable: %v", err)
		return nil, "video:undecodable", nil
	}
	return frames, "", nil
}

func (r *Redactor) logf(format string, args ...any) {
	if r.Video.Logf != nil {
		r.Video.Logf(format, args...)
	}
}

// cappedBuffer keeps at most max bytes. Past it, it either fails the
// write (over is set, and ffmpeg's stdout pipe breaks) or, truncating,
// drops the rest silently.
type cappedBuffer struct {
	b        []byte
	max      int
	truncate bool
	over     bool
}

var errTooMuchOutput = errors.New("output too large")

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); len(p) > room {
		if !c.truncate {
			c.over = true
			return 0, errTooMuchOutput
		}
		c.b = append(c.b, p[:max(room, 0)]...)
		return len(p), nil
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// printable keeps printable ASCII of ffmpeg's stderr, lines joined.
func printable(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		switch {
		case c == '\n' || c == '\r' || c == '\t':
			sb.WriteByte(' ')
		case c >= 0x20 && c < 0x7f:
			sb.WriteByte(c)
		default:
			sb.WriteByte('?')
		}
	}
	return strings.TrimSpace(sb.String())
}

// IVF: a 32-byte file header ("DKIF", version 0, header size 32, fourcc,
// width, height, time base denominator and numerator, frame count, unused;
// little-endian), then per frame a 12-byte header (size u32, pts u64) and
// the frame.
const (
	ivfHeaderLen = 32
	ivfFrameLen  = 12
)

// readIVF parses ffmpeg's IVF output and checks it is the GOP re-encoded:
// the codec and size asked for, one frame per input frame, each at its
// input frame's time (so output frame i is input frame i), the first a
// keyframe. Errors never carry stream bytes.
func readIVF(b []byte, g VideoGOP) ([][]byte, error) {
	if len(b) < ivfHeaderLen || string(b[:4]) != "DKIF" {
		return nil, fmt.Errorf("not IVF")
	}
	le := binary.LittleEndian
	hdr := int(le.Uint16(b[6:]))
	if hdr < ivfHeaderLen || hdr > len(b) {
		return nil, fmt.Errorf("IVF header size %d", hdr)
	}
	fourcc := map[string]string{"V_VP8": "VP80", "V_VP9": "VP90"}[g.Codec]
	if string(b[8:12]) != fourcc {
		return nil, fmt.Errorf("IVF codec is not %s", fourcc)
	}
	if w, h := int(le.Uint16(b[12:])), int(le.Uint16(b[14:])); w != g.Width || h != g.Height {
		return nil, fmt.Errorf("IVF size %dx%d, want %dx%d", w, h, g.Width, g.Height)
	}
	den, num := le.Uint32(b[16:]), le.Uint32(b[20:])
	if den == 0 || num == 0 {
		return nil, fmt.Errorf("IVF time base %d/%d", num, den)
	}
	var frames [][]byte
	var pts []uint64
	for off := hdr; off < len(b); {
		if len(b)-off < ivfFrameLen {
			return nil, fmt.Errorf("IVF frame header cut short at byte %d", off)
		}
		size := uint64(le.Uint32(b[off:]))
		p := le.Uint64(b[off+4:])
		off += ivfFrameLen
		if size == 0 || size > uint64(len(b)-off) {
			return nil, fmt.Errorf("IVF frame %d of %d bytes at byte %d", len(frames), size, off)
		}
		frames = append(frames, b[off:off+int(size):off+int(size)])
		pts = append(pts, p)
		off += int(size)
	}
	if len(frames) != len(g.Times) {
		return nil, fmt.Errorf("%d frames re-encoded for a GOP of %d", len(frames), len(g.Times))
	}
	// Output frame i must be input frame i: its time, relative to the
	// first, is the input's. ffmpeg keeps the input's time base
	// (-enc_time_base -1, the WebM's TimecodeScale), so they are equal;
	// half a tick allows for rounding should it not, and is less than
	// the step to a neighbouring frame (at least a tick, unless both
	// show at the same time).
	tick := float64(num) * 1e9 / float64(den)
	for i := 1; i < len(frames); i++ {
		if pts[i] < pts[0] {
			return nil, fmt.Errorf("IVF frame %d precedes the first", i)
		}
		got := float64(pts[i]-pts[0]) * tick
		want := float64(g.Times[i] - g.Times[0])
		if math.Abs(got-want) > tick/2+1 {
			return nil, fmt.Errorf("IVF frame %d is at +%.0f ns, input frame %d at +%.0f ns", i, got, i, want)
		}
	}
	if !isKeyframe(g.Codec, frames[0]) {
		return nil, fmt.Errorf("the first re-encoded frame is not a keyframe")
	}
	return frames, nil
}

// isKeyframe reads a VP8 or VP9 frame's type from its first bytes.
func isKeyframe(codec string, f []byte) bool {
	switch codec {
	case "V_VP8":
		// frame tag: bit 0 is 0 on a keyframe, then the start code 9d 01 2a
		return len(f) >= 10 && f[0]&1 == 0 && f[3] == 0x9d && f[4] == 0x01 && f[5] == 0x2a
	case "V_VP9":
		// frame_marker (2 bits, 0b10), profile_low_bit, profile_high_bit,
		// [reserved_zero when profile 3], show_existing_frame, frame_type
		// (0: key frame)
		if len(f) < 4 || f[0]>>6 != 2 {
			return false
		}
		bit := 2
		next := func() byte { v := f[0] >> (7 - bit) & 1; bit++; return v }
		profile := next() | next()<<1
		if profile == 3 {
			next()
		}
		if next() == 1 { // show_existing_frame
			return false
		}
		return next() == 0
	}
	return false
}
