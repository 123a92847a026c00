package webm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"iter"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoFFmpeg is returned (wrapped) when no ffmpeg binary is found: the
// caller tells the operator to install it (apt-get install ffmpeg) rather
// than reporting a failure of the recording.
var ErrNoFFmpeg = errors.New("ffmpeg not found (apt-get install ffmpeg)")

// ErrNoFrames is returned when no frame could be shown: none was given
// before Options.End, or none of them decoded.
var ErrNoFrames = errors.New("webm: no decodable frame before the end")

// Frame is one input picture.
type Frame struct {
	// Time is when the picture was on screen, unix ns on the recording's
	// clock.
	Time int64
	// Image is the JPEG or PNG. When nil, Load is called, and only if the
	// frame is shown: a frame superseded before the next output frame, or
	// one before the video's start other than the newest, is never
	// loaded, so a caller can read blobs lazily.
	Image []byte
	Load  func() ([]byte, error)
	// Cursor is the agent's pointer position in image pixels (CSS px at
	// device scale 1), or nil for none.
	Cursor *image.Point
}

// Chapter is one step's span of the recording.
type Chapter struct {
	Step  int
	Title string
	// Start and End are unix ns on the recording's clock. End ≤ Start
	// (an unfinished step: End 0) means "until the next chapter's start,
	// or the video's end". Both are clamped to the video's span.
	Start, End int64
}

// Options configures Encode.
type Options struct {
	// Start and End are unix ns: video time 0 is Start, and the video
	// lasts End−Start. For a clip they are the clip's span.
	Start, End int64
	// FPS is the output's regular frame rate (default 5, at most 60; the
	// recorder sends at most 5 frames a second).
	FPS int
	// KeyframeInterval bounds the distance between keyframes (default
	// 10 s, at most 30 s, which keeps every cluster starting with one): a
	// seek decodes at most this much video. Chapter starts are keyframes
	// whatever it says.
	KeyframeInterval time.Duration
	// CRF is libvpx's constant-quality level, 4…63, lower is better
	// (default 12: small UI text stays legible).
	CRF int
	// MaxBitrate caps the bitrate in bit/s (default 2,000,000) so a burst
	// of page changes can't blow the file up.
	MaxBitrate int
	// FFmpeg is the ffmpeg binary, a path or a name on $PATH; "" is
	// "ffmpeg" (FFmpegPath).
	FFmpeg string
	// TempDir holds the clusters while ffmpeg runs (default os.TempDir()).
	TempDir string
	// Threads is libvpx's thread count (default 1; see encoder.args).
	Threads int
	// MaxDuration bounds End−Start (default 24 h): the output's frame
	// count, and so the encoder's work and the slots it lays out, grow
	// with it. A longer video is ErrTooLong, before any work.
	MaxDuration time.Duration
}

// ErrTooLong is a video longer than Options.MaxDuration.
var ErrTooLong = errors.New("webm: the video is longer than its bound")

func (o *Options) defaults() error {
	if o.End <= o.Start {
		return fmt.Errorf("webm: end %d is not after start %d", o.End, o.Start)
	}
	if o.MaxDuration == 0 {
		o.MaxDuration = 24 * time.Hour
	}
	// End−Start overflows when they are far apart: then it is negative.
	if d := o.End - o.Start; d <= 0 || d > int64(o.MaxDuration) {
		return fmt.Errorf("%w: %d ns from start to end, at most %v", ErrTooLong, uint64(o.End)-uint64(o.Start), o.MaxDuration)
	}
	if o.FPS == 0 {
		o.FPS = 5
	}
	if o.FPS < 1 || o.FPS > 60 {
		return fmt.Errorf("webm: fps %d outside 1…60", o.FPS)
	}
	if o.KeyframeInterval == 0 {
		o.KeyframeInterval = 10 * time.Second
	}
	if o.KeyframeInterval < time.Second/time.Duration(o.FPS) || o.KeyframeInterval > maxClusterSpan*time.Millisecond {
		return fmt.Errorf("webm: keyframe interval %v outside a frame…%v", o.KeyframeInterval, maxClusterSpan*time.Millisecond)
	}
	if o.CRF == 0 {
		o.CRF = 12
	}
	if o.CRF < 4 || o.CRF > 63 {
		return fmt.Errorf("webm: crf %d outside 4…63", o.CRF)
	}
	if o.MaxBitrate == 0 {
		o.MaxBitrate = 2_000_000
	}
	if o.MaxBitrate < 10_000 {
		return fmt.Errorf("webm: max bitrate %d too low", o.MaxBitrate)
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	return nil
}

// FFmpegPath finds the ffmpeg binary bin, a path or a name looked up on
// $PATH; "" is "ffmpeg". The error wraps ErrNoFFmpeg.
func FFmpegPath(bin string) (string, error) {
	if bin == "" {
		bin = "ffmpeg"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoFFmpeg, err)
	}
	return p, nil
}

