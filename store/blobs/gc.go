package blobs

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/layout"
)

// Blob garbage collection is mark and sweep, with the mark phase driven by
// the caller (retention), while ingest goes on:
//
//	sw := blobs.BeginSweep()           // from here every Put/PutMany digest is "touched"
//	live := mark(kept recordings)      // Store.References of every kept recording, read now
//	rep, err := sw.Collect(live.Has, progress)
//	sw.End()
//
// Collect removes every blob that is stored, not live, and not touched
// since BeginSweep. A blob that did not exist at BeginSweep can only have
// come from a Put or PutMany, which touched it, so "stored and not
// touched" means "existed at BeginSweep".
//
// Why nothing an ingest needs is collected:
//
//   - A Put or PutMany records its digests (under gcMu) before it looks
//     for them in the packs or the shards. Collect decides a blob is dead
//     and then removes it in a step that re-checks the touches and is
//     ordered against that lookup: a loose blob is removed while Collect
//     holds its flight (a Put of it waits for the flight, then finds it
//     missing and writes it again); a packed blob leaves the index only
//     in the swap, which holds packs.mu and gcMu and gives up the pack's
//     repack if any blob it would drop was touched in the meantime (a Put
//     after the swap no longer finds the blob and stores it again). So a
//     Put that reports a blob as already stored (a dedup) always leaves it
//     stored: touching resurrects it.
//   - Touches are recorded only from BeginSweep on. BeginSweep waits for
//     every Put and PutMany already running, and for every Hold taken
//     before it, to finish. Hold brackets a Put-then-reference sequence:
//     Seal holds from its first segment Put until ROOT is written, and an
//     ingest batch holds from its PutMany until its log append. So
//     when BeginSweep returns, every blob stored before it is either
//     referenced by something the mark phase reads (a log record, a
//     manifest) or by nothing; and every blob a later batch uses is
//     touched. The mark phase must therefore start after BeginSweep
//     returns, and read open recordings' logs then (Store.References).
//
// Why a crash at any point leaves every live blob readable: loose blobs
// are only unlinked when dead. A pack is rewritten copy-first: the kept
// entries are copied (each one's CRC and digest checked) into a temporary
// file that is fsynced and renamed to a new pack number, the directory is
// fsynced, and the new pack's index is written atomically; only then does
// the in-memory index switch to the new pack, and only then are the old
// pack's index and the old pack removed (index first, so that no index
// ever outlives its pack) and the directory fsynced. Until the old pack
// is gone the new one holds copies of all its live blobs; open tolerates
// a blob in two packs (the higher-numbered one wins), and it scans a pack
// left without an index as it always did. A crash therefore leaves the
// old pack, the new one, or both, and at worst brings dead blobs back, for
// the next sweep. A reader that looked a blob up in the old pack and finds
// it removed looks it up again (FSBlobs.Open), and one that has the old
// pack open keeps reading it.
//
// Only full packs (with an index on disk) are rewritten, never one
// abandoned after a failed fsync; the one being filled is first finished
// when it holds a dead blob. packs.mu is held to
// list packs, to pick the entries the index still places in a pack, to
// reserve a pack number and to swap the index, never while copying.

// holdGen is one generation of running puts and holds. BeginSweep starts a
// new one and waits for the old one to drain.
type holdGen struct {
	n        int  // puts and holds running (gcMu)
	draining bool // a sweep waits for n to reach 0 (gcMu)
	done     chan struct{}
}

func newHoldGen() *holdGen { return &holdGen{done: make(chan struct{})} }

// enter registers a put (or a hold, with no digests) in the current
// generation and touches ds for the sweep in progress. The returned
// function ends it.
func (b *FSBlobs) enter(ds [][32]byte) func() {
	b.gcMu.Lock()
	g := b.gen
	g.n++
	if sw := b.sweep; sw != nil {
		for _, d := range ds {
			sw.touches[d] = struct{}{}
		}
	}
	b.gcMu.Unlock()
	return func() {
		b.gcMu.Lock()
		g.n--
		if g.n == 0 && g.draining {
			close(g.done)
		}
		b.gcMu.Unlock()
	}
}

