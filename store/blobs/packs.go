package blobs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/flightrec/flightrec/store/blobs/jpegdelta"
	"github.com/flightrec/flightrec/store/layout"
)

// Packs hold the blobs that arrive in ingest batches (frames, screenshots,
// video chunks). A file per small blob costs a journal commit per file, so
// on this kind of disk a batch of 20 frames of 50 KB takes 20–30 ms however
// the fsyncs are grouped: about 50 MB/s. Appending the batch to one pack
// file and fsyncing once costs what a sequential write costs. The blobs
// stay content-addressed (found by CID, stored once, never rewritten);
// only their placement differs from a loose blob's.
//
//	DIR/packs/NNNNNNNN.pack   header "FRPACK\x00\x03", then entries:
//	    u32 LE z<<31 | d<<30 | n | u32 LE CRC-32C of (digest ‖ stored) | 32-byte sha2-256 digest of the blob | n stored bytes
//	DIR/packs/NNNNNNNN.idx    written when a pack is full (atomic):
//	    "FRPIDX\x00\x03" | u32 LE count |
//	    count × (digest, u64 LE offset, u32 LE z<<31 | d<<30 | stored length, u32 LE blob size) | u32 LE CRC-32C of all before
//
// An entry with z set stores the blob as one zstd frame (packz.go): a
// blob is kept so when that saves a tenth of it, which screencast frames
// do. One with d set too is a delta: the frame was compressed against an
// earlier entry of the pack, which its stored bytes name (packz.go). The
// digest is always the blob's, so a CID never depends on how it is kept.
// Packs and indexes of version 2 (no d) and version 1 ("FRPACK\x00\x01",
// "FRPIDX\x00\x01" with 44-byte rows and no z) are read as before; the
// packs written now, and the packs a sweep rewrites, are version 3.
//
// A pack is preallocated (fallocate) ahead of its logical end and written
// there: writing into allocated space costs a tenth of the CPU of extending
// a file and doubles the bandwidth on ext4. The allocation grows in
// proportion to what is written (it doubles from packAllocStart up to the
// pack's maximum, see growAlloc), so a store holding one small recording
// does not take a whole pack's worth of disk. An all-zero entry header marks
// the logical end; a full pack is trimmed to it.
//
// The in-memory index maps digest → (pack, offset, length); it is loaded
// from the .idx files and by scanning the one pack that has none (the one
// being filled), whose torn tail a crash may have left is cut: entries in
// it were never acknowledged. A sweep (gc.go) rewrites full packs without
// their dead blobs under new numbers, so a crash may leave a blob in two
// packs: the higher-numbered one is indexed, the other copy is dropped by
// the next sweep.
type packs struct {
	dir      string
	maxBytes int64

	mu    sync.Mutex // guards everything below; held for a batch's write, not its fsync
	index map[[32]byte]packLoc
	cur   *packFile // the pack being filled, nil until the first put
	lastN int       // the highest pack number in use
	bytes int64     // payload bytes in all packs
	cut   int64     // bytes cut from torn tails at open
	// corrupt holds whole entries whose bytes do not hash to the digest
	// in their header (a flipped bit): never served, never cut, reported
	// by CID. damaged holds regions that parse as no entry at all, with
	// intact entries after them.
	corrupt  map[[32]byte]packLoc
	damaged  []PackDamage
	readOnly bool
	// delta makes the deltas (under mu).
	delta deltaCoder
	// frames keeps the JPEG frames reads rebuilt last (packz.go).
	frames frameCache
	// buf is reused for every batch: growing a fresh slice to a megabyte
	// copies it many times into newly faulted pages, which cost more than
	// the write itself.
	buf []byte

	// gcHook, when set (by tests), is called at each step of a repack
	// (see gc.go); an error stops the collection there, as a crash would.
	gcHook func(step string) error
}

type packLoc struct {
	pack int
	off  int64 // offset of the stored bytes (after the entry header)
	n    int64 // stored bytes
	raw  int64 // the blob's size (n, unless z)
	z    bool  // the stored bytes are the blob's zstd frame
	d    bool  // ... compressed against an earlier entry (a delta; z too)
}

const (
	packMagic      = "FRPACK\x00\x03"
	packMagicV2    = "FRPACK\x00\x02"
	packMagicV1    = "FRPACK\x00\x01"
	packIdxMagic   = "FRPIDX\x00\x03"
	packIdxMagicV2 = "FRPIDX\x00\x02"
	packIdxMagicV1 = "FRPIDX\x00\x01"
	packEntryHdr   = 4 + 4 + 32
	// packZ, in an entry's first word, says its stored bytes are the
	// blob's zstd frame, and packD that they are a delta (packz.go); the
	// other 30 bits are their length.
	packZ          = 1 << 31
	packD          = 1 << 30
	defaultPackMax = 128 << 20
	// packAllocStart is a new pack's first allocation; it doubles as the
	// pack fills.
	packAllocStart = 1 << 20
	// PackMaxBlob bounds a packed blob; larger ones are stored loose.
	PackMaxBlob = 8 << 20
)

var errPackCorrupt = errors.New("pack corrupt")

