package blobs

import (
	"errors"
	"hash/crc32"
)

var (
	// ErrNotFound is a missing blob, and anything else the data directory
	// does not hold: the store facade and the log answer with this same
	// sentinel (store.ErrNotFound), so callers test one error.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly is returned by any write to a store opened read-only
	// (store.ErrReadOnly).
	ErrReadOnly = errors.New("store: opened read-only")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
