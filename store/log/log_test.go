package log

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/bench/disk"
	"github.com/flightrec/flightrec/store/blobs"
)

// logRecs returns n records with seqs from, from+1, … whose Data is about
// pad bytes.
func logRecs(from uint64, n, pad int) []Record {
	kinds := []event.Kind{event.KindReceipt, event.KindConsole, event.KindHAR, event.KindFrame}
	out := make([]Record, n)
	for i := range out {
		seq := from + uint64(i)
		r := Record{
			Seq: seq, TS: 1764483600000000000 + int64(seq)*1e6, Step: int(seq / 10),
			Kind:    kinds[seq%uint64(len(kinds))],
			Summary: event.Summary{Text: fmt.Sprintf("événement %d", seq), Status: int(seq % 600)},
			Data:    json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, seq, strings.Repeat("x", pad))),
		}
		if r.Kind == event.KindFrame {
			r.CID, r.BlobSize = blobs.SumString([]byte(fmt.Sprint(seq))), 50<<10
		}
		out[i] = r
	}
	return out
}

func openTestLog(t testing.TB, dir string, opt LogOptions) *Log {
	t.Helper()
	l, err := OpenLog(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAppend(t testing.TB, l *Log, recs []Record) []Locator {
	t.Helper()
	locs, err := l.Append(recs)
	if err != nil {
		t.Fatal(err)
	}
	return locs
}

type scanned struct {
	rec Record
	loc Locator
}

func scanAll(t testing.TB, dir string) []scanned {
	t.Helper()
	var out []scanned
	if err := ScanLog(dir, func(r Record, loc Locator) error {
		out = append(out, scanned{r, loc})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// scanIntact is scanAll over a damaged log: the intact records.
func scanIntact(t testing.TB, dir string) []scanned {
	t.Helper()
	var out []scanned
	err := ScanLog(dir, func(r Record, loc Locator) error {
		out = append(out, scanned{r, loc})
		return nil
	})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("ScanLog of a damaged log: %v", err)
	}
	return out
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// checkLog checks that the log in dir holds exactly recs at locs, read both
// by scanning and by locator.
func checkLog(t testing.TB, dir string, recs []Record, locs []Locator) {
	t.Helper()
	got := scanAll(t, dir)
	if len(got) != len(recs) {
		t.Fatalf("scanned %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !reflect.DeepEqual(got[i].rec, recs[i]) {
			t.Fatalf("record %d: got %+v\nwant %+v", i, got[i].rec, recs[i])
		}
		if got[i].loc != locs[i] {
			t.Fatalf("record %d: scanned at %+v, appended at %+v", i, got[i].loc, locs[i])
		}
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("%08d.seg", locs[i].Segment)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := ReadRecordAt(f, locs[i])
		f.Close()
		if err != nil {
			t.Fatalf("ReadRecordAt %+v: %v", locs[i], err)
		}
		if !reflect.DeepEqual(r, recs[i]) {
			t.Fatalf("ReadRecordAt %d: got %+v", i, r)
		}
	}
}

func TestLogAppendReopenRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec", "log")
	l := openTestLog(t, dir, LogOptions{})
	if l.LastSeq() != 0 || l.Segments() != 0 || l.Size() != 0 {
		t.Fatalf("empty log: last %d segments %d size %d", l.LastSeq(), l.Segments(), l.Size())
	}
	var recs []Record
	var locs []Locator
	for _, batch := range [][]Record{logRecs(1, 1, 10), logRecs(2, 10, 300), logRecs(12, 3, 0)} {
		recs = append(recs, batch...)
		locs = append(locs, mustAppend(t, l, batch)...)
	}
	if l.LastSeq() != 14 || l.Segments() != 1 {
		t.Fatalf("last %d segments %d", l.LastSeq(), l.Segments())
	}
	// Frames are back to back after the header.
	off := int64(len(segMagic))
	for i, loc := range locs {
		if loc.Segment != 1 || loc.Offset != off {
			t.Fatalf("locator %d: %+v, want segment 1 offset %d", i, loc, off)
		}
		if want := len(recs[i].AppendBinary(nil)) + 8; loc.Length != want {
			t.Fatalf("locator %d: length %d, want %d", i, loc.Length, want)
		}
		off += int64(loc.Length)
	}
	if l.Size() != off || fileSize(t, l.SegmentPath(1)) != off {
		t.Fatalf("Size %d, file %d, want %d", l.Size(), fileSize(t, l.SegmentPath(1)), off)
	}
	checkLog(t, dir, recs, locs) // while open
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(logRecs(15, 1, 0)); !errors.Is(err, ErrLogClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	l2 := openTestLog(t, dir, LogOptions{})
	if l2.LastSeq() != 14 || l2.Segments() != 1 || l2.Size() != off || l2.Recovered() != 0 {
		t.Fatalf("reopened: last %d segments %d size %d cut %d", l2.LastSeq(), l2.Segments(), l2.Size(), l2.Recovered())
	}
	more := logRecs(15, 5, 50)
	recs = append(recs, more...)
	locs = append(locs, mustAppend(t, l2, more)...)
	if locs[14].Offset != off {
		t.Fatalf("append after reopen at %d, want %d", locs[14].Offset, off)
	}
	checkLog(t, dir, recs, locs)
}

func TestLogSeqOrder(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, LogOptions{})
	mustAppend(t, l, logRecs(5, 2, 0))
	size := l.Size()
	for _, bad := range [][]Record{logRecs(6, 1, 0), logRecs(3, 1, 0), {{Seq: 9}, {Seq: 8}}, {{Seq: 9}, {Seq: 9}}} {
		if _, err := l.Append(bad); !errors.Is(err, ErrSeqOrder) {
			t.Fatalf("Append %v: %v, want ErrSeqOrder", bad[0].Seq, err)
		}
	}
	if l.Size() != size || fileSize(t, l.SegmentPath(1)) != size || l.LastSeq() != 6 {
		t.Fatal("a refused append changed the log")
	}
	if locs, err := l.Append(nil); err != nil || locs != nil {
		t.Fatalf("empty append: %v %v", locs, err)
	}
}

func TestLogRecordTooLarge(t *testing.T) {
	l := openTestLog(t, t.TempDir(), LogOptions{})
	big := Record{Seq: 1, Data: make(json.RawMessage, MaxRecordBytes)}
	if _, err := l.Append([]Record{big}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("err %v, want ErrRecordTooLarge", err)
	}
	if l.Size() != 0 || l.Segments() != 0 {
		t.Fatal("a refused append wrote something")
	}
}

func TestLogSegmentRoll(t *testing.T) {
	dir := t.TempDir()
	const segBytes = 2048
	l := openTestLog(t, dir, LogOptions{SegmentBytes: segBytes})
	var recs []Record
	var locs []Locator
	seq := uint64(1)
	add := func(batch []Record) {
		recs = append(recs, batch...)
		locs = append(locs, mustAppend(t, l, batch)...)
		seq += uint64(len(batch))
	}
	add(logRecs(seq, 30, 100)) // one batch that crosses several rolls
	for i := 0; i < 10; i++ {
		add(logRecs(seq, 3, 20))
	}
	big := logRecs(seq, 1, 3*segBytes) // bigger than a segment: its own segment
	add(big)
	add(logRecs(seq, 2, 10))

	n := l.Segments()
	if n < 5 {
		t.Fatalf("%d segments, expected rolling", n)
	}
	var total int64
	for s := 1; s <= n; s++ {
		size := fileSize(t, l.SegmentPath(s))
		total += size
		var frames int
		for _, loc := range locs {
			if loc.Segment == s {
				frames++
			}
		}
		if size > segBytes && frames != 1 {
			t.Fatalf("segment %d is %d bytes with %d frames", s, size, frames)
		}
		if frames == 0 {
			t.Fatalf("segment %d is empty", s)
		}
	}
	if total != l.Size() {
		t.Fatalf("Size %d, files %d", l.Size(), total)
	}
	bigLoc := locs[len(locs)-3]
	if bigLoc.Offset != int64(len(segMagic)) || locs[len(locs)-2].Segment != bigLoc.Segment+1 {
		t.Fatalf("the oversized record is not alone in its segment: %+v then %+v", bigLoc, locs[len(locs)-2])
	}
	for i := 1; i < len(locs); i++ {
		if locs[i].Segment < locs[i-1].Segment {
			t.Fatal("segment ordinals go backwards")
		}
	}
	checkLog(t, dir, recs, locs)
	l.Close()
	l2 := openTestLog(t, dir, LogOptions{SegmentBytes: segBytes})
	if l2.Segments() != n || l2.Size() != total || l2.LastSeq() != seq-1 {
		t.Fatalf("reopened: %d segments %d bytes last %d", l2.Segments(), l2.Size(), l2.LastSeq())
	}
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tornFixture is a closed two-segment log whose last segment ends with the
// frame at last.
type tornFixture struct {
	dir  string
	recs []Record
	locs []Locator
	last Locator
}

func newTornFixture(t *testing.T) tornFixture {
	dir := filepath.Join(t.TempDir(), "orig")
	l := openTestLog(t, dir, LogOptions{SegmentBytes: 300})
	var fx tornFixture
	fx.dir = dir
	fx.recs = logRecs(1, 6, 20)
	for i := range fx.recs {
		// Several appends, the last frame alone in its own batch.
		fx.locs = append(fx.locs, mustAppend(t, l, fx.recs[i:i+1])...)
	}
	l.Close()
	fx.last = fx.locs[len(fx.locs)-1]
	if fx.last.Segment < 2 || fx.locs[len(fx.locs)-2].Segment != fx.last.Segment {
		t.Fatalf("fixture: want ≥ 2 segments and two frames in the last, got %+v", fx.locs)
	}
	return fx
}

// checkRecovered opens a damaged copy of the fixture and checks that
// exactly the last frame was cut and appends continue after it.
func (fx tornFixture) checkRecovered(t *testing.T, dir string, damagedSize int64, what string) {
	t.Helper()
	l, err := OpenLog(dir, LogOptions{SegmentBytes: 300})
	if err != nil {
		t.Fatalf("%s: OpenLog: %v", what, err)
	}
	defer l.Close()
	keep := len(fx.recs) - 1
	segPath := l.SegmentPath(fx.last.Segment)
	if got := l.Recovered(); got != damagedSize-fx.last.Offset {
		t.Fatalf("%s: Recovered %d, want %d", what, got, damagedSize-fx.last.Offset)
	}
	if got := fileSize(t, segPath); got != fx.last.Offset {
		t.Fatalf("%s: segment is %d bytes after recovery, want %d", what, got, fx.last.Offset)
	}
	if l.LastSeq() != fx.recs[keep-1].Seq || l.Segments() != fx.last.Segment {
		t.Fatalf("%s: LastSeq %d Segments %d", what, l.LastSeq(), l.Segments())
	}
	checkLog(t, dir, fx.recs[:keep], fx.locs[:keep])
	// Appending continues where the good frames end: the cut record is
	// appended again at the same place, then one more.
	again := append(append([]Record(nil), fx.recs[keep]), logRecs(fx.recs[keep].Seq+1, 1, 20)...)
	locs := mustAppend(t, l, again)
	if locs[0] != fx.last {
		t.Fatalf("%s: re-append at %+v, want %+v", what, locs[0], fx.last)
	}
	checkLog(t, dir, append(fx.recs[:keep:keep], again...), append(fx.locs[:keep:keep], locs...))
}

func TestLogTornTailEveryTruncation(t *testing.T) {
	fx := newTornFixture(t)
	for cut := fx.last.Offset + 1; cut < fx.last.Offset+int64(fx.last.Length); cut++ {
		dir := filepath.Join(t.TempDir(), "log")
		copyDir(t, fx.dir, dir)
		if err := os.Truncate(filepath.Join(dir, fmt.Sprintf("%08d.seg", fx.last.Segment)), cut); err != nil {
			t.Fatal(err)
		}
		fx.checkRecovered(t, dir, cut, fmt.Sprintf("truncated to %d", cut))
	}
}

// A flipped byte in the last frame is no torn tail unless it makes the
// frame run past the end of the file: the frame was acknowledged, so the
// log is damaged, not cut, and the records before it stay readable.
func TestLogTornTailFlippedByte(t *testing.T) {
	fx := newTornFixture(t)
	end := fx.last.Offset + int64(fx.last.Length)
	for pos := fx.last.Offset; pos < end; pos++ {
		dir := filepath.Join(t.TempDir(), "log")
		copyDir(t, fx.dir, dir)
		p := filepath.Join(dir, fmt.Sprintf("%08d.seg", fx.last.Segment))
		b, _ := os.ReadFile(p)
		b[pos] ^= 0x10
		os.WriteFile(p, b, 0o644)
		if n := int64(binary.LittleEndian.Uint32(b[fx.last.Offset:])); fx.last.Offset+FrameHeaderLen+n > end {
			// The length grew past the end: a torn final record.
			fx.checkRecovered(t, dir, end, fmt.Sprintf("byte %d flipped", pos))
			continue
		}
		_, err := OpenLog(dir, LogOptions{SegmentBytes: 300})
		var de *DamagedError
		if !errors.As(err, &de) || len(de.Damage) != 1 {
			t.Fatalf("byte %d flipped: OpenLog: %v, want one damaged region", pos, err)
		}
		d := de.Damage[0]
		keep := len(fx.recs) - 1
		if d.Segment != fx.last.Segment || d.Offset != fx.last.Offset || d.End != end ||
			d.AfterSeq != fx.recs[keep-1].Seq || d.BeforeSeq != 0 {
			t.Fatalf("byte %d flipped: damage %+v", pos, d)
		}
		if fileSize(t, p) != end {
			t.Fatalf("byte %d flipped: the damaged log was cut", pos)
		}
		if got := scanIntact(t, dir); len(got) != keep {
			t.Fatalf("byte %d flipped: %d records readable, want %d", pos, len(got), keep)
		}
	}
}

// oneSegmentLog writes records 1..n to a new log of one segment and
// returns its directory, the records, their locators and the segment.
func oneSegmentLog(t *testing.T, n, pad int) (string, []Record, []Locator, []byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	l := openTestLog(t, dir, LogOptions{})
	recs := logRecs(1, n, pad)
	locs := mustAppend(t, l, recs)
	l.Close()
	b, err := os.ReadFile(filepath.Join(dir, "00000001.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, recs, locs, b
}

// TestLogDamageMidSegment flips one bit in a frame in the middle of the last
// segment: OpenLog reports the region and the seqs lost and cuts nothing;
// a scan reads every record before and after it.
func TestLogDamageMidSegment(t *testing.T) {
	dir, recs, locs, b := oneSegmentLog(t, 200, 30)
	p := filepath.Join(dir, "00000001.seg")
	for _, victim := range []int{101, 0, 150} { // seq 102's frame (payload), seq 1's (length), 151 (checksum)
		bb := append([]byte(nil), b...)
		switch victim {
		case 101:
			bb[locs[victim].Offset+FrameHeaderLen+5] ^= 0x04
		case 0:
			bb[locs[victim].Offset+1] ^= 0x01 // length +256: runs into the next frames
		case 150:
			bb[locs[victim].Offset+4] ^= 0x80
		}
		os.WriteFile(p, bb, 0o644)
		_, err := OpenLog(dir, LogOptions{})
		var de *DamagedError
		if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) || len(de.Damage) != 1 {
			t.Fatalf("victim %d: OpenLog: %v", victim, err)
		}
		d := de.Damage[0]
		from, to := d.Lost()
		if d.Offset != locs[victim].Offset || from != recs[victim].Seq || to < from {
			t.Fatalf("victim %d: damage %+v lost %d–%d", victim, d, from, to)
		}
		after, _ := os.ReadFile(p)
		if !bytes.Equal(after, bb) {
			t.Fatalf("victim %d: the damaged log was changed", victim)
		}
		got := scanIntact(t, dir)
		if len(got) != len(recs)-int(to-from+1) || got[len(got)-1].rec.Seq != 200 {
			t.Fatalf("victim %d: %d records readable after the damage, last %d", victim, len(got), got[len(got)-1].rec.Seq)
		}
		// The store's Scan (the projector's reader) reads past it too.
		var seqs []uint64
		f, _ := os.Open(p)
		if _, err := ScanSegment(f, Pos{Segment: 1}, 0, func(r Record, _ Locator) error {
			seqs = append(seqs, r.Seq)
			return nil
		}); err != nil {
			t.Fatalf("victim %d: scanSegment: %v", victim, err)
		}
		f.Close()
		if len(seqs) != len(got) || seqs[len(seqs)-1] != 200 {
			t.Fatalf("victim %d: Scan read %d records", victim, len(seqs))
		}
	}
}

func TestLogTornTailGarbageAfterLastFrame(t *testing.T) {
	fx := newTornFixture(t)
	dir := filepath.Join(t.TempDir(), "log")
	copyDir(t, fx.dir, dir)
	p := filepath.Join(dir, fmt.Sprintf("%08d.seg", fx.last.Segment))
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 4096)) // zeros, as a crash on some filesystems leaves
	f.Close()
	l := openTestLog(t, dir, LogOptions{})
	end := fx.last.Offset + int64(fx.last.Length)
	if l.Recovered() != 4096 || fileSize(t, p) != end || l.LastSeq() != fx.recs[len(fx.recs)-1].Seq {
		t.Fatalf("Recovered %d size %d last %d", l.Recovered(), fileSize(t, p), l.LastSeq())
	}
}

func TestLogTornSegmentHeader(t *testing.T) {
	fx := newTornFixture(t)
	next := fx.last.Segment + 1
	for _, header := range [][]byte{{}, []byte(segMagic[:5]), make([]byte, 8), make([]byte, 100)} {
		dir := filepath.Join(t.TempDir(), "log")
		copyDir(t, fx.dir, dir)
		p := filepath.Join(dir, fmt.Sprintf("%08d.seg", next))
		os.WriteFile(p, header, 0o644)
		l, err := OpenLog(dir, LogOptions{SegmentBytes: 300})
		if err != nil {
			t.Fatalf("header %q: %v", header, err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("header %q: torn segment not removed", header)
		}
		if l.Recovered() != int64(len(header)) || l.Segments() != fx.last.Segment || l.LastSeq() != fx.recs[len(fx.recs)-1].Seq {
			t.Fatalf("header %q: cut %d segments %d last %d", header, l.Recovered(), l.Segments(), l.LastSeq())
		}
		locs := mustAppend(t, l, logRecs(l.LastSeq()+1, 1, 400)) // rolls into a new segment `next`
		if locs[0].Segment != next {
			t.Fatalf("append after recovery went to segment %d", locs[0].Segment)
		}
		l.Close()
		checkLog(t, dir, append(fx.recs[:len(fx.recs):len(fx.recs)], logRecs(fx.recs[len(fx.recs)-1].Seq+1, 1, 400)...), append(fx.locs[:len(fx.locs):len(fx.locs)], locs...))
	}
}

func TestLogCorruptEarlierSegment(t *testing.T) {
	fx := newTornFixture(t)
	for _, damage := range []string{"flip", "truncate", "magic"} {
		dir := filepath.Join(t.TempDir(), "log")
		copyDir(t, fx.dir, dir)
		p := filepath.Join(dir, "00000001.seg")
		b, _ := os.ReadFile(p)
		switch damage {
		case "flip":
			b[fx.locs[0].Offset+10] ^= 1
		case "truncate":
			b = b[:len(b)-1]
		case "magic":
			b[0] = 'X'
		}
		os.WriteFile(p, b, 0o644)
		before := fileSize(t, p)
		if _, err := OpenLog(dir, LogOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: OpenLog: %v, want ErrCorrupt", damage, err)
		}
		if err := ScanLog(dir, func(Record, Locator) error { return nil }); !errors.Is(err, ErrCorrupt) && damage != "magic" {
			t.Fatalf("%s: ScanLog: %v, want ErrCorrupt", damage, err)
		}
		if fileSize(t, p) != before {
			t.Fatalf("%s: recovery cut a segment that is not the last", damage)
		}
	}
}

func TestLogMissingSegment(t *testing.T) {
	fx := newTornFixture(t)
	dir := filepath.Join(t.TempDir(), "log")
	copyDir(t, fx.dir, dir)
	os.Remove(filepath.Join(dir, "00000001.seg"))
	if _, err := OpenLog(dir, LogOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenLog with a gap: %v", err)
	}
	if err := ScanLog(filepath.Join(dir, "nope"), nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ScanLog of a missing dir: %v", err)
	}
}

// A torn tail that OpenLog has not cut yet (a log being written) ends a scan
// quietly.
func TestScanLogStopsAtTornTail(t *testing.T) {
	fx := newTornFixture(t)
	dir := filepath.Join(t.TempDir(), "log")
	copyDir(t, fx.dir, dir)
	os.Truncate(filepath.Join(dir, fmt.Sprintf("%08d.seg", fx.last.Segment)), fx.last.Offset+3)
	if got := scanAll(t, dir); len(got) != len(fx.recs)-1 {
		t.Fatalf("scanned %d records, want %d", len(got), len(fx.recs)-1)
	}
	stop := errors.New("stop")
	if err := ScanLog(dir, func(Record, Locator) error { return stop }); err != stop {
		t.Fatalf("ScanLog returned %v, want fn's error", err)
	}
}

func TestReadRecordAtChecks(t *testing.T) {
	fx := newTornFixture(t)
	b, _ := os.ReadFile(filepath.Join(fx.dir, fmt.Sprintf("%08d.seg", fx.last.Segment)))
	loc := fx.last
	if _, err := ReadRecordAt(bytes.NewReader(b), loc); err != nil {
		t.Fatal(err)
	}
	bad := map[string]Locator{
		"longer":      {Offset: loc.Offset, Length: loc.Length + 1},
		"shorter":     {Offset: loc.Offset, Length: loc.Length - 1},
		"misaligned":  {Offset: loc.Offset + 1, Length: loc.Length},
		"past end":    {Offset: int64(len(b)), Length: loc.Length},
		"in header":   {Offset: 0, Length: loc.Length},
		"zero length": {Offset: loc.Offset},
	}
	for name, l := range bad {
		if _, err := ReadRecordAt(bytes.NewReader(b), l); err == nil {
			t.Errorf("%s locator %+v read without error", name, l)
		}
	}
	b[loc.Offset+int64(loc.Length)-1] ^= 1
	if _, err := ReadRecordAt(bytes.NewReader(b), loc); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped byte: %v, want ErrCorrupt", err)
	}
}

func TestSegmentReaderAt(t *testing.T) {
	fx := newTornFixture(t)
	b, _ := os.ReadFile(filepath.Join(fx.dir, "00000001.seg"))
	var first []Locator
	for _, l := range fx.locs {
		if l.Segment == 1 {
			first = append(first, l)
		}
	}
	sr, err := NewSegmentReaderAt(bytes.NewReader(b), first[1].Offset)
	if err != nil {
		t.Fatal(err)
	}
	rec, loc, err := sr.Next()
	if err != nil || loc != (Locator{Offset: first[1].Offset, Length: first[1].Length}) || rec.Seq != fx.recs[1].Seq {
		t.Fatalf("Next: seq %d %+v %v", rec.Seq, loc, err)
	}
	for i := 2; i < len(first); i++ {
		if _, _, err := sr.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := sr.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if sr.Offset() != int64(len(b)) {
		t.Fatalf("Offset %d at the end of %d bytes", sr.Offset(), len(b))
	}
	if _, err := NewSegmentReaderAt(bytes.NewReader(b), 3); err == nil {
		t.Fatal("offset inside the header accepted")
	}
	b[0] = 'x'
	if _, err := NewSegmentReaderAt(bytes.NewReader(b), first[1].Offset); !errors.Is(err, ErrNotSegment) {
		t.Fatalf("bad magic: %v", err)
	}
	if _, _, err := NewSegmentReader(bytes.NewReader(b)).Next(); !errors.Is(err, ErrNotSegment) {
		t.Fatalf("bad magic: %v", err)
	}
}

// faultyFile fails writes or fsyncs on demand.
type faultyFile struct {
	segFile
	failWrite, failSync atomic.Bool
}

var errInjected = errors.New("injected failure")

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if f.failWrite.Load() {
		// A partial write, as a full disk leaves.
		n, _ := f.segFile.WriteAt(p[:len(p)/2], off)
		return n, errInjected
	}
	return f.segFile.WriteAt(p, off)
}

func (f *faultyFile) Sync() error {
	if f.failSync.Load() {
		return errInjected
	}
	return f.segFile.Sync()
}

func TestLogWriteFailureRollsBack(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, LogOptions{})
	recs := logRecs(1, 5, 50)
	locs := mustAppend(t, l, recs)
	ff := &faultyFile{segFile: l.f}
	l.f = ff
	size := l.Size()

	ff.failWrite.Store(true)
	if _, err := l.Append(logRecs(6, 100, 50)); !errors.Is(err, errInjected) {
		t.Fatalf("Append: %v, want the injected error", err)
	}
	if fileSize(t, l.SegmentPath(1)) != size || l.Size() != size || l.LastSeq() != 5 {
		t.Fatalf("after a failed write: file %d, Size %d (want %d), last %d", fileSize(t, l.SegmentPath(1)), l.Size(), size, l.LastSeq())
	}
	// Not broken: the next append goes where the failed one would have.
	ff.failWrite.Store(false)
	more := logRecs(6, 3, 50)
	moreLocs := mustAppend(t, l, more)
	if moreLocs[0].Offset != size {
		t.Fatalf("append after rollback at %d, want %d", moreLocs[0].Offset, size)
	}
	l.Close()
	l2 := openTestLog(t, dir, LogOptions{})
	if l2.Recovered() != 0 {
		t.Fatalf("rollback left a tail of %d bytes", l2.Recovered())
	}
	checkLog(t, dir, append(recs, more...), append(locs, moreLocs...))
}

func TestLogSyncFailureBreaksLog(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, LogOptions{})
	recs := logRecs(1, 5, 50)
	locs := mustAppend(t, l, recs)
	ff := &faultyFile{segFile: l.f}
	l.f = ff
	ff.failSync.Store(true)
	if _, err := l.Append(logRecs(6, 2, 50)); !errors.Is(err, errInjected) {
		t.Fatalf("Append: %v", err)
	}
	ff.failSync.Store(false)
	if _, err := l.Append(logRecs(6, 2, 50)); err == nil {
		t.Fatal("Append after a failed fsync succeeded; the log should be broken")
	}
	l.Close()
	l2 := openTestLog(t, dir, LogOptions{})
	if l2.LastSeq() != 5 {
		t.Fatalf("reopened LastSeq %d, want 5", l2.LastSeq())
	}
	checkLog(t, dir, recs, locs)
	mustAppend(t, l2, logRecs(6, 1, 0))
}

// TestLogDurableElsewhere: appends are not fsynced (a failing fsync
// fails nothing), segments roll as before, and the log reads back whole.
func TestLogDurableElsewhere(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, LogOptions{SegmentBytes: 1000, DurableElsewhere: true})
	var recs []Record
	var locs []Locator
	recs = append(recs, logRecs(1, 2, 50)...)
	locs = append(locs, mustAppend(t, l, recs)...)
	ff := &faultyFile{segFile: l.f}
	ff.failSync.Store(true)
	l.f = ff
	more := logRecs(3, 40, 50) // rolls into new segments (created synced)
	locs = append(locs, mustAppend(t, l, more)...)
	recs = append(recs, more...)
	if l.Segments() < 2 {
		t.Fatal("expected a roll")
	}
	l.Close()
	checkLog(t, dir, recs, locs)
}

func TestLogFailureInNewSegmentRollsBackBoth(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, LogOptions{SegmentBytes: 1000})
	recs := logRecs(1, 2, 50)
	locs := mustAppend(t, l, recs)
	size := l.Size()
	l.wrap = func(seg int, f segFile) segFile {
		ff := &faultyFile{segFile: f}
		ff.failWrite.Store(seg == 2)
		return ff
	}
	// Fills segment 1, then fails writing its first frames into segment 2.
	if _, err := l.Append(logRecs(3, 40, 50)); !errors.Is(err, errInjected) {
		t.Fatalf("Append: %v", err)
	}
	if _, err := os.Stat(l.SegmentPath(2)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment 2 left behind: %v", err)
	}
	if l.Segments() != 1 || l.Size() != size || fileSize(t, l.SegmentPath(1)) != size || l.LastSeq() != 2 {
		t.Fatalf("after rollback: %d segments, Size %d, file %d, want %d", l.Segments(), l.Size(), fileSize(t, l.SegmentPath(1)), size)
	}
	l.wrap = nil
	more := logRecs(3, 40, 50)
	moreLocs := mustAppend(t, l, more)
	if l.Segments() < 2 {
		t.Fatal("expected a roll")
	}
	checkLog(t, dir, append(recs, more...), append(locs, moreLocs...))
}