func openPacks(dir string, maxBytes int64) (*packs, error) {
	if maxBytes <= 0 {
		maxBytes = defaultPackMax
	}
	p := &packs{dir: dir, maxBytes: maxBytes, index: map[[32]byte]packLoc{}, corrupt: map[[32]byte]packLoc{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: packs: %w", err)
	}
	nums, idxs, err := p.list(true)
	if err != nil {
		return nil, err
	}
	// The pack being filled is the highest-numbered one without an index.
	// It is usually the last, but a sweep writes its rewritten packs (with
	// their indexes) under new numbers while one is being filled.
	filling := 0
	for _, n := range nums {
		if !idxs[n] && !p.markedDamaged(n) {
			filling = n
		}
	}
	for _, n := range nums {
		if idxs[n] {
			if err := p.loadIdx(n); err == nil {
				continue
			}
			// A bad index is rebuilt from its pack below.
		}
		last := n == filling
		sc, err := p.scan(n)
		if err != nil {
			return nil, fmt.Errorf("store: pack %d: %w", n, err)
		}
		p.note(sc)
		if p.markedDamaged(n) {
			// Finished (trimmed, durable) with damage in it: scanned
			// at every open to find the damage again, and never cut,
			// since every entry in it was acknowledged.
			continue
		}
		if sc.torn {
			// A pack without an index was being filled: a crash, or a
			// failed write after which nothing more went into it, left
			// its tail torn (an entry that runs past the end of what
			// was written), and nothing in that tail was acknowledged.
			// Cut it (and preallocate again below if it stays current).
			// Damage before the tail is never cut: see scan.
			if err := layout.TruncateSync(p.path(n), sc.end); err != nil {
				return nil, err
			}
			p.cut += sc.size - sc.end
			sc.size = sc.end
		}
		// A pack of an older version is not filled further: it is
		// finished, and the next put starts a version-3 one.
		if !last || sc.end >= maxBytes || sc.version < 3 {
			if err := trimPack(p.path(n), sc.end); err != nil {
				return nil, err
			}
			if err := p.indexUnlessDamaged(n, sc.entries); err != nil {
				return nil, err
			}
		} else {
			f, err := os.OpenFile(p.path(n), os.O_WRONLY, 0)
			if err != nil {
				return nil, fmt.Errorf("store: pack: %w", err)
			}
			pf := newPackFile(n, f, sc.end, sc.entries)
			pf.depths = sc.depths
			// Their signatures are made by the first put that searches
			// (signRecent), not here: that reads and parses up to
			// packRecentFrames frames.
			pf.unsigned = sc.lastJPEGs
			pf.alloc = max(sc.size, growAlloc(0, sc.end, maxBytes))
			if pf.alloc > sc.size {
				preallocate(f, pf.alloc)
			}
			p.cur = pf
		}
	}
	if len(nums) > 0 {
		p.lastN = nums[len(nums)-1]
	}
	return p, nil
}

// openPacksReadOnly loads the pack index without changing a byte: no torn
// tail is cut (a writer may be appending to it right now), no pack is
// trimmed or preallocated, no index written, no leftover removed.
func openPacksReadOnly(dir string) (*packs, error) {
	p := &packs{dir: dir, maxBytes: defaultPackMax, index: map[[32]byte]packLoc{}, corrupt: map[[32]byte]packLoc{}, readOnly: true}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// load (read-only) indexes every pack: from its index file, or by scanning
// it.
func (p *packs) load() error {
	nums, idxs, err := p.list(false)
	if err != nil {
		return err
	}
	for _, n := range nums {
		if idxs[n] && p.loadIdx(n) == nil {
			continue
		}
		sc, err := p.scan(n)
		if err != nil {
			return fmt.Errorf("store: pack %d: %w", n, err)
		}
		p.note(sc)
	}
	return nil
}

// reload (read-only) indexes the packs again: a writer beside a read-only
// reader adds blobs after the reader opened, and a record the reader finds
// later may name one.
func (p *packs) reload() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.index, p.corrupt, p.damaged, p.bytes = map[[32]byte]packLoc{}, map[[32]byte]packLoc{}, nil, 0
	_ = p.load()
}

// note adds what a scan found to the index (with p.mu held or before the
// packs are shared).
func (p *packs) note(sc packScan) {
	for d, loc := range sc.entries {
		p.add(d, loc)
	}
	for d, loc := range sc.corrupt {
		p.corrupt[d] = loc
	}
	p.damaged = append(p.damaged, sc.damaged...)
}

func (p *packs) path(n int) string    { return layout.PackFile(p.dir, n, ".pack") }
func (p *packs) idxPath(n int) string { return layout.PackFile(p.dir, n, ".idx") }

func (p *packs) add(d [32]byte, loc packLoc) {
	if _, ok := p.index[d]; !ok {
		p.bytes += loc.n
	}
	p.index[d] = loc
}

// list returns the pack numbers in order and which have an index.
// With tidy unset (a read-only open) nothing is removed.
func (p *packs) list(tidy bool) ([]int, map[int]bool, error) {
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("store: packs: %w", err)
	}
	var nums, marks []int
	idxs := map[int]bool{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) || strings.HasPrefix(name, ".") && strings.Contains(name, tmpPrefix) {
			// A pack a repack left half written (".tmp-*"), or an index
			// a crash left half written (WriteFileAtomic's
			// ".NNNNNNNN.idx.tmp-*").
			if tidy {
				_ = os.Remove(filepath.Join(p.dir, name))
			}
			continue
		}
		base, ext, ok := strings.Cut(name, ".")
		n, err := strconv.Atoi(base)
		if !ok || err != nil || len(base) != 8 || n <= 0 {
			continue
		}
		switch ext {
		case "pack":
			nums = append(nums, n)
		case "idx":
			idxs[n] = true
		case "damaged":
			marks = append(marks, n)
		}
	}
	sort.Ints(nums)
	// An index without its pack (a collection removes the index first, so
	// only outside damage leaves one) must not outlive it: a later pack
	// with the same number would load it.
	have := make(map[int]bool, len(nums))
	for _, n := range nums {
		have[n] = true
	}
	for _, n := range marks {
		// A damage marker without its pack would mark a later pack of
		// that number (only outside changes leave one).
		if !have[n] && tidy {
			_ = os.Remove(p.markPath(n))
		}
	}
	for n := range idxs {
		if !have[n] && !tidy {
			delete(idxs, n)
			continue
		}
		if !have[n] {
			if err := os.Remove(p.idxPath(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("store: packs: %w", err)
			}
			delete(idxs, n)
		}
	}
	return nums, idxs, nil
}

// PackDamage is a region of a pack that holds no readable entry, with
// intact entries after it.
type PackDamage struct {
	Pack       int
	Offset, To int64
}

// packScan is what scan found in one pack.
type packScan struct {
	entries map[[32]byte]packLoc // good entries
	corrupt map[[32]byte]packLoc // whole entries whose bytes do not match their digest
	damaged []PackDamage
	end     int64 // the logical end: after the last whole entry
	size    int64 // the file size
	torn    bool  // from end on lies an entry that runs past the end of the file
	version int   // the version the pack's header names (3 if damaged)
	// depths holds how many deltas lead to each good delta entry, and
	// lastJPEGs the last packRecentFrames good entries that look like
	// JPEGs, oldest first: a writer continuing the pack needs both
	// (packFile.depths, packFile.recent).
	depths    map[[32]byte]int
	lastJPEGs []recentFrame
}

// scan reads a pack's entries, checking each one's CRC and digest. A pack
// is preallocated, so an all-zero entry header marks the end of what was
// written. Damage is told apart from a torn tail by what follows it:
//   - a whole entry (its length fits) whose bytes do not match, followed by
//     the end, zeros or a good entry, with no good entry inside the span
//     its length claims, is corrupt: its digest is kept in corrupt so the
//     blob is reported by CID, and the scan goes on;
//   - bytes that parse as no entry, followed somewhere by a good entry,
//     are a damaged region, skipped;
//   - bytes that parse as no entry, with no good entry after them, are a
//     torn tail: an append a crash interrupted (the only thing a writer's
//     open may cut).
//
// A damaged pack header is a damaged region too; only failing to read the
// file is an error.
func (p *packs) scan(n int) (packScan, error) {
	sc := packScan{entries: map[[32]byte]packLoc{}, corrupt: map[[32]byte]packLoc{}, depths: map[[32]byte]int{}}
	f, err := os.Open(p.path(n))
	if err != nil {
		return sc, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return sc, err
	}
	sc.size = fi.Size()
	head := make([]byte, len(packMagic))
	if _, err := f.ReadAt(head, 0); err != nil || string(head) != packMagic && string(head) != packMagicV2 && string(head) != packMagicV1 {
		if allZeroBytes(head) || sc.size < int64(len(packMagic)) { // created, header never made durable
			sc.torn = sc.size > 0
			return sc, nil
		}
		// A damaged header: the entries after it are read as usual.
		sc.damaged = append(sc.damaged, PackDamage{Pack: n, Offset: 0, To: int64(len(packMagic))})
	}
	sc.version = 3
	switch string(head) {
	case packMagicV1:
		sc.version = 1
	case packMagicV2:
		sc.version = 2
	}
	pr := packReader{r: bufio.NewReaderSize(io.NewSectionReader(f, 0, sc.size), 1<<20), f: f, size: sc.size, prevOff: -1, good: map[int64]goodEntry{}}
	pr.skip(int64(len(packMagic)))
	off := int64(len(packMagic))
	for {
		e, st := pr.entryAt(off)
		switch st {
		case entryEnd:
			sc.end = off
			return sc, nil
		case entryGood:
			sc.entries[e.d] = packLoc{pack: n, off: off + packEntryHdr, n: e.n, raw: e.raw, z: e.z, d: e.delta}
			depth := 0
			if e.delta {
				depth = pr.good[e.baseOff].depth + 1
				sc.depths[e.d] = depth
			}
			pr.good[off] = goodEntry{loc: sc.entries[e.d], depth: depth}
			if (e.blob == nil || jpegdelta.Looks(e.blob)) && packRecentFrames > 0 {
				if len(sc.lastJPEGs) >= packRecentFrames {
					sc.lastJPEGs = sc.lastJPEGs[1:]
				}
				sc.lastJPEGs = append(sc.lastJPEGs, recentFrame{d: e.d, off: off, depth: depth})
			}
			pr.prevOff, pr.prevBlob = off, nil
			if e.blob != nil { // not a JPEG delta taken by its shape
				pr.prevBlob = append(pr.prevBuf[:0], e.blob...)
				pr.prevBuf = pr.prevBlob
			}
			off += packEntryHdr + e.n
			continue
		case entryOrphan:
			// Whole, but its base is not readable: corrupt with it.
			sc.corrupt[e.d] = packLoc{pack: n, off: off + packEntryHdr, n: e.n, raw: e.n, z: e.z, d: e.delta}
			pr.prevOff = -1
			off += packEntryHdr + e.n
			continue
		case entryBad:
			// A good entry inside the span its length claims means the
			// length is what is damaged: that is a damaged region.
			next := off + packEntryHdr + e.n
			if r := pr.resync(off + 1); r >= 0 && r < next {
				sc.damaged = append(sc.damaged, PackDamage{Pack: n, Offset: off, To: r})
				off = r
				continue
			}
			if next == sc.size || pr.boundary(next) {
				sc.corrupt[e.d] = packLoc{pack: n, off: off + packEntryHdr, n: e.n, raw: e.n, z: e.z, d: e.delta}
				pr.prevOff = -1
				off = next
				continue
			}
		}
		pr.prevOff = -1
		// No entry parses here: a damaged region if a good entry follows,
		// else the torn tail.
		next := pr.resync(off + 1)
		if next < 0 {
			sc.end, sc.torn = off, true
			return sc, nil
		}
		sc.damaged = append(sc.damaged, PackDamage{Pack: n, Offset: off, To: next})
		off = next
	}
}

