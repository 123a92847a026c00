package playback

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/playback/webm"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// maxGOPBytes bounds one GOP blob read for a video (ingest's default
// limit is 64 MiB; a larger blob is not a GOP this server made).
const maxGOPBytes = 128 << 20

// executorGOP is one stored GOP of an executor's own video stream.
type executorGOP struct {
	start, end int64 // unix ns on the recording's clock
	cid        string
	stream     event.VideoStream
}

// executorGOPs lists a recording's stored executor GOPs in time order.
// The video events say which GOPs each chunk completed (ingest stored
// them redacted); dropped GOPs are not there, so their span shows the
// GOP before it frozen, as a dropped frame does.
func (s *Service) executorGOPs(ctx context.Context, id string) ([]executorGOP, error) {
	var out []executorGOP
	streams := map[int64]event.VideoStream{}
	err := s.eachEvent(ctx, id, event.KindVideo, func(e event.Envelope) error {
		var v event.Video
		if err := json.Unmarshal(e.Data, &v); err != nil {
			return fmt.Errorf("video event %d: %w", e.Seq, err)
		}
		if v.Stream != nil {
			streams[v.StreamStartTS] = *v.Stream
		}
		for _, g := range v.GOPs {
			if g.CID == "" {
				continue
			}
			st, ok := streams[v.StreamStartTS]
			if !ok {
				return fmt.Errorf("video event %d: a GOP of a stream whose header no event carries", e.Seq)
			}
			out = append(out, executorGOP{start: g.StartTS, end: g.EndTS, cid: g.CID, stream: st})
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b executorGOP) int { return cmp.Compare(a.start, b.start) })
	return out, err
}

// sameTrack says two streams can share one video track.
func sameTrack(a, b event.VideoStream) bool {
	return a.Codec == b.Codec && a.Width == b.Width && a.Height == b.Height
}

// buildExecutorVideo muxes the executor's GOPs into one WebM without
// re-encoding: the whole recording (time 0 its first event, as for the
// frames' video, which the player relies on; frames of a stream that
// began earlier are shown from time 0), or a clip of chosen's span, which
// starts at the keyframe of the GOP showing at the clip's start so its
// first frame decodes. GOPs of another codec or size than the first one's, and
// GOPs overlapping the one before (a second stream at the same time),
// are left out: a WebM has one track here.
func (s *Service) buildExecutorVideo(ctx context.Context, row store.RecordingRow, chosen []store.StepRow, clip bool, gops []executorGOP, w io.Writer) error {
	start, end := row.FirstTS, row.LastTS
	if clip || start == 0 {
		start, end = chosen[0].StartTS, chosen[len(chosen)-1].EndTS
	}
	if !clip {
		end = max(end, gops[len(gops)-1].end)
	}
	var pick []executorGOP
	for _, g := range gops {
		if g.end <= start || g.start >= end || !sameTrack(g.stream, gops[0].stream) {
			continue
		}
		if n := len(pick); n > 0 && g.start < pick[n-1].end {
			continue
		}
		pick = append(pick, g)
	}
	if len(pick) == 0 {
		return wire.New(http.StatusNotFound, "NO_FRAMES", "the executor's video has no GOP in that span; see the DOM at each step instead",
			"the recording has no video in that span")
	}
	if clip && pick[0].start < start {
		start = pick[0].start
	}
	floor := start
	if end < start+int64(videoFrame) {
		end = start + int64(videoFrame)
	}
	if err := s.checkVideoSpan(start, end); err != nil {
		return err
	}
	chapters := make([]webm.Chapter, len(chosen))
	for i, st := range chosen {
		chapters[i] = webm.Chapter{Step: st.Step, Title: chapterTitle(st), Start: st.StartTS, End: st.EndTS}
	}
	first := pick[0].stream
	stream := webm.Stream{Codec: first.Codec, Width: first.Width, Height: first.Height, CodecPrivate: first.CodecPrivate}
	err := webm.Mux(ctx, webm.MuxOptions{Start: start, End: end, TempDir: s.st.Dir()}, stream, s.gopPackets(stream, pick, floor), chapters, w)
	switch {
	case errors.Is(err, webm.ErrNoFrames):
		return wire.New(http.StatusNotFound, "NO_FRAMES", "the executor's video has no keyframe in that span; ask for a longer clip",
			"the recording has no video in that span")
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		s.log.Error("muxing the executor's video failed", "recording", row.ID, "err", err)
		return wire.New(http.StatusInternalServerError, "VIDEO_FAILED", "see the server log; the video events are at GET …/events?kind=video",
			"the video could not be assembled")
	}
	return nil
}

// gopPackets reads each GOP blob when the muxer reaches it and yields its
// frames on the recording's clock, none before floor (earlier ones are
// moved to it). A blob whose track is not the video's would corrupt the
// file: it is an error.
func (s *Service) gopPackets(track webm.Stream, gops []executorGOP, floor int64) iter.Seq2[webm.Packet, error] {
	return func(yield func(webm.Packet, error) bool) {
		for _, g := range gops {
			b, err := s.gopBytes(g.cid)
			if err != nil {
				yield(webm.Packet{}, fmt.Errorf("GOP %s: %w", g.cid, err))
				return
			}
			st, pkts, err := webm.ReadGOP(b)
			if err == nil && (st.Codec != track.Codec || st.Width != track.Width || st.Height != track.Height) {
				err = fmt.Errorf("its track is %s %dx%d, the video's %s %dx%d", st.Codec, st.Width, st.Height, track.Codec, track.Width, track.Height)
			}
			if err != nil {
				yield(webm.Packet{}, fmt.Errorf("GOP %s: %w", g.cid, err))
				return
			}
			for _, p := range pkts {
				p.Time = max(p.Time+g.start, floor)
				if !yield(p, nil) {
					return
				}
			}
		}
	}
}

func (s *Service) gopBytes(c string) ([]byte, error) { return s.readBlob(c, maxGOPBytes) }
