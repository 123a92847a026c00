package blobs

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A packed blob (in a local pack or a pack object) may be kept
// compressed: its stored bytes are then one zstd frame of the blob, with
// the frame's content size and checksum, and the pack's entry says so.
// As for a seekable blob, the CID names the uncompressed bytes, so
// manifests, verify, bundles and attestations never see the compressed
// form. Screencast frames are JPEGs, but Chromium's, and even more those
// redaction re-encodes with standard Huffman tables, shrink to 0.4–0.75
// of their size under zstd's fastest level (a flat page's blocks repeat),
// and a higher level gains about 1% more.

// ErrBadPacked is returned for a compressed packed blob whose frame does
// not decode to the size its entry names.
var ErrBadPacked = errors.New("compressed packed blob is damaged")

var packEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true),
		zstd.WithZeroFrames(true))
	if err != nil {
		panic(err) // only for invalid options
	}
	return e
})

// CompressPacked returns the form in which a packed blob is kept: its
// zstd frame when that is at most nine tenths of data (what a stored
// compressed blob must save to be worth a decode on every read), else
// data itself; compressed says which.
func CompressPacked(data []byte) (stored []byte, compressed bool) {
	if len(data) < 64 {
		return data, false
	}
	enc := packEncoder().EncodeAll(data, make([]byte, 0, len(data)*9/10))
	if int64(len(enc)) > int64(len(data))*9/10 {
		return data, false
	}
	return enc, true
}

// DecompressPacked returns the blob a compressed packed entry holds. raw
// is the blob's size as its entry (or the frame) names it; a frame that
// claims or decodes to another size, or more than PackMaxBlob, is
// ErrBadPacked: a damaged entry never makes the reader allocate more
// than the blob's size.
func DecompressPacked(stored []byte, raw int64) ([]byte, error) {
	if raw < 0 || raw > PackMaxBlob {
		return nil, fmt.Errorf("%w: size %d", ErrBadPacked, raw)
	}
	var h zstd.Header
	if err := h.Decode(stored); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	if !h.HasFCS || h.FrameContentSize != uint64(raw) {
		return nil, fmt.Errorf("%w: the frame holds %d bytes, the entry names %d", ErrBadPacked, h.FrameContentSize, raw)
	}
	out, err := zDecoder().DecodeAll(stored, make([]byte, 0, raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	if int64(len(out)) != raw {
		return nil, fmt.Errorf("%w: %d bytes, the entry names %d", ErrBadPacked, len(out), raw)
	}
	return out, nil
}

// packedSize is the size of the blob a compressed packed entry holds, from
// its frame's header (a scan of a pack reads it there).
func packedSize(stored []byte) (int64, error) {
	var h zstd.Header
	if err := h.Decode(stored); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	if !h.HasFCS || h.FrameContentSize > PackMaxBlob {
		return 0, fmt.Errorf("%w: no size, or more than a packed blob may hold", ErrBadPacked)
	}
	return int64(h.FrameContentSize), nil
}
