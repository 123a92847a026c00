package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
)

// outlineFixture is one run's events: a HAR entry with a large response
// body and one with a large request body, a DOM FullSnapshot, a large
// text snapshot, and events that stay whole (a small HAR entry, a large
// incremental DOM event, a large console message). run varies what runs
// vary: timestamps, timings, ids outside the outlined parts.
func outlineFixture(run int) []Record {
	body := strings.Repeat(`{"sku":"A-1","name":"Mug \"blue\"","price":12.5},`, 200)
	tree := `{"type":0,"childNodes":[{"type":2,"tagName":"html","attributes":{},"childNodes":[` +
		strings.Repeat(`{"type":3,"textContent":"row \u00e9 ","id":7},`, 300) + `{"type":3,"textContent":"end","id":8}],"id":2}],"id":1}`
	mk := func(seq int, kind event.Kind, data string) Record {
		return Record{Seq: uint64(seq), TS: int64(run*1000 + seq), Step: seq / 3, Kind: kind, Data: json.RawMessage(data)}
	}
	return []Record{
		mk(1, event.KindHAR, fmt.Sprintf(`{"startedDateTime":"2025-03-01T12:00:0%dZ","time":%d,"request":{"method":"GET","url":"https://shop.example/api/items"},"response":{"status":200,"content":{"size":1,"mimeType":"application/json","text":%q}}}`, run, 10+run, body)),
		mk(2, event.KindHAR, fmt.Sprintf(`{"time":%d,"request":{"method":"POST","url":"https://shop.example/api/cart","postData":{"mimeType":"text/plain","text":%q}},"response":{"status":204,"content":{"size":0}}}`, run, strings.Repeat("x", OutlineMin))),
		mk(3, event.KindDOM, fmt.Sprintf(`{"type":2,"data":{"node":%s,"initialOffset":{"left":0,"top":%d}},"timestamp":%d}`, tree, run, 1700000000000+run)),
		// Large enough to be a loose seekable blob (outlinePackedMax);
		// the other parts go to packs.
		mk(4, event.KindSnapshot, fmt.Sprintf(`{"view":"content","nonce":"n%d","text":%q}`, run, strings.Repeat("Checkout — gift card ", 4000))),
		mk(5, event.KindHAR, fmt.Sprintf(`{"time":%d,"request":{"method":"GET","url":"/small"},"response":{"status":200,"content":{"text":"ok"}}}`, run)),
		mk(6, event.KindDOM, fmt.Sprintf(`{"type":3,"data":{"source":0,"adds":[{"node":%s}]},"timestamp":%d}`, tree, 1700000000001+run)),
		mk(7, event.KindConsole, fmt.Sprintf(`{"level":"log","text":%q}`, strings.Repeat("log ", 2000))),
	}
}

// outlinedSeqs are the fixture's events whose large part is outlined.
var outlinedSeqs = map[uint64]bool{1: true, 2: true, 3: true, 4: true}

// writeRun stores one run of outlineFixture as ingest does (the large
// parts outlined under a hold, then appended) and seals it if asked.
func writeRun(t *testing.T, s *Store, run int, seal bool) (string, []Record, []Locator) {
	t.Helper()
	id := newID()
	meta := RecordingMeta{ID: id, Project: "p", CreatedAt: idClock.UnixNano()}
	if err := s.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := s.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	recs := outlineFixture(run)
	want := make([]Record, len(recs))
	for i, r := range recs {
		want[i] = r
		want[i].Data = append(json.RawMessage(nil), r.Data...)
	}
	release := s.Blobs.Hold()
	if err := s.Outline(recs); err != nil {
		t.Fatal(err)
	}
	locs, err := lg.Append(recs)
	release()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if (r.Outlined != nil) != outlinedSeqs[r.Seq] || !bytes.Equal(r.Data, want[i].Data) {
			t.Fatalf("run %d seq %d: outlined %+v (want %v); data whole: %v", run, r.Seq, r.Outlined, outlinedSeqs[r.Seq], bytes.Equal(r.Data, want[i].Data))
		}
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	if seal {
		meta.Verdict, meta.FinishedAt = "pass", meta.CreatedAt+1
		if _, err := s.Seal(meta); err != nil {
			t.Fatal(err)
		}
	}
	return id, want, locs
}