// Encode writes a WebM of frames (in time order; see Frame) with one
// chapter per element of chapters to w. frames may be slices.Values of a
// slice, or an iterator reading a recording's frames as it goes: Encode
// holds only the newest frame and one decoded picture at a time. Of the
// frames before opt.Start only the newest is loaded, as the picture at
// time 0 (without one, the first frame after the start fills in);
// iteration stops at the first frame at or after opt.End. A frame
// older than one already seen is skipped; one that does not decode is
// skipped (the previous picture stays). Nothing is written to w until the
// whole video is encoded, so on error w is untouched.
func Encode(ctx context.Context, opt Options, frames iter.Seq[Frame], chapters []Chapter, w io.Writer) error {
	if err := opt.defaults(); err != nil {
		return err
	}
	bin, err := FFmpegPath(opt.FFmpeg)
	if err != nil {
		return err
	}
	dur := opt.End - opt.Start
	atoms, starts := chapterAtoms(chapters, opt.Start, dur)
	slots := timeline(dur, opt.FPS, starts, int64(opt.KeyframeInterval))

	mx, err := newMuxer(opt.TempDir)
	if err != nil {
		return err
	}
	defer mx.close()

	e := &encoder{opt: opt, bin: bin, slots: slots, mx: mx}
	if err := e.run(ctx, frames); err != nil {
		return err
	}
	_, err = mx.finish(w, head{
		width: e.width, height: e.height, fps: opt.FPS, durationNS: dur, chapters: atoms,
	})
	return err
}

// chapterAtoms turns chapters into ChapterAtoms relative to the video's
// start, sorted by start and clamped to [0, dur], and returns their
// starts (for keyframes). ChapterUIDs are 1, 2, … in that order: unique
// and non-zero, as Matroska requires, and the same for the same input.
func chapterAtoms(chapters []Chapter, start, dur int64) ([]chapterAtom, []int64) {
	cs := slices.Clone(chapters)
	slices.SortStableFunc(cs, func(a, b Chapter) int { return cmp.Compare(a.Start, b.Start) })
	clamp := func(t int64) int64 { return min(max(t-start, 0), dur) }
	atoms := make([]chapterAtom, 0, len(cs))
	starts := make([]int64, 0, len(cs))
	for i, c := range cs {
		s, e := clamp(c.Start), clamp(c.End)
		if c.End <= c.Start {
			e = dur
			if i+1 < len(cs) {
				e = clamp(cs[i+1].Start)
			}
		}
		e = max(e, s)
		atoms = append(atoms, chapterAtom{
			ChapterUID:       uint64(i + 1),
			ChapterTimeStart: uint64(s),
			ChapterTimeEnd:   uint64(e),
			ChapterDisplay: []chapterDisplay{{
				ChapString: chapterTitle(c.Title, c.Step), ChapLanguage: "eng",
			}},
		})
		starts = append(starts, s)
	}
	return atoms, starts
}

// encoder is one run of ffmpeg: the calling goroutine iterates the frames
// and feeds ffmpeg's stdin; a second goroutine reads the IVF from its
// stdout into the muxer.
type encoder struct {
	opt   Options
	bin   string
	slots []slot
	mx    *muxer

	width, height int
	next          int // the next slot to feed

	cmd        *exec.Cmd
	stdin      io.WriteCloser
	stderr     tailBuffer
	read       chan error
	readFailed atomic.Bool
	cancel     context.CancelFunc

	canvas   *image.RGBA
	shownSeq int // seq of the frame on the canvas; 0: none yet
}

// pending is the newest frame seen, not necessarily loaded yet.
type pending struct {
	f   Frame
	seq int
}

