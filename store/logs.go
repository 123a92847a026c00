package store

import (
	"github.com/flightrec/flightrec/store/log"
)

// The per-recording log's vocabulary, for callers of the facade
// (store/log defines it).
type (
	Record       = log.Record
	BlobRef      = log.BlobRef
	Redaction    = log.Redaction
	Locator      = log.Locator
	Log          = log.Log
	LogOptions   = log.LogOptions
	LogDamage    = log.LogDamage
	DamagedError = log.DamagedError
	Pos          = log.Pos
	SegmentFile  = log.SegmentFile
)

var (
	// ErrCorrupt is damage recovery must not cut away.
	ErrCorrupt = log.ErrCorrupt
	// ErrDamaged is a log with damage in it.
	ErrDamaged = log.ErrDamaged
)

// ScanLog calls fn for every record of the log in dir (log.ScanLog), as
// stored: an outlined part of a record's data is named (Record.Outlined),
// not read back; Store.Scan reads it back.
func ScanLog(dir string, fn func(Record, Locator) error) error { return log.ScanLog(dir, fn) }

// DecodeRecord decodes a record from its binary encoding
// (Record.AppendBinary; log.DecodeRecord).
func DecodeRecord(p []byte) (Record, error) { return log.DecodeRecord(p) }
