package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest/webmstream"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// videoStream is a recording's executor-encoded WebM stream in progress:
// the incremental parser holding the GOP not yet complete. Only complete
// GOPs are stored (redacted first), so the parser's held bytes are the one
// part of an acknowledged chunk that is not yet durable: a crash loses at
// most the GOP in progress, and the stream resumes at its next keyframe
// Cluster (see resumeVideo).
type videoStream struct {
	startTS int64 // the stream's stream_start_ts: its identity
	parser  *webmstream.Parser
	// resumedAt is, for a stream resumed after a restart, the stream
	// offset its parser began at (-1 otherwise): errors name offsets in
	// the whole stream.
	resumedAt int64
}

// clone snapshots the stream so a refused batch can roll it back.
func (v *videoStream) clone() *videoStream {
	if v == nil {
		return nil
	}
	c := *v
	c.parser = v.parser.Clone()
	return &c
}

// videoGOPBlob is a GOP on its way to the blob store.
type videoGOPBlob struct {
	data []byte
	cid  string
}

// videoOutcome is what one video event completed: the stored data's
// server-set members and the GOP blobs to put.
type videoOutcome struct {
	data     event.Video
	blobs    []videoGOPBlob
	findings []redact.Finding
}

// configureVideo tells a recording's redactor how to run ffmpeg for the
// GOPs it masks, and where to say that ffmpeg failed.
func (s *Service) configureVideo(red *redact.Redactor, id string) {
	red.Video.FFmpeg = s.cfg.FFmpeg
	red.Video.Slots = s.maskSlots
	red.Video.Logf = func(format string, args ...any) {
		s.log.Warn("masking a video GOP failed; it is dropped", "recording", id, "detail", fmt.Sprintf(format, args...))
	}
}

// videoLimits bounds what a stream's parser holds.
func (s *Service) videoLimits() webmstream.Limits {
	return webmstream.Limits{MaxBlock: s.cfg.MaxVideoBlockBytes, MaxGOP: s.cfg.MaxVideoGOPBytes}
}

// processVideo feeds one video event's chunk to the recording's stream
// and redacts and encodes the GOPs it completes. A new stream_start_ts
// starts a new stream, completing the old one's open GOP; End completes
// the stream. Nothing here touches the disk; an error refuses the batch
// (the caller restores r.video).
//
// A stream that stopped inside an element is refused at an executor's
// end; when the server ends it (a new stream, or finish: lenient), the
// complete frames of its open GOP are kept and the rest is lost.
func (s *Service) processVideo(ctx context.Context, r *recording, d *event.Decoded, v *event.Video, lenient bool) (videoOutcome, error) {
	out := videoOutcome{data: event.Video{Mime: v.Mime, StreamStartTS: v.StreamStartTS, Masks: v.Masks, End: v.End,
		ChunkBytes: len(v.Chunk)}}
	type done struct {
		st  *videoStream
		gop webmstream.GOP
	}
	var gops []done
	// Only an event with stream bytes (or an end) speaks for a stream; one
	// with masks alone leaves the stream as it is, whatever its
	// stream_start_ts.
	streamEvent := len(v.Chunk) > 0 || v.End
	if len(v.Chunk) > 0 && r.video != nil && r.video.startTS != v.StreamStartTS {
		// Another stream begins: the old one is over.
		old := r.video
		r.video = nil
		if old.parser != nil {
			g, err := old.parser.End()
			if err != nil {
				// The old stream stopped mid-element: what it held of
				// the element is lost; its complete frames are kept.
				s.log.Warn("a video stream ended mid-element; its last frame is lost", "recording", r.meta.ID, "err", err)
			}
			if g != nil {
				gops = append(gops, done{old, *g})
			}
		}
	}
	if r.video == nil && len(v.Chunk) > 0 {
		r.video = &videoStream{startTS: v.StreamStartTS, parser: webmstream.NewParser(s.videoLimits()), resumedAt: -1}
	}
	st := r.video
	if !streamEvent || (st != nil && st.startTS != v.StreamStartTS) {
		st = nil // masks only, or an end of a stream that is not open
	}
	if st != nil && st.parser == nil && len(v.Chunk) > 0 {
		// A crash came before any stored event carried the stream's
		// header, so its track is unknown: the chunks are recorded (their
		// size) without video until a new stream begins.
		s.log.Warn("a video chunk of a stream whose header was lost in a restart; start a new stream",
			"recording", r.meta.ID, "seq", d.Seq)
	}
	if st != nil && st.parser != nil {
		_, hadTrack := st.parser.Track()
		skipped := st.parser.Skipped()
		if len(v.Chunk) > 0 {
			done1, err := st.parser.Write(v.Chunk)
			if err != nil {
				return out, videoError(d, st, err)
			}
			for _, g := range done1 {
				gops = append(gops, done{st, g})
			}
		}
		if v.End {
			g, err := st.parser.End()
			if err != nil && !lenient {
				return out, videoError(d, st, err)
			}
			if err != nil {
				s.log.Warn("a video stream stopped mid-element at finish; its last frame is lost", "recording", r.meta.ID, "err", err)
			}
			if g != nil {
				gops = append(gops, done{st, *g})
			}
		}
		if t, ok := st.parser.Track(); ok && !hadTrack {
			// The event that completes the header carries the track: a
			// restarted server resumes the stream from it.
			out.data.Stream = streamOf(t)
		}
		out.data.Resynced = st.parser.Skipped() - skipped
	}
	if st != nil && v.End {
		r.video = nil
	}
	for _, g := range gops {
		t, ok := g.st.parser.Track()
		if !ok {
			return out, fmt.Errorf("ingest: a GOP of a stream without a track")
		}
		if err := s.storeGOP(ctx, r, &out, t, g.st.startTS, g.gop); err != nil {
			return out, err
		}
	}
	return out, nil
}