// entryState is what lies at an offset of a pack.
type entryState int

const (
	entryEnd  entryState = iota // the end of the file, or an all-zero header
	entryGood                   // a whole entry whose bytes match its digest
	entryBad                    // a whole entry (its length fits) whose bytes do not
	entryNone                   // no whole entry: a length that does not fit, a short header
	// entryOrphan is a whole delta entry (its CRC matches) whose base is
	// not the good entry the scan read before it: not readable.
	entryOrphan
)

type packEntry struct {
	d     [32]byte
	n     int64 // stored bytes
	raw   int64 // the blob's size
	z     bool
	delta bool
	blob  []byte // entryGood's blob (valid until the next read)
	// baseOff is where a good delta's base starts.
	baseOff int64
}

// appendEntry appends a whole entry (header and stored bytes out) of the
// blob of digest d to buf.
func appendEntry(buf []byte, d [32]byte, out []byte, z, delta bool) []byte {
	crc := crc32.Update(crc32.Checksum(d[:], castagnoli), castagnoli, out)
	buf = binary.LittleEndian.AppendUint32(buf, entryWord(int64(len(out)), z, delta))
	buf = binary.LittleEndian.AppendUint32(buf, crc)
	return append(append(buf, d[:]...), out...)
}

// entryCRCOK reports whether an entry's header hdr names the CRC of its
// digest and stored bytes.
func entryCRCOK(hdr, stored []byte) bool {
	crc := crc32.Update(crc32.Checksum(hdr[8:40], castagnoli), castagnoli, stored)
	return crc == binary.LittleEndian.Uint32(hdr[4:8])
}

// entryWord is an entry header's first word.
func entryWord(n int64, z, d bool) uint32 {
	w := uint32(n)
	if z {
		w |= packZ
	}
	if d {
		w |= packD
	}
	return w
}

// parseWord splits an entry header's first word.
func parseWord(w uint32) (n int64, z, d bool) {
	return int64(w &^ (packZ | packD)), w&packZ != 0, w&packD != 0
}

// checkEntry checks a whole entry: the CRC of its header's digest and its
// stored bytes, and that the blob they hold (decompressed when z, against
// base when d) hashes to the digest. It returns the blob (stored itself
// when neither). A delta needs its base's bytes: without them (base nil)
// only its CRC is checked, and whole says whether it matched.
func checkEntry(hdr, stored []byte, z, d bool, base []byte) (blob []byte, whole, ok bool) {
	if !entryCRCOK(hdr, stored) || d && !z {
		return nil, false, false
	}
	blob = stored
	switch {
	case d:
		if base == nil {
			return nil, true, false
		}
		size, err := deltaSize(stored)
		if err != nil {
			return nil, true, false
		}
		if blob, err = decompressDelta(stored, size, base); err != nil {
			return nil, true, false
		}
	case z:
		size, err := packedSize(stored)
		if err != nil {
			return nil, true, false
		}
		if blob, err = DecompressPacked(stored, size); err != nil {
			return nil, true, false
		}
	}
	if sha256.Sum256(blob) != [32]byte(hdr[8:40]) {
		return nil, true, false
	}
	return blob, true, true
}

// packReader reads a pack's entries in order through a buffer, and checks
// offsets ahead of it directly (see scan).
type packReader struct {
	r    *bufio.Reader
	f    io.ReaderAt
	size int64
	pos  int64 // where r is
	hdr  [packEntryHdr]byte
	body []byte
	// prevOff is where the last good entry the scan read starts, -1
	// after anything else, and prevBlob its blob: a delta after it most
	// often names it as its base.
	prevOff  int64
	prevBlob []byte // nil when not kept (a JPEG delta taken by its shape)
	prevBuf  []byte // prevBlob's storage, reused
	// good holds the good entries the scan read before, by where their
	// header starts: a delta may name any of them (a searched or a
	// sequence's base), read again from the file then.
	good   map[int64]goodEntry
	frames frameCache
}

// goodEntry is a good entry a scan read: where it is, and how many deltas
// lead to it.
type goodEntry struct {
	loc   packLoc
	depth int
}

func (r *packReader) skip(n int64) {
	_, _ = r.r.Discard(int(n))
	r.pos += n
}

// entryAt reads the entry at off: through the buffer when off is where it
// is, directly otherwise.
func (r *packReader) entryAt(off int64) (packEntry, entryState) {
	if off != r.pos {
		r.r.Reset(io.NewSectionReader(r.f, off, r.size-off))
		r.pos = off
	}
	var e packEntry
	if r.size-off < packEntryHdr {
		if allZeroAt(r.f, off, r.size-off) {
			return e, entryEnd
		}
		return e, entryNone
	}
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return e, entryNone
	}
	r.pos += packEntryHdr
	if allZeroBytes(r.hdr[:]) {
		return e, entryEnd // the preallocated, unwritten rest
	}
	e.n, e.z, e.delta = parseWord(binary.LittleEndian.Uint32(r.hdr[0:4]))
	copy(e.d[:], r.hdr[8:40])
	if e.n > PackMaxBlob || r.size-off-packEntryHdr < e.n {
		return e, entryNone
	}
	if int64(cap(r.body)) < e.n {
		r.body = make([]byte, e.n)
	}
	r.body = r.body[:e.n]
	if _, err := io.ReadFull(r.r, r.body); err != nil {
		return e, entryNone
	}
	r.pos += e.n
	var base []byte
	if e.delta {
		if back, err := deltaBack(r.body); err == nil {
			e.baseOff = off - back
			if _, good := r.good[e.baseOff]; good && e.z && isJPEGDelta(r.body) {
				// A JPEG delta on a good base is checked by its CRC and
				// its shape, not rebuilt: every read rebuilds it and
				// checks the JPEG against its digest (unpackJPEG), and
				// rebuilding each of a pack's frames here made every
				// open of a store cost milliseconds per frame.
				if raw, ok := jpegDeltaShape(r.hdr[:], r.body); ok {
					e.raw, e.blob = raw, nil
					return e, entryGood
				}
				return e, entryBad
			}
			if at := e.baseOff; r.prevOff >= 0 && at == r.prevOff && r.prevBlob != nil {
				base = r.prevBlob
			} else if g, ok := r.good[at]; ok {
				// Unreadable since: the delta is an orphan.
				base, _ = readPacked(r.f, g.loc, 0, &r.frames)
			}
		}
	}
	blob, whole, ok := checkEntry(r.hdr[:], r.body, e.z, e.delta, base)
	if !ok {
		if whole && e.delta && base == nil {
			return e, entryOrphan
		}
		return e, entryBad
	}
	e.raw, e.blob = int64(len(blob)), blob
	return e, entryGood
}

