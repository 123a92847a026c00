package objblobs

// Loose objects. A loose blob is kept in one of two forms:
//
//	loose/<shard>/<cid>       the blob as it is
//	loose/<shard>/<cid>.zst   the blob's seekable zstd form
//	                          (blobs.EncodeSeekable: frames, a seek table)
//
// A blob is written compressed when its seekable form is at most nine
// tenths of it (the form is decoded and compared first, so a compressor
// fault never puts other bytes under the CID), else plain; either is
// written create-only. Before writing one form a writer asks whether the
// other exists, and then stores nothing. Two nodes writing the same blob
// at once may still leave both forms (a node of the previous version
// writes the plain one only): both hold the blob, a read takes either, a
// Delete and a sweep remove both.
//
// A compressed object is read by byte range through its seek table: a
// read decodes only the frames it needs, each checked by its zstd content
// checksum and the table's length (the table by its CRC); damage is
// blobs.ErrBlobCorrupt, never other bytes. A small one (wholeRead) is read
// with one GET, and, when the blob is at most checkWhole, decoded whole
// and checked against its CID at Open, as a packed blob is.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/objbackend"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/objstore"
)

var (
	// wholeRead: a compressed loose object of at most this many bytes is
	// read whole with one GET at Open (a screencast frame, a manifest, a
	// small segment); a larger one by ranges. A variable for tests.
	wholeRead int64 = 256 << 10
	// checkWhole: a blob read whole of at most this many bytes is decoded
	// at Open and checked against its CID.
	checkWhole int64 = 2 << 20
	// tailRead is how much of a larger compressed object's end is read
	// with one GET to find its seek table (8 bytes a frame of 64 KiB).
	tailRead int64 = 64 << 10
)

func looseKey(cidStr string) string {
	return loosePrefix + layout.ShardOf(cidStr) + "/" + cidStr
}

// zKey is the key of loose blob cidStr kept compressed.
func zKey(cidStr string) string { return looseKey(cidStr) + layout.CompressedSuffix }

// parseLooseKey reads a key under loose/ as a loose blob's: its CID,
// digest and whether it is the compressed form. A name that is not where
// this store would put that CID (another shard, another spelling of it)
// is no blob.
func parseLooseKey(key string) (c cid.Cid, d [32]byte, compressed, ok bool) {
	n, compressed := strings.CutSuffix(key[strings.LastIndexByte(key, '/')+1:], layout.CompressedSuffix)
	c, err := blobs.ParseCID(n)
	if err != nil {
		return cid.Undef, d, false, false
	}
	d, str, err := name(c)
	if err != nil || str != n || loosePrefix+layout.ShardOf(str)+"/"+n != strings.TrimSuffix(key, layout.CompressedSuffix) {
		return cid.Undef, d, false, false
	}
	return c, d, compressed, true
}

// putLooseData stores data, whose CID is c, as a loose object: its
// seekable form with frames ending at cuts (nil: every
// blobs.ZFrameTarget bytes) when that saves a tenth, else as it is. A
// blob already stored in either form is not stored again (created false).
func (s *Store) putLooseData(ctx context.Context, c cid.Cid, data []byte, cuts []int64) (bool, error) {
	key := c.String()
	if enc := blobs.EncodeSeekable(data, cuts); int64(len(enc)) <= int64(len(data))*9/10 {
		back, err := blobs.DecodeSeekable(enc)
		if err != nil || !bytes.Equal(back, data) {
			return false, fmt.Errorf("store: put blob %s: the compressed form does not decode to it (%v)", key, err)
		}
		return s.putLoose(ctx, key, true, bytes.NewReader(enc), int64(len(enc)))
	}
	return s.putLoose(ctx, key, false, bytes.NewReader(data), int64(len(data)))
}

// putLoose writes n bytes of r as loose blob key (its CID), compressed or
// plain, create-only: one that exists holds the same blob (its key is
// the blob's address). When the other form exists nothing is written.
func (s *Store) putLoose(ctx context.Context, key string, compressed bool, r io.Reader, n int64) (bool, error) {
	mine, other := looseKey(key), zKey(key)
	if compressed {
		mine, other = other, mine
	}
	if _, err := s.obj.Stat(ctx, other); err == nil {
		return false, nil
	} else if !errors.Is(err, objstore.ErrNotExist) {
		return false, fmt.Errorf("store: put blob %s: %w", key, err)
	}
	_, err := s.obj.Put(ctx, mine, r, n, objstore.PutOptions{CreateOnly: true})
	if errors.Is(err, objstore.ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: put blob %s: %w", key, err)
	}
	return true, nil
}

// openLoose opens loose blob key (digest d): the compressed form first
// (what is written now, mostly), then the plain one. A blob in neither
// is blobs.ErrNotFound.
func (s *Store) openLoose(ctx context.Context, d [32]byte, key string) (blobs.BlobReader, error) {
	r, err := s.openCompressed(ctx, d, key)
	if !errors.Is(err, blobs.ErrNotFound) {
		return r, err
	}
	return s.raw.Get(ctx, looseKey(key))
}