// storeGOP redacts one complete GOP and adds it to out: as received when
// no mask applies, re-encoded with the masks painted, or dropped (fail
// closed) when it cannot be masked.
func (s *Service) storeGOP(ctx context.Context, r *recording, out *videoOutcome, t webmstream.Track, streamStart int64, g webmstream.GOP) error {
	blob, err := webmstream.EncodeGOP(t, g)
	if err != nil {
		return fmt.Errorf("ingest: encoding a GOP: %w", err)
	}
	times := make([]int64, len(g.Frames))
	for i, f := range g.Frames {
		times[i] = streamStart + f.TS
	}
	entry := event.VideoGOP{StartTS: times[0], EndTS: streamStart + g.End, Frames: len(g.Frames)}
	var res redact.VideoResult
	if !s.cfg.MeasureWithoutRedaction {
		res, err = r.red.RedactGOP(ctx, redact.VideoGOP{Codec: t.Codec, Width: t.Width, Height: t.Height,
			WebM: blob, Times: times, End: entry.EndTS})
		if err == nil && ctx.Err() != nil {
			// A cancelled request may have cut ffmpeg short: that is no
			// verdict on the GOP, so the batch fails instead.
			err = ctx.Err()
		}
		if err != nil {
			return err
		}
	}
	pointer := func(list string, n int) string { return "/" + list + "/" + strconv.Itoa(n) }
	if res.Drop {
		entry.Rule = "video:dropped"
		if len(res.Findings) > 0 {
			entry.Rule = res.Findings[0].Rule
		}
		for _, f := range res.Findings {
			f.Pointer = pointer("dropped_gops", len(out.data.Dropped))
			out.findings = append(out.findings, f)
		}
		out.data.Dropped = append(out.data.Dropped, entry)
		return nil
	}
	if res.Frames != nil {
		if len(res.Frames) != len(g.Frames) {
			return fmt.Errorf("ingest: redaction returned %d frames for a GOP of %d", len(res.Frames), len(g.Frames))
		}
		masked := webmstream.GOP{End: g.End, Frames: make([]webmstream.Frame, len(g.Frames))}
		for i, f := range g.Frames {
			masked.Frames[i] = webmstream.Frame{TS: f.TS, Key: i == 0, Data: res.Frames[i]}
		}
		if blob, err = webmstream.EncodeGOP(t, masked); err != nil {
			return fmt.Errorf("ingest: encoding a masked GOP: %w", err)
		}
		entry.Masked = true
	}
	for _, f := range res.Findings {
		f.Pointer = pointer("gops", len(out.data.GOPs))
		out.findings = append(out.findings, f)
	}
	entry.CID = store.SumString(blob)
	entry.Bytes = int64(len(blob))
	out.data.GOPs = append(out.data.GOPs, entry)
	out.blobs = append(out.blobs, videoGOPBlob{data: blob, cid: entry.CID})
	return nil
}

// videoRecord makes rec the stored form of a video event: what its chunk
// completed, with the redactions, and the GOP blobs it names, which it
// returns for storing.
func (s *Service) videoRecord(rec *store.Record, out videoOutcome) [][]byte {
	s.addRedactions(rec, out.findings)
	rec.Data, _ = json.Marshal(&out.data)
	blobs := make([][]byte, len(out.blobs))
	for i, b := range out.blobs {
		rec.Blobs = append(rec.Blobs, store.BlobRef{CID: b.cid, Size: int64(len(b.data))})
		blobs[i] = b.data
	}
	return blobs
}

func streamOf(t webmstream.Track) *event.VideoStream {
	return &event.VideoStream{Codec: t.Codec, Width: t.Width, Height: t.Height, CodecPrivate: t.CodecPrivate,
		TimecodeScale: t.TimecodeScale, FrameDuration: t.FrameDuration}
}