// Hold marks the start of a sequence that stores blobs and then records a
// reference to them somewhere a sweep's mark phase reads (an ingest batch:
// PutMany, then the log append; Seal: the segment and manifest Puts, then
// ROOT). release marks its end; calling it again does nothing. BeginSweep
// waits for every hold taken before it to be released, so that a blob Put
// just before a sweep began is referenced by the time the mark phase
// reads. Holds never wait for a sweep.
func (b *FSBlobs) Hold() (release func()) {
	leave := b.enter(nil)
	var once sync.Once
	return func() { once.Do(leave) }
}

// Sweep is one garbage collection of the blob store: it records every
// digest a Put or PutMany touches from BeginSweep until End.
type Sweep struct {
	b       *FSBlobs
	mu      sync.Mutex            // serializes Collect and End
	touches map[[32]byte]struct{} // b.gcMu
	ended   bool                  // b.gcMu
}

// BeginSweep starts a sweep. From the moment it is called, every digest a
// Put or PutMany touches (stored anew or found already stored) is
// recorded, and Collect keeps it. It returns once every put, and every
// Hold, that began before it has finished. One sweep runs at a time: it
// waits for the previous sweep's End. It must not be called by a
// goroutine that holds a Hold (it would wait for itself).
func (b *FSBlobs) BeginSweep() Sweeper {
	b.sweepSem <- struct{}{}
	sw := &Sweep{b: b, touches: map[[32]byte]struct{}{}}
	b.gcMu.Lock()
	b.sweep = sw
	old := b.gen
	b.gen = newHoldGen()
	old.draining = true
	if old.n == 0 {
		close(old.done)
	}
	b.gcMu.Unlock()
	<-old.done
	return sw
}

// End stops recording touches and lets the next sweep begin. It waits for
// a Collect in progress. Calling it again does nothing.
func (sw *Sweep) End() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	b := sw.b
	b.gcMu.Lock()
	if sw.ended {
		b.gcMu.Unlock()
		return
	}
	sw.ended = true
	b.sweep = nil
	b.gcMu.Unlock()
	<-b.sweepSem
}

// Touched reports whether a Put or PutMany has touched c since BeginSweep.
func (sw *Sweep) Touched(c cid.Cid) bool {
	d, ok := digestOf(c)
	return ok && sw.touched(d)
}

func (sw *Sweep) touched(d [32]byte) bool {
	sw.b.gcMu.Lock()
	defer sw.b.gcMu.Unlock()
	_, ok := sw.touches[d]
	return ok
}

// ErrSweepEnded is returned by Collect after End.
var ErrSweepEnded = errors.New("store: sweep has ended")

// CollectReport is what Collect removed and kept.
type CollectReport struct {
	// Removed is the number of distinct blobs removed.
	Removed int `json:"removed"`
	// Freed is the bytes of blob data removed: a loose blob's size, a
	// packed one's stored bytes (compressed for one kept compressed;
	// twice for one that was stored both loose and packed). Pack
	// entry headers and duplicate copies of kept blobs dropped by a
	// repack are not counted; PackBytesBefore - PackBytesAfter shows them.
	Freed int64 `json:"freed"`
	// DiskFreed is the bytes of files the collection removed or shrank:
	// loose blob files, and for each rewritten pack its pack and index
	// files less those of the pack that replaced it (entry headers and
	// index entries included). StoredBytes drops by exactly this much when
	// nothing is put meanwhile.
	DiskFreed int64 `json:"disk_freed"`
	// PackBytesBefore and PackBytesAfter are the bytes of all pack files
	// (the pack being filled counted to its logical end) when Collect
	// started and when it ended; ingest may add to both meanwhile.
	PackBytesBefore int64 `json:"pack_bytes_before"`
	PackBytesAfter  int64 `json:"pack_bytes_after"`
	// Kept is the number of blobs Collect examined and kept (live, or
	// touched since BeginSweep): loose blobs and the blobs of full packs
	// (the pack being filled counts only when it was finished for dead
	// blobs).
	Kept int `json:"kept"`
}

