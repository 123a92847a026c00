package objblobs

import (
	"context"

	"github.com/flightrec/flightrec/store/objstore"
)

// OpenWithHook opens a store whose sweeps call hook at each step, for
// tests that interleave a writer with a sweep deterministically.
func OpenWithHook(ctx context.Context, obj objstore.Store, opts Options, hook func(step string)) (*Store, error) {
	return openWith(ctx, obj, opts, hook)
}

// HeaderReads counts the pack headers s has read.
func (s *Store) HeaderReads() int64 { return s.headerReads.Load() }

// SetReadSizes sets how large a compressed loose object Open reads whole
// (0: none) and how much of a larger one's end it reads for the seek
// table, and returns the function that restores them.
func SetReadSizes(whole, tail int64) (restore func()) {
	w, t := wholeRead, tailRead
	wholeRead, tailRead = whole, tail
	return func() { wholeRead, tailRead = w, t }
}
