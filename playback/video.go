package playback

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"iter"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/playback/webm"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// videoFrame is one output frame's length at webm's default 5 frames a
// second: the shortest video, and the unit a span is rounded up to.
const videoFrame = 200 * time.Millisecond

// videoBuilds makes concurrent requests for one video wait for one build
// instead of each running ffmpeg.
type videoBuilds struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (b *videoBuilds) lock(key string) func() {
	b.mu.Lock()
	if b.locks == nil {
		b.locks = map[string]*sync.Mutex{}
	}
	l, ok := b.locks[key]
	if !ok {
		l = &sync.Mutex{}
		b.locks[key] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// handleVideo serves GET /v1/recordings/{id}/video.webm[?from_step=&to_step=]:
// the executor's own video when it sent one (its stored GOPs muxed as
// they are, execvideo.go), else the recording's frames as VP8 WebM
// (playback/webm: ffmpeg encodes), the container written here with a
// chapter per step and cues, video time 0 being the recording's first
// event. A clip covers the steps from from_step to to_step, its time 0
// the first one's start (for executor video, the keyframe before it). A finished
// recording's video is built once and kept as a derived blob; an open
// one's is built for each request. Range and conditional requests work
// (http.ServeContent).
func (s *Service) handleVideo(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	steps, err := s.idx.Timeline(r.Context(), row.ID)
	if err != nil {
		s.edge.Fail(w, r, indexError(err))
		return
	}
	from, to, name, err := clipParams(r, steps)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	var chosen []store.StepRow
	for _, st := range steps {
		if st.Step >= from && st.Step <= to {
			chosen = append(chosen, st)
		}
	}
	if len(chosen) == 0 {
		s.edge.Fail(w, r, wire.New(http.StatusNotFound, "STEP_NOT_FOUND", "list steps with GET …/steps",
			"the recording has no step from %d to %d", from, to))
		return
	}
	finished := row.State == store.StateFinished
	if finished {
		if c, ok, err := s.st.Derived(row.ID, name); err == nil && ok {
			s.serveVideo(w, r, row.ID, c.String(), name)
			return
		}
	}
	// The executor's own video, when it sent one, is preferred to the
	// frames: it is served as recorded (redacted GOP by GOP at ingest),
	// without re-encoding.
	gops, err := s.executorGOPs(r.Context(), row.ID)
	if err != nil {
		s.log.Error("reading the executor's video events failed", "recording", row.ID, "err", err)
		s.edge.Fail(w, r, storeReadFailed("the recording's video events could not be read"))
		return
	}
	build := func(w io.Writer) error {
		if len(gops) > 0 {
			return s.buildExecutorVideo(r.Context(), row, chosen, name != "video.webm", gops, w)
		}
		return s.buildVideo(r.Context(), row, steps, chosen, name != "video.webm", w)
	}
	// A video already built is served without ffmpeg; only encoding
	// frames needs it.
	if _, err := webm.FFmpegPath(); err != nil && len(gops) == 0 {
		s.edge.Fail(w, r, wire.New(http.StatusNotImplemented, "FFMPEG_MISSING",
			"install ffmpeg on the server (apt-get install ffmpeg); until then play the frames: GET …/events?kind=frame",
			"this server cannot encode video: ffmpeg is not installed"))
		return
	}
	// Only a finished recording the index holds whole is kept: a video
	// built from a prefix of the frames would be served for good.
	keep := false
	if finished {
		if man, _, err := s.st.Manifest(row.ID); err == nil && row.IndexedTo >= man.LastSeq {
			keep = true
		}
	}
	if keep {
		// One build per video: a request that waited here finds the
		// video another one kept. The lock covers the build, not the
		// serving, so range requests for a kept video never wait.
		unlock := s.videos.lock(row.ID + "/" + name)
		c, ok, err := s.st.Derived(row.ID, name)
		if err != nil || !ok {
			tmp, err := s.buildFile(build)
			if err != nil {
				unlock()
				s.edge.Fail(w, r, err)
				return
			}
			defer removeBuilt(tmp)
			c, err = s.st.PutDerivedFile(row.ID, name, tmp.Name())
			if err != nil {
				unlock()
				s.log.Error("keeping a built video failed", "recording", row.ID, "video", name, "err", err)
				serveBuilt(w, r, name, tmp)
				return
			}
		}
		unlock()
		s.serveVideo(w, r, row.ID, c.String(), name)
		return
	}
	tmp, err := s.buildFile(build)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	defer removeBuilt(tmp)
	serveBuilt(w, r, name, tmp)
}

// buildFile builds a video into a temporary file under the data directory,
// never in memory: an hour of video is hundreds of megabytes, and being on
// the blob store's filesystem lets PutDerivedFile move it into place. The
// caller removes it (removeBuilt).
func (s *Service) buildFile(build func(io.Writer) error) (*os.File, error) {
	f, err := os.CreateTemp(s.st.Dir(), builtVideoPattern)
	if err != nil {
		s.log.Error("creating a file for a video failed", "err", err)
		return nil, wire.New(http.StatusInternalServerError, "VIDEO_FAILED", "see the server log; the frames are at GET …/events?kind=frame",
			"the video could not be encoded")
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = build(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		removeBuilt(f)
		return nil, err
	}
	return f, nil
}

// builtVideoPattern names the temporaries buildFile makes; the muxer's
// own share the prefix, and a store opened for writing removes what a
// crash left of either.
const builtVideoPattern = store.VideoTempPrefix + "built-*"

// removeBuilt closes and removes a built video's temporary file (gone
// already when PutDerivedFile moved it into the blob store).
func removeBuilt(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// serveBuilt serves a video built for this request and not kept.
func serveBuilt(w http.ResponseWriter, r *http.Request, name string, f *os.File) {
	w.Header().Set("Content-Type", "video/webm")
	w.Header().Set("Cache-Control", "private, no-store")
	http.ServeContent(w, r, name, time.Time{}, f)
}

// clipParams reads from_step and to_step (each defaulting to the
// recording's first and last step) and names the video they make.
func clipParams(r *http.Request, steps []store.StepRow) (from, to int, name string, err error) {
	if len(steps) == 0 {
		return 0, 0, "", wire.New(http.StatusNotFound, "NO_FRAMES", "record frames (the frame kind) to get a video",
			"the recording has no steps yet")
	}
	from, to = steps[0].Step, steps[len(steps)-1].Step
	q := r.URL.Query()
	clip := false
	for _, p := range []struct {
		name string
		v    *int
	}{{"from_step", &from}, {"to_step", &to}} {
		if raw := q.Get(p.name); raw != "" {
			n, perr := strconv.Atoi(raw)
			if perr != nil || n < 0 {
				return 0, 0, "", badParam(p.name, "a step number ≥ 0")
			}
			*p.v, clip = n, true
		}
	}
	if from > to {
		return 0, 0, "", badParam("from_step", "a step no later than to_step")
	}
	if !clip {
		return from, to, "video.webm", nil
	}
	return from, to, fmt.Sprintf("video-steps-%d-%d.webm", from, to), nil
}

// buildVideo encodes chosen's span of the recording: all of it (from its
// first event to its last) unless clip, else from the first chosen step's
// start to the last one's end.
func (s *Service) buildVideo(ctx context.Context, row store.RecordingRow, all, chosen []store.StepRow, clip bool, w io.Writer) error {
	opt := webm.Options{Start: row.FirstTS, End: row.LastTS, TempDir: s.st.Dir()}
	if clip || opt.Start == 0 {
		opt.Start, opt.End = chosen[0].StartTS, chosen[len(chosen)-1].EndTS
	}
	if opt.End < opt.Start+int64(videoFrame) {
		opt.End = opt.Start + int64(videoFrame)
	}
	if err := s.checkVideoSpan(opt.Start, opt.End); err != nil {
		return err
	}
	opt.MaxDuration = s.MaxVideoDuration
	chapters := make([]webm.Chapter, len(chosen))
	for i, st := range chosen {
		chapters[i] = webm.Chapter{Step: st.Step, Title: chapterTitle(st), Start: st.StartTS, End: st.EndTS}
	}
	var readErr error
	err := webm.Encode(ctx, opt, s.frames(ctx, row.ID, &readErr), chapters, w)
	switch {
	case readErr != nil:
		s.log.Error("reading frames for a video failed", "recording", row.ID, "err", readErr)
		return storeReadFailed("the recording's frames could not be read")
	case errors.Is(err, webm.ErrNoFrames):
		return wire.New(http.StatusNotFound, "NO_FRAMES", "record frames (the frame kind) to get a video; see the DOM at each step instead",
			"the recording has no frames in that span")
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		s.log.Error("encoding a video failed", "recording", row.ID, "err", err)
		return wire.New(http.StatusInternalServerError, "VIDEO_FAILED", "see the server log; the frames are at GET …/events?kind=frame",
			"the video could not be encoded")
	}
	return nil
}

// checkVideoSpan refuses a video longer than MaxVideoDuration before any
// work is done. A recording stored before ingest bounded timestamps may
// span centuries (one event at ts 2^63−1): its video would be billions of
// frames.
func (s *Service) checkVideoSpan(start, end int64) error {
	max := s.MaxVideoDuration
	// Timestamps are > 0, so end-start cannot overflow once end >= start.
	if max <= 0 || (end >= start && end-start <= int64(max)) {
		return nil
	}
	return wire.New(http.StatusUnprocessableEntity, "VIDEO_TOO_LONG",
		fmt.Sprintf("ask for a clip of steps (?from_step=N&to_step=M) spanning at most %s, or play the frames: GET …/events?kind=frame", max),
		"the video would span more than %s (the server's --max-video-duration)", max).
		With("max_duration_ns", int64(max))
}

// chapterTitle names a step as a reviewer scans a chapter list.
func chapterTitle(st store.StepRow) string {
	t := fmt.Sprintf("Step %d", st.Step)
	if st.Action != "" {
		t += ": " + st.Action
		if st.Target != "" {
			t += " " + st.Target
		}
	}
	if st.Outcome == "failed" {
		t += " (failed"
		if st.ErrorCode != "" {
			t += " " + st.ErrorCode
		}
		t += ")"
	}
	return t
}

// frames iterates a recording's frames in seq order, each image read from
// its blob only if the encoder shows it. A read error stops the iteration
// and is left in *errp.
func (s *Service) frames(ctx context.Context, id string, errp *error) iter.Seq[webm.Frame] {
	return func(yield func(webm.Frame) bool) {
		*errp = s.eachEvent(ctx, id, event.KindFrame, func(e event.Envelope) error {
			var f event.Frame
			if err := json.Unmarshal(e.Data, &f); err != nil {
				return fmt.Errorf("frame %d: %w", e.Seq, err)
			}
			if f.ImageCID == "" {
				// Redaction dropped this frame's picture (it could not
				// be masked): the previous picture stays on screen.
				return nil
			}
			if _, err := store.ParseCID(f.ImageCID); err != nil {
				return fmt.Errorf("frame %d: image_cid %q: %w", e.Seq, f.ImageCID, err)
			}
			fr := webm.Frame{Time: e.TS, Load: func() ([]byte, error) { return s.blobBytes(f.ImageCID) }}
			if f.Cursor != nil {
				fr.Cursor = &image.Point{X: f.Cursor.X, Y: f.Cursor.Y}
			}
			if !yield(fr) {
				return errStopFrames
			}
			return nil
		})
		if errors.Is(*errp, errStopFrames) {
			*errp = nil
		}
	}
}

// errStopFrames ends eachEvent early when the encoder has what it needs.
var errStopFrames = errors.New("enough frames")

// serveVideo serves a kept video blob: its CID is its ETag.
func (s *Service) serveVideo(w http.ResponseWriter, r *http.Request, id, c, name string) {
	cc, err := store.ParseCID(c)
	if err != nil {
		s.edge.Fail(w, r, storeReadFailed("the kept video could not be read"))
		return
	}
	f, err := s.st.Blobs.Open(cc)
	if err != nil {
		s.log.Error("opening a kept video failed", "recording", id, "err", err)
		s.edge.Fail(w, r, storeReadFailed("the kept video could not be read"))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "video/webm")
	w.Header().Set("Cache-Control", "private")
	w.Header().Set("ETag", `"`+c+`"`)
	http.ServeContent(w, r, name, time.Time{}, f)
}