// boundary reports whether an entry could start at off: zeros or a good
// entry are there.
func (r *packReader) boundary(off int64) bool {
	_, st := r.entryAt(off)
	return st == entryEnd || st == entryGood || st == entryOrphan
}

// resync returns the offset of the first good entry at or after from, or
// -1. It reads the rest of the pack into memory: damage is rare, and this
// is its only cost.
func (r *packReader) resync(from int64) int64 {
	if from >= r.size {
		return -1
	}
	rest := make([]byte, r.size-from)
	if n, _ := r.f.ReadAt(rest, from); int64(n) < int64(len(rest)) {
		rest = rest[:n]
	}
	for i := 0; i+packEntryHdr <= len(rest); i++ {
		h := rest[i : i+packEntryHdr]
		if binary.LittleEndian.Uint64(h) == 0 {
			continue // a zero length and checksum start no entry worth the hashing
		}
		n64, z, d := parseWord(binary.LittleEndian.Uint32(h[0:4]))
		n := int(n64)
		if n > PackMaxBlob || i+packEntryHdr+n > len(rest) {
			continue
		}
		// A delta's base is not known here: its CRC makes it an entry.
		if _, whole, ok := checkEntry(h, rest[i+packEntryHdr:i+packEntryHdr+n], z, d, nil); ok || d && whole {
			return from + int64(i)
		}
	}
	return -1
}

func allZeroAt(r io.ReaderAt, off, n int64) bool {
	b := make([]byte, n)
	m, _ := r.ReadAt(b, off)
	return allZeroBytes(b[:m])
}

func allZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (p *packs) loadIdx(n int) error {
	ents, err := p.readIdx(n)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p.add(e.d, e.loc)
	}
	return nil
}

// idxEntry is one row of a pack's index.
type idxEntry struct {
	d   [32]byte
	loc packLoc
}

// readIdx reads and checks pack n's index file.
func (p *packs) readIdx(n int) ([]idxEntry, error) {
	b, err := os.ReadFile(p.idxPath(n))
	if err != nil {
		return nil, err
	}
	if len(b) < len(packIdxMagic)+8 {
		return nil, errPackCorrupt
	}
	rowLen := 0
	switch string(b[:len(packIdxMagic)]) {
	case packIdxMagic, packIdxMagicV2:
		rowLen = 48
	case packIdxMagicV1:
		rowLen = 44
	default:
		return nil, errPackCorrupt
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, errPackCorrupt
	}
	cnt := int(binary.LittleEndian.Uint32(body[len(packIdxMagic):]))
	rows := body[len(packIdxMagic)+4:]
	if len(rows)%rowLen != 0 || len(rows)/rowLen != cnt {
		return nil, errPackCorrupt
	}
	out := make([]idxEntry, cnt)
	for i := range out {
		r := rows[i*rowLen:]
		copy(out[i].d[:], r[:32])
		loc := packLoc{pack: n, off: int64(binary.LittleEndian.Uint64(r[32:40]))}
		loc.n, loc.z, loc.d = parseWord(binary.LittleEndian.Uint32(r[40:44]))
		loc.raw = loc.n
		if rowLen == 48 {
			loc.raw = int64(binary.LittleEndian.Uint32(r[44:48]))
		}
		if loc.n > PackMaxBlob || loc.raw > PackMaxBlob || rowLen == 44 && loc.z || !loc.z && loc.raw != loc.n ||
			loc.d && (!loc.z || string(b[:len(packIdxMagic)]) != packIdxMagic || loc.off < int64(len(packMagic))+packEntryHdr) {
			return nil, errPackCorrupt
		}
		out[i].loc = loc
	}
	return out, nil
}

func (p *packs) writeIdx(n int, entries map[[32]byte]packLoc) error {
	ds := make([][32]byte, 0, len(entries))
	for d := range entries {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return bytes.Compare(ds[i][:], ds[j][:]) < 0 })
	b := make([]byte, 0, len(packIdxMagic)+4+48*len(ds)+4)
	b = append(b, packIdxMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ds)))
	for _, d := range ds {
		loc := entries[d]
		b = append(b, d[:]...)
		b = binary.LittleEndian.AppendUint64(b, uint64(loc.off))
		b = binary.LittleEndian.AppendUint32(b, entryWord(loc.n, loc.z, loc.d))
		b = binary.LittleEndian.AppendUint32(b, uint32(loc.raw))
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return layout.WriteFileAtomic(p.idxPath(n), b, 0o444)
}

// indexUnlessDamaged writes full pack n's index, unless the pack holds
// damage (a corrupt entry, an unreadable region): an index lists only the
// good entries, so a pack with one would be loaded from it and what is
// known of its damage would last only as long as this process — verify
// would call a corrupt blob missing, and a sweep would rewrite the pack.
// A damaged pack gets the marker NNNNNNNN.damaged instead: it is scanned
// at every open, which finds the damage again, and, being finished, never
// cut (a pack without an index or a marker may have a torn tail). Called
// with p.mu held or before the packs are shared.
func (p *packs) indexUnlessDamaged(n int, entries map[[32]byte]packLoc) error {
	damaged := false
	for _, loc := range p.corrupt {
		damaged = damaged || loc.pack == n
	}
	for _, d := range p.damaged {
		damaged = damaged || d.Pack == n
	}
	if damaged {
		return layout.WriteFileAtomic(p.markPath(n), nil, 0o444)
	}
	return p.writeIdx(n, entries)
}

// markPath is the marker of a finished pack that holds damage.
func (p *packs) markPath(n int) string {
	return layout.PackFile(p.dir, n, ".damaged")
}

// markedDamaged reports whether pack n was finished holding damage.
func (p *packs) markedDamaged(n int) bool {
	_, err := os.Stat(p.markPath(n))
	return err == nil
}

// corruptAt reports whether a digest was found corrupt in a pack (and not
// also stored intact).
func (p *packs) corruptAt(d [32]byte) (packLoc, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.index[d]; ok {
		return packLoc{}, false
	}
	loc, ok := p.corrupt[d]
	return loc, ok
}

// Damage lists the packs' unreadable regions and corrupt entries found at
// open, the corrupt ones by CID.
func (b *FSBlobs) PackDamage() (regions []PackDamage, corrupt map[string]PackDamage) {
	p := b.packs
	p.mu.Lock()
	defer p.mu.Unlock()
	corrupt = map[string]PackDamage{}
	for d, loc := range p.corrupt {
		if _, ok := p.index[d]; !ok {
			corrupt[FromDigest(d[:]).String()] = PackDamage{Pack: loc.pack, Offset: loc.off - packEntryHdr, To: loc.off + loc.n}
		}
	}
	return append([]PackDamage(nil), p.damaged...), corrupt
}

// has reports whether a digest is packed.
func (p *packs) has(d [32]byte) (packLoc, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	loc, ok := p.index[d]
	return loc, ok
}