// Collect removes every blob that is stored, for which live returns false,
// and that no Put or PutMany has touched since BeginSweep: loose blobs are
// unlinked; each full pack holding such blobs (or copies of blobs the index
// places in another pack) is rewritten without them into a new pack, and a
// pack left with nothing is removed. The pack being filled is finished
// and collected the same way when it holds a dead blob, else left to fill.
//
// live is called without locks held, at most once or twice per blob, for
// blobs not touched; it must be the mark set of every recording kept,
// computed after BeginSweep returned. progress, if set, is called after
// each shard directory and each full pack, with total = shards + packs.
//
// Collect may run while blobs are put and read. An error stops it; what it
// reports is what it did until then, and everything it left is consistent
// (a half-written pack is a temporary removed at the next open). A pack
// whose kept entries fail their checksum is left as it was, the others are
// collected, and the error (wrapping a corruption) is returned at the end.
func (sw *Sweep) Collect(live func(cid.Cid) bool, progress func(done, total int)) (CollectReport, error) {
	if sw.b.readOnly {
		return CollectReport{}, ErrReadOnly
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	b := sw.b
	b.gcMu.Lock()
	ended := sw.ended
	b.gcMu.Unlock()
	if ended {
		return CollectReport{}, ErrSweepEnded
	}
	c := &collector{sw: sw, b: b, p: b.packs, live: live, removed: map[[32]byte]struct{}{}}
	rep, err := c.run(progress)
	rep.Removed = len(c.removed)
	return rep, err
}

func (c *collector) run(progress func(done, total int)) (CollectReport, error) {
	var err error
	if c.rep.PackBytesBefore, err = c.p.diskBytes(); err != nil {
		return c.rep, err
	}
	shards, err := c.b.shardDirs()
	if err != nil {
		return c.rep, err
	}
	// The pack being filled holds the newest blobs; when one of them is
	// dead (a recording removed soon after it was written), the pack is
	// finished now so it can be rewritten like any full pack. Otherwise it
	// is left to fill: finishing it every sweep would leave a trail of
	// small packs.
	if dead := c.deadInCurrent(); dead {
		curN, _ := c.p.current()
		if err := c.p.finishCurrent(); err != nil {
			return c.rep, err
		}
		// Finishing wrote its index: that is not freed by the rewrite.
		c.rep.DiskFreed -= sizeOf(c.p.idxPath(curN))
	}
	full, err := c.p.fullPacks()
	if err != nil {
		return c.rep, err
	}
	total, done := len(shards)+len(full), 0
	step := func() {
		done++
		if progress != nil {
			progress(done, total)
		}
	}
	for _, sh := range shards {
		if err := c.looseShard(sh); err != nil {
			return c.rep, err
		}
		step()
	}
	var damaged []error
	for _, n := range full {
		if err := c.pack(n); err != nil {
			if !errors.Is(err, errPackCorrupt) {
				return c.rep, err
			}
			damaged = append(damaged, err)
		}
		step()
	}
	if c.rep.PackBytesAfter, err = c.p.diskBytes(); err != nil {
		return c.rep, err
	}
	return c.rep, errors.Join(damaged...)
}

type collector struct {
	sw      *Sweep
	b       *FSBlobs
	p       *packs
	live    func(cid.Cid) bool
	rep     CollectReport
	removed map[[32]byte]struct{}
}

// deadInCurrent says whether the pack being filled holds a blob that
// does not stay.
func (c *collector) deadInCurrent() bool {
	c.p.mu.Lock()
	var ds [][32]byte
	if pf := c.p.cur; pf != nil {
		for d := range pf.entries {
			ds = append(ds, d)
		}
	}
	c.p.mu.Unlock()
	for _, d := range ds {
		if !c.keep(d) {
			return true
		}
	}
	return false
}

// keep reports whether a blob stays: touched since BeginSweep, or live.
func (c *collector) keep(d [32]byte) bool {
	return c.sw.touched(d) || c.live(FromDigest(d[:]))
}

// shardDirs lists the loose blobs' shard directories.
func (b *FSBlobs) shardDirs() ([]string, error) {
	ents, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, fmt.Errorf("store: collect: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && isShardName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// looseShard removes the dead loose blobs of one shard directory and
// fsyncs it once.
func (c *collector) looseShard(shard string) error {
	dir := c.b.tree().Shard(shard)
	files, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: collect: %w", err)
	}
	dirty := false
	for _, f := range files {
		id, _, ok := looseName(f, shard)
		if !ok {
			continue
		}
		name := f.Name()
		d, _ := digestOf(id)
		if c.keep(d) {
			c.rep.Kept++
			continue
		}
		size, disk, gone, err := c.b.removeLoose(id.String(), filepath.Join(dir, name), func() bool { return !c.sw.touched(d) })
		if err != nil {
			return err
		}
		if !gone {
			c.rep.Kept++ // touched since it was found dead
			continue
		}
		if size >= 0 {
			c.rep.Freed += size
			c.rep.DiskFreed += disk
			c.removed[d] = struct{}{}
			dirty = true
		}
	}
	if dirty {
		return layout.SyncDir(dir)
	}
	return nil
}

// removeLoose unlinks a loose blob if still() holds, both decided while
// its flight is claimed, so that a Put of the same bytes is ordered
// before (and still() sees its touch) or after (and finds it missing and
// writes it again). size is the blob's (uncompressed) size and disk the
// file's; size is -1 when the file was already gone. The caller fsyncs the
// shard directory.
func (b *FSBlobs) removeLoose(key, path string, still func() bool) (size, disk int64, gone bool, err error) {
	defer b.claim(key)()
	if !still() {
		return 0, 0, false, nil
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, 0, true, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("store: collect blob %s: %w", key, err)
	}
	size = fi.Size()
	if strings.HasSuffix(path, layout.CompressedSuffix) {
		if f, err := os.Open(path); err == nil {
			if z, err := OpenSeekable(f, fi.Size(), nil); err == nil {
				size = z.Size()
			}
			f.Close()
		}
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return -1, 0, true, nil
		}
		return 0, 0, false, fmt.Errorf("store: collect blob %s: %w", key, err)
	}
	return size, fi.Size(), true, nil
}

// packName parses "NNNNNNNN.<ext>".
func packName(name, ext string) (int, bool) { return layout.PackOrdinal(name, "."+ext) }

// diskBytes is the size of every pack file, the pack being filled counted
// to its logical end (the rest is preallocated).
func (p *packs) diskBytes() (int64, error) {
	curN, curSize := p.current()
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return 0, fmt.Errorf("store: packs: %w", err)
	}
	// A pack without an index that this process is not filling (a
	// read-only open, beside a writer filling it) is preallocated past
	// its logical end: that end is where its last known entry ends.
	ends := map[int]int64{}
	p.mu.Lock()
	for _, m := range []map[[32]byte]packLoc{p.index, p.corrupt} {
		for _, loc := range m {
			ends[loc.pack] = max(ends[loc.pack], loc.off+loc.n)
		}
	}
	p.mu.Unlock()
	var total int64
	for _, e := range ents {
		n, ok := packName(e.Name(), "pack")
		if !ok {
			continue
		}
		if n == curN {
			total += curSize
			continue
		}
		if _, err := os.Stat(p.idxPath(n)); errors.Is(err, fs.ErrNotExist) && ends[n] > 0 && !p.markedDamaged(n) {
			total += ends[n]
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("store: packs: %w", err)
		}
		total += fi.Size()
	}
	return total, nil
}