// Appends from many goroutines are serialized: every acknowledged record is
// there once, in seq order, and nothing else.
func TestLogConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, LogOptions{SegmentBytes: 4096})
	var next atomic.Uint64
	var mu sync.Mutex
	acked := map[uint64]Locator{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				seq := next.Add(1)
				locs, err := l.Append(logRecs(seq, 1, 30))
				if errors.Is(err, ErrSeqOrder) {
					continue // lost the race to a higher seq
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[seq] = locs[0]
				mu.Unlock()
				_ = l.Size()
				_ = l.LastSeq()
			}
		}()
	}
	wg.Wait()
	got := scanAll(t, dir)
	if len(got) != len(acked) || len(acked) == 0 {
		t.Fatalf("scanned %d records, acknowledged %d", len(got), len(acked))
	}
	for i, s := range got {
		if i > 0 && s.rec.Seq <= got[i-1].rec.Seq {
			t.Fatal("seqs do not ascend")
		}
		if acked[s.rec.Seq] != s.loc {
			t.Fatalf("seq %d at %+v, acknowledged at %+v", s.rec.Seq, s.loc, acked[s.rec.Seq])
		}
	}
}

// segmentBytes builds a segment holding recs.
func segmentBytes(recs []Record) []byte {
	dir, err := os.MkdirTemp("", "seg")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	l, err := OpenLog(dir, LogOptions{SegmentBytes: 1 << 30})
	if err != nil {
		panic(err)
	}
	if _, err := l.Append(recs); err != nil {
		panic(err)
	}
	l.Close()
	b, err := os.ReadFile(l.SegmentPath(1))
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzSegmentReader(f *testing.F) {
	seg := segmentBytes(append(logRecs(1, 5, 10), fullRecord()))
	f.Add(seg)
	f.Add(seg[:len(seg)-3])                                 // torn payload
	f.Add(seg[:len(segMagic)+5])                            // torn frame header
	f.Add(seg[:4])                                          // torn segment header
	f.Add([]byte(segMagic))                                 // empty segment
	f.Add(append([]byte(segMagic), 0, 0, 0, 0, 0, 0, 0, 0)) // zero length
	f.Add(append([]byte(segMagic), 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4))
	flipped := append([]byte(nil), seg...)
	flipped[len(flipped)-1] ^= 1
	f.Add(flipped)
	f.Add([]byte("not a segment at all"))
	f.Fuzz(func(t *testing.T, p []byte) {
		sr := NewSegmentReader(bytes.NewReader(p))
		off := int64(len(segMagic))
		for i := 0; ; i++ {
			rec, loc, err := sr.Next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrTornTail) && !errors.Is(err, ErrNotSegment) && !errors.Is(err, ErrBadRecord) {
					t.Fatalf("unexpected error %v", err)
				}
				if _, _, again := sr.Next(); again != err {
					t.Fatalf("error not sticky: %v then %v", err, again)
				}
				if err == io.EOF && sr.Offset() != int64(len(p)) {
					t.Fatalf("clean EOF at %d of %d bytes", sr.Offset(), len(p))
				}
				return
			}
			if loc.Segment != 0 || loc.Offset != off || loc.Offset+int64(loc.Length) > int64(len(p)) {
				t.Fatalf("record %d: locator %+v, expected offset %d", i, loc, off)
			}
			frame := p[loc.Offset : loc.Offset+int64(loc.Length)]
			if enc := rec.AppendBinary(nil); !bytes.Equal(enc, frame[8:]) {
				t.Fatalf("record %d re-encodes differently", i)
			}
			again, err := ReadRecordAt(bytes.NewReader(p), loc)
			if err != nil || !reflect.DeepEqual(again, rec) {
				t.Fatalf("ReadRecordAt %+v: %v", loc, err)
			}
			off += int64(loc.Length)
		}
	})
}

