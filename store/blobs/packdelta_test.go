package blobs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/blobs/jpegdelta"
)

// similar is blobstest.Similar.
func similar(t testing.TB, n, size int) [][]byte { t.Helper(); return blobstest.Similar(t, n, size) }

// packEntryFlags walks a pack's bytes and returns each entry's d.
func packEntryFlags(t testing.TB, bs []byte) (ds []bool) {
	t.Helper()
	offs, _, _ := packEntries(t, bs)
	for _, off := range offs {
		_, _, d := parseWord(uint32(bs[off]) | uint32(bs[off+1])<<8 | uint32(bs[off+2])<<16 | uint32(bs[off+3])<<24)
		ds = append(ds, d)
	}
	return ds
}

// TestPackDeltaEntries: blobs that differ a little from the one packed
// before are kept as deltas against it, a chain at most packDeltaDepth
// long; each reads back as its bytes through a scan, through the index,
// and after a sweep that dropped the whole entry at the head of a chain
// and one in its middle (the survivors are kept again against what was
// copied before them, and nothing of the dead blobs is left in the pack).
//
// Screencast frames (JPEGs that differ in a few MCUs) are kept as JPEG
// deltas, in a small part of what they take compressed alone.
func TestPackDeltaEntries(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		datas := similar(t, 12, 40000)
		deltaEntries(t, datas, false, 0.6, func(i int) []byte {
			// The region that sets blob i apart (blobstest.Similar).
			at := (i * 997) % (40000 - 256)
			return datas[i][at : at+200]
		})
	})
	t.Run("JPEG", func(t *testing.T) {
		deltaEntries(t, blobstest.Frames(t, 12, 320, 200, false, 12), true, 0.4, nil)
	})
}

