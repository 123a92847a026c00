package blobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs/blobstest"
)

// compressible returns n blobs of size bytes that zstd shrinks to well
// under nine tenths (a random 64-byte motif repeated, as a flat page's
// JPEG blocks repeat), each different.
func compressible(t testing.TB, n, size int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		motif := randBytes(t, 64)
		b := bytes.Repeat(motif, size/64+1)[:size]
		copy(b, randBytes(t, 16)) // no two alike
		out[i] = b
	}
	return out
}

// packEntries walks a pack's bytes and returns each entry's offset, its
// first word's stored length and z.
func packEntries(t testing.TB, bs []byte) (offs []int, ns []int, zs []bool) {
	t.Helper()
	for off := len(packMagic); off+packEntryHdr <= len(bs); {
		w := binary.LittleEndian.Uint32(bs[off:])
		if w == 0 && binary.LittleEndian.Uint32(bs[off+4:]) == 0 {
			break
		}
		n, z, _ := parseWord(w)
		offs, ns, zs = append(offs, off), append(ns, int(n)), append(zs, z)
		off += packEntryHdr + int(n)
	}
	return
}

// TestPackCompressedEntries: a blob that compresses is packed as its zstd
// frame, one that does not as it is; both read back as their bytes under
// their CIDs, with their own sizes, through a scan of the pack being filled,
// through its version-2 index once full, and after a sweep rewrote it.
func TestPackCompressedEntries(t *testing.T) {
	dir := t.TempDir()
	datas := append(compressible(t, 4, 30000), randBytes(t, 30000))
	cids, bs := packEach(t, dir, datas)
	if string(bs[:len(packMagic)]) != packMagic {
		t.Fatalf("pack header %q, want %q", bs[:len(packMagic)], packMagic)
	}
	_, ns, zs := packEntries(t, bs)
	if len(ns) != len(datas) {
		t.Fatalf("%d entries, want %d", len(ns), len(datas))
	}
	for i := range 4 {
		if !zs[i] || ns[i] > len(datas[i])/2 {
			t.Fatalf("compressible blob %d: stored %d bytes of %d, z=%v", i, ns[i], len(datas[i]), zs[i])
		}
	}
	if zs[4] || ns[4] != len(datas[4]) {
		t.Fatalf("random blob: stored %d bytes of %d, z=%v: want it as it is", ns[4], len(datas[4]), zs[4])
	}
	check := func(what string, b *FSBlobs, live []int) {
		t.Helper()
		sizes := map[cid.Cid]int64{}
		if err := b.Walk(func(c cid.Cid, size int64) error { sizes[c] = size; return nil }); err != nil {
			t.Fatal(err)
		}
		for _, i := range live {
			if got := readBlob(t, b, cids[i]); !bytes.Equal(got, datas[i]) {
				t.Fatalf("%s: blob %d reads back other bytes", what, i)
			}
			if n, err := b.Stat(cids[i]); err != nil || n != int64(len(datas[i])) {
				t.Fatalf("%s: Stat of blob %d: %d, %v; want %d", what, i, n, err, len(datas[i]))
			}
			if sizes[cids[i]] != int64(len(datas[i])) {
				t.Fatalf("%s: Walk gives blob %d size %d, want %d", what, i, sizes[cids[i]], len(datas[i]))
			}
		}
	}
	all := []int{0, 1, 2, 3, 4}
	b := throughEachOpen(t, dir, func(what string, b *FSBlobs) { check(what, b, all) })
	// A sweep drops blobs 1 and 4 and copies the rest as they are stored.
	live := map[cid.Cid]bool{cids[0]: true, cids[2]: true, cids[3]: true}
	sw := b.BeginSweep()
	rep, err := sw.Collect(func(c cid.Cid) bool { return live[c] }, nil)
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Freed != int64(ns[1]+ns[4]) {
		t.Errorf("sweep freed %d bytes, want the two dead entries' stored %d", rep.Freed, ns[1]+ns[4])
	}
	check("after the sweep", b, []int{0, 2, 3})
	b.Close()
	b, err = OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	check("reopened after the sweep", b, []int{0, 2, 3})
	if _, err := b.Open(cids[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a swept blob: %v, want ErrNotFound", err)
	}
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs after the sweep: %v", packs)
	}
	rewritten, _ := os.ReadFile(packs[0])
	if _, ns2, zs2 := packEntries(t, rewritten); len(ns2) != 3 || !zs2[0] || !zs2[1] || !zs2[2] {
		t.Fatalf("the rewritten pack's entries: stored %v, z %v; want three compressed", ns2, zs2)
	}
}

