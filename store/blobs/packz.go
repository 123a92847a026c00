package blobs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/store/blobs/jpegdelta"
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

// A packed blob may also be kept as a delta: the zstd frame of the blob
// compressed with the blob of an earlier entry of the same pack as its
// dictionary (zstd's raw-content dictionary, the base's bytes as history
// before the blob's own). Consecutive screencast frames of a page share
// most of their bytes up to the first block that changed, so a frame
// kept against the one packed before it takes about half of what it
// takes alone (the demo's checkout: 135 KiB against 245 KiB for one
// run's distinct frames). The entry's stored bytes are then
//
//	u32 LE back | zstd frame (dictionary ID packDeltaDict)
//
// where back is the distance from the base entry's header to this
// entry's: a delta is read by reading its base first, which may itself be
// a delta. A writer bounds such a chain to packDeltaDepth deltas after a
// whole entry, so a read decodes at most packDeltaDepth+1 frames and a
// damaged entry takes at most packDeltaDepth others with it (they are
// reported corrupt, never served). A reader refuses a chain longer than
// packDeltaMaxChain, so a damaged pack cannot make it loop or recurse
// without end.
//
// A delta of a JPEG against a JPEG of the same geometry (screencast
// frames) is kept in coefficients rather than bytes (store/blobs/
// jpegdelta: the MCUs that changed, and a map of them), since a JPEG's
// entropy-coded bits after its first changed MCU share no bytes with the
// frame before. Its stored bytes are
//
//	u32 LE back | u32 LE the blob's size | zstd frame (dictionary ID
//	packJPEGDict: the base's bytes before its scan, which hold the
//	tables the frame most likely repeats) of the jpegdelta delta
//
// and they are told from a byte delta by what follows back: a zstd
// frame's magic there, or a size (at most PackMaxBlob, never the magic).
// On the demo's checkout trace, 23 frames after the first take 72 KiB
// this way against 294 KiB as byte deltas.
const (
	packDeltaDepth    = 4
	packDeltaMaxChain = 16
	// packDeltaMax bounds the blobs tried as deltas, and their bases:
	// screencast frames are tens of kilobytes; a video chunk is not
	// worth a second encode.
	packDeltaMax  = 1 << 20
	packDeltaDict = 1
	packDeltaHdr  = 4
	packJPEGDict  = 2
	packJPEGHdr   = 8
)

// zstdMagic begins every zstd frame.
var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

// isJPEGDelta reports whether a delta's stored bytes are a JPEG delta.
func isJPEGDelta(stored []byte) bool {
	return len(stored) >= packJPEGHdr && !bytes.Equal(stored[packDeltaHdr:packJPEGHdr], zstdMagic)
}

// deltaCoder makes deltas: it is owned by one writer (packs.mu, or a
// sweep's copy) since its dictionary changes with every blob.
type deltaCoder struct{ enc *zstd.Encoder }

// encode returns the delta of data against base (the back word and the
// frame), or nil when it would not save a tenth over alone, the form
// data is kept in otherwise.
func (c *deltaCoder) encode(data, base []byte, back int64, alone int) []byte {
	if !deltaFits(data, base, back) {
		return nil
	}
	if err := c.reset(packDeltaDict, base); err != nil {
		return nil
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, alone), uint32(back))
	out = c.enc.EncodeAll(data, out)
	if len(out) > alone*9/10 {
		return nil
	}
	return out
}

func deltaFits(data, base []byte, back int64) bool {
	return len(data) >= 64 && len(data) <= packDeltaMax && len(base) > 0 && len(base) <= packDeltaMax && back > 0 && back <= 1<<31
}

// reset readies the coder to compress against dict.
func (c *deltaCoder) reset(id uint32, dict []byte) error {
	if c.enc == nil {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true),
			zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		c.enc = e
	}
	return c.enc.ResetWithOptions(nil, zstd.WithEncoderDictRaw(id, dict))
}