// packFile is one pack being filled. Writes are serialized by packs.mu;
// fsyncs by its own mutex, so a batch waits for an fsync without blocking
// the next batch's write, and one fsync covers every write before it
// (group commit).
type packFile struct {
	n       int
	f       *os.File
	size    atomic.Int64         // bytes written; stored under packs.mu, read by syncers without it
	alloc   int64                // bytes preallocated (packs.mu)
	entries map[[32]byte]packLoc // everything written, durable or not (packs.mu)

	// last is the entry written last (packs.mu): a delta's base.
	last deltaBase
	// depths holds how many deltas lead to each delta entry (packs.mu;
	// absent: none), for a base other than the entry before (seqBase):
	// those this process wrote, and, for a pack it continues, those the
	// scan at open found (a chain must stay within packDeltaDepth across
	// restarts too).
	depths map[[32]byte]int
	// recent holds the signatures of the last packRecentFrames JPEGs
	// written to it (packs.mu), oldest first: what a new JPEG's base is
	// searched among (searchBases). unsigned holds those a continued pack
	// had at open, without their signatures yet (signRecent).
	recent   []recentFrame
	unsigned []recentFrame

	syncMu sync.Mutex
	synced int64 // bytes known durable (syncMu)
	err    error // a failed fsync: nothing after synced can be trusted (syncMu)
}

func newPackFile(n int, f *os.File, size int64, entries map[[32]byte]packLoc) *packFile {
	pf := &packFile{n: n, f: f, synced: size, entries: entries, depths: map[[32]byte]int{}}
	pf.size.Store(size)
	return pf
}

// seqBase is sb as a delta base in pf (packs.mu held): where its entry
// starts and its depth, when it is in pf (written before, or earlier in
// this batch: batch has those entries').
func (pf *packFile) seqBase(sb *seqBase, batch map[[32]byte]deltaBase) (deltaBase, bool) {
	b, ok := batch[sb.d]
	if !ok {
		loc, inPack := pf.entries[sb.d]
		if !inPack {
			return deltaBase{}, false
		}
		b = deltaBase{off: loc.off - packEntryHdr, depth: pf.depths[sb.d]}
	}
	b.blob, b.jpeg = sb.data, sb.jpeg
	return b, true
}

// syncThrough returns once the first end bytes are durable. It takes only
// syncMu (lock order: packs.mu before syncMu, never the reverse).
func (f *packFile) syncThrough(end int64) error {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	if f.synced >= end {
		return nil
	}
	if f.err != nil {
		return f.err
	}
	target := f.size.Load() // what this fsync will cover, read before it starts
	if err := f.f.Sync(); err != nil {
		f.err = fmt.Errorf("store: pack fsync: %w", err)
		return f.err
	}
	f.synced = target
	return nil
}

// deltaBase is the entry a writer may keep the next blob against: where
// its header starts, its blob, and how many deltas lead to it (0: kept
// whole). A zero value (no blob) is none.
type deltaBase struct {
	off   int64
	blob  []byte
	depth int
	// jpeg is blob parsed as a JPEG, or not parsed yet.
	jpeg parsedJPEG
}

// next returns how data is kept as the entry after b, whose header starts
// at off: alone (stored, z: what CompressPacked made) or as a delta
// against b when that saves a tenth more and the chain stays within
// packDeltaDepth; and the base the entry after it would have. pj is data
// parsed as a JPEG, or to be parsed here: a JPEG delta is tried first,
// then a byte delta.
//
// A delta is tried only for a blob that compresses alone or shares a few
// sampled runs of bytes with the base (alike): already-compressed media
// (a PNG screenshot, a video chunk) repeats nothing of the blob before
// it, and trying costs a second encode (it tripled BenchmarkPackPut's time
// for random blobs). Compressing alone is not enough of a test: zstd's
// fastest level sometimes keeps a blob that repeats itself whole (it
// skips ahead through a start with nothing to match), which a delta
// would still take to a few hundred bytes.
func (b deltaBase) next(c *deltaCoder, data []byte, pj parsedJPEG, stored []byte, z bool, off int64) (out []byte, oz, od bool, after deltaBase) {
	jpeg := pj.of(data)
	after = baseAfter(data, jpeg, off)
	if b.blob != nil && b.depth < packDeltaDepth {
		if jpeg != nil {
			// Only a JPEG's base need be parsed.
			if delta := c.encodeJPEG(data, jpeg, b.blob, b.jpeg.of(b.blob), off-b.off, len(stored)); delta != nil {
				after.depth = b.depth + 1
				return delta, true, true, after
			}
		}
		if z || alike(data, b.blob) {
			if delta := c.encode(data, b.blob, off-b.off, len(stored)); delta != nil {
				after.depth = b.depth + 1
				return delta, true, true, after
			}
		}
	}
	return stored, z, false, after
}

// nextJPEG is next for a JPEG (jpeg: data parsed) kept only as a JPEG
// delta against b, which is not the entry before it: the most alike
// frame of the pack (searchBases), or the frame a sequence showed before
// it (PutManyAfter). ok is false when that does not pay.
func (b deltaBase) nextJPEG(c *deltaCoder, data []byte, jpeg *jpegdelta.Frame, stored []byte, off int64) (out []byte, after deltaBase, ok bool) {
	if b.blob == nil || b.depth >= packDeltaDepth || jpeg == nil {
		return nil, deltaBase{}, false
	}
	delta := c.encodeJPEG(data, jpeg, b.blob, b.jpeg.of(b.blob), off-b.off, len(stored))
	if delta == nil {
		return nil, deltaBase{}, false
	}
	after = baseAfter(data, jpeg, off)
	after.depth = b.depth + 1
	return delta, after, true
}

// baseAfter is the base an entry of data (jpeg: parsed) at off gives the
// entry after it. The base is a copy: the caller owns data, and may reuse
// it once put returns, while the pack's next entry may be kept against
// it.
func baseAfter(data []byte, jpeg *jpegdelta.Frame, off int64) deltaBase {
	var keep []byte
	if len(data) <= packDeltaMax {
		keep = append([]byte(nil), data...)
	}
	return deltaBase{off: off, blob: keep, jpeg: parsedJPEG{f: jpeg, parsed: true}}
}

// seqBase is the frame a sequence showed before a blob of a batch
// (PutManyAfter): its digest, its bytes and the bytes parsed.
type seqBase struct {
	d    [32]byte
	data []byte
	jpeg parsedJPEG
}

// parse parses sb's bytes, if not yet and budget (the coefficients a
// batch may still hold) allows, and takes what it holds from budget.
func (sb *seqBase) parse(budget *int) {
	if sb.jpeg.parsed || *budget <= 0 {
		return
	}
	sb.jpeg = parsedJPEG{f: parseJPEG(sb.data), parsed: true}
	if sb.jpeg.f != nil {
		*budget -= sb.jpeg.f.Coefficients()
	}
}

// seqBases returns, for each blob of a batch that follows prev (nil: the
// batch alone), the JPEG the sequence showed before it: the last JPEG
// before it in the batch, or prev's blob when that is a JPEG in the pack
// being filled (read here, without the lock). Bases that a new JPEG will
// be tried against are parsed here, within budget.
func (p *packs) seqBases(ds [][32]byte, datas [][]byte, jpegs []parsedJPEG, stored [][]byte, prev *[32]byte, budget *int) []*seqBase {
	bases := make([]*seqBase, len(datas))
	var cur *seqBase
	if prev != nil {
		cur = p.readSeqBase(*prev)
	}
	for i, d := range datas {
		if stored[i] != nil && cur != nil && (jpegs[i].f != nil || !jpegs[i].parsed) {
			bases[i] = cur
			cur.parse(budget)
		}
		if jpegdelta.Looks(d) {
			cur = &seqBase{d: ds[i], data: d, jpeg: jpegs[i]}
		}
	}
	return bases
}

