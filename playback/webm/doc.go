// Package webm turns a recording's frames (the JPEG and PNG screencast
// images an executor sent, each with its timestamp and the agent's cursor)
// into a seekable VP8 WebM with one chapter per step, and reads such files
// back (Probe) for tests. Video an executor encoded itself (VP8 or VP9
// WebM, stored as one GOP blob per group of pictures) is read with
// ReadGOP and written into the same kind of file by Mux, without
// re-encoding; see "Remuxing" below.
//
// # Pipeline
//
// Go decodes each image, draws the agent's cursor on it and writes raw RGBA
// frames at a constant rate to ffmpeg's stdin; ffmpeg (libvpx) answers an
// IVF stream of VP8 frames on stdout; this package parses the IVF and writes
// the Matroska/WebM container itself with ebml-go. ffmpeg only encodes:
// its own WebM muxer can't write chapters from a list without a metadata
// file, puts the Cues at the end, and knows nothing about where the steps
// begin, so the container is ours.
//
// # Layout
//
// The file is written in this order:
//
//	EBML header        DocType "webm"
//	Segment            known size (never "unknown": players need its end)
//	  SeekHead         positions of Info, Tracks, Chapters, Cues
//	  Info             TimecodeScale 1 ms, Duration (end−start, exact), apps "flightrec"
//	  Tracks           track 1: V_VP8, width, height, DefaultDuration 1/FPS
//	                   (Mux: V_VP8 or V_VP9, CodecPrivate if any, no DefaultDuration)
//	  Chapters         one edition, one ChapterAtom per step (times in ns)
//	  Cues             one CuePoint per keyframe cluster: its time and position
//	  Cluster …        each begins with a keyframe (but one cut after 30 s
//	                   without any); SimpleBlocks, ms timestamps
//
// Everything a player needs to seek — the duration and every keyframe's
// position — is in the first few kilobytes, ahead of the clusters. A
// browser playing the file over HTTP range requests learns them from its
// first request and can jump anywhere without first fetching the file's
// tail (ffmpeg and most live muxers put the Cues after the clusters, which
// costs a seek to the end before the first seek works). Writing the Cues
// first needs the clusters' sizes, so the clusters are written to a
// temporary file while ffmpeg runs and copied after the head.
//
// # Frames and keyframes
//
// Video time 0 is Options.Start and the video lasts End−Start (Info's
// Duration says so exactly; the last frame starts less than a frame
// before it). Output frames come at a constant rate, Options.FPS, each
// showing the newest input frame at or before its time (before the first
// input frame, the first one; the last output frame, the newest before
// End, so the recording's final state is what the video ends on). A
// constant rate keeps the file ordinary:
// DefaultDuration is true, and tools that assume a frame rate (ffmpeg
// transcoding it, for one) neither drop nor duplicate frames.
//
// Keyframes are forced on the frame on screen at each chapter start (the
// last frame at or before it), and each keyframe begins a cluster and has
// a cue. A player seeking to a step finds, through the Cues, the last
// keyframe at or before the step's start, which is the frame to show
// then: the seek reads one cluster and decodes one frame, and the position
// the player reports is the one asked for. A keyframe after the start
// would make the player decode from the keyframe before. Further
// keyframes are forced at least every Options.KeyframeInterval so a seek
// anywhere decodes a bounded run of frames.
//
// # Remuxing
//
// An executor that encodes its own video sends WebM, which ingest splits
// into GOP blobs: each a standalone WebM file whose first frame is a
// keyframe, so any of them decodes on its own and a span of the
// recording needs only the blobs it covers. ReadGOP reads one (its
// stream description and its packets); Mux writes packets of any number
// of blobs into one file with the layout above, through the same
// container writer as Encode (only the track's codec, CodecPrivate and
// DefaultDuration differ), the packets' bytes untouched. The keyframes
// are the executor's: Mux can't put one at each chapter start, so a
// seek to a step decodes from the keyframe before it, at most a GOP's
// worth of frames. A span starting inside a GOP starts at the next
// keyframe, shown from time 0, since the delta frames before it would
// need the keyframe they follow.
package webm
