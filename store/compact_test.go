package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/layout"
)

// writeCompactFixture records one deterministic recording of n records
// (HAR-like, compressible, as a real log's are) in s and seals it. It
// returns the recording's id and every record's locator.
func writeCompactFixture(t *testing.T, s *Store, id string, n int) []Locator {
	t.Helper()
	meta := RecordingMeta{ID: id, Project: "p", CreatedAt: idClock.UnixNano()}
	if err := s.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := s.OpenLog(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	var locs []Locator
	for seq := 1; seq <= n; seq += 10 {
		var recs []Record
		for i := seq; i < seq+10 && i <= n; i++ {
			recs = append(recs, Record{Seq: uint64(i), TS: int64(i) * 1000, Step: i / 50, Kind: event.KindHAR,
				Data: json.RawMessage(fmt.Sprintf(`{"method":"GET","url":"https://shop.example/api/items/%d","status":200,"headers":{"content-type":"application/json"},"body":"%0*d"}`, i%37, 100+i%700, i))})
		}
		l, err := lg.Append(recs)
		if err != nil {
			t.Fatal(err)
		}
		locs = append(locs, l...)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	meta.Verdict, meta.FinishedAt = "pass", meta.CreatedAt+1
	if _, err := s.Seal(meta); err != nil {
		t.Fatal(err)
	}
	return locs
}

// TestCompressedSegmentsOldStoresAndBundles: a store written by the
// pre-compression code (sealed segments stored as plain blobs) opens and
// reads with today's code; the same recording sealed compressed has the
// same root, reads the same by locator, verifies, and exports a
// byte-identical bundle; importing that bundle stores its segments
// compressed and exports the same bytes again.
func TestCompressedSegmentsOldStoresAndBundles(t *testing.T) {
	const n = 3000
	lo := LogOptions{SegmentBytes: 512 << 10}

	// The old format: what Seal wrote before segments were compressed.
	oldDir := t.TempDir()
	old, err := OpenStore(oldDir, lo)
	if err != nil {
		t.Fatal(err)
	}
	old.plainSegments = true
	id := newID()
	locs := writeCompactFixture(t, old, id, n)
	old.Close()
	oldRoot, _ := old.Root(id)

	newDir := t.TempDir()
	cur, err := OpenStore(newDir, lo)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	locs2 := writeCompactFixture(t, cur, id, n)

	// Reopened with today's code, the old store reads.
	reopened, err := OpenStore(oldDir, lo)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	man, root, err := reopened.Manifest(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Segments) < 2 {
		t.Fatalf("fixture: %d segments", len(man.Segments))
	}
	var plainBytes, zBytes int64
	for _, sr := range man.Segments {
		plain := layout.Of(oldDir).Blobs().Loose(sr.CID)
		fi, err := os.Stat(plain)
		if err != nil {
			t.Fatalf("old store's segment is not a plain blob: %v", err)
		}
		plainBytes += fi.Size()
		zi, err := os.Stat(layout.Of(newDir).Blobs().LooseCompressed(sr.CID))
		if err != nil {
			t.Fatalf("new store's segment is not compressed: %v", err)
		}
		zBytes += zi.Size()
	}
	// Content addresses do not depend on the compressor.
	curRoot, _ := cur.Root(id)
	if root != oldRoot || curRoot != root {
		t.Fatalf("roots differ: old %s, reopened %s, compressed %s", oldRoot, root, curRoot)
	}
	if zBytes*4 > plainBytes {
		t.Fatalf("segments: %d bytes plain, %d compressed: expected at least 4×", plainBytes, zBytes)
	}

	// Reads by locator and scans give the same records from both.
	ro, rc := reopened.NewReader(), cur.NewReader()
	defer ro.Close()
	defer rc.Close()
	for i := 0; i < n; i += 7 {
		if locs[i] != locs2[i] {
			t.Fatalf("record %d: locators differ %+v %+v", i, locs[i], locs2[i])
		}
		a, err := ro.Read(id, locs[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := rc.Read(id, locs[i])
		if err != nil {
			t.Fatal(err)
		}
		if a.Seq != uint64(i+1) || a.Seq != b.Seq || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("record %d reads %d/%d", i, a.Seq, b.Seq)
		}
	}
	for _, s := range []*Store{reopened, cur} {
		var seen uint64
		if _, err := s.Scan(id, Pos{}, 0, func(r Record, _ Locator) error {
			if r.Seq != seen+1 {
				return fmt.Errorf("seq %d after %d", r.Seq, seen)
			}
			seen = r.Seq
			return nil
		}); err != nil || seen != n {
			t.Fatalf("scan: %v, %d records", err, seen)
		}
		mustVerify(t, s)
	}

	// Bundles carry the uncompressed bytes: identical from both stores,
	// and again after an import into a compressing store.
	ob, cb := exportBundle(t, reopened, id), exportBundle(t, cur, id)
	if !bytes.Equal(ob, cb) {
		t.Fatal("the compressed store's bundle differs from the old store's")
	}
	mustBundleOK(t, cb)
	imp, err := OpenStore(t.TempDir(), lo)
	if err != nil {
		t.Fatal(err)
	}
	defer imp.Close()
	if _, _, err := imp.ImportBundle(bytes.NewReader(ob)); err != nil {
		t.Fatal(err)
	}
	for _, sr := range man.Segments {
		if _, err := os.Stat(imp.Layout().Blobs().LooseCompressed(sr.CID)); err != nil {
			t.Fatalf("imported segment not compressed: %v", err)
		}
	}
	mustVerify(t, imp)
	if again := exportBundle(t, imp, id); !bytes.Equal(again, ob) {
		t.Fatal("export after import differs")
	}
}

// jpegFrames returns n distinct screencast-like frames: flat pages with a
// few boxes, JPEG-encoded as redaction re-encodes a masked frame (Go's
// encoder), which is what zstd shrinks most.
func jpegFrames(t testing.TB, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 640, 400))
		draw.Draw(img, img.Bounds(), image.NewUniform(color.RGBA{250, 250, 250, 255}), image.Point{}, draw.Src)
		for k := range 4 {
			r := image.Rect(40+k*150, 30+i*7, 160+k*150, 90+i*7+k*20)
			draw.Draw(img, r, image.NewUniform(color.RGBA{uint8(30 * k), uint8(100 + i), 200, 255}), image.Point{}, draw.Src)
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 70}); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}