// current returns the number and logical size of the pack being filled (0
// when none).
func (p *packs) current() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0, 0
	}
	return p.cur.n, p.cur.size.Load()
}

// fullPacks lists the packs a sweep may rewrite: those with an index on
// disk, never the one being filled. A pack gets its index under packs.mu
// just before it stops being the current one, so one listed with an index
// after that lock is taken is full.
func (p *packs) fullPacks() ([]int, error) {
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("store: packs: %w", err)
	}
	packs, idxs := map[int]bool{}, map[int]bool{}
	for _, e := range ents {
		if n, ok := packName(e.Name(), "pack"); ok {
			packs[n] = true
		} else if n, ok := packName(e.Name(), "idx"); ok {
			idxs[n] = true
		}
	}
	curN, _ := p.current()
	// A pack holding damage (a corrupt entry, an unreadable region) is not
	// rewritten: a rewrite would keep only its good entries, and the
	// damaged bytes are evidence that verify reports.
	damaged := map[int]bool{}
	p.mu.Lock()
	for _, loc := range p.corrupt {
		damaged[loc.pack] = true
	}
	for _, d := range p.damaged {
		damaged[d.Pack] = true
	}
	p.mu.Unlock()
	var out []int
	for n := range idxs {
		if packs[n] && n != curN && !damaged[n] {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

func (p *packs) hook(step string) error {
	if p.gcHook != nil {
		if err := p.gcHook(step); err != nil {
			return fmt.Errorf("%w at %s: %w", errGCHook, step, err)
		}
	}
	return nil
}

// pack collects full pack n: its entries that the index places there are
// kept if live or touched; the others (dead, or copies of blobs the index
// places elsewhere) are dropped by rewriting the pack without them.
func (c *collector) pack(n int) error {
	p := c.p
	ents, err := p.readIdx(n)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: collect pack %d: index: %w", n, err)
	}
	var mine []idxEntry
	p.mu.Lock()
	for _, e := range ents {
		if loc, ok := p.index[e.d]; ok && loc == e.loc {
			mine = append(mine, e)
		}
	}
	p.mu.Unlock()
	var keep, dead []idxEntry
	for _, e := range mine {
		if c.keep(e.d) {
			keep = append(keep, e)
		} else {
			dead = append(dead, e)
		}
	}
	if len(keep) == len(ents) {
		c.rep.Kept += len(keep)
		return nil // nothing to drop
	}
	var moved []idxEntry
	k := 0
	if len(keep) > 0 {
		p.mu.Lock()
		p.lastN++
		k = p.lastN
		p.mu.Unlock()
		if moved, err = p.copyEntries(n, k, keep); err != nil {
			return err
		}
	}
	if !p.swap(c.sw, n, dead, moved) {
		// A blob this pack would drop was touched since it was found
		// dead: keep the pack as it is, for a later sweep.
		c.rep.Kept += len(mine)
		if k > 0 {
			return p.removePack(k, false)
		}
		return nil
	}
	c.rep.Kept += len(keep)
	for _, e := range dead {
		c.rep.Freed += e.loc.n
		c.removed[e.d] = struct{}{}
	}
	if err := p.hook("swapped"); err != nil {
		return err
	}
	old := sizeOf(p.path(n)) + sizeOf(p.idxPath(n))
	if err := p.removePack(n, true); err != nil {
		return err
	}
	c.rep.DiskFreed += old
	if k > 0 {
		c.rep.DiskFreed -= sizeOf(p.path(k)) + sizeOf(p.idxPath(k))
	}
	return nil
}

// sizeOf is a file's size, 0 when it cannot be read.
func sizeOf(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// StoredBytes is what the blob store occupies: loose blob files, every
// pack (the one being filled counted to its logical end: the rest is
// preallocated) and every pack index.
func (b *FSBlobs) StoredBytes() (int64, error) {
	total, err := b.packs.diskBytes()
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir(b.packs.dir)
	if err != nil {
		return 0, fmt.Errorf("store: packs: %w", err)
	}
	for _, e := range ents {
		if _, ok := packName(e.Name(), "idx"); ok {
			total += sizeOf(filepath.Join(b.packs.dir, e.Name()))
		}
	}
	shards, err := b.shardDirs()
	if err != nil {
		return 0, err
	}
	for _, sh := range shards {
		files, err := os.ReadDir(b.tree().Shard(sh))
		if err != nil {
			continue
		}
		for _, f := range files {
			if f.Type().IsRegular() && !strings.HasPrefix(f.Name(), ".") {
				total += sizeOf(filepath.Join(b.dir, sh, f.Name()))
			}
		}
	}
	return total, nil
}

// copyEntries writes the entries keep of pack n into new pack k: a
// temporary file, fsynced, renamed to pack k, the directory fsynced, then
// k's index written atomically. It returns keep's new locations. Every
// entry's length, digest and CRC are checked on the way; a mismatch
// leaves pack n alone (errPackCorrupt).
func (p *packs) copyEntries(n, k int, keep []idxEntry) (moved []idxEntry, err error) {
	src, err := os.Open(p.path(n))
	if err != nil {
		return nil, fmt.Errorf("store: collect pack %d: %w", n, err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(p.dir, tmpPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("store: collect pack %d: %w", n, err)
	}
	renamed := false
	defer func() {
		if err != nil && !errors.Is(err, errGCHook) {
			tmp.Close()
			if renamed {
				_ = p.removePack(k, false)
			} else {
				os.Remove(tmp.Name())
			}
		}
	}()
	sorted := append([]idxEntry(nil), keep...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].loc.off < sorted[j].loc.off })
	w := bufio.NewWriterSize(tmp, 1<<20)
	if _, err := w.WriteString(packMagic); err != nil {
		return nil, fmt.Errorf("store: collect pack %d: %w", n, err)
	}
	off := int64(len(packMagic))
	entries := make(map[[32]byte]packLoc, len(sorted))
	var buf []byte
	var last deltaBase // the entry copied last: a delta's base in pack k
	// copied holds the entries copied so far, by where they started in
	// pack n: where they start in pack k, and their depths.
	copied := map[int64]deltaBase{}
	var coder deltaCoder
	var frames frameCache
	for _, e := range sorted {
		size := packEntryHdr + e.loc.n
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := src.ReadAt(buf, e.loc.off-packEntryHdr); err != nil {
			return nil, fmt.Errorf("store: collect pack %d: %w: entry at %d: %v", n, errPackCorrupt, e.loc.off, err)
		}
		// Checked, then copied as stored (compressed or not); a delta
		// whose base was copied too is copied as stored, naming its base
		// where it is now; another is kept again against the entry
		// copied before it, since its base is dead.
		if binary.LittleEndian.Uint32(buf[0:4]) != entryWord(e.loc.n, e.loc.z, e.loc.d) || [32]byte(buf[8:40]) != e.d {
			return nil, fmt.Errorf("store: collect pack %d: %w: entry at %d does not check out", n, errPackCorrupt, e.loc.off)
		}
		var blob []byte
		var ok bool
		if e.loc.d {
			_, whole, _ := checkEntry(buf[:packEntryHdr], buf[packEntryHdr:], true, true, nil)
			blob, err = unpack(src, e.loc, buf[packEntryHdr:], 0, &frames)
			ok = whole && err == nil && sha256.Sum256(blob) == e.d
		} else {
			blob, _, ok = checkEntry(buf[:packEntryHdr], buf[packEntryHdr:], e.loc.z, false, nil)
		}
		if !ok || int64(len(blob)) != e.loc.raw {
			return nil, fmt.Errorf("store: collect pack %d: %w: entry at %d does not check out", n, errPackCorrupt, e.loc.off)
		}
		blob = append([]byte(nil), blob...) // buf is reused
		loc := e.loc
		loc.pack, loc.off = k, off+packEntryHdr
		back, _ := deltaBack(buf[packEntryHdr:])
		base, baseCopied := copied[e.loc.off-packEntryHdr-back]
		switch {
		case !e.loc.d:
			last = deltaBase{off: off, blob: blob}
		case baseCopied && base.depth < packDeltaDepth:
			// Its base was copied: the delta is kept as it is, naming
			// the base where it is now (a delta against a searched or
			// a sequence's base stays one).
			out := binary.LittleEndian.AppendUint32(nil, uint32(off-base.off))
			out = append(out, buf[packEntryHdr+4:]...)
			buf = appendEntry(buf[:0], e.d, out, loc.z, loc.d)
			last = deltaBase{off: off, blob: blob, depth: base.depth + 1}
		default:
			stored, z := CompressPacked(blob)
			var out []byte
			out, loc.z, loc.d, last = last.next(&coder, blob, parsedJPEG{}, stored, z, off)
			loc.n = int64(len(out))
			buf = appendEntry(buf[:0], e.d, out, loc.z, loc.d)
		}
		copied[e.loc.off-packEntryHdr] = deltaBase{off: off, depth: last.depth}
		if _, err := w.Write(buf); err != nil {
			return nil, fmt.Errorf("store: collect pack %d: %w", n, err)
		}
		entries[e.d] = loc
		moved = append(moved, idxEntry{d: e.d, loc: loc})
		off += int64(len(buf))
	}
	if err = w.Flush(); err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("store: collect pack %d: %w", n, err)
	}
	if err = p.hook("pack-written"); err != nil {
		return nil, err
	}
	if err = os.Rename(tmp.Name(), p.path(k)); err != nil {
		return nil, fmt.Errorf("store: collect pack %d: %w", n, err)
	}
	renamed = true
	if err = layout.SyncDir(p.dir); err != nil {
		return nil, err
	}
	if err = p.hook("pack-renamed"); err != nil {
		return nil, err
	}
	if err = p.writeIdx(k, entries); err != nil {
		return nil, err
	}
	if err = p.hook("idx-written"); err != nil {
		return nil, err
	}
	return moved, nil
}

// swap drops the dead entries of pack n from the index and points the
// moved ones at their new pack, unless a dead one was touched since it
// was found dead (then it changes nothing and reports false). Holding
// packs.mu and gcMu orders it against every Put: one that touched a dead
// blob before makes it give up; one that touches it after looks it up
// after, does not find it, and stores it again.
func (p *packs) swap(sw *Sweep, n int, dead, moved []idxEntry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	sw.b.gcMu.Lock()
	defer sw.b.gcMu.Unlock()
	for _, e := range dead {
		if _, ok := sw.touches[e.d]; ok {
			return false
		}
	}
	for _, e := range dead {
		if loc, ok := p.index[e.d]; ok && loc == e.loc {
			delete(p.index, e.d)
			p.bytes -= loc.n
		}
	}
	for _, e := range moved {
		if loc, ok := p.index[e.d]; ok && loc.pack == n {
			p.index[e.d] = e.loc
		}
	}
	return true
}

// removePack removes pack n: its index first (an index must never outlive
// its pack, or a later pack with that number would load it; a pack without
// an index is scanned at open), then the pack, then fsyncs the directory.
func (p *packs) removePack(n int, hooked bool) error {
	if err := os.Remove(p.idxPath(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: remove pack %d: %w", n, err)
	}
	if hooked {
		if err := p.hook("old-idx-removed"); err != nil {
			return err
		}
	}
	if err := os.Remove(p.path(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: remove pack %d: %w", n, err)
	}
	return layout.SyncDir(p.dir)
}

// errGCHook marks an error a test's gcHook returned: a simulated crash,
// after which nothing is cleaned up.
var errGCHook = errors.New("gc hook")
