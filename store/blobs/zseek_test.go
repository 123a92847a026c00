package blobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/store/layout"
)

// recordsLike returns n compressible "records" (JSON-ish lines of varying
// length, as a log segment's are) and the offsets where each ends.
func recordsLike(seed uint64, n int) ([]byte, []int64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	var b []byte
	var ends []int64
	for i := 0; i < n; i++ {
		b = fmt.Appendf(b, `{"seq":%d,"kind":"network","url":"https://shop.example/api/item/%d","pad":"%0*d"}`, i, rng.IntN(50), rng.IntN(900), 0)
		ends = append(ends, int64(len(b)))
	}
	return b, ends
}

func TestSeekableRoundTripCutsAtRecords(t *testing.T) {
	data, ends := recordsLike(1, 3000)
	enc := EncodeSeekable(data, ends)
	if len(enc) >= len(data)/3 {
		t.Fatalf("compressed %d bytes to %d: expected at least 3×", len(data), len(enc))
	}
	s, err := OpenSeekable(bytes.NewReader(enc), int64(len(enc)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Size() != int64(len(data)) || s.Frames() < 2 {
		t.Fatalf("size %d (want %d), %d frames", s.Size(), len(data), s.Frames())
	}
	// Every frame ends where a record ends: one record, one frame.
	for _, f := range s.frames {
		if _, ok := slices.BinarySearch(ends, f.uoff+f.ulen); !ok {
			t.Fatalf("a frame ends at %d, inside a record", f.uoff+f.ulen)
		}
	}
	// Every record reads back by (offset, length), from any order.
	rng := rand.New(rand.NewPCG(3, 4))
	for _, i := range rng.Perm(len(ends)) {
		from := int64(0)
		if i > 0 {
			from = ends[i-1]
		}
		got := make([]byte, ends[i]-from)
		if _, err := s.ReadAt(got, from); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[from:ends[i]]) {
			t.Fatalf("record %d reads back differently", i)
		}
	}
	// Reading across frames and to the end.
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("sequential read: %v, equal %v", err, bytes.Equal(got, data))
	}
	tail := make([]byte, 10)
	if n, err := s.ReadAt(tail, s.Size()-4); n != 4 || err != io.EOF {
		t.Fatalf("read past the end: %d, %v", n, err)
	}
}