// TestCompressedFramesEveryPath: frames packed compressed (blobs.CompressPacked,
// most of them as JPEG deltas against the frame before, in well under what
// they take alone)
// read back as their bytes under their CIDs in every path that reads
// blobs: Open and Stat, verify, a bundle's export (which carries the
// frames' own bytes) and its import (packed compressed again, the same
// bundle exported again), and a sweep that rewrites the pack around the
// frames a removed recording alone held.
func TestCompressedFramesEveryPath(t *testing.T) {
	frames := jpegFrames(t, 12)
	var raw, alone int64
	for _, f := range frames {
		stored, z := blobs.CompressPacked(f)
		if !z {
			t.Fatal("fixture: a frame does not compress")
		}
		raw += int64(len(f))
		alone += int64(len(stored))
	}
	dir := t.TempDir()
	s := openTestStore(t, dir)
	defer s.Close()
	id := record(t, s, frames, true)
	gone := record(t, s, jpegFrames(t, 15)[12:], true) // frames of its own
	stored := func(s *Store) int64 {
		n, err := s.Blobs.StoredBytes()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := stored(s); n*10 > (raw+raw/4)*7 {
		t.Fatalf("the store holds %d bytes for frames of %d (and 3 more): not kept compressed", n, raw)
	}
	// Frames of one page a little apart: most are kept as deltas against
	// the frame before (blobs' packs), in well under what they take each
	// compressed alone.
	for _, f := range jpegFrames(t, 15)[12:] {
		stored, _ := blobs.CompressPacked(f)
		alone += int64(len(stored))
	}
	// What the packs hold to their logical end: all stored bytes but
	// the loose blobs' files (segments, the manifest).
	packed := stored(s)
	bt := layout.Of(dir).Blobs()
	err := filepath.WalkDir(bt.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && p == bt.Packs() {
			if err == nil {
				err = filepath.SkipDir
			}
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			packed -= fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	jpegDeltas := 0
	for _, f := range frames {
		c, _ := ParseCID(SumString(f))
		if fsBlobs(t, s).IsJPEGDelta(c) {
			jpegDeltas++
		}
	}
	// Chains of 4 deltas after a whole frame: 9 of the 12 can be; the
	// frames change in a few MCUs, so they are JPEG deltas.
	if packed*100 > alone*75 || jpegDeltas < 8 {
		t.Fatalf("the packs hold %d bytes for 15 frames that take %d compressed alone, %d of 12 frames as JPEG deltas", packed, alone, jpegDeltas)
	}
	readAll := func(what string, s *Store) {
		t.Helper()
		for i, f := range frames {
			c, _ := ParseCID(SumString(f))
			r, err := s.Blobs.Open(c)
			if err != nil {
				t.Fatalf("%s: frame %d: %v", what, i, err)
			}
			got, _ := io.ReadAll(r)
			r.Close()
			if !bytes.Equal(got, f) {
				t.Fatalf("%s: frame %d reads back other bytes", what, i)
			}
			if n, err := s.Blobs.Stat(c); err != nil || n != int64(len(f)) {
				t.Fatalf("%s: Stat of frame %d: %d, %v", what, i, n, err)
			}
		}
		mustVerify(t, s)
	}
	readAll("the store", s)
	b := exportBundle(t, s, id)
	mustBundleOK(t, b)
	for i, f := range frames {
		if !bytes.Contains(b, f) {
			t.Fatalf("the bundle does not carry frame %d's own bytes", i)
		}
	}
	imp := openTestStore(t, t.TempDir())
	defer imp.Close()
	if _, _, err := imp.ImportBundle(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if n := stored(imp); n*10 > raw*7 {
		t.Fatalf("the imported store holds %d bytes for frames of %d: not kept compressed", n, raw)
	}
	readAll("the imported store", imp)
	if r1, r2 := mustRoot(t, s, id), mustRoot(t, imp, id); r1 != r2 {
		t.Fatalf("roots differ: %s, imported %s", r1, r2)
	}
	if again := exportBundle(t, imp, id); !bytes.Equal(again, b) {
		t.Fatal("the bundle exported after the import differs")
	}
	// A sweep after removing the other recording rewrites the full pack
	// around the dead frames; the live ones read back.
	if _, err := s.RemoveRecording(gone); err != nil {
		t.Fatal(err)
	}
	fsBlobs(t, s).SetPackBytes(1) // the pack being filled is full: a sweep rewrites it
	sw := s.Blobs.BeginSweep()
	rep, err := sw.Collect(mark(t, s).has, nil)
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Removed < 3 {
		t.Fatalf("the sweep removed %d blobs, want the removed recording's 3 frames and more", rep.Removed)
	}
	readAll("after the sweep", s)
}

func mustRoot(t testing.TB, s *Store, id string) string {
	t.Helper()
	r, err := s.Root(id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
