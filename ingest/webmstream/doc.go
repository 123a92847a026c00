// Package webmstream reassembles the WebM video an executor uploads as a
// stream of chunks and cuts it into GOPs, and stores each GOP as a small
// standalone WebM file (a "GOP blob").
//
// Executors encode their screen as VP8 or VP9 at a few frames per second and
// upload the muxer's output as it is produced, in chunks split at arbitrary
// byte positions: mid-element, mid-SimpleBlock. A Parser takes the chunks in
// order (Write), keeps only the current GOP and at most one partial element,
// and hands back every GOP the moment the next keyframe (or the end of a
// known-size Segment) completes it. Memory is bounded by Limits whatever the
// stream's length: Cues, Tags, SeekHead and other elements the ingest does not
// need are streamed past, never buffered.
//
// The stream's byte layout is driven by a small EBML tokenizer of its own
// (IDs and sizes as variable-length integers) because ebml-go's Unmarshal
// needs a complete document; ebml-go decodes the complete bytes of the small
// header elements (the EBML header, Info, Tracks) once the tokenizer has
// collected them, and reads GOP blobs back (DecodeGOP).
//
// Failures are *Error values with a stable Code and the stream offset at
// fault; their messages never quote stream bytes (a foreign codec ID is
// named only after sanitizing and truncating it). A Parser that failed stays
// failed; Clone before a Write to be able to refuse a chunk and go on with
// the parser as it was.
//
// A GOP blob is a WebM file of its own that any player decodes (ffmpeg and
// ffprobe are used in the tests): EncodeGOP writes it deterministically, so
// identical GOPs across reruns get the same content address, and another
// package may read it independently with ebml-go. Its layout is documented
// on EncodeGOP.
package webmstream
