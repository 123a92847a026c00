package log

import "github.com/flightrec/flightrec/store/blobs"

// ErrNotFound is a missing log or segment: the one sentinel the store
// answers with for anything the data directory does not hold
// (store.ErrNotFound).
var ErrNotFound = blobs.ErrNotFound