// readSeqBase reads the packed blob d when it is a JPEG in the pack being
// filled (only there can it be a delta's base).
func (p *packs) readSeqBase(d [32]byte) *seqBase {
	p.mu.Lock()
	loc, ok := p.index[d]
	cur := p.cur
	p.mu.Unlock()
	if !ok || cur == nil || loc.pack != cur.n || loc.raw > packDeltaMax {
		return nil
	}
	r, err := p.open(loc)
	if err != nil {
		return nil
	}
	defer r.Close()
	data := make([]byte, loc.raw)
	if _, err := io.ReadFull(r, data); err != nil || sha256.Sum256(data) != d || !jpegdelta.Looks(data) {
		return nil
	}
	return &seqBase{d: d, data: data}
}

// packRecentFrames is how many of the JPEGs written last to the pack
// being filled a new JPEG's base is searched among: 64 signatures of
// 800×500 frames take about 400 KB. A variable for tests
// (SetRecentFrames).
var packRecentFrames = 64

// recentFrame is a JPEG written to the pack being filled: its digest, its
// signature and how many deltas lead to it.
type recentFrame struct {
	d     [32]byte
	off   int64 // where its entry starts
	sig   jpegdelta.Signature
	depth int
}

// searchBases returns, for each new JPEG of a batch (parsed), the JPEG of
// the pack being filled whose signature is most alike its own, among the
// last packRecentFrames written whose chains leave room, read and parsed
// here (nil where there is none, or where it is the entry before or the
// sequence's base, which put tries anyway); whether the JPEG the sequence
// showed before it (bases) is the more alike, so to be tried first; and
// the batch's signatures (the zero Signature for a blob not parsed as a
// JPEG). A rerun's frame that its timing caught mid-change is most often
// far from the frame before it and close to one the first run showed.
func (p *packs) searchBases(ds [][32]byte, datas [][]byte, jpegs []parsedJPEG, stored [][]byte, bases []*seqBase, budget *int) (found []*seqBase, seqFirst []bool, sigs []jpegdelta.Signature) {
	if !slices.ContainsFunc(jpegs, func(j parsedJPEG) bool { return j.f != nil }) {
		return make([]*seqBase, len(datas)), make([]bool, len(datas)), make([]jpegdelta.Signature, len(datas))
	}
	p.signRecent()
	p.mu.Lock()
	var recent []recentFrame
	lastOff := int64(-1)
	if p.cur != nil {
		recent = append(recent, p.cur.recent...)
		lastOff = p.cur.last.off
	}
	p.mu.Unlock()
	sigs = make([]jpegdelta.Signature, len(datas))
	found = make([]*seqBase, len(datas))
	seqFirst = make([]bool, len(datas))
	read := map[[32]byte]*seqBase{}
	for i := range datas {
		if stored[i] == nil || jpegs[i].f == nil {
			continue
		}
		sigs[i] = jpegs[i].f.Signature()
		best, at := 0, -1
		for k, r := range recent {
			if r.depth >= packDeltaDepth || r.d == ds[i] {
				continue
			}
			if a := jpegdelta.Alike(sigs[i], r.sig); a > best {
				best, at = a, k
			}
		}
		if at < 0 || recent[at].off == lastOff {
			continue // none, or the entry before, which put tries anyway
		}
		if sb := bases[i]; sb != nil {
			if sb.d == recent[at].d {
				continue // the sequence's base already
			}
			// Tried first when more alike (its chain may be full,
			// which only the lock tells).
			if f := sb.jpeg.f; f != nil && jpegdelta.Alike(sigs[i], f.Signature()) >= best {
				seqFirst[i] = true
			}
		}
		// Read even when the batch's budget is spent (then it is parsed
		// under the lock, if tried): a 1280×800 frame and the frame
		// before it in its sequence take 6 MB of coefficients, and a
		// rerun's mid-change frame whose most alike was dropped for that
		// was kept whole (19 KB against a 1.1 KB delta).
		sb, ok := read[recent[at].d]
		if !ok {
			if sb = p.readSeqBase(recent[at].d); sb != nil {
				sb.parse(budget)
			}
			read[recent[at].d] = sb
		}
		found[i] = sb
	}
	return found, seqFirst, sigs
}

// signRecent makes the signatures of the JPEGs a pack continued from an
// earlier process had at open (packFile.unsigned), reading and parsing
// them without the lock, once.
func (p *packs) signRecent() {
	p.mu.Lock()
	pf := p.cur
	var todo []recentFrame
	if pf != nil {
		todo, pf.unsigned = pf.unsigned, nil
	}
	p.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	var signed []recentFrame
	for _, r := range todo {
		sb := p.readSeqBase(r.d)
		if sb == nil {
			continue
		}
		if f := parseJPEG(sb.data); f != nil {
			r.sig = f.Signature()
			signed = append(signed, r)
		}
	}
	p.mu.Lock()
	if p.cur == pf {
		pf.recent = append(signed, pf.recent...)
		if n := len(pf.recent) - packRecentFrames; n > 0 {
			pf.recent = append(pf.recent[:0], pf.recent[n:]...)
		}
	}
	p.mu.Unlock()
}

// parsedJPEG is a blob parsed as a JPEG (parseJPEG; f nil: not one), or
// not parsed yet.
type parsedJPEG struct {
	f      *jpegdelta.Frame
	parsed bool
}

// of returns data parsed, parsing it now if it was not.
func (j parsedJPEG) of(data []byte) *jpegdelta.Frame {
	if !j.parsed {
		return parseJPEG(data)
	}
	return j.f
}

// packParseBudget bounds the coefficients of the JPEGs a batch parses
// before taking the packs lock (its own, the frames its sequence showed
// before them, the most alike of the pack); the rest are parsed under the
// lock when their turn comes. A 1280×800 frame's take 3 MB, so a frame,
// its sequence's base and its most alike fit. A variable for tests
// (SetParseBudget).
var packParseBudget = 8 << 20

// alike reports whether at least two of four runs of 32 bytes sampled
// across data occur in base: a cheap sign that a delta may pay.
func alike(data, base []byte) bool {
	const run = 32
	if len(data) < 8*run || len(base) < run {
		return false
	}
	found := 0
	for k := 1; k <= 4; k++ {
		at := len(data) * k / 5
		if bytes.Contains(base, data[at:at+run]) {
			found++
		}
	}
	return found >= 2
}

