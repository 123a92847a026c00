package blobs

import (
	"os"

	"github.com/ipfs/go-cid"
)

// Seams for the tests of code built on the blob store (the store's
// garbage-collection tests, which mark with real recordings): a pack
// size that makes packs roll quickly, where a blob lies, and a simulated
// crash at a step of a repack. Production code calls none of them.

// SetPackBytes sets the size at which packs roll. Call it before any put.
func (b *FSBlobs) SetPackBytes(n int64) { b.packs.maxBytes = n }

// CurrentPack is the number of the pack being filled (0 when none).
func (b *FSBlobs) CurrentPack() int { n, _ := b.packs.current(); return n }

// PackOf is the pack blob c is indexed in; ok is false for a loose or
// missing blob.
func (b *FSBlobs) PackOf(c cid.Cid) (pack int, ok bool) {
	d, _ := digestOf(c)
	loc, ok := b.packs.has(d)
	return loc.pack, ok
}

// IsDelta reports whether blob c is packed as a delta against another
// entry (packs.go).
func (b *FSBlobs) IsDelta(c cid.Cid) bool {
	d, _ := digestOf(c)
	loc, _ := b.packs.has(d)
	return loc.d
}

// PackedCompressed reports whether blob c is packed in a compressed form
// (its zstd frame, or a delta).
func (b *FSBlobs) PackedCompressed(c cid.Cid) bool {
	d, _ := digestOf(c)
	loc, ok := b.packs.has(d)
	return ok && loc.z
}

// FullPacks lists the full packs (those with an index on disk).
func (b *FSBlobs) FullPacks() ([]int, error) { return b.packs.fullPacks() }

// SetGCHook makes fn run at each step of a repack: an error it returns
// stops the collection there, as a crash would, and Collect's error wraps
// ErrGCHook.
func (b *FSBlobs) SetGCHook(fn func(step string) error) { b.packs.gcHook = fn }

// ErrGCHook marks an error a test's GC hook returned.
var ErrGCHook = errGCHook

// IsJPEGDelta reports whether blob c is packed as a JPEG delta (packz.go).
func (b *FSBlobs) IsJPEGDelta(c cid.Cid) bool {
	d, _ := digestOf(c)
	loc, ok := b.packs.has(d)
	if !ok || !loc.d {
		return false
	}
	f, err := os.Open(b.packs.path(loc.pack))
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, packJPEGHdr)
	if _, err := f.ReadAt(head, loc.off); err != nil {
		return false
	}
	return isJPEGDelta(head)
}

// DeltaBase is the blob the packed delta c is kept against (ok false for
// a blob that is not a delta in a pack).
func (b *FSBlobs) DeltaBase(c cid.Cid) (base cid.Cid, ok bool) {
	d, _ := digestOf(c)
	loc, ok := b.packs.has(d)
	if !ok || !loc.d {
		return cid.Undef, false
	}
	f, err := os.Open(b.packs.path(loc.pack))
	if err != nil {
		return cid.Undef, false
	}
	defer f.Close()
	stored, err := readStored(f, loc)
	if err != nil {
		return cid.Undef, false
	}
	_, digest, err := baseOf(f, loc, stored, 0)
	if err != nil {
		return cid.Undef, false
	}
	return FromDigest(digest[:]), true
}

// SetRecentFrames sets how many of the last JPEGs written a new JPEG's
// base is searched among (0: no search), for every blob store of the
// process, and returns what restores it.
func SetRecentFrames(n int) (restore func()) {
	old := packRecentFrames
	packRecentFrames = n
	return func() { packRecentFrames = old }
}

// SetParseBudget sets the coefficients a batch may parse before taking
// the packs lock (packParseBudget), for every blob store of the process,
// and returns what restores it.
func SetParseBudget(n int) (restore func()) {
	old := packParseBudget
	packParseBudget = n
	return func() { packParseBudget = old }
}