func (e *encoder) run(parent context.Context, frames iter.Seq[Frame]) (err error) {
	ctx, cancel := context.WithCancel(parent)
	e.cancel = cancel
	defer cancel()
	defer func() {
		if e.cmd != nil {
			err = e.stop(parent, err)
		}
	}()

	var cur *pending
	seq := 0
	for f := range frames {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cur != nil && f.Time < cur.f.Time {
			continue
		}
		if f.Time >= e.opt.Start && e.canvas == nil && cur != nil {
			// cur, from before the start, is the picture at time 0 and
			// sets the video's size. If it does not decode, the video
			// opens on the first frame that does.
			ok, err := e.begin(ctx, cur)
			if err != nil {
				return err
			}
			if !ok {
				cur = nil
			}
		}
		if cur != nil && e.canvas != nil {
			// Output frames before this one show what was current until
			// now. Those before the first frame wait for the second one,
			// and show the first.
			for e.next < len(e.slots) && e.opt.Start+e.slots[e.next].at < f.Time {
				if err := e.emit(ctx, cur); err != nil {
					return err
				}
			}
		}
		if f.Time >= e.opt.End {
			break
		}
		seq++
		p := &pending{f: f, seq: seq}
		if e.canvas == nil && f.Time >= e.opt.Start {
			ok, err := e.begin(ctx, p)
			if err != nil {
				return err
			}
			if !ok {
				continue // undecodable: passed over
			}
		}
		cur = p
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.canvas == nil && cur != nil {
		if ok, err := e.begin(ctx, cur); err != nil {
			return err
		} else if !ok {
			cur = nil
		}
	}
	if cur == nil {
		return ErrNoFrames
	}
	for e.next < len(e.slots) {
		if err := e.emit(ctx, cur); err != nil {
			return err
		}
	}
	return nil
}

// begin decodes the video's first picture, which sets its size, and
// starts ffmpeg. ok is false when the picture does not decode.
func (e *encoder) begin(ctx context.Context, p *pending) (ok bool, err error) {
	img, err := load(p.f)
	if err != nil {
		if errors.Is(err, errLoad) {
			return false, err
		}
		return false, nil
	}
	if err := e.start(ctx, img); err != nil {
		return false, err
	}
	compose(e.canvas, img, p.f.Cursor)
	e.shownSeq = p.seq
	return true, nil
}

// errLoad marks a Frame.Load failure: unlike an undecodable image, which
// is skipped, it ends the encoding (storage is failing).
var errLoad = errors.New("loading frame")

// load fetches and decodes f's image.
func load(f Frame) (image.Image, error) {
	b := f.Image
	if b == nil && f.Load != nil {
		var err error
		if b, err = f.Load(); err != nil {
			return nil, fmt.Errorf("webm: %w at %d: %w", errLoad, f.Time, err)
		}
	}
	return decodeImage(b)
}

// emit feeds the next slot's frame showing p (loading and drawing it if
// the canvas holds another one).
func (e *encoder) emit(ctx context.Context, p *pending) error {
	if p.seq != e.shownSeq {
		img, err := load(p.f)
		switch {
		case errors.Is(err, errLoad):
			return err
		case err == nil:
			compose(e.canvas, img, p.f.Cursor)
		}
		// An undecodable frame leaves the previous picture up.
		e.shownSeq = p.seq
	}
	if _, err := e.stdin.Write(e.canvas.Pix); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &pipeError{err}
	}
	e.next++
	return nil
}

// start runs ffmpeg for pictures the size of img.
func (e *encoder) start(ctx context.Context, img image.Image) error {
	w, h, err := canvasSize(img.Bounds().Dx(), img.Bounds().Dy())
	if err != nil {
		return err
	}
	e.width, e.height = w, h
	e.canvas = image.NewRGBA(image.Rect(0, 0, w, h))
	cmd := exec.CommandContext(ctx, e.bin, e.args()...)
	cmd.Stderr = &e.stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("webm: starting ffmpeg: %w", err)
	}
	// From here on stop must run: it is what waits for the process.
	e.cmd, e.stdin = cmd, stdin
	e.read = make(chan error, 1)
	go func() {
		err := e.readIVF(stdout)
		// A stream cut short is ffmpeg's failure, reported from its exit;
		// any other error is the reader's own, and stops ffmpeg.
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			e.readFailed.Store(true)
			e.cancel()
		}
		e.read <- err
	}()
	return nil
}