// put appends the blobs not yet packed to the current pack with one write,
// waits for an fsync that covers it, and only then makes them visible.
// Digests must match data.
//
// prev, when not nil, is the blob a sequence showed before the batch's
// first (PutManyAfter): a new JPEG is then first tried as a JPEG delta
// against the JPEG before it in the sequence, when that is in the pack
// being filled, and only then against the entry packed before it.
func (p *packs) put(ds [][32]byte, datas [][]byte, prev *[32]byte) error {
	// The stored forms, made before taking the lock (and not for a blob
	// already packed: a rerun's frames mostly are).
	stored := make([][]byte, len(datas))
	zs := make([]bool, len(datas))
	// JPEGs are parsed here too, outside the lock, up to a bound on the
	// coefficients a batch holds at once (packParseBudget); the rest are
	// parsed under the lock, as their turn comes.
	jpegs := make([]parsedJPEG, len(datas))
	budget := packParseBudget
	need := 0
	for i, d := range datas {
		if _, ok := p.has(ds[i]); ok {
			continue
		}
		stored[i], zs[i] = CompressPacked(d)
		if budget > 0 {
			jpegs[i] = parsedJPEG{f: parseJPEG(d), parsed: true}
			if jpegs[i].f != nil {
				budget -= jpegs[i].f.Coefficients()
			}
		}
		need += packEntryHdr + len(stored[i])
	}
	bases := make([]*seqBase, len(datas))
	if prev != nil {
		bases = p.seqBases(ds, datas, jpegs, stored, prev, &budget)
	}
	found, seqFirst, sigs := p.searchBases(ds, datas, jpegs, stored, bases, &budget)
	p.mu.Lock()
	if cap(p.buf) < need && need <= 2*PackMaxBlob {
		p.buf = make([]byte, 0, need)
	}
	buf := p.buf[:0]
	var adds []packAdd
	seen := map[[32]byte]bool{}
	if p.cur == nil || p.cur.size.Load() >= p.maxBytes {
		if err := p.roll(); err != nil {
			p.mu.Unlock()
			return err
		}
	}
	pf := p.cur
	last := pf.last
	// Where the entries this batch writes start, and their depths
	// (pf.entries and pf.depths have the others'); and the JPEGs among
	// them, for pf.recent.
	var written map[[32]byte]deltaBase
	var recent []recentFrame
	for i, d := range ds {
		if _, ok := p.index[d]; ok || seen[d] || stored[i] == nil {
			// Packed (by now, or before the stored forms were made: a
			// blob packed since then was compressed, one packed before
			// was not, and either way is skipped).
			continue
		}
		seen[d] = true
		// A delta against the entry before is made here, under the
		// lock, since only here is it known which entry that is.
		off := pf.size.Load() + int64(len(buf))
		var out []byte
		var z, delta, hinted bool
		var after deltaBase
		// The bases tried first: the pack's most alike JPEG and the one
		// the sequence showed before, the more alike first; then the
		// entry before.
		try := []*seqBase{found[i], bases[i]}
		if seqFirst[i] {
			try[0], try[1] = try[1], try[0]
		}
		for _, sb := range try {
			if sb == nil || hinted {
				continue
			}
			if b, ok := pf.seqBase(sb, written); ok && b.off != last.off {
				jpegs[i] = parsedJPEG{f: jpegs[i].of(datas[i]), parsed: true}
				out, after, hinted = b.nextJPEG(&p.delta, datas[i], jpegs[i].f, stored[i], off)
				z, delta = hinted, hinted
			}
		}
		if !hinted {
			out, z, delta, after = last.next(&p.delta, datas[i], jpegs[i], stored[i], zs[i], off)
		}
		last = after
		if written == nil {
			written = map[[32]byte]deltaBase{}
		}
		written[d] = deltaBase{off: off, depth: after.depth}
		if f := after.jpeg.f; f != nil {
			sig := sigs[i]
			if sig.IsZero() {
				sig = f.Signature() // parsed under the lock
			}
			recent = append(recent, recentFrame{d: d, off: off, sig: sig, depth: after.depth})
		}
		adds = append(adds, packAdd{d: d, off: off + packEntryHdr,
			n: int64(len(out)), raw: int64(len(datas[i])), z: z, delta: delta})
		buf = appendEntry(buf, d, out, z, delta)
	}
	if len(buf) == 0 {
		p.mu.Unlock()
		return nil
	}
	if end := pf.size.Load() + int64(len(buf)); end > pf.alloc {
		pf.alloc = growAlloc(pf.alloc, end, p.maxBytes)
		preallocate(pf.f, pf.alloc)
	}
	if _, err := pf.f.WriteAt(buf, pf.size.Load()); err != nil {
		// Nothing of this batch is acknowledged, and the logical end
		// does not move: the next batch overwrites what reached the
		// file, and a crash before that leaves a torn tail that open cuts.
		p.mu.Unlock()
		return fmt.Errorf("store: pack write: %w", err)
	}
	end := pf.size.Add(int64(len(buf)))
	pf.last = last
	for _, a := range adds {
		pf.entries[a.d] = a.loc(pf.n)
	}
	for d, w := range written {
		if w.depth > 0 {
			pf.depths[d] = w.depth
		}
	}
	pf.recent = append(pf.recent, recent...)
	if n := len(pf.recent) - packRecentFrames; n > 0 {
		pf.recent = append(pf.recent[:0], pf.recent[n:]...)
	}
	p.mu.Unlock()

	if err := pf.syncThrough(end); err != nil {
		p.mu.Lock()
		p.abandon(pf) // after a failed fsync, start a new pack
		p.mu.Unlock()
		return err
	}
	p.mu.Lock()
	for _, a := range adds {
		p.add(a.d, a.loc(pf.n))
	}
	p.mu.Unlock()
	return nil
}

// trimPack cuts a full pack to its logical end, releasing the
// preallocated rest, and makes that durable.
func trimPack(path string, end int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() == end {
		return nil
	}
	return layout.TruncateSync(path, end)
}

// abandon stops writing to pf (with p.mu held). It has no index: the next
// open scans it and cuts whatever torn tail it has, none of it acknowledged.
func (p *packs) abandon(pf *packFile) {
	if p.cur == pf {
		p.cur = nil
		pf.f.Close()
	}
}

// packAdd is a blob written to a pack but not yet indexed.
type packAdd struct {
	d        [32]byte
	off      int64
	n, raw   int64
	z, delta bool
}

func (a packAdd) loc(pack int) packLoc {
	return packLoc{pack: pack, off: a.off, n: a.n, raw: a.raw, z: a.z, d: a.delta}
}

// finishCurrent finishes the pack being filled, if any (see finish); the
// next put starts a new one.
func (p *packs) finishCurrent() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finish()
}

// finish finishes the current pack — everything written to it made
// durable, trimmed, its index written — so it is full from now on. Called
// with p.mu held.
func (p *packs) finish() error {
	pf := p.cur
	if pf == nil {
		return nil
	}
	if err := pf.syncThrough(pf.size.Load()); err != nil {
		p.abandon(pf)
		return err
	}
	if err := trimPack(p.path(pf.n), pf.size.Load()); err != nil {
		return err
	}
	if err := p.indexUnlessDamaged(pf.n, pf.entries); err != nil {
		return err
	}
	if err := pf.f.Close(); err != nil {
		return err
	}
	p.cur = nil
	return nil
}

// roll finishes the current pack and starts the next. Called with p.mu
// held.
func (p *packs) roll() error {
	if err := p.finish(); err != nil {
		return err
	}
	n := p.lastN + 1
	f, err := os.OpenFile(p.path(n), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("store: new pack: %w", err)
	}
	alloc := growAlloc(0, int64(len(packMagic)), p.maxBytes)
	preallocate(f, alloc)
	if _, err := f.WriteAt([]byte(packMagic), 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = layout.SyncDir(p.dir)
	}
	if err != nil {
		f.Close()
		os.Remove(p.path(n))
		return fmt.Errorf("store: new pack: %w", err)
	}
	p.lastN = n
	p.cur = newPackFile(n, f, int64(len(packMagic)), map[[32]byte]packLoc{})
	p.cur.alloc = alloc
	return nil
}

// growAlloc is the allocation a pack needs to hold need bytes, having
// alloc: doubling from packAllocStart, so the space reserved ahead of the
// data stays in proportion to it, never past maxBytes unless need is (one
// batch may overshoot a pack's nominal size).
func growAlloc(alloc, need, maxBytes int64) int64 {
	if alloc < packAllocStart {
		alloc = packAllocStart
	}
	for alloc < need && alloc < maxBytes {
		alloc *= 2
	}
	return max(min(alloc, maxBytes), need)
}