// throughEachOpen calls check with dir's blobs as a read-only open scans
// the pack being filled, as the writer's open scans it, and, once it is
// finished (its index written, of the current version), as the writer's
// open loads them from the index; it returns the last open.
func throughEachOpen(t *testing.T, dir string, check func(what string, b *FSBlobs)) *FSBlobs {
	t.Helper()
	ro, err := OpenFSBlobsReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("read-only, scanned", ro)
	ro.Close()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("writer, scanned", b)
	if err := b.packs.finishCurrent(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if idx, err := os.ReadFile(filepath.Join(dir, "packs", "00000001.idx")); err != nil || string(idx[:len(packIdxMagic)]) != packIdxMagic {
		t.Fatalf("index: %q, %v; want version %d", idx, err, packIdxMagic[len(packIdxMagic)-1])
	}
	b, err = OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("from the index", b)
	return b
}

// openThenDamage opens the blob store at dir (its pack 1 holding orig),
// then flips a bit of byte at in the pack behind its back: damage after
// the index was loaded.
func openThenDamage(t *testing.T, dir string, orig []byte, at int) *FSBlobs {
	t.Helper()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	bs := append([]byte(nil), orig...)
	bs[at] ^= 0x10
	if err := os.WriteFile(filepath.Join(dir, "packs", "00000001.pack"), bs, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPackCompressedAnyFlippedByte flips every byte of a compressed entry
// in turn: the other blobs are served, the damaged one never is (not with
// other bytes, not as a bomb), and nothing is cut.
func TestPackCompressedAnyFlippedByte(t *testing.T) {
	dir := t.TempDir()
	datas := compressible(t, 4, 3000)
	cids, orig := packEach(t, dir, datas)
	offs, ns, zs := packEntries(t, orig)
	const victim = 2
	if !zs[victim] {
		t.Fatal("the victim is not compressed")
	}
	for pos := offs[victim]; pos < offs[victim]+packEntryHdr+ns[victim]; pos++ {
		for _, bit := range []byte{0x01, 0x80} {
			d := t.TempDir()
			os.MkdirAll(filepath.Join(d, "packs"), 0o755)
			pack := filepath.Join(d, "packs", "00000001.pack")
			bs := append([]byte(nil), orig...)
			bs[pos] ^= bit
			os.WriteFile(pack, bs, 0o644)
			b, err := OpenFSBlobs(d)
			if err != nil {
				t.Fatalf("byte %d: open: %v", pos, err)
			}
			checkAroundDamage(t, fmt.Sprintf("byte %d bit %#x", pos, bit), b, pack, bs, cids, datas, victim)
			b.Close()
		}
	}
	// Damage after the index was loaded: Open refuses it as corrupt.
	b := openThenDamage(t, dir, orig, offs[victim]+packEntryHdr+ns[victim]/2)
	defer b.Close()
	if r, err := b.Open(cids[victim]); !errors.Is(err, ErrBlobCorrupt) {
		if err == nil {
			got, _ := io.ReadAll(r)
			r.Close()
			t.Fatalf("a compressed blob damaged after open was served (%d bytes, equal %v)", len(got), bytes.Equal(got, datas[victim]))
		}
		t.Fatalf("a compressed blob damaged after open: %v, want ErrBlobCorrupt", err)
	}
}

// TestPackVersion1 opens a store written before packed blobs could be
// compressed: a full version-1 pack with its version-1 index, and a
// version-1 pack being filled. Every blob reads back; the filled one is
// finished, and new blobs go to a new version-2 pack.
func TestPackVersion1(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "packs"), 0o755)
	datas := compressible(t, 6, 2000)
	var cids []cid.Cid
	writeV1 := func(n int, ds [][]byte, withIdx bool) {
		pack := []byte(packMagicV1)
		idx := binary.LittleEndian.AppendUint32([]byte(packIdxMagicV1), uint32(len(ds)))
		for _, d := range ds {
			sum := sha256.Sum256(d)
			cids = append(cids, FromDigest(sum[:]))
			idx = append(idx, sum[:]...)
			idx = binary.LittleEndian.AppendUint64(idx, uint64(len(pack)+packEntryHdr))
			idx = binary.LittleEndian.AppendUint32(idx, uint32(len(d)))
			pack = binary.LittleEndian.AppendUint32(pack, uint32(len(d)))
			pack = binary.LittleEndian.AppendUint32(pack, crc32.Update(crc32.Checksum(sum[:], castagnoli), castagnoli, d))
			pack = append(append(pack, sum[:]...), d...)
		}
		idx = binary.LittleEndian.AppendUint32(idx, crc32.Checksum(idx, castagnoli))
		os.WriteFile(filepath.Join(dir, "packs", fmt.Sprintf("%08d.pack", n)), pack, 0o644)
		if withIdx {
			os.WriteFile(filepath.Join(dir, "packs", fmt.Sprintf("%08d.idx", n)), idx, 0o444)
		}
	}
	writeV1(1, datas[:3], true)
	writeV1(2, datas[3:], false)
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, c := range cids {
		if got := readBlob(t, b, c); !bytes.Equal(got, datas[i]) {
			t.Fatalf("version-1 blob %d reads back other bytes", i)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "packs", "00000002.idx")); err != nil {
		t.Fatalf("the version-1 pack being filled was not finished: %v", err)
	}
	more := compressible(t, 1, 5000)
	mc := putAll(t, b, more)[0]
	bs, err := os.ReadFile(filepath.Join(dir, "packs", "00000003.pack"))
	if err != nil || string(bs[:len(packMagic)]) != packMagic {
		t.Fatalf("a new blob did not start a version-2 pack: %v", err)
	}
	if got := readBlob(t, b, mc); !bytes.Equal(got, more[0]) {
		t.Fatal("the new blob reads back other bytes")
	}
}

// FuzzPackScan scans arbitrary pack bytes (after a valid header, or
// not): the scan never panics or allocates past a packed blob's bound,
// and every entry it calls good reads back, through open, as bytes that
// hash to its digest, with its size.
func FuzzPackScan(f *testing.F) {
	seeds := append(compressible(f, 2, 500), randBytes(f, 300))
	seeds = append(seeds, similar(f, 3, 400)...) // a chain of deltas
	_, valid := packEach(f, f.TempDir(), seeds)
	offs, _, _ := packEntries(f, valid)
	f.Add(valid[:offs[len(offs)-1]+packEntryHdr+20])
	f.Add(valid[:len(packMagic)+packEntryHdr+10])
	f.Add(append([]byte(packMagicV1), valid[len(packMagic):]...))
	_, frames := packEach(f, f.TempDir(), blobstest.Frames(f, 3, 48, 32, false, 9)) // a chain of JPEG deltas
	f.Add(frames)
	// A JPEG delta whose base is not the entry before it (PutManyAfter).
	seq := blobstest.Frames(f, 2, 48, 32, false, 10)
	seqDir := f.TempDir()
	sb, err := OpenFSBlobs(seqDir)
	if err != nil {
		f.Fatal(err)
	}
	if cs, err := sb.PutManyAfter(cid.Undef, [][]byte{seq[0], randBytes(f, 200), seq[1]}); err != nil || !sb.IsJPEGDelta(cs[2]) {
		f.Fatalf("the sequence's seed: %v, a JPEG delta %v", err, err == nil && sb.IsJPEGDelta(cs[2]))
	}
	sb.Close()
	seqPack, err := os.ReadFile(filepath.Join(seqDir, "packs", "00000001.pack"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seqPack)
	d := f.TempDir()
	p := &packs{dir: d, maxBytes: defaultPackMax, readOnly: true}
	f.Fuzz(func(t *testing.T, bs []byte) {
		if err := os.WriteFile(p.path(1), bs, 0o644); err != nil {
			t.Fatal(err)
		}
		sc, err := p.scan(1)
		if err != nil {
			t.Fatal(err)
		}
		for dg, loc := range sc.entries {
			r, err := p.open(loc)
			if err != nil {
				t.Fatalf("an entry the scan called good: %v", err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || sha256.Sum256(got) != dg || int64(len(got)) != loc.raw {
				t.Fatalf("an entry the scan called good reads back %d bytes (size %d) that hash elsewhere: %v", len(got), loc.raw, err)
			}
		}
	})
}

// TestLooseCompressedDamageIsCorrupt: a loose blob kept compressed whose
// seek table is damaged is refused as corrupt (BLOB_CORRUPT over HTTP),
// not served and not called missing.
func TestLooseCompressedDamageIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := compressible(t, 1, 200<<10)[0]
	c, _, err := b.PutSeekable(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := b.tree().LooseCompressed(c.String())
	bs, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("not kept compressed: %v", err)
	}
	bs[len(bs)-20] ^= 0x40 // in the seek table, under its CRC
	if err := os.WriteFile(path, bs, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Open(c); !errors.Is(err, ErrBlobCorrupt) {
		if r != nil {
			r.Close()
		}
		t.Fatalf("Open of a damaged compressed blob: %v, want ErrBlobCorrupt", err)
	}
}