// args is ffmpeg's command line: raw RGBA in, VP8 in IVF out.
//
// -deadline realtime / -cpu-used 8 is libvpx's fastest mode: a screencast
// is mostly still, so speed costs little size. Constant quality (-crf,
// capped by -b:v) keeps text legible on a busy page and spends nothing on
// a still one. No lag or alt-ref frames: each input frame gives exactly
// one output packet, which is how packets are matched to slots. -g is out
// of reach so libvpx places no keyframes of its own; ours are forced at
// their times. -fps_mode passthrough: ffmpeg must neither drop nor
// duplicate frames. One thread: on a 2-CPU machine libvpx's VP8 threads
// made encoding four times slower, and the server may run several
// encodings at once anyway.
func (e *encoder) args() []string {
	o := e.opt
	return []string{
		"-hide_banner", "-nostats", "-loglevel", "error",
		"-f", "rawvideo", "-pix_fmt", "rgba",
		"-s", strconv.Itoa(e.width) + "x" + strconv.Itoa(e.height),
		"-r", strconv.Itoa(o.FPS),
		"-i", "pipe:0",
		"-an",
		"-c:v", "libvpx",
		"-pix_fmt", "yuv420p",
		"-deadline", "realtime", "-cpu-used", "8",
		"-crf", strconv.Itoa(o.CRF), "-b:v", strconv.Itoa(o.MaxBitrate),
		"-lag-in-frames", "0", "-auto-alt-ref", "0",
		"-threads", strconv.Itoa(o.Threads),
		"-g", "1000000",
		"-force_key_frames", forceKeyFrames(e.slots, o.FPS),
		"-fps_mode", "passthrough",
		"-f", "ivf", "pipe:1",
	}
}

// readIVF moves ffmpeg's packets into the muxer, the k-th packet being
// the k-th slot's frame.
func (e *encoder) readIVF(r io.Reader) error {
	defer io.Copy(io.Discard, r) // never leave ffmpeg blocked on a full pipe
	ivf, err := newIVFReader(r)
	if err != nil {
		return err
	}
	if ivf.fourcc != "VP80" {
		return fmt.Errorf("ivf: codec %q, want VP80", ivf.fourcc)
	}
	k := 0
	last := int64(-1)
	for {
		pts, data, err := ivf.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if k >= len(e.slots) {
			return fmt.Errorf("ffmpeg sent more than the %d frames it was given", len(e.slots))
		}
		if pts <= last {
			return fmt.Errorf("ffmpeg packet %d: pts %d after %d", k, pts, last)
		}
		last = pts
		if err := e.mx.add(e.slots[k].ms, vp8Keyframe(data), data); err != nil {
			return err
		}
		k++
	}
	if k != len(e.slots) {
		return fmt.Errorf("ffmpeg sent %d frames of %d", k, len(e.slots))
	}
	return nil
}

// stop ends ffmpeg's run: closes its stdin, waits for the reader and the
// process, and returns the error that explains what went wrong. On
// failure (err set) ffmpeg is killed first: nobody wants its output.
//
// One failure brings others: a reader that fails kills ffmpeg, whose stdin
// then refuses the feeder's writes; an ffmpeg that dies cuts the reader's
// stream short. So the cause is picked in order: the caller's context, a
// frame that failed to load, ffmpeg's own exit (with its stderr) unless we
// killed it, the reader's error, then whatever remains.
func (e *encoder) stop(parent context.Context, err error) error {
	if err != nil {
		e.cancel()
	}
	e.stdin.Close()
	rerr := <-e.read
	werr := e.cmd.Wait()
	var pe *pipeError
	consequence := err == nil || errors.Is(err, context.Canceled) || errors.As(err, &pe)
	switch {
	case parent.Err() != nil:
		return parent.Err()
	case !consequence:
		return err
	case werr != nil && !e.readFailed.Load():
		msg := strings.TrimSpace(e.stderr.String())
		if msg == "" {
			msg = "no message"
		}
		return fmt.Errorf("webm: ffmpeg: %v: %s", werr, msg)
	case rerr != nil:
		return fmt.Errorf("webm: reading ffmpeg's output: %w", rerr)
	}
	return err
}

// pipeError is a failed write to ffmpeg's stdin: a consequence of ffmpeg
// ending, whose cause is reported instead.
type pipeError struct{ err error }

func (p *pipeError) Error() string { return "webm: writing to ffmpeg: " + p.err.Error() }
func (p *pipeError) Unwrap() error { return p.err }

// tailBuffer keeps the last 4 KiB written to it: ffmpeg's last words are
// the ones that explain a failure.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.b, nil))
}