func BenchmarkLogAppend(b *testing.B) {
	const batch = 1000
	l := openTestLog(b, b.TempDir(), LogOptions{})
	recs := logRecs(1, batch, 200)
	var bytesPerBatch int
	for i := range recs {
		bytesPerBatch += len(recs[i].AppendBinary(nil)) + FrameHeaderLen
	}
	base := disk.Baseline(b, bytesPerBatch)
	b.SetBytes(int64(bytesPerBatch))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range recs {
			recs[j].Seq = uint64(i*batch + j + 1)
		}
		if _, err := l.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*batch)/secs, "records/s")
	b.ReportMetric(float64(b.N)*float64(bytesPerBatch)/secs/1e6/base, "x_disk_fsync_baseline")
}

// TestLogAnyFlippedBit flips each byte of a one-segment log in turn: the
// only thing ever cut is the last frame when its length grew past the end
// (a torn final record); otherwise OpenLog reports damage that loses just
// the frame hit (or no seq, for the header), changes nothing, and every
// other record is read.
func TestLogAnyFlippedBit(t *testing.T) {
	_, recs, locs, orig := oneSegmentLog(t, 12, 10)
	victimOf := func(pos int64) int {
		for i, loc := range locs {
			if pos >= loc.Offset && pos < loc.Offset+int64(loc.Length) {
				return i
			}
		}
		return -1 // the header
	}
	for pos := int64(0); pos < int64(len(orig)); pos++ {
		dir := filepath.Join(t.TempDir(), "log")
		os.MkdirAll(dir, 0o755)
		p := filepath.Join(dir, "00000001.seg")
		b := append([]byte(nil), orig...)
		b[pos] ^= 0x04
		os.WriteFile(p, b, 0o644)
		v := victimOf(pos)
		lg, err := OpenLog(dir, LogOptions{})
		if err == nil {
			// Only a torn final record: the last frame, cut.
			if v != len(locs)-1 || lg.LastSeq() != recs[v].Seq-1 || fileSize(t, p) != locs[v].Offset {
				t.Fatalf("byte %d: opened with last seq %d, size %d", pos, lg.LastSeq(), fileSize(t, p))
			}
			lg.Close()
			continue
		}
		var de *DamagedError
		if !errors.As(err, &de) || len(de.Damage) != 1 {
			t.Fatalf("byte %d: %v", pos, err)
		}
		if after, _ := os.ReadFile(p); !bytes.Equal(after, b) {
			t.Fatalf("byte %d: the damaged log was changed", pos)
		}
		from, to := de.Damage[0].Lost()
		got := scanIntact(t, dir)
		switch {
		case v < 0 && (to >= from || len(got) != len(recs)):
			t.Fatalf("byte %d (header): lost %d–%d, read %d", pos, from, to, len(got))
		case v >= 0 && (from != recs[v].Seq || (to != recs[v].Seq && !(to == 0 && v == len(recs)-1)) || len(got) != len(recs)-1):
			t.Fatalf("byte %d (seq %d): lost %d–%d, read %d", pos, recs[v].Seq, from, to, len(got))
		}
	}
}