// encodeJPEG returns the JPEG delta of data (parsed: frame) against base
// (parsed: baseFrame), or nil when there is none or it would not save a
// tenth over alone.
func (c *deltaCoder) encodeJPEG(data []byte, frame *jpegdelta.Frame, base []byte, baseFrame *jpegdelta.Frame, back int64, alone int) []byte {
	if frame == nil || baseFrame == nil || !deltaFits(data, base, back) {
		return nil
	}
	delta, err := jpegdelta.Delta(frame, baseFrame)
	if err != nil {
		return nil
	}
	if err := c.reset(packJPEGDict, baseFrame.Header()); err != nil {
		return nil
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, alone), uint32(back))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(data)))
	out = c.enc.EncodeAll(delta, out)
	if len(out) > alone*9/10 {
		return nil
	}
	return out
}

// parseJPEG returns data parsed as a JPEG that a delta can be made of or
// against, or nil.
func parseJPEG(data []byte) *jpegdelta.Frame {
	if len(data) > packDeltaMax || !jpegdelta.Looks(data) {
		return nil
	}
	f, err := jpegdelta.Parse(data)
	if err != nil {
		return nil
	}
	return f
}

var dictDecoders = &kept[*zstd.Decoder]{max: 4, new: func() *zstd.Decoder {
	// Bounded by the largest seekable frame; decodeAgainst checks a
	// frame's size before decoding it.
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(zMaxFrame))
	if err != nil {
		panic(err) // only for invalid options
	}
	return d
}}

// deltaBack is the distance a delta entry's stored bytes name back to
// its base entry.
func deltaBack(stored []byte) (int64, error) {
	if len(stored) < packDeltaHdr {
		return 0, fmt.Errorf("%w: a delta without its base", ErrBadPacked)
	}
	return int64(binary.LittleEndian.Uint32(stored)), nil
}

// deltaSize is the size of the blob a delta entry holds, from its frame's
// header.
func deltaSize(stored []byte) (int64, error) {
	if len(stored) < packDeltaHdr {
		return 0, fmt.Errorf("%w: a delta without its base", ErrBadPacked)
	}
	if isJPEGDelta(stored) {
		raw := int64(binary.LittleEndian.Uint32(stored[packDeltaHdr:]))
		if raw > PackMaxBlob {
			return 0, fmt.Errorf("%w: a JPEG delta of %d bytes", ErrBadPacked, raw)
		}
		return raw, nil
	}
	return packedSize(stored[packDeltaHdr:])
}

// jpegDeltaShape checks a JPEG delta entry (hdr, stored) without its
// base: its CRC, the size it names, and that a zstd frame against
// packJPEGDict naming its content size follows. It returns the size.
func jpegDeltaShape(hdr, stored []byte) (int64, bool) {
	if !entryCRCOK(hdr, stored) || len(stored) < packJPEGHdr+len(zstdMagic) ||
		!bytes.Equal(stored[packJPEGHdr:packJPEGHdr+len(zstdMagic)], zstdMagic) {
		return 0, false
	}
	raw, err := deltaSize(stored)
	if err != nil || raw <= 0 {
		return 0, false
	}
	var h zstd.Header
	if h.Decode(stored[packJPEGHdr:]) != nil || h.DictionaryID != packJPEGDict || !h.HasFCS {
		return 0, false
	}
	return raw, true
}

// decompressDelta returns the blob a delta entry holds, given its base's
// bytes; raw is the blob's size, checked as DecompressPacked does (and
// the frame's checksum catches a wrong base).
func decompressDelta(stored []byte, raw int64, base []byte) ([]byte, error) {
	if raw < 0 || raw > PackMaxBlob || len(stored) < packDeltaHdr {
		return nil, fmt.Errorf("%w: size %d", ErrBadPacked, raw)
	}
	if isJPEGDelta(stored) {
		return decompressJPEGDelta(stored, raw, base)
	}
	return decodeAgainst(stored[packDeltaHdr:], packDeltaDict, base, func(size uint64) bool { return size == uint64(raw) })
}