// openCompressed opens the compressed form of loose blob key (digest d);
// a missing one is blobs.ErrNotFound.
func (s *Store) openCompressed(ctx context.Context, d [32]byte, key string) (blobs.BlobReader, error) {
	zk := zKey(key)
	n, err := s.raw.Stat(ctx, zk)
	if err != nil {
		return nil, err
	}
	window := tailRead
	if n <= wholeRead {
		window = n
	}
	sk, rr, err := s.openSeekable(ctx, key, n, window)
	if err != nil {
		return nil, err
	}
	z := &zBlob{key: key, sk: sk, rr: rr}
	if window < n || sk.Size() > checkWhole {
		return zReader{io.NewSectionReader(z, 0, sk.Size())}, nil
	}
	// In memory: decode it whole and check it, as a packed blob is.
	p := make([]byte, sk.Size())
	if _, err := z.ReadAt(p, 0); err != nil && err != io.EOF {
		return nil, err
	}
	if sha256.Sum256(p) != d {
		return nil, fmt.Errorf("blob %s (%s): %w", key, zk, blobs.ErrBlobCorrupt)
	}
	return blobs.MemBlob{Reader: bytes.NewReader(p)}, nil
}

// openSeekable reads the seek table of compressed loose blob key, of n
// stored bytes, having read its last window bytes with one GET (its
// whole when window is n). A table that does not check out is
// blobs.ErrBlobCorrupt; a missing object blobs.ErrNotFound.
func (s *Store) openSeekable(ctx context.Context, key string, n, window int64) (*blobs.Seekable, *rangeReader, error) {
	rr := &rangeReader{ctx: ctx, raw: s.raw, key: zKey(key), size: n}
	window = min(window, n)
	rr.tail = make([]byte, window)
	if window > 0 {
		if err := s.raw.GetRange(ctx, rr.key, n-window, rr.tail); err != nil {
			return nil, nil, fmt.Errorf("blob %s: %w", key, err)
		}
	}
	sk, err := blobs.OpenSeekable(rr, n, nil)
	if err != nil {
		if ioErr := rr.takeErr(); ioErr != nil {
			return nil, nil, fmt.Errorf("blob %s: %w", key, ioErr)
		}
		return nil, nil, fmt.Errorf("blob %s (%s): %w: %w", key, rr.key, blobs.ErrBlobCorrupt, err)
	}
	return sk, rr, nil
}

// compressedSize is the blob's size (uncompressed) of compressed loose
// blob key, of n stored bytes: one ranged GET of its end for the seek
// table (a second of its first bytes when it is longer than tailRead).
func (s *Store) compressedSize(ctx context.Context, key string, n int64) (int64, error) {
	sk, _, err := s.openSeekable(ctx, key, n, tailRead)
	if err != nil {
		return 0, err
	}
	return sk.Size(), nil
}

// statLoose returns loose blob key's size (uncompressed), in either form.
func (s *Store) statLoose(ctx context.Context, key string) (int64, error) {
	n, err := s.raw.Stat(ctx, zKey(key))
	if err == nil {
		return s.compressedSize(ctx, key, n)
	}
	if !errors.Is(err, blobs.ErrNotFound) {
		return 0, err
	}
	return s.raw.Stat(ctx, looseKey(key))
}

// deleteLoose removes both forms of loose blob key; blobs.ErrNotFound
// when neither was there.
func (s *Store) deleteLoose(ctx context.Context, key string) error {
	zerr := s.raw.Delete(ctx, zKey(key))
	err := s.raw.Delete(ctx, looseKey(key))
	switch {
	case zerr != nil && !errors.Is(zerr, blobs.ErrNotFound):
		return zerr // a failure to remove either is reported
	case zerr == nil && errors.Is(err, blobs.ErrNotFound):
		return nil // only the compressed form was there
	}
	return err
}

// rangeReader is an io.ReaderAt over a compressed loose object: its last
// len(tail) bytes from memory, the rest by ranged GETs. It keeps the last
// error a GET met, so that zBlob tells an unreachable store (or an object
// a sweep removed meanwhile) from damage: blobs.Seekable reports both as
// blobs.ErrBadSeekable.
type rangeReader struct {
	ctx  context.Context
	raw  objbackend.Backend
	key  string
	size int64
	tail []byte

	mu  sync.Mutex
	err error
}

func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > r.size {
		return 0, io.EOF
	}
	if at := r.size - int64(len(r.tail)); off >= at {
		n := copy(p, r.tail[off-at:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	if err := r.raw.GetRange(r.ctx, r.key, off, p); err != nil {
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		return 0, err
	}
	return len(p), nil
}

// takeErr returns the last GET error and forgets it.
func (r *rangeReader) takeErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.err
	r.err = nil
	return err
}

// zBlob reads a compressed loose blob by ranges: ReadAt decodes the
// frames that hold what it reads. A frame that does not check out is
// blobs.ErrBlobCorrupt; a GET that fails keeps its error
// (objstore.ErrUnavailable, blobs.ErrNotFound).
type zBlob struct {
	key string
	sk  *blobs.Seekable
	rr  *rangeReader
	mu  sync.Mutex // ties a GET's error to the read that met it
}

func (z *zBlob) ReadAt(p []byte, off int64) (int, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	n, err := z.sk.ReadAt(p, off)
	if err == nil || err == io.EOF {
		return n, err
	}
	if ioErr := z.rr.takeErr(); ioErr != nil {
		return n, fmt.Errorf("blob %s: %w", z.key, ioErr)
	}
	return n, fmt.Errorf("blob %s (%s): %w: %w", z.key, z.rr.key, blobs.ErrBlobCorrupt, err)
}

// zReader is a blobs.BlobReader over a zBlob: Read and Seek from the
// section reader, over ReadAt.
type zReader struct{ *io.SectionReader }

func (zReader) Close() error { return nil }
