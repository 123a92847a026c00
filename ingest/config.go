// Package ingest is flightrec's write API: opening a recording, appending
// batches of events with sequence and idempotency rules, and finishing it
// into a manifest. An acknowledgement means the events are durable.
package ingest

import "time"

// Limits bound what a client may send. Zero disables a limit.
type Limits struct {
	MaxBatchBytes     int64 // decompressed body of one append
	MaxEventBytes     int   // one NDJSON line
	MaxEventsPerBatch int
	MaxOpenRecordings int
	// MaxOpenPerProject bounds one project's open recordings, so that one
	// project's abandoned recordings cannot take every slot.
	MaxOpenPerProject int
	// OpenIdleTimeout aborts an open recording nothing was appended to for
	// this long (measured from its last write on disk, so across
	// restarts); 0 never.
	OpenIdleTimeout   time.Duration
	MaxRecordingBytes int64 // stored bytes of one recording (log plus its blobs)
	MaxStep           int
	// MaxVideoChunkBytes bounds one video event's chunk (decoded bytes);
	// MaxVideoBlockBytes one encoded frame and MaxVideoGOPBytes one GOP,
	// which the stream's parser holds in memory until it is complete.
	MaxVideoChunkBytes int
	MaxVideoBlockBytes int
	MaxVideoGOPBytes   int
	// MaxRecordingSpan bounds a recording's events from its earliest ts to
	// its latest; MaxClockSkew how far past the server's clock an event's
	// ts may lie. Together they bound every ts playback ever works over.
	MaxRecordingSpan time.Duration
	MaxClockSkew     time.Duration
	// MaxBodyMemory bounds the memory request bodies being read take
	// together (decompressed): 32 MiB for bodies up to 4 MiB, 32 MiB for
	// four zstd decoders, the rest in slots of MaxBatchBytes plus 4 MiB,
	// at least one (bodyMem).
	MaxBodyMemory int64
}

// Config configures ingest.
type Config struct {
	Limits
	// MeasureWithoutRedaction skips redaction so a benchmark can measure
	// what it costs. No flag sets it; nothing but internal/bench may.
	MeasureWithoutRedaction bool
	// FFmpeg is the ffmpeg binary that masks video GOPs, a path or a name
	// looked up on $PATH; "" is "ffmpeg".
	FFmpeg string
}

// DefaultLimits are the limits unless flags say otherwise.
var DefaultLimits = Limits{
	MaxBatchBytes:     64 << 20,
	MaxEventBytes:     16 << 20,
	MaxEventsPerBatch: 50_000,
	MaxOpenRecordings: 10_000,
	MaxOpenPerProject: 1_000,
	OpenIdleTimeout:   24 * time.Hour,
	MaxRecordingBytes: 16 << 30,
	MaxStep:           1_000_000,

	MaxVideoChunkBytes: 8 << 20,
	MaxVideoBlockBytes: 16 << 20,
	MaxVideoGOPBytes:   64 << 20,

	MaxRecordingSpan: 24 * time.Hour,
	MaxClockSkew:     5 * time.Minute,
	MaxBodyMemory:    160 << 20,
}