// deltaEntries is TestPackDeltaEntries for 12 datas, which must take at
// most a fraction most of their bytes compressed alone; distinct, when
// set, is what sets blob i apart, which a sweep must leave nowhere once
// i is dead.
func deltaEntries(t *testing.T, datas [][]byte, jpeg bool, most float64, distinct func(i int) []byte) {
	dir := t.TempDir()
	n := len(datas)
	cids, bs := packEach(t, dir, datas)
	offs, ns, zs := packEntries(t, bs)
	ds := packEntryFlags(t, bs)
	stored, alone := 0, 0
	depth := map[int]int{} // by entry offset
	for i := range n {
		// Byte deltas: entries 0, 5 and 10 start chains, the others are
		// deltas. JPEG deltas: every entry but the first is one, against
		// the most alike frame whose chain leaves room (searchBases).
		want := i%(packDeltaDepth+1) != 0
		if jpeg {
			want = i != 0
		}
		if ds[i] != want {
			t.Fatalf("entry %d: delta %v, want %v (entries %v, stored %v, z %v)", i, ds[i], want, ds, ns, zs)
		}
		if ds[i] {
			back := int(binary.LittleEndian.Uint32(bs[offs[i]+packEntryHdr:]))
			base, ok := depth[offs[i]-back]
			if !ok || base+1 > packDeltaDepth {
				t.Fatalf("entry %d: a delta against %d entries back, which is no entry or %d deep", i, back, base)
			}
			depth[offs[i]] = base + 1
		} else {
			depth[offs[i]] = 0
		}
		if ds[i] && isJPEGDelta(bs[offs[i]+packEntryHdr:offs[i]+packEntryHdr+ns[i]]) != jpeg {
			t.Fatalf("entry %d: a JPEG delta %v, want %v", i, !jpeg, jpeg)
		}
		stored += ns[i]
		z, _ := CompressPacked(datas[i])
		alone += len(z)
	}
	t.Logf("%d blobs stored in %d bytes, %d each compressed alone", n, stored, alone)
	if float64(stored) > float64(alone)*most {
		t.Fatalf("%d similar blobs stored in %d bytes, %d each compressed alone", n, stored, alone)
	}
	check := func(what string, b *FSBlobs, live []int) {
		t.Helper()
		for _, i := range live {
			if got := readBlob(t, b, cids[i]); !bytes.Equal(got, datas[i]) {
				t.Fatalf("%s: blob %d reads back other bytes", what, i)
			}
			if sz, err := b.Stat(cids[i]); err != nil || sz != int64(len(datas[i])) {
				t.Fatalf("%s: Stat of blob %d: %d, %v", what, i, sz, err)
			}
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	b := throughEachOpen(t, dir, func(what string, b *FSBlobs) { check(what, b, all) })
	defer b.Close()
	dead := map[int]bool{0: true, 2: true, 7: true}
	var live []int
	for i := range n {
		if !dead[i] {
			live = append(live, i)
		}
	}
	sw := b.BeginSweep()
	_, err := sw.Collect(func(c cid.Cid) bool {
		for i := range cids {
			if cids[i] == c {
				return !dead[i]
			}
		}
		return false
	}, nil)
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	check("after the sweep", b, live)
	for i := range dead {
		if _, err := b.Open(cids[i]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("swept blob %d: %v", i, err)
		}
	}
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs after the sweep: %v", packs)
	}
	rewritten, _ := os.ReadFile(packs[0])
	ds2 := packEntryFlags(t, rewritten)
	if len(ds2) != len(live) || ds2[0] {
		t.Fatalf("the rewritten pack's entries: delta %v", ds2)
	}
	deltas := 0
	for _, d := range ds2 {
		if d {
			deltas++
		}
	}
	if deltas < len(live)-3 {
		t.Errorf("the rewritten pack keeps %d of %d blobs as deltas", deltas, len(live))
	}
	// The dead blobs' own bytes (the regions that set them apart) are
	// nowhere in the packs: a retention sweep leaves nothing of them.
	for i := range dead {
		if distinct != nil && bytes.Contains(rewritten, distinct(i)) {
			t.Errorf("swept blob %d's bytes are still in the pack", i)
		}
	}
	r2, _ := OpenFSBlobs(dir)
	check("reopened after the sweep", r2, live)
	r2.Close()
}

// TestPackDeltaAnyFlippedByte flips bytes of the entry at the head of a
// chain in turn, in a pack without an index (so it is scanned): its
// dependents can no longer be read, and none is served with other bytes;
// they are reported corrupt. The blobs before it still read back.
// Damage after the index was loaded: a dependent is ErrBlobCorrupt.
func TestPackDeltaAnyFlippedByte(t *testing.T) {
	// The first blob is too large to be a base (packDeltaMax): the chain
	// starts at entry 1 (a small blob may win a tenth against an
	// unrelated base, zstd's fastest level being erratic on it).
	large := randBytes(t, packDeltaMax+1)
	t.Run("bytes", func(t *testing.T) {
		flipChainHead(t, append([][]byte{large}, similar(t, 4, 1000)...), false)
	})
	t.Run("JPEG", func(t *testing.T) {
		flipChainHead(t, append([][]byte{large}, blobstest.Frames(t, 4, 96, 64, false, 11)...), true)
	})
}

// flipChainHead is TestPackDeltaAnyFlippedByte for datas, whose entries
// 2 to 4 are kept as deltas (JPEG deltas when jpeg).
func flipChainHead(t *testing.T, datas [][]byte, jpeg bool) {
	dir := t.TempDir()
	cids, orig := packEach(t, dir, datas)
	offs, ns, _ := packEntries(t, orig)
	if ds := packEntryFlags(t, orig); ds[1] || !ds[2] || !ds[3] || !ds[4] {
		t.Fatalf("entries' deltas %v, want a chain from entry 1", ds)
	}
	for i := 2; i <= 4; i++ {
		if got := isJPEGDelta(orig[offs[i]+packEntryHdr : offs[i]+packEntryHdr+ns[i]]); got != jpeg {
			t.Fatalf("entry %d is a JPEG delta: %v, want %v", i, got, jpeg)
		}
	}
	const head = 1
	// Every byte of the header, every fifth of the body (a flip there
	// fails the CRC alike).
	next := func(pos int) int {
		if pos < offs[head]+packEntryHdr {
			return pos + 1
		}
		return pos + 5
	}
	for pos := offs[head]; pos < offs[head]+packEntryHdr+ns[head]; pos = next(pos) {
		for _, bit := range []byte{0x01, 0x80} {
			what := fmt.Sprintf("byte %d bit %#x", pos, bit)
			d := t.TempDir()
			os.MkdirAll(filepath.Join(d, "packs"), 0o755)
			pack := filepath.Join(d, "packs", "00000001.pack")
			bs := append([]byte(nil), orig...)
			bs[pos] ^= bit
			os.WriteFile(pack, bs, 0o644)
			b, err := OpenFSBlobs(d)
			if err != nil {
				t.Fatalf("%s: open: %v", what, err)
			}
			if got := readBlob(t, b, cids[0]); !bytes.Equal(got, datas[0]) {
				t.Fatalf("%s: the blob before the damage reads back other bytes", what)
			}
			regions, corrupt := b.PackDamage()
			for i := head; i < len(datas); i++ {
				r, err := b.Open(cids[i])
				if err == nil {
					got, _ := io.ReadAll(r)
					r.Close()
					if !bytes.Equal(got, datas[i]) {
						t.Fatalf("%s: blob %d served with other bytes", what, i)
					}
					if i == head {
						t.Fatalf("%s: the damaged blob is served", what)
					}
					continue
				}
				// (A flip in the head's digest reports it under another CID.)
				inDigest := i == head && pos >= offs[head]+8 && pos < offs[head]+packEntryHdr
				if _, ok := corrupt[cids[i].String()]; !ok && len(regions) == 0 && !inDigest {
					t.Fatalf("%s: blob %d unreadable (%v) but not reported", what, i, err)
				}
			}
			if b.PackCut() != 0 {
				t.Fatalf("%s: the scan cut %d bytes", what, b.PackCut())
			}
			b.Close()
		}
	}
	b := openThenDamage(t, dir, orig, offs[head]+packEntryHdr+ns[head]/2)
	defer b.Close()
	for i := head + 1; i < len(datas); i++ {
		if r, err := b.Open(cids[i]); !errors.Is(err, ErrBlobCorrupt) {
			if err == nil {
				r.Close()
			}
			t.Fatalf("a delta whose base was damaged after open: %v, want ErrBlobCorrupt", err)
		}
	}
}

// TestPackDeltaVersion2 opens a store whose pack being filled is version
// 2 (no deltas): it is finished, its blobs read back, and new blobs go to
// a version-3 pack, as deltas.
func TestPackDeltaVersion2(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Compressed entries, each after a blob too large to be a base, so
	// that none is a delta: a version-2 pack has none.
	c := compressible(t, 2, 3000)
	datas := [][]byte{c[0], randBytes(t, packDeltaMax+1), c[1]}
	cids := putAll(t, b, datas)
	b.Close()
	pack := filepath.Join(dir, "packs", "00000001.pack")
	bs, _ := os.ReadFile(pack)
	if ds := packEntryFlags(t, bs); ds[0] || ds[1] || ds[2] {
		t.Fatalf("a version-2 fixture holds deltas: %v", ds)
	}
	os.WriteFile(pack, append([]byte(packMagicV2), bs[len(packMagic):]...), 0o644)
	b, err = OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, c := range cids {
		if got := readBlob(t, b, c); !bytes.Equal(got, datas[i]) {
			t.Fatalf("version-2 blob %d reads back other bytes", i)
		}
	}
	idx, err := os.ReadFile(filepath.Join(dir, "packs", "00000001.idx"))
	if err != nil || string(idx[:len(packIdxMagic)]) != packIdxMagic {
		t.Fatalf("the version-2 pack being filled was not finished: %v", err)
	}
	more := similar(t, 2, 5000)
	mc := putAll(t, b, more[:1])
	mc = append(mc, putAll(t, b, more[1:])...)
	bs, err = os.ReadFile(filepath.Join(dir, "packs", "00000002.pack"))
	if err != nil || string(bs[:len(packMagic)]) != packMagic {
		t.Fatalf("new blobs did not start a version-3 pack: %v", err)
	}
	if ds := packEntryFlags(t, bs); len(ds) != 2 || ds[0] || !ds[1] {
		t.Fatalf("the new pack's deltas: %v", ds)
	}
	for i, c := range mc {
		if got := readBlob(t, b, c); !bytes.Equal(got, more[i]) {
			t.Fatalf("new blob %d reads back other bytes", i)
		}
	}
}

// TestPackDeltaCallerReusesBuffer: the caller may reuse a blob's buffer
// once PutMany returns; the next blob, kept as a delta against it, still
// reads back, and a scan of the pack finds every entry good.
func TestPackDeltaCallerReusesBuffer(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	datas := similar(t, 3, 20000)
	buf := append([]byte(nil), datas[0]...)
	cids := putAll(t, b, [][]byte{buf})
	for i := range buf {
		buf[i] = 0xAA // reused for something else
	}
	cids = append(cids, putAll(t, b, datas[1:2])...)
	cids = append(cids, putAll(t, b, datas[2:3])...)
	for i, c := range cids {
		if got := readBlob(t, b, c); !bytes.Equal(got, datas[i]) {
			t.Fatalf("blob %d reads back other bytes", i)
		}
	}
	b.Close()
	b, err = OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if regions, corrupt := b.PackDamage(); len(regions)+len(corrupt) > 0 {
		t.Fatalf("the scan found damage: %v %v", regions, corrupt)
	}
	for i, c := range cids {
		if got := readBlob(t, b, c); !bytes.Equal(got, datas[i]) {
			t.Fatalf("after reopening, blob %d reads back other bytes", i)
		}
	}
	bs, _ := os.ReadFile(filepath.Join(dir, "packs", "00000001.pack"))
	if ds := packEntryFlags(t, bs); len(ds) != 3 || !ds[1] {
		t.Fatalf("the second blob was not kept as a delta: %v", ds)
	}
}

// TestPackJPEGDeltaRebuildChecked: a JPEG delta whose every checksum holds
// but which rebuilds other bytes than its entry's digest (what a reader
// whose rebuilding changed would make of it: here the last byte of the
// delta's copy of the frame's trailer) is not served. A byte delta's
// frame checksum covers the blob; a JPEG delta's covers only the delta.
func TestPackJPEGDeltaRebuildChecked(t *testing.T) {
	dir := t.TempDir()
	frames := blobstest.Frames(t, 2, 96, 64, false, 21)
	cids, orig := packEach(t, dir, frames)
	offs, ns, _ := packEntries(t, orig)
	at := offs[1] + packEntryHdr
	stored := orig[at : at+ns[1]]
	if !isJPEGDelta(stored) {
		t.Fatal("fixture: entry 1 is not a JPEG delta")
	}
	f0, err := jpegdelta.Open(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	dict := f0.Header()
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderDictRaw(packJPEGDict, dict))
	delta, err := dec.DecodeAll(stored[packJPEGHdr:], nil)
	if err != nil {
		t.Fatal(err)
	}
	// The delta's copy of the frame's trailer (its EOI), after its header.
	hlen, k := binary.Uvarint(delta[3:])
	eoi := 3 + k + int(hlen) + 1 + 1
	if !bytes.Equal(delta[eoi-1:eoi+1], []byte{0xFF, 0xD9}) {
		t.Fatalf("fixture: no EOI at %d in the delta", eoi)
	}
	var c deltaCoder
	var tampered []byte
	// A value whose frame keeps the entry's length, so that the index's
	// location still frames it.
	for v := 0; v < 256 && tampered == nil; v++ {
		if v == 0xD9 {
			continue
		}
		d := append([]byte(nil), delta...)
		d[eoi] = byte(v)
		if err := c.reset(packJPEGDict, dict); err != nil {
			t.Fatal(err)
		}
		out := c.enc.EncodeAll(d, append([]byte(nil), stored[:packJPEGHdr]...))
		if len(out) == len(stored) {
			tampered = out
		}
	}
	if tampered == nil {
		t.Fatal("fixture: no trailer keeps the frame's length")
	}
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bs := append([]byte(nil), orig...)
	copy(bs[at:], tampered)
	crc := crc32.Update(crc32.Checksum(bs[offs[1]+8:offs[1]+40], castagnoli), castagnoli, tampered)
	binary.LittleEndian.PutUint32(bs[offs[1]+4:], crc)
	if err := os.WriteFile(filepath.Join(dir, "packs", "00000001.pack"), bs, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readBlob(t, b, cids[0]); !bytes.Equal(got, frames[0]) {
		t.Fatal("the base reads back other bytes")
	}
	if r, err := b.Open(cids[1]); !errors.Is(err, ErrBlobCorrupt) {
		if err == nil {
			r.Close()
		}
		t.Fatalf("a JPEG delta that rebuilds other bytes: %v, want ErrBlobCorrupt", err)
	}
}

// TestPackJPEGDeltaOneBatch: a batch whose frames take more coefficients
// than a put parses before taking the lock (packParseBudget) still keeps
// every frame it can as a JPEG delta (the rest are parsed under the
// lock), and each reads back.
func TestPackJPEGDeltaOneBatch(t *testing.T) {
	dir := t.TempDir()
	datas := blobstest.Frames(t, 12, 800, 500, false, 13)
	f, err := jpegdelta.Parse(datas[0])
	if err != nil {
		t.Fatal(err)
	}
	if f.Coefficients()*len(datas) <= packParseBudget {
		t.Fatalf("fixture: %d bytes of coefficients a frame do not pass the bound", f.Coefficients())
	}
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	cids := putAll(t, b, datas)
	b.Close()
	bs, err := os.ReadFile(filepath.Join(dir, "packs", "00000001.pack"))
	if err != nil {
		t.Fatal(err)
	}
	offs, ns, _ := packEntries(t, bs)
	ds := packEntryFlags(t, bs)
	for i := range datas {
		want := i%(packDeltaDepth+1) != 0
		if ds[i] != want || want && !isJPEGDelta(bs[offs[i]+packEntryHdr:offs[i]+packEntryHdr+ns[i]]) {
			t.Fatalf("entry %d: a delta %v (JPEG or not), want a JPEG delta %v", i, ds[i], want)
		}
	}
	b = throughEachOpen(t, dir, func(what string, b *FSBlobs) {
		for i, c := range cids {
			if got := readBlob(t, b, c); !bytes.Equal(got, datas[i]) {
				t.Fatalf("%s: frame %d reads back other bytes", what, i)
			}
		}
	})
	b.Close()
}

// TestPackSequenceDeltas: a JPEG put after the frame its sequence showed
// before it (PutManyAfter) is kept as a JPEG delta against that frame
// (when it is not among the JPEGs the search looks at: searchBases),
// though other blobs were packed between them, both when that frame came
// in an earlier batch (prev) and earlier in the same batch (with a blob
// that is no JPEG between); the same puts without the sequence (PutMany)
// keep it against the entry before, and store more. Every blob reads back
// through a scan of the pack being filled, its index, and a sweep that
// keeps them all.
func TestPackSequenceDeltas(t *testing.T) {
	// The search among the pack's last JPEGs would find the sequence's
	// frames here too: this is what the sequence finds beyond them.
	defer SetRecentFrames(0)()
	pageA := blobstest.Frames(t, 3, 320, 200, false, 21) // one page, changing a little
	pageB := blobstest.Frames(t, 1, 320, 200, false, 22) // another recording's page
	other := randBytes(t, 5000)                          // a video chunk, say
	// Batch 1 (another recording's, in between): A0 B0. Batch 2 (after
	// A0): A1 X A2, so that A1 is kept against A0 (prev, two entries
	// back) and A2 against A1 (in the batch, X between them).
	batches := [][][]byte{{pageA[0], pageB[0]}, {pageA[1], other, pageA[2]}}
	put := func(dir string, after bool) (*FSBlobs, []cid.Cid, int) {
		b, err := OpenFSBlobs(dir)
		if err != nil {
			t.Fatal(err)
		}
		var cids []cid.Cid
		for k, batch := range batches {
			var cs []cid.Cid
			if after {
				prev := cid.Undef
				if k > 0 {
					prev = cids[0]
				}
				cs, err = b.PutManyAfter(prev, batch)
			} else {
				cs, err = b.PutMany(batch)
			}
			if err != nil {
				t.Fatal(err)
			}
			cids = append(cids, cs...)
		}
		stored, err := b.StoredBytes()
		if err != nil {
			t.Fatal(err)
		}
		return b, cids, int(stored)
	}
	plain, _, plainBytes := put(t.TempDir(), false)
	plain.Close()
	dir := t.TempDir()
	b, cids, seqBytes := put(dir, true)
	// cids: A0 B0 A1 X A2.
	for _, i := range []int{2, 4} {
		if !b.IsJPEGDelta(cids[i]) {
			t.Fatalf("blob %d is not a JPEG delta", i)
		}
	}
	t.Logf("4 frames of 2 pages and a blob: %d bytes packed as a sequence, %d without", seqBytes, plainBytes)
	if seqBytes >= plainBytes*9/10 {
		t.Fatalf("as a sequence %d bytes, without %d: the sequence saved nothing", seqBytes, plainBytes)
	}
	b.Close()
	datas := [][]byte{pageA[0], pageB[0], pageA[1], other, pageA[2]}
	// A sweep removing B0 rewrites the pack: the sequence's deltas stay
	// deltas against their frames.
	b, cids, _ = readBackThenSweep(t, dir, cids, datas, 1)
	defer b.Close()
	for _, i := range []int{1, 3} {
		if !b.IsJPEGDelta(cids[i]) {
			t.Fatalf("after a sweep, frame %d is not a JPEG delta", i)
		}
	}
}

// TestPackSearchesBase: a JPEG is kept as a JPEG delta against the frame
// of the pack being filled most alike it, among the last it wrote, though
// neither the entry before nor a sequence names it: a rerun's frame
// against the first run's at that step. Through a scan, the index and a
// sweep, every blob reads back.
func TestPackSearchesBase(t *testing.T) {
	pageA := blobstest.Frames(t, 2, 320, 200, false, 61)
	others := blobstest.Frames(t, 6, 320, 200, false, 62) // another page, changing
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	datas := append(append([][]byte{pageA[0]}, others...), pageA[1])
	var cids []cid.Cid
	for _, d := range datas { // one batch each, no sequence
		cs, err := b.PutMany([][]byte{d})
		if err != nil {
			t.Fatal(err)
		}
		cids = append(cids, cs...)
	}
	last := cids[len(cids)-1]
	if base, ok := b.DeltaBase(last); !ok || base != cids[0] || !b.IsJPEGDelta(last) {
		t.Fatalf("the last frame is kept against %s (%v), want %s, its page's frame 7 entries back", base, ok, cids[0])
	}
	// Without the search, against the entry before (another page).
	plainDir := t.TempDir()
	plain, err := OpenFSBlobs(plainDir)
	if err != nil {
		t.Fatal(err)
	}
	restore := SetRecentFrames(0)
	for _, d := range datas {
		if _, err := plain.PutMany([][]byte{d}); err != nil {
			t.Fatal(err)
		}
	}
	restore()
	searched, _ := b.StoredBytes()
	without, _ := plain.StoredBytes()
	plain.Close()
	t.Logf("%d frames: %d bytes with the search, %d without", len(datas), searched, without)
	if searched >= without {
		t.Fatalf("%d bytes with the search, %d without", searched, without)
	}
	b.Close()
	b, cids, _ = readBackThenSweep(t, dir, cids, datas, 1)
	defer b.Close()
	if base, ok := b.DeltaBase(last); !ok || base != cids[0] {
		t.Fatalf("after a sweep, the last frame is kept against %s (%v), want %s", base, ok, cids[0])
	}
}

// TestPackSearchesBaseOverBudget: the most alike frame of the pack is
// still tried when the batch has spent its budget for parsing before the
// lock on the frame itself and the frame its sequence showed before it
// (as one 1280×800 frame and its sequence's base did in the demo's
// reruns, which kept a frame whole instead of as a delta of a twentieth
// of its size).
func TestPackSearchesBaseOverBudget(t *testing.T) {
	pageA := blobstest.Frames(t, 2, 320, 200, false, 61)
	others := blobstest.Frames(t, 6, 320, 200, false, 62)
	b, err := OpenFSBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var cids []cid.Cid
	for _, d := range append([][]byte{pageA[0]}, others...) {
		cs, err := b.PutMany([][]byte{d})
		if err != nil {
			t.Fatal(err)
		}
		cids = append(cids, cs...)
	}
	defer SetParseBudget(1)()
	cs, err := b.PutManyAfter(cids[len(cids)-1], [][]byte{pageA[1]})
	if err != nil {
		t.Fatal(err)
	}
	if base, ok := b.DeltaBase(cs[0]); !ok || base != cids[0] || !b.IsJPEGDelta(cs[0]) {
		t.Fatalf("the frame is kept against %s (%v), want %s, its page's frame (the sequence showed %s)", base, ok, cids[0], cids[len(cids)-1])
	}
	if !bytes.Equal(readBlob(t, b, cs[0]), pageA[1]) {
		t.Fatal("the frame reads back other bytes")
	}
}

// packDepths returns, for each entry of pack bs in order, how many deltas
// lead to it (read from the back words), failing when a delta names no
// entry.
func packDepths(t *testing.T, bs []byte) []int {
	t.Helper()
	offs, _, _ := packEntries(t, bs)
	ds := packEntryFlags(t, bs)
	at := map[int]int{}
	var out []int
	for i, off := range offs {
		depth := 0
		if ds[i] {
			back := int(binary.LittleEndian.Uint32(bs[off+packEntryHdr:]))
			base, ok := at[off-back]
			if !ok {
				t.Fatalf("entry %d: a delta against %d bytes back, where no entry starts", i, back)
			}
			depth = base + 1
		}
		at[off] = depth
		out = append(out, depth)
	}
	return out
}

// TestPackContinuedAcrossOpens: a pack being filled is continued by the
// next process that opens the store (one `flightrec record` after
// another). Its frames are bases for the new process's frames too (their
// signatures are made again from the pack), and chains stay within
// packDeltaDepth across the opens: the depths of the entries written
// before come from the scan at open. Every frame reads back, also after a
// sweep removed the frame every chain starts from.
func TestPackContinuedAcrossOpens(t *testing.T) {
	frames := blobstest.Frames(t, 16, 320, 200, false, 71)
	dir := t.TempDir()
	var cids []cid.Cid
	for _, part := range [][][]byte{frames[:6], frames[6:11], frames[11:]} {
		b, err := OpenFSBlobs(dir)
		if err != nil {
			t.Fatal(err)
		}
		for k, f := range part {
			cs, err := b.PutMany([][]byte{f})
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 && len(cids) > 0 && !b.IsJPEGDelta(cs[0]) {
				t.Fatalf("the first frame after an open (%d) is not a JPEG delta against the pack's frames", len(cids))
			}
			cids = append(cids, cs...)
		}
		b.Close()
	}
	bs, err := os.ReadFile(filepath.Join(dir, "packs", "00000001.pack"))
	if err != nil {
		t.Fatal(err)
	}
	depths := packDepths(t, bs)
	if len(depths) != len(frames) {
		t.Fatalf("%d entries in the pack, want %d (one pack, continued)", len(depths), len(frames))
	}
	for i, d := range depths {
		if d > packDeltaDepth {
			t.Fatalf("entry %d is %d deltas deep (%v), more than %d", i, d, depths, packDeltaDepth)
		}
	}
	t.Logf("depths %v", depths)
	// A sweep of the first frame, which every chain starts from.
	b, _, _ := readBackThenSweep(t, dir, cids, frames, 0)
	b.Close()
}

// readBackThenSweep checks that blobs cids (of datas) read back through a
// scan of the pack being filled and its index (throughEachOpen), sweeps
// blob dead away, and checks the rest again; it returns the open store
// and the blobs left.
func readBackThenSweep(t *testing.T, dir string, cids []cid.Cid, datas [][]byte, dead int) (*FSBlobs, []cid.Cid, [][]byte) {
	t.Helper()
	check := func(what string, b *FSBlobs) {
		t.Helper()
		for i, c := range cids {
			if got := readBlob(t, b, c); !bytes.Equal(got, datas[i]) {
				t.Fatalf("%s: blob %d reads back other bytes", what, i)
			}
		}
	}
	b := throughEachOpen(t, dir, check)
	gone := cids[dead]
	sw := b.BeginSweep()
	if _, err := sw.Collect(func(c cid.Cid) bool { return c != gone }, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	if _, err := b.Open(gone); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the swept blob: %v", err)
	}
	cids, datas = slices.Delete(slices.Clone(cids), dead, dead+1), slices.Delete(slices.Clone(datas), dead, dead+1)
	check("after a sweep", b)
	return b, cids, datas
}