// open returns a reader over a packed blob: a compressed one is read and
// decoded whole (a packed blob is at most PackMaxBlob).
func (p *packs) open(loc packLoc) (BlobReader, error) {
	f, err := os.Open(p.path(loc.pack))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	if !loc.z {
		return &packBlob{SectionReader: io.NewSectionReader(f, loc.off, loc.n), f: f}, nil
	}
	defer f.Close()
	blob, err := readPacked(f, loc, 0, &p.frames)
	if err != nil {
		// Damaged since the pack was indexed: never served (an
		// uncompressed one is caught by verify's rehash instead).
		return nil, fmt.Errorf("pack %d, offset %d: %w: %w", loc.pack, loc.off, ErrBlobCorrupt, err)
	}
	return MemBlob{bytes.NewReader(blob)}, nil
}

// readPacked reads the blob of a compressed entry at loc in pack f: a
// delta's base first, checked against the digest in its header (the
// frame's checksum would catch a wrong base too), chain entries deep.
// frames keeps JPEG frames rebuilt along the way.
func readPacked(f io.ReaderAt, loc packLoc, chain int, frames *frameCache) ([]byte, error) {
	stored, err := readStored(f, loc)
	if err != nil {
		return nil, err
	}
	return unpack(f, loc, stored, chain, frames)
}

func readStored(f io.ReaderAt, loc packLoc) ([]byte, error) {
	if loc.n > PackMaxBlob || loc.n < 0 {
		return nil, fmt.Errorf("%w: %d stored bytes", ErrBadPacked, loc.n)
	}
	stored := make([]byte, loc.n)
	if _, err := f.ReadAt(stored, loc.off); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	return stored, nil
}

// unpack is readPacked with the entry's stored bytes already read.
func unpack(f io.ReaderAt, loc packLoc, stored []byte, chain int, frames *frameCache) ([]byte, error) {
	if !loc.d {
		if !loc.z {
			return stored, nil
		}
		return DecompressPacked(stored, loc.raw)
	}
	base, digest, err := baseOf(f, loc, stored, chain)
	if err != nil {
		return nil, err
	}
	if isJPEGDelta(stored) {
		return unpackJPEG(f, loc, stored, base, digest, chain, frames)
	}
	blob, err := readPacked(f, base, chain+1, frames)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(blob) != digest {
		return nil, fmt.Errorf("%w: a delta's base does not match its digest", ErrBadPacked)
	}
	return decompressDelta(stored, loc.raw, blob)
}

// baseOf finds the base of the delta at loc (stored: its stored bytes):
// where it is, and the digest its header names.
func baseOf(f io.ReaderAt, loc packLoc, stored []byte, chain int) (packLoc, [32]byte, error) {
	back, err := deltaBack(stored)
	if err != nil {
		return packLoc{}, [32]byte{}, err
	}
	at := loc.off - packEntryHdr - back
	if chain >= packDeltaMaxChain || back <= 0 || at < int64(len(packMagicV1)) {
		return packLoc{}, [32]byte{}, fmt.Errorf("%w: a delta's base at %d", ErrBadPacked, at)
	}
	var hdr [packEntryHdr]byte
	if _, err := f.ReadAt(hdr[:], at); err != nil {
		return packLoc{}, [32]byte{}, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	n, z, d := parseWord(binary.LittleEndian.Uint32(hdr[0:4]))
	base := packLoc{pack: loc.pack, off: at + packEntryHdr, n: n, raw: n, z: z, d: d}
	if z {
		// A compressed base names its size in its frame.
		var head [packDeltaHdr + 18]byte
		m, _ := f.ReadAt(head[:min(int64(len(head)), n)], base.off)
		if d {
			base.raw, err = deltaSize(head[:m])
		} else {
			base.raw, err = packedSize(head[:m])
		}
		if err != nil {
			return packLoc{}, [32]byte{}, err
		}
	}
	return base, [32]byte(hdr[8:40]), nil
}

// unpackJPEG is unpack for a JPEG delta, whose base is at base (named
// baseDigest). A chain of JPEG deltas is applied in coefficients, coding
// only its last frame; that frame's bytes are checked against its entry's
// digest before they are served: a byte delta's frame checksum covers the
// blob it decodes to, but a JPEG delta's covers only the delta, and the
// JPEG is rebuilt by code that may change between versions.
func unpackJPEG(f io.ReaderAt, loc packLoc, stored []byte, base packLoc, baseDigest [32]byte, chain int, frames *frameCache) ([]byte, error) {
	fr, err := applyJPEG(f, stored, loc.raw, base, baseDigest, chain, frames)
	if err != nil {
		return nil, err
	}
	out, err := fr.Bytes(int(loc.raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	var hdr [packEntryHdr]byte
	if _, err := f.ReadAt(hdr[:], loc.off-packEntryHdr); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	digest := [32]byte(hdr[8:40])
	if int64(len(out)) != loc.raw || sha256.Sum256(out) != digest {
		return nil, fmt.Errorf("%w: a JPEG delta rebuilds other bytes than its digest names", ErrBadPacked)
	}
	frames.put(digest, fr)
	return out, nil
}

// applyJPEG returns the frame the JPEG delta stored (of a raw-byte blob)
// rebuilds from its base, in coefficients.
func applyJPEG(f io.ReaderAt, stored []byte, raw int64, base packLoc, baseDigest [32]byte, chain int, frames *frameCache) (*jpegdelta.Frame, error) {
	bf, err := jpegAt(f, base, baseDigest, chain+1, frames)
	if err != nil {
		return nil, err
	}
	return applyStored(stored, raw, bf)
}

// jpegAt returns the JPEG of the entry at loc (named digest) in
// coefficients: kept from an earlier read, rebuilt from its own JPEG
// delta (unchecked: the chain's last frame is), or decoded from its
// bytes, checked against digest.
func jpegAt(f io.ReaderAt, loc packLoc, digest [32]byte, chain int, frames *frameCache) (*jpegdelta.Frame, error) {
	if fr := frames.get(digest); fr != nil {
		return fr, nil
	}
	stored, err := readStored(f, loc)
	if err != nil {
		return nil, err
	}
	if loc.d && isJPEGDelta(stored) {
		base, bd, err := baseOf(f, loc, stored, chain)
		if err != nil {
			return nil, err
		}
		return applyJPEG(f, stored, loc.raw, base, bd, chain, frames)
	}
	blob, err := unpack(f, loc, stored, chain, frames)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(blob) != digest {
		return nil, fmt.Errorf("%w: a delta's base does not match its digest", ErrBadPacked)
	}
	fr, err := jpegdelta.Open(blob)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacked, err)
	}
	frames.put(digest, fr)
	return fr, nil
}

// MemBlob reads a blob held in memory (read whole: decompressed, checked).
type MemBlob struct{ *bytes.Reader }

func (MemBlob) Close() error { return nil }

// each calls fn for every packed blob.
func (p *packs) each(fn func(d [32]byte, n int64) error) error {
	p.mu.Lock()
	ds := make([][32]byte, 0, len(p.index))
	ns := make([]int64, 0, len(p.index))
	for d, loc := range p.index {
		ds = append(ds, d)
		ns = append(ns, loc.raw)
	}
	p.mu.Unlock()
	for i := range ds {
		if err := fn(ds[i], ns[i]); err != nil {
			return err
		}
	}
	return nil
}

func (p *packs) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		err := p.cur.f.Close()
		p.cur = nil
		return err
	}
	return nil
}

// packBlob reads one blob inside a pack file.
type packBlob struct {
	*io.SectionReader
	f *os.File
}

func (b *packBlob) Close() error { return b.f.Close() }