// videoError turns a stream failure into the envelope. The chunk and its
// batch are refused; everything acknowledged before stays stored.
func videoError(d *event.Decoded, st *videoStream, err error) error {
	var se *webmstream.Error
	if !errors.As(err, &se) {
		return err
	}
	next := "resend this chunk with the stream's next bytes, or start a new stream (a new stream_start_ts, from the EBML header); everything before this batch is stored"
	status, code := http.StatusUnprocessableEntity, "VIDEO_MALFORMED"
	switch se.Code {
	case "not_webm":
		code = "VIDEO_NOT_WEBM"
		next = "send a WebM stream: its first chunk begins with the EBML header (1A45DFA3); everything before this batch is stored"
	case "unknown_codec":
		status, code = http.StatusUnsupportedMediaType, "VIDEO_CODEC_UNSUPPORTED"
		next = "encode the video as VP8 or VP9 WebM, in a new stream; everything before this batch is stored"
	case "too_large":
		status, code = http.StatusRequestEntityTooLarge, "VIDEO_GOP_TOO_LARGE"
		next = "encode with keyframes more often (a shorter GOP) or raise --max-video-gop-bytes, in a new stream; everything before this batch is stored"
	}
	off := se.Offset
	if st.resumedAt >= 0 {
		off += st.resumedAt // a resumed parser counts from its first byte
	}
	return wire.New(status, code, next, "seq %d: video stream byte %d: %s", d.Seq, off, se.Msg).
		With("seq", d.Seq).With("stream_offset", off)
}

// resumeVideo rebuilds an open recording's video stream after a restart
// from its stored events: the last stream, if it did not end, continues
// from its next keyframe Cluster (the GOP in progress at the crash is
// lost: its frames were held in memory only, because they could not be
// stored before it was known whether a mask covers them).
func resumeVideo(st *store.Store, id string, lim webmstream.Limits) (*videoStream, error) {
	var cur *videoStream
	var track *event.VideoStream
	var base int64 // the current stream's bytes stored
	_, err := st.Scan(id, store.Pos{}, 0, func(rec store.Record, _ store.Locator) error {
		if rec.Kind != event.KindVideo {
			return nil
		}
		var v event.Video
		if err := json.Unmarshal(rec.Data, &v); err != nil {
			return fmt.Errorf("video event %d: %w", rec.Seq, err)
		}
		if v.StreamStartTS == 0 || (v.ChunkBytes == 0 && !v.End) {
			return nil // dropped by redaction, or masks only: no stream data
		}
		if cur == nil || cur.startTS != v.StreamStartTS {
			cur, track, base = &videoStream{startTS: v.StreamStartTS, resumedAt: -1}, nil, 0
		}
		base += int64(v.ChunkBytes)
		if v.Stream != nil {
			track = v.Stream
		}
		if v.End {
			cur, track = nil, nil
		}
		return nil
	})
	if err != nil || cur == nil {
		return nil, err
	}
	if track != nil {
		cur.resumedAt = base
		cur.parser = webmstream.Resume(webmstream.Track{Codec: track.Codec, Width: track.Width, Height: track.Height,
			CodecPrivate: track.CodecPrivate, TimecodeScale: track.TimecodeScale, FrameDuration: track.FrameDuration}, lim)
	}
	return cur, nil
}

// finishVideo completes a stream still open when its recording finishes:
// the GOP it holds is stored in one more video event, made by the server
// (seq one past the last, the last event's step, end set, no chunk), so
// a recording's last seconds of video are kept even when the executor
// never said the stream ended. A stream that stopped mid-element keeps
// the GOP's complete frames.
func (s *Service) finishVideo(ctx context.Context, r *recording) error {
	if r.video == nil || r.video.parser == nil {
		r.video = nil
		return nil
	}
	d := &event.Decoded{Envelope: event.Envelope{Seq: r.next, TS: s.now().UnixNano(), Step: r.lastStep, Kind: event.KindVideo}}
	v := &event.Video{Mime: "video/webm", StreamStartTS: r.video.startTS, End: true}
	saved := r.video.clone()
	out, err := s.processVideo(ctx, r, d, v, true)
	if err != nil {
		r.video = saved
		s.log.Error("redacting the last GOP of a video stream failed", "recording", r.meta.ID, "err", err)
		return wire.New(http.StatusServiceUnavailable, "VIDEO_FINISH_FAILED",
			"retry the finish; the recording stays open", "the video stream's last GOP could not be stored")
	}
	if len(out.data.GOPs) == 0 && len(out.data.Dropped) == 0 {
		return nil
	}
	if n := len(out.data.GOPs); n > 0 {
		d.TS = out.data.GOPs[n-1].EndTS
	}
	rec := store.Record{Seq: d.Seq, TS: d.TS, Step: d.Step, Kind: event.KindVideo}
	blobs := s.videoRecord(&rec, out)
	if err := s.commit(ctx, r, nil, []store.Record{rec}, blobs, slices.Repeat([]int{-1}, len(blobs))); err != nil {
		r.video = saved
		return err
	}
	r.next++
	s.m.Events.Inc()
	return nil
}
