package sqlite

import (
	"errors"

	"modernc.org/sqlite"
)

// SQLite's primary result codes that say what is wrong with the file.
const (
	codeCorrupt = 11 // SQLITE_CORRUPT: the database disk image is malformed
	codeFull    = 13 // SQLITE_FULL: the disk is full
	codeNotADB  = 26 // SQLITE_NOTADB: the file is not a database
)

func code(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// Corrupt reports whether err is SQLite finding the index file damaged
// (malformed, or not a database at all): `flightrec reindex` rebuilds it.
func Corrupt(err error) bool {
	c := code(err)
	return c == codeCorrupt || c == codeNotADB
}

// Full reports whether err is SQLite finding no space left to write.
func Full(err error) bool { return code(err) == codeFull }