// decodeAgainst decodes frame, a zstd frame compressed against dict under
// dictionary id, whose header must name its content size and one that
// fits; the frame's checksum is checked.
func decodeAgainst(frame []byte, id uint32, dict []byte, fits func(size uint64) bool) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(frame); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	if !h.HasFCS || h.DictionaryID != id || !fits(h.FrameContentSize) {
		return nil, fmt.Errorf("%w: a delta of %d bytes against dictionary %d, want %d", ErrBadPacked, h.FrameContentSize, h.DictionaryID, id)
	}
	d := dictDecoders.get()
	defer dictDecoders.put(d)
	if err := d.ResetWithOptions(nil, zstd.WithDecoderDictRaw(id, dict)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	out, err := d.DecodeAll(frame, make([]byte, 0, h.FrameContentSize))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	if uint64(len(out)) != h.FrameContentSize {
		return nil, fmt.Errorf("%w: %d bytes, the frame names %d", ErrBadPacked, len(out), h.FrameContentSize)
	}
	return out, nil
}

// decompressJPEGDelta is decompressDelta for a JPEG delta.
func decompressJPEGDelta(stored []byte, raw int64, base []byte) ([]byte, error) {
	bf, err := jpegdelta.Open(base)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	fr, err := applyStored(stored, raw, bf)
	if err != nil {
		return nil, err
	}
	out, err := fr.Bytes(int(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	if int64(len(out)) != raw {
		return nil, fmt.Errorf("%w: %d bytes, the entry names %d", ErrBadPacked, len(out), raw)
	}
	return out, nil
}

// applyStored returns the frame that a JPEG delta's stored bytes (of a
// raw-byte blob) rebuild from its base bf, in coefficients.
func applyStored(stored []byte, raw int64, bf *jpegdelta.Frame) (*jpegdelta.Frame, error) {
	if size, err := deltaSize(stored); err != nil || size != raw {
		return nil, fmt.Errorf("%w: a JPEG delta of %d bytes, the entry names %d", ErrBadPacked, size, raw)
	}
	// The delta holds the frame's header and its changed MCUs' bits
	// without stuffing, and a bit per MCU (each at least two bits in
	// the frame): never much more than the frame.
	delta, err := decodeAgainst(stored[packJPEGHdr:], packJPEGDict, bf.Header(), func(size uint64) bool { return size <= uint64(raw)*2+4096 })
	if err != nil {
		return nil, err
	}
	fr, err := jpegdelta.Apply(delta, bf)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	return fr, nil
}

// frameCache keeps the JPEG frames (in coefficients) last read, by
// digest, so that reading a chain's frames in order (a video, verify, a
// bundle, a sweep's copy, the player stepping on) applies one delta each
// rather than the whole chain. It holds only frames whose bytes were
// checked against their digest.
type frameCache struct {
	mu      sync.Mutex
	entries []cachedFrame // oldest first
	bytes   int
}

type cachedFrame struct {
	d     [32]byte
	frame *jpegdelta.Frame
	bytes int // its coefficients' bytes
}

// frameCacheBytes bounds the coefficients a cache keeps (an 800×500
// frame's take 1.2 MB).
const frameCacheBytes = 16 << 20

func (c *frameCache) get(d [32]byte) *jpegdelta.Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.d == d {
			return e.frame
		}
	}
	return nil
}

func (c *frameCache) put(d [32]byte, fr *jpegdelta.Frame) {
	n := fr.Coefficients()
	if n > frameCacheBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.d == d {
			return
		}
	}
	for c.bytes+n > frameCacheBytes && len(c.entries) > 0 {
		c.bytes -= c.entries[0].bytes
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, cachedFrame{d: d, frame: fr, bytes: n})
	c.bytes += n
}
