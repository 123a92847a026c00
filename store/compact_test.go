package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/flightrec/flightrec/event"
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
