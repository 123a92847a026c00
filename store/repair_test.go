package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/bundle"
	"github.com/flightrec/flightrec/store/log"
)

func TestGapsCover(t *testing.T) {
	gaps := []Gap{{From: 5, To: 6}, {From: 7, To: 7}, {From: 20}}
	for _, c := range []struct {
		prev, seq uint64
		ok        bool
	}{{0, 1, true}, {3, 4, true}, {4, 7, true}, {4, 8, true}, {4, 9, false}, {8, 10, false}, {19, 40, true}, {2, 4, false}, {0, 2, false}} {
		if got := bundle.SeqsFollow(gaps, c.prev, c.seq); got != c.ok {
			t.Errorf("seq %d after %d: %v, want %v", c.seq, c.prev, got, c.ok)
		}
	}
}

// TestRepairSealsWithTheGap damages one record in the middle of an open
// log: repair keeps its bytes in quarantine, seals the recording with the
// lost seq as a gap, and Verify and VerifyBundle accept it; a manifest that
// hides the gap is refused by both.
func TestRepairSealsWithTheGap(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir, LogOptions{SegmentBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	meta, lg := openRecording(t, st, 5)
	locs := mustAppend(t, lg, consoleRecs(50))
	lg.Close()
	v := locs[19] // seq 20
	seg := filepath.Join(st.logDir(meta.ID), fmt.Sprintf("%08d.seg", v.Segment))
	b, _ := os.ReadFile(seg)
	frame := append([]byte(nil), b[v.Offset:v.Offset+int64(v.Length)]...)
	frame[len(frame)-3] ^= 0x02
	copy(b[v.Offset:], frame)
	os.WriteFile(seg, b, 0o644)

	if _, err := st.OpenLog(meta.ID); !errors.Is(err, ErrDamaged) {
		t.Fatalf("OpenLog of the damaged log: %v", err)
	}
	rep, _ := st.Verify(context.Background(), nil)
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "seqs 20–20 lost") {
		t.Fatalf("verify before repair: %+v", rep.Problems)
	}
	root, gaps, err := st.Repair(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps) != 1 || gaps[0].From != 20 || gaps[0].To != 20 || gaps[0].Bytes != int64(v.Length) {
		t.Fatalf("gaps %+v", gaps)
	}
	if q, _ := os.ReadFile(filepath.Join(st.recDir(meta.ID), gaps[0].Quarantine)); !bytes.Equal(q, frame) {
		t.Fatal("the quarantine does not hold the damaged frame")
	}
	m, sealed, err := st.Manifest(meta.ID)
	if err != nil || sealed != root || m.Events != 49 || len(m.Gaps) != 1 || m.Recording.Verdict != "" {
		t.Fatalf("manifest %+v: %v", m, err)
	}
	if rep, err := st.Verify(context.Background(), nil); err != nil || !rep.OK() {
		t.Fatalf("verify after repair: %v %+v", err, rep.Problems)
	}
	checkBundle := func(wantOK bool) {
		t.Helper()
		var buf bytes.Buffer
		if _, err := st.WriteBundle(&buf, meta.ID); err != nil {
			t.Fatal(err)
		}
		br, err := VerifyBundle(&buf)
		if err != nil || br.OK() != wantOK || len(br.Gaps) != map[bool]int{true: 1, false: 0}[wantOK] {
			t.Fatalf("VerifyBundle (want ok %v): %v %+v", wantOK, err, br)
		}
	}
	checkBundle(true)
	if _, _, err := st.Repair(meta.ID); !errors.Is(err, ErrFinished) {
		t.Fatalf("a second repair: %v", err)
	}

	// A manifest that hides the gap is refused.
	m.Gaps = nil
	mb, _ := json.MarshalIndent(m, "", " ")
	c, _, err := st.Blobs.Put(mb)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(st.rootPath(meta.ID), []byte(c.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, _ = st.Verify(context.Background(), nil)
	if rep.OK() || !strings.Contains(rep.Problems[0].What, "no declared gap") {
		t.Fatalf("verify of a hidden gap: %+v", rep.Problems)
	}
	checkBundle(false)
}

// TestRepairInterrupted: a repair a crash stopped after it declared the
// gaps (before it rewrote the log, or after) keeps appends refused, and the
// next repair finishes it with the same gaps, once each.
func TestRepairInterrupted(t *testing.T) {
	for _, stage := range []string{"declared", "rewritten"} {
		dir := t.TempDir()
		st, err := OpenStore(dir, LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		meta, lg := openRecording(t, st, 6)
		locs := mustAppend(t, lg, consoleRecs(30))
		lg.Close()
		seg := filepath.Join(st.logDir(meta.ID), "00000001.seg")
		b, _ := os.ReadFile(seg)
		b[locs[9].Offset+log.FrameHeaderLen+2] ^= 0x01
		os.WriteFile(seg, b, 0o644)
		// Run a whole repair on a copy to learn what it declares, then
		// put the recording back as the crash left it.
		saved := filepath.Join(t.TempDir(), "rec")
		copyTree(t, st.recDir(meta.ID), saved)
		if _, _, err := st.Repair(meta.ID); err != nil {
			t.Fatal(err)
		}
		gapsJSON, _ := os.ReadFile(st.Layout().Gaps(meta.ID))
		os.RemoveAll(st.recDir(meta.ID))
		copyTree(t, saved, st.recDir(meta.ID))
		os.MkdirAll(st.Layout().Quarantine(meta.ID), 0o755)
		os.WriteFile(st.Layout().Gaps(meta.ID), gapsJSON, 0o444)
		if stage == "rewritten" { // the segment already without the damaged frame
			clean := append(append([]byte(nil), b[:locs[9].Offset]...), b[locs[10].Offset:]...)
			os.WriteFile(seg, clean, 0o644)
		}
		if _, err := st.OpenLog(meta.ID); !errors.Is(err, ErrDamaged) {
			t.Fatalf("%s: OpenLog during an interrupted repair: %v", stage, err)
		}
		_, gaps, err := st.Repair(meta.ID)
		if err != nil || len(gaps) != 1 || gaps[0].From != 10 || gaps[0].To != 10 {
			t.Fatalf("%s: repair again: %+v %v", stage, gaps, err)
		}
		if rep, err := st.Verify(context.Background(), nil); err != nil || !rep.OK() {
			t.Fatalf("%s: verify: %v %+v", stage, err, rep.Problems)
		}
		st.Close()
	}
}

// consoleRecs are records 1..n that carry no blob.
func consoleRecs(n int) []Record {
	var recs []Record
	for seq := uint64(1); seq <= uint64(n); seq++ {
		recs = append(recs, Record{Seq: seq, TS: int64(seq), Step: int(seq / 10), Kind: event.KindConsole,
			Data: json.RawMessage(fmt.Sprintf(`{"level":"log","text":"line %d %s"}`, seq, strings.Repeat("x", 40)))})
	}
	return recs
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mustAppend appends recs to l, failing the test if it cannot.
func mustAppend(t testing.TB, l *Log, recs []Record) []Locator {
	t.Helper()
	locs, err := l.Append(recs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return locs
}