// readsWhole: Scan and Reader give every record of id with the data it
// was appended with, byte for byte.
func readsWhole(t *testing.T, s *Store, id string, want []Record, locs []Locator) {
	t.Helper()
	i := 0
	if _, err := s.Scan(id, Pos{}, 0, func(r Record, _ Locator) error {
		if !bytes.Equal(r.Data, want[i].Data) {
			return fmt.Errorf("scan: seq %d reads other data", r.Seq)
		}
		i++
		return nil
	}); err != nil || i != len(want) {
		t.Fatalf("scan of %s: %v after %d records", id, err, i)
	}
	rd := s.NewReader()
	defer rd.Close()
	for i, loc := range locs {
		r, err := rd.Read(id, loc)
		if err != nil || !bytes.Equal(r.Data, want[i].Data) || r.Envelope().Seq != want[i].Seq {
			t.Fatalf("read seq %d of %s: %v, data equal %v", want[i].Seq, id, err, err == nil && bytes.Equal(r.Data, want[i].Data))
		}
	}
}

// TestOutlinedData: the large parts of HAR bodies, FullSnapshots and
// snapshot texts are blobs of exactly their bytes (the CID names the
// uncompressed bytes), stored once across runs; the log keeps the rest;
// every reader gets the data whole while the recording is open, once it
// is sealed, and after a bundle's export and import (byte-identical
// bundles again); verify is clean; a recording's references hold its
// outlined blobs, so a sweep keeps them while one run references them
// and collects them once none does.
func TestOutlinedData(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	open, openWant, openLocs := writeRun(t, s, 0, false)
	readsWhole(t, s, open, openWant, openLocs)

	var ids []string
	var logBytes []int64
	for run := 1; run <= 3; run++ {
		id, want, locs := writeRun(t, s, run, false)
		logBytes = append(logBytes, treeBytes(t, s.logDir(id)))
		meta, _ := s.Meta(id)
		meta.Verdict, meta.FinishedAt = "pass", meta.CreatedAt+1
		if _, err := s.Seal(meta); err != nil {
			t.Fatal(err)
		}
		readsWhole(t, s, id, want, locs)
		ids = append(ids, id)
	}
	// Each outlined part is one blob whatever the run: 4 parts, the same
	// CIDs in every manifest, each holding exactly the part's bytes.
	var shared []string
	for i, id := range ids {
		m, _, err := s.Manifest(id)
		if err != nil {
			t.Fatal(err)
		}
		var outlined []string
		if _, err := s.Scan(id, Pos{}, 0, func(r Record, _ Locator) error {
			if r.Outlined != nil {
				outlined = append(outlined, r.Outlined.CID)
				part := r.Data[r.Outlined.At : r.Outlined.At+r.Outlined.Size]
				if got := readBlob(t, s.Blobs, mustCID(t, r.Outlined.CID)); !bytes.Equal(got, part) || SumString(part) != r.Outlined.CID {
					return fmt.Errorf("seq %d: the blob is not the part's bytes", r.Seq)
				}
				if !json.Valid(part) {
					return fmt.Errorf("seq %d: the outlined part is not one JSON value", r.Seq)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(outlined) != 4 {
			t.Fatalf("run %d: %d outlined parts, want 4", i+1, len(outlined))
		}
		for _, c := range outlined {
			found := false
			for _, b := range m.Blobs {
				found = found || b == c
			}
			if !found {
				t.Fatalf("run %d: the manifest does not list outlined blob %s", i+1, c)
			}
		}
		if i == 0 {
			shared = outlined
		} else if strings.Join(outlined, ",") != strings.Join(shared, ",") {
			t.Fatalf("run %d outlined other blobs: %v, want %v", i+1, outlined, shared)
		}
	}
	var whole int
	for _, r := range outlineFixture(0) {
		whole += len(r.Data)
	}
	t.Logf("one run: %d bytes of event data; its open log %d bytes (the outlined parts are blobs, stored once for every run)", whole, logBytes[0])
	mustVerify(t, s)

	// Bundles carry the outlined blobs: an import into an empty store
	// reads the same, verifies, and exports the same bytes.
	b := exportBundle(t, s, ids[0])
	mustBundleOK(t, b)
	imp := openTestStore(t, t.TempDir())
	defer imp.Close()
	if _, _, err := imp.ImportBundle(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	want := outlineFixture(1)
	i := 0
	if _, err := imp.Scan(ids[0], Pos{}, 0, func(r Record, _ Locator) error {
		if !bytes.Equal(r.Data, want[i].Data) {
			return fmt.Errorf("imported seq %d reads other data", r.Seq)
		}
		i++
		return nil
	}); err != nil || i != len(want) {
		t.Fatalf("imported scan: %v after %d", err, i)
	}
	mustVerify(t, imp)
	// Kept compressed, where recorded and imported alike: the large part
	// as a loose seekable blob, the others in a pack.
	for _, st := range []*Store{s, imp} {
		for _, c := range shared {
			cc, _ := ParseCID(c)
			size, err := st.Blobs.Stat(cc)
			if err != nil {
				t.Fatal(err)
			}
			_, looseErr := os.Stat(st.Layout().Blobs().LooseCompressed(c))
			_, packed := fsBlobs(t, st).PackOf(cc)
			if size >= outlinePackedMax && looseErr != nil || size < outlinePackedMax && (!packed || !fsBlobs(t, st).PackedCompressed(cc)) {
				t.Fatalf("outlined blob %s (%d bytes) is not kept compressed where it belongs: loose %v, packed %v", c, size, looseErr, packed)
			}
		}
	}
	if again := exportBundle(t, imp, ids[0]); !bytes.Equal(again, b) {
		t.Fatal("export after import differs")
	}

	// Reachability: while any run references a part, it is live; once
	// none does, a sweep collects it.
	for _, id := range append([]string{open}, ids[:2]...) {
		if _, err := s.RemoveRecording(id); err != nil {
			t.Fatal(err)
		}
	}
	live := mark(t, s)
	for _, c := range shared {
		if !live[c] {
			t.Fatalf("outlined blob %s of a kept recording is not live", c)
		}
	}
	if _, err := s.RemoveRecording(ids[2]); err != nil {
		t.Fatal(err)
	}
	sw := s.Blobs.BeginSweep()
	live = mark(t, s)
	if _, err := sw.Collect(live.has, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	for _, c := range shared {
		if _, err := s.Blobs.Stat(mustCID(t, c)); err == nil {
			t.Fatalf("outlined blob %s survived a sweep with no recording referencing it", c)
		}
	}
	if _, err := os.Stat(s.logDir(open)); err == nil {
		t.Fatal("removed recording's log still there")
	}
}

// TestResealOutlined: a reseal (retroactive redaction) of records read
// whole writes their outlined parts by reference while they are
// unchanged, and whole once redaction changed them; either way the new
// root reads what was resealed.
func TestResealOutlined(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	id, _, _ := writeRun(t, s, 1, true)
	var recs []Record
	if _, err := s.Scan(id, Pos{}, 0, func(r Record, _ Locator) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	recs[0].Data = bytes.ReplaceAll(recs[0].Data, []byte("Mug"), []byte("[redacted]"))
	want := make([][]byte, len(recs))
	for i := range recs {
		want[i] = append([]byte(nil), recs[i].Data...)
	}
	meta, _ := s.Meta(id)
	if _, _, err := s.Reseal(meta, recs); err != nil {
		t.Fatal(err)
	}
	i := 0
	if _, err := s.Scan(id, Pos{}, 0, func(r Record, _ Locator) error {
		if !bytes.Equal(r.Data, want[i]) {
			return fmt.Errorf("seq %d reads other data after the reseal", r.Seq)
		}
		if (r.Outlined != nil) != (outlinedSeqs[r.Seq] && r.Seq != 1) {
			return fmt.Errorf("seq %d: outlined %+v after the reseal", r.Seq, r.Outlined)
		}
		i++
		return nil
	}); err != nil || i != len(want) {
		t.Fatalf("scan after reseal: %v after %d", err, i)
	}
	mustVerify(t, s)
}