func TestSeekableConcurrentReads(t *testing.T) {
	data, ends := recordsLike(5, 2000)
	enc := EncodeSeekable(data, ends)
	s, err := OpenSeekable(bytes.NewReader(enc), int64(len(enc)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for k := 0; k < 300; k++ {
				off := rng.Int64N(int64(len(data)))
				n := min(int64(rng.IntN(5000)), int64(len(data))-off)
				got := make([]byte, n)
				if _, err := s.ReadAt(got, off); err != nil && err != io.EOF {
					errs <- err
					return
				}
				if !bytes.Equal(got, data[off:off+n]) {
					errs <- fmt.Errorf("bytes %d+%d differ", off, n)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSeekableDamageIsAnError(t *testing.T) {
	data, ends := recordsLike(7, 1500)
	enc := EncodeSeekable(data, ends)
	// Every single flipped byte is refused at open (magic, table) or when
	// the frame holding it is read (zstd's frame checksum): never other
	// bytes.
	for i := 0; i < len(enc); i += 1 + len(enc)/400 {
		bad := bytes.Clone(enc)
		bad[i] ^= 0x40
		back, err := DecodeSeekable(bad)
		if err == nil && !bytes.Equal(back, data) {
			t.Fatalf("byte %d flipped: decoded to other bytes without an error", i)
		}
		if err != nil && !errors.Is(err, ErrBadSeekable) {
			t.Fatalf("byte %d flipped: %v is not ErrBadSeekable", i, err)
		}
	}
	for _, n := range []int{0, 8, 20, len(enc) - 1} {
		if _, err := DecodeSeekable(enc[:n]); !errors.Is(err, ErrBadSeekable) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
}

// FuzzSeekable feeds the seekable decoder (magic, seek table, frames)
// arbitrary bytes: it must refuse or read, never panic or read out of
// bounds; and a valid encoding of the input reads back as the input.
func FuzzSeekable(f *testing.F) {
	data, ends := recordsLike(11, 12)
	f.Add(encodeSeekable(data, ends, 256, 3))
	f.Add(encodeSeekable(data, ends, 256, 2))
	f.Add(encodeSeekable(data, ends, 256, 1))
	f.Add(encodeSeekable([]byte("x"), nil, 256, 3))
	f.Add([]byte(zMagic + zTailMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := OpenSeekable(bytes.NewReader(b), int64(len(b)), nil); err == nil {
			buf := make([]byte, 4096)
			for off := int64(0); off < s.Size() && off < 1<<20; off += int64(len(buf)) {
				if _, err := s.ReadAt(buf, off); err != nil && err != io.EOF {
					break
				}
			}
		}
		var cuts []int64
		for i := 0; i < len(b); i += 1 + int(b[i]) {
			cuts = append(cuts, int64(i))
		}
		back, err := DecodeSeekable(encodeSeekable(b, cuts, 256, 3))
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("round trip of %d bytes: %v", len(b), err)
		}
	})
}

func TestPutSeekable(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data, ends := recordsLike(13, 1000)
	c, created, err := b.PutSeekable(data, ends)
	if err != nil || !created {
		t.Fatalf("PutSeekable: %v, created %v", err, created)
	}
	if c != Sum(data) {
		t.Fatalf("CID %s is not the uncompressed bytes' %s", c, Sum(data))
	}
	tree := layout.BlobTree{Dir: dir}
	fi, err := os.Stat(tree.LooseCompressed(c.String()))
	if err != nil || fi.Size() >= int64(len(data))/3 {
		t.Fatalf("compressed file: %v (%d bytes for %d)", err, fi.Size(), len(data))
	}
	if _, err := os.Stat(tree.Loose(c.String())); err == nil {
		t.Fatal("a plain copy was written too")
	}
	// Every read path sees the uncompressed bytes.
	if n, err := b.Stat(c); err != nil || n != int64(len(data)) {
		t.Fatalf("Stat: %d, %v", n, err)
	}
	r, err := b.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Open: %v, equal %v", err, bytes.Equal(got, data))
	}
	walked := map[string]int64{}
	b.Walk(func(c2 cid.Cid, n int64) error { walked[c2.String()] = n; return nil })
	if walked[c.String()] != int64(len(data)) || len(walked) != 1 {
		t.Fatalf("Walk: %v", walked)
	}
	// Stored once: neither form is written again.
	if _, created, err := b.PutSeekable(data, ends); err != nil || created {
		t.Fatalf("second PutSeekable: created %v, %v", created, err)
	}
	if _, created, err := b.Put(data); err != nil || created {
		t.Fatalf("Put of a blob kept compressed: created %v, %v", created, err)
	}
	// A garbage-collection sweep that finds it dead removes it and
	// counts its uncompressed size as freed, its file's as disk freed.
	sw := b.BeginSweep()
	rep, err := sw.Collect(func(cid.Cid) bool { return false }, nil)
	sw.End()
	if err != nil || rep.Removed != 1 || rep.Freed != int64(len(data)) || rep.DiskFreed != fi.Size() {
		t.Fatalf("collect: %+v, %v", rep, err)
	}
	if _, err := b.Open(c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after collection: %v", err)
	}

	// What does not compress is kept as it is.
	noise := make([]byte, 50000)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	c2, _, err := b.PutSeekable(noise, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tree.Loose(c2.String())); err != nil {
		t.Fatalf("incompressible blob not kept plain: %v", err)
	}
	if err := b.Delete(c2); err != nil {
		t.Fatal(err)
	}
	// Delete removes a compressed one too.
	c3, _, _ := b.PutSeekable(data, ends)
	if err := b.Delete(c3); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(c3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
	if err := b.Delete(c3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
}

// TestSeekableFramesAgainstFirst: in version 2 every frame after the first
// is compressed against frame 0, and in version 3 frame 0 against the
// built-in dictionary and every later frame against both (each header
// names its dictionary); each version saves over the one before, and each
// record still reads back alone, from a fresh reader, in any order.
func TestSeekableFramesAgainstFirst(t *testing.T) {
	data, ends := recordsLike(13, 4000)
	v1, v2, v3 := encodeSeekable(data, ends, ZFrameTarget, 1), encodeSeekable(data, ends, ZFrameTarget, 2), EncodeSeekable(data, ends)
	if len(v2) >= len(v1) || len(v3) >= len(v2) {
		t.Fatalf("version 1 takes %d bytes, 2 %d, 3 %d: a version saved nothing", len(v1), len(v2), len(v3))
	}
	t.Logf("%d bytes: version 1 %d, version 2 %d, version 3 %d", len(data), len(v1), len(v2), len(v3))
	for _, c := range []struct {
		enc          []byte
		first, later uint32
	}{{v2, 0, zDictID}, {v3, zBuiltinID, zBuiltinFirstID}} {
		s, err := OpenSeekable(bytes.NewReader(c.enc), int64(len(c.enc)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Frames() < 3 {
			t.Fatalf("%d frames", s.Frames())
		}
		for i, f := range s.frames {
			var h zstd.Header
			if err := h.Decode(c.enc[f.coff : f.coff+f.clen]); err != nil {
				t.Fatal(err)
			}
			if i == 0 && h.DictionaryID != c.first || i > 0 && h.DictionaryID != c.later {
				t.Fatalf("version %d: frame %d names dictionary %d", s.version, i, h.DictionaryID)
			}
		}
		rng := rand.New(rand.NewPCG(13, 14))
		for _, i := range rng.Perm(len(ends))[:200] {
			from := int64(0)
			if i > 0 {
				from = ends[i-1]
			}
			fresh, err := OpenSeekable(bytes.NewReader(c.enc), int64(len(c.enc)), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, ends[i]-from)
			if _, err := fresh.ReadAt(got, from); err != nil || !bytes.Equal(got, data[from:ends[i]]) {
				t.Fatalf("version %d: record %d from a fresh reader: %v", s.version, i, err)
			}
		}
	}
}

// TestBuiltinDictionaryIsFixed: version 3's built-in dictionary is part of
// the format. Every version-3 blob ever written needs these exact bytes to
// decode, so a change must be a new dictionary under a new version, never
// an edit of this one.
func TestBuiltinDictionaryIsFixed(t *testing.T) {
	const want = "e8b5d7d7c0a89525c3362e336f710e98528bfb346a9efbb710953796441bfaf9"
	if got := fmt.Sprintf("%x", sha256.Sum256(zBuiltin)); got != want {
		t.Fatalf("zdict1.txt has sha256 %s, want %s: blobs written with it no longer decode", got, want)
	}
}

// olderVersionReads writes records in an older seekable version, as
// older binaries did, and checks that they read back whole and from their
// last frame alone; it returns the records, their ends and the blob.
func olderVersionReads(t *testing.T, version int, seed uint64) ([]byte, []int64, []byte) {
	t.Helper()
	data, ends := recordsLike(seed, 3000)
	enc := encodeSeekable(data, ends, ZFrameTarget, version)
	if magic := map[int]string{1: zMagicV1, 2: zMagicV2}[version]; string(enc[:len(magic)]) != magic {
		t.Fatalf("not version %d", version)
	}
	if back, err := DecodeSeekable(enc); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("version %d: %v", version, err)
	}
	s, err := OpenSeekable(bytes.NewReader(enc), int64(len(enc)), nil)
	if err != nil || s.Frames() < 2 {
		t.Fatalf("%v, %d frames", err, s.Frames())
	}
	last := s.frames[len(s.frames)-1]
	got := make([]byte, last.ulen)
	if _, err := s.ReadAt(got, last.uoff); err != nil && err != io.EOF || !bytes.Equal(got, data[last.uoff:]) {
		t.Fatalf("version %d: the last frame alone: %v", version, err)
	}
	return data, ends, enc
}

// TestSeekableVersion2StillReads: blobs written before version 3 (frame 0
// alone, later frames against it) read back, whole and by frame; a
// version-2 blob relabelled as version 3, or the reverse, is damage, not
// misread.
func TestSeekableVersion2StillReads(t *testing.T) {
	data, ends, v2 := olderVersionReads(t, 2, 23)
	relabelled := bytes.Clone(v2)
	copy(relabelled, zMagic)
	if _, err := DecodeSeekable(relabelled); !errors.Is(err, ErrBadSeekable) {
		t.Fatalf("version 2 read as version 3: %v", err)
	}
	v3 := EncodeSeekable(data, ends)
	copy(v3, zMagicV2)
	if _, err := DecodeSeekable(v3); !errors.Is(err, ErrBadSeekable) {
		t.Fatalf("version 3 read as version 2: %v", err)
	}
}

// TestSeekableVersion1StillReads: blobs written before version 2 (every
// frame independent) read back, whole and by record; a version-1 frame
// that names a dictionary is damage.
func TestSeekableVersion1StillReads(t *testing.T) {
	data, ends, _ := olderVersionReads(t, 1, 17)
	// A version-2 or -3 blob relabelled as version 1: its frames name a
	// dictionary a version-1 reader has none of.
	for _, version := range []int{2, 3} {
		enc := encodeSeekable(data, ends, ZFrameTarget, version)
		copy(enc, zMagicV1)
		if _, err := DecodeSeekable(enc); !errors.Is(err, ErrBadSeekable) {
			t.Fatalf("version %d read as version 1: %v", version, err)
		}
	}
}

// BenchmarkSeekableRecord reads one record from the middle of a
// multi-frame blob with a fresh reader (what a read by locator costs cold:
// in versions 2 and 3 frame 0 is decoded too), in every version.
func BenchmarkSeekableRecord(b *testing.B) {
	data, ends := recordsLike(19, 4000)
	for _, version := range []int{1, 2, 3} {
		enc := encodeSeekable(data, ends, ZFrameTarget, version)
		b.Run(fmt.Sprintf("v%d", version), func(b *testing.B) {
			i := len(ends) * 2 / 3
			got := make([]byte, ends[i]-ends[i-1])
			b.SetBytes(int64(len(got)))
			for b.Loop() {
				s, err := OpenSeekable(bytes.NewReader(enc), int64(len(enc)), nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.ReadAt(got, ends[i-1]); err != nil {
					b.Fatal(err)
				}
			}
			if !bytes.Equal(got, data[ends[i-1]:ends[i]]) {
				b.Fatal("read other bytes")
			}
			b.ReportMetric(float64(len(enc)), "stored-bytes")
		})
	}
}

// TestCRCFilter: version 3's filter zeroes the CRC of every record framed
// as a log frames one after a segment's magic, keeps a wrong CRC wrong
// (the XOR of the two), and is its own inverse on any bytes, so what it
// stores decodes to the bytes given.
func TestCRCFilter(t *testing.T) {
	seg := []byte("FRLOG\x00\x01\n")
	var crcAt []int
	for i := range 50 {
		payload := fmt.Appendf(nil, `{"seq":%d,"ts":%d}`, i, 1796274000000+i*37)
		seg = binary.LittleEndian.AppendUint32(seg, uint32(len(payload)))
		crcAt = append(crcAt, len(seg))
		seg = binary.LittleEndian.AppendUint32(seg, crc32.Checksum(payload, zCastagnoli))
		seg = append(seg, payload...)
	}
	seg[crcAt[7]] ^= 0x10 // a damaged record
	f := bytes.Clone(seg)
	crcFilter(f)
	for i, at := range crcAt {
		got := binary.LittleEndian.Uint32(f[at:])
		if i == 7 && got != 0x10 || i != 7 && got != 0 {
			t.Fatalf("record %d: filtered CRC %#x", i, got)
		}
	}
	if crcFilter(f); !bytes.Equal(f, seg) {
		t.Fatal("the filter twice changed the bytes")
	}
	if back, err := DecodeSeekable(EncodeSeekable(seg, nil)); err != nil || !bytes.Equal(back, seg) {
		t.Fatalf("round trip: %v", err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 600 {
		b := make([]byte, rng.IntN(300))
		for j := range b {
			switch i % 3 {
			case 0:
				b[j] = byte(rng.IntN(4)) // small lengths: many false records
			case 1:
				b[j] = byte(0x20 + rng.IntN(95)) // text
			default:
				b[j] = byte(rng.IntN(256))
				if rng.IntN(8) == 0 {
					b[j] = 0
				}
			}
		}
		f := bytes.Clone(b)
		crcFilter(f)
		if ref := crcFilterWalk(bytes.Clone(b)); !bytes.Equal(f, ref) {
			t.Fatalf("the filter walks other records than the format's walk on %x", b)
		}
		if crcFilter(f); !bytes.Equal(f, b) {
			t.Fatalf("not its own inverse on %x", b)
		}
	}
	// Text between records, as a manifest or a segment of JSON has.
	mixed := append([]byte(`{"text":"no record here"}`), seg...)
	mixed = append(mixed, `tail text`...)
	fm := bytes.Clone(mixed)
	if crcFilter(fm); !bytes.Equal(fm, crcFilterWalk(bytes.Clone(mixed))) {
		t.Fatal("the filter and the format's walk differ on text around records")
	}
}

// crcFilterWalk is the filter as the format defines it, one byte at a
// time where no record fits: crcFilter must change exactly the same bytes
// (blobs written by either read back through the other).
func crcFilterWalk(b []byte) []byte {
	for p := 0; p+8 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[p:]))
		if n < 1 || n > len(b)-p-8 {
			p++
			continue
		}
		c := crc32.Checksum(b[p+8:p+8+n], zCastagnoli)
		binary.LittleEndian.PutUint32(b[p+4:], binary.LittleEndian.Uint32(b[p+4:])^c)
		p += 8 + n
	}
	return b
}

// FuzzCRCFilter: on any bytes, crcFilter changes what the format's walk
// does.
func FuzzCRCFilter(f *testing.F) {
	f.Add([]byte("FRLOG\x00\x01\n\x05\x00\x00\x00abcdhello"))
	f.Add([]byte("\x00\x00\x00\x00\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := bytes.Clone(b)
		crcFilter(got)
		if want := crcFilterWalk(bytes.Clone(b)); !bytes.Equal(got, want) {
			t.Fatalf("filter %x, the format's walk %x", got, want)
		}
	})
}

// BenchmarkSealAfterCollection encodes a 1 MB segment of log records
// (framed as a log frames them) after two garbage collections, as a seal
// that comes seconds after the last one does: the encoders of later frames
// are kept across collections (kept), so it costs what a seal
// right after another does (16 ms each before, 6 ms after; 6 ms warm).
func BenchmarkSealAfterCollection(b *testing.B) {
	text, ends := recordsLike(19, 2000)
	data := []byte("FRLOG\x00\x01\n")
	var cuts []int64
	var start int64
	for _, e := range ends {
		p := text[start:e]
		start = e
		data = binary.LittleEndian.AppendUint32(data, uint32(len(p)))
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(p, zCastagnoli))
		data = append(data, p...)
		cuts = append(cuts, int64(len(data)))
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		runtime.GC()
		b.StartTimer()
		EncodeSeekable(data, cuts)
	}
}

// TestKept: a put keeps up to max values, a get takes a kept one before
// making one, and drop (after keptIdle unused) lets them go.
func TestKept(t *testing.T) {
	made := 0
	c := &kept[*zstd.Encoder]{max: 2, new: func() *zstd.Encoder { made++; return newEncoder(zstd.WithEncoderLevel(zstd.SpeedFastest)) }}
	a, b, d := c.get(), c.get(), c.get()
	c.put(a)
	c.put(b)
	c.put(d)
	if made != 3 || len(c.free) != 2 {
		t.Fatalf("made %d, kept %d; want 3 and 2", made, len(c.free))
	}
	if e := c.get(); e != b || made != 3 {
		t.Fatalf("get made a new encoder or took another than the last kept")
	}
	c.drop()
	if len(c.free) != 0 {
		t.Fatalf("drop kept %d", len(c.free))
	}
	c.get()
	if made != 4 {
		t.Fatalf("after drop, get made %d encoders in all, want 4", made)
	}
	c.idle.Stop()
}
