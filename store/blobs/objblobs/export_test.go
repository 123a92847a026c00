package objblobs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"

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

// V1Pack is a pack object as the previous version wrote it (all blobs
// plain): "FRPACK1\n", count, entries of digest, offset, length, the
// blobs.
func V1Pack(datas [][]byte) []byte {
	b := append([]byte(packMagicV1), binary.BigEndian.AppendUint32(nil, uint32(len(datas)))...)
	off := headerFixed + entryBytesV1*len(datas)
	for _, d := range datas {
		sum := sha256.Sum256(d)
		b = append(b, sum[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(off))
		b = binary.BigEndian.AppendUint64(b, uint64(len(d)))
		off += len(d)
	}
	for _, d := range datas {
		b = append(b, d...)
	}
	return b
}
