// Package ingest is flightrec's write API: opening a recording, appending
// batches of events with sequence and idempotency rules, and finishing it
// into a manifest. An acknowledgement means the events are durable.
package ingest

import (
	"flag"
	"os"
	"strconv"
	"time"
)

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

// RegisterFlags adds ingest's flags, each with a FLIGHTREC_… environment
// fallback.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Limits = DefaultLimits
	int64Flag(fs, &c.MaxBatchBytes, "max-batch-bytes", "largest decompressed append body in bytes")
	intFlag(fs, &c.MaxEventBytes, "max-event-bytes", "largest single event (NDJSON line) in bytes")
	intFlag(fs, &c.MaxEventsPerBatch, "max-events-per-batch", "most events in one append")
	intFlag(fs, &c.MaxOpenRecordings, "max-open-recordings", "most recordings open at once")
	intFlag(fs, &c.MaxOpenPerProject, "max-open-recordings-per-project", "most recordings one project may have open at once")
	durationFlag(fs, &c.OpenIdleTimeout, "open-idle-timeout", "abort an open recording nothing was appended to for this long, measured from its last write on disk (0: never)")
	int64Flag(fs, &c.MaxRecordingBytes, "max-recording-bytes", "largest recording in stored bytes")
	intFlag(fs, &c.MaxVideoChunkBytes, "max-video-chunk-bytes", "largest chunk of one video event in bytes")
	intFlag(fs, &c.MaxVideoBlockBytes, "max-video-block-bytes", "largest encoded video frame in bytes")
	intFlag(fs, &c.MaxVideoGOPBytes, "max-video-gop-bytes", "largest video GOP (keyframe to keyframe) in bytes, held in memory until complete")
	int64Flag(fs, &c.MaxBodyMemory, "max-body-memory", "memory in bytes that request bodies being read take together: 32 MiB for bodies up to 4 MiB, the rest in slots of --max-batch-bytes plus 4 MiB, at least one (plus 32 MiB for four zstd decoders)")
	durationFlag(fs, &c.MaxRecordingSpan, "max-recording-span", "longest time from a recording's earliest event ts to its latest")
	durationFlag(fs, &c.MaxClockSkew, "max-clock-skew", "how far past the server's clock an event's ts may lie")
}

// EnvName is the environment variable that backs a flag.
func EnvName(flagName string) string {
	b := []byte("FLIGHTREC_")
	for i := 0; i < len(flagName); i++ {
		c := flagName[i]
		switch {
		case c == '-':
			c = '_'
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

func intFlag(fs *flag.FlagSet, p *int, name, usage string) {
	if v, err := strconv.Atoi(os.Getenv(EnvName(name))); err == nil {
		*p = v
	}
	fs.IntVar(p, name, *p, usage+" (env "+EnvName(name)+")")
}

func durationFlag(fs *flag.FlagSet, p *time.Duration, name, usage string) {
	if v, err := time.ParseDuration(os.Getenv(EnvName(name))); err == nil {
		*p = v
	}
	fs.DurationVar(p, name, *p, usage+" (env "+EnvName(name)+")")
}

func int64Flag(fs *flag.FlagSet, p *int64, name, usage string) {
	if v, err := strconv.ParseInt(os.Getenv(EnvName(name)), 10, 64); err == nil {
		*p = v
	}
	fs.Int64Var(p, name, *p, usage+" (env "+EnvName(name)+")")
}
