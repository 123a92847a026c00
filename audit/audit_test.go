package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock returns a clock that moves one second per call, from a fixed time.
func clock() func() time.Time {
	var n atomic.Int64
	base := time.Unix(1_700_000_000, 0)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Second) }
}

func openLog(t *testing.T, dir string) *Log {
	t.Helper()
	l, err := OpenWith(dir, Options{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// sample is the i-th of a varied run of entries.
func sample(i int) Entry {
	rec := fmt.Sprintf("rec-%03d", i)
	switch i % 5 {
	case 0:
		return Entry{Kind: KindPin, Recording: rec, Project: "shop", Why: "legal hold"}
	case 1:
		return Plan(rec, "sha256:"+strings.Repeat("ab", 32))
	case 2:
		return Delete(rec, "shop", WhyClassExpiry, int64(1000+i), "ci", 1_600_000_000_000_000_000+int64(i))
	case 3:
		return Entry{Kind: KindUnpin, Recording: rec, Project: "shop", Why: "hold lifted"}
	default:
		return Sweep(i, 2*i, int64(10_000*i))
	}
}

// fill appends n sample entries and returns them as written.
func fill(t *testing.T, l *Log, n int) []Entry {
	t.Helper()
	var out []Entry
	for i := 0; i < n; i++ {
		e, err := l.Append(sample(i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// logBytes builds a log of n sample entries and returns its file's bytes
// and head.
func logBytes(t testing.TB, n int) ([]byte, Head) {
	t.Helper()
	dir := t.TempDir()
	l, err := OpenWith(dir, Options{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < n; i++ {
		if _, err := l.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	hn, hh := l.Head()
	return b, Head{hn, hh}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		out = append(out, append([]byte(nil), b[:i+1]...))
		b = b[i+1:]
	}
	return out
}

func verify(t *testing.T, b []byte) VerifyReport {
	t.Helper()
	rep, err := Verify(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestHashingIsAsDocumented(t *testing.T) {
	// Spelled out by hand, not by the encoder under test.
	e := Entry{N: 1, TS: 1_700_000_000_000_000_000, Kind: "delete", Recording: "r1", Project: "p",
		Why: "class expiry", BytesFreed: 42,
		Details: map[string]any{"expired_at": json.Number("1690000000000000000"), "class": "ci"},
		Prev:    ZeroHash}
	body := `{"n":1,"ts":1700000000000000000,"kind":"delete","recording":"r1","project":"p","why":"class expiry",` +
		`"bytes_freed":42,"details":{"class":"ci","expired_at":1690000000000000000},"prev":"` + ZeroHash + `"}`
	sum := sha256.Sum256([]byte(body))
	want := hex.EncodeToString(sum[:])
	line, hash, err := encodeLine(&e)
	if err != nil {
		t.Fatal(err)
	}
	if hash != want {
		t.Fatalf("hash %s, want sha256(body) %s", hash, want)
	}
	wantLine := strings.TrimSuffix(body, "}") + `,"hash":"` + want + "\"}\n"
	if string(line) != wantLine {
		t.Fatalf("line\n%s\nwant\n%s", line, wantLine)
	}
	if h, _ := e.ComputeHash(); h != want {
		t.Fatalf("ComputeHash %s", h)
	}
	e.Hash = hash
	if b, _ := json.Marshal(e); string(b)+"\n" != wantLine {
		t.Fatalf("MarshalJSON %s", b)
	}
}

func TestStringEscaping(t *testing.T) {
	got, err := appendString(nil, "a\"b\\c\n\t\x00\x1f\x7f<>&\u2028é")
	if err != nil {
		t.Fatal(err)
	}
	want := `"a\"b\\c\u000a\u0009\u0000\u001f` + "\x7f<>&\u2028é" + `"`
	if string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if _, err := appendString(nil, "\xff"); err == nil {
		t.Fatal("invalid UTF-8 encoded")
	}
}

func TestAppendReopenContinues(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	if n, h := l.Head(); n != 0 || h != ZeroHash {
		t.Fatalf("empty head %d %s", n, h)
	}
	first := fill(t, l, 3)
	prev := ZeroHash
	for i, e := range first {
		if e.N != uint64(i+1) || e.Prev != prev {
			t.Fatalf("entry %d: n %d prev %s", i, e.N, e.Prev)
		}
		if want := time.Unix(1_700_000_000+int64(i+1), 0).UnixNano(); e.TS != want {
			t.Fatalf("entry %d: ts %d, want %d from the clock", i, e.TS, want)
		}
		if h, err := e.ComputeHash(); err != nil || h != e.Hash {
			t.Fatalf("entry %d: hash %s, recomputed %s %v", i, e.Hash, h, err)
		}
		prev = e.Hash
	}
	if n, h := l.Head(); n != 3 || h != first[2].Hash {
		t.Fatalf("head %d %s", n, h)
	}
	// A given ts is kept.
	withTS := sample(3)
	withTS.TS = 12345
	e4, err := l.Append(withTS)
	if err != nil || e4.TS != 12345 {
		t.Fatalf("ts %d %v", e4.TS, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(sample(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}

	l2 := openLog(t, dir)
	if n, h := l2.Head(); n != 4 || h != e4.Hash {
		t.Fatalf("reopened head %d %s", n, h)
	}
	if l2.Recovered() != 0 {
		t.Fatalf("recovered %d from a clean log", l2.Recovered())
	}
	e5, err := l2.Append(sample(4))
	if err != nil {
		t.Fatal(err)
	}
	if e5.N != 5 || e5.Prev != e4.Hash {
		t.Fatalf("continued as %d prev %s", e5.N, e5.Prev)
	}
	all, err := l2.Entries(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(first, e4), e5)
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("entries\n%v\nwant\n%v", all, want)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if rep := verify(t, b); !rep.OK || rep.Entries != 5 || rep.Head != (Head{5, e5.Hash}) {
		t.Fatalf("verify %+v %v", rep, rep.Problem)
	}
	if rep, err := l2.Verify(); err != nil || !rep.OK {
		t.Fatalf("log verify %+v %v", rep, err)
	}
	fi, _ := os.Stat(filepath.Join(dir, FileName))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

func TestOpenCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l := openLog(t, dir)
	fill(t, l, 1)
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
}

func TestTornTailCutAtOpen(t *testing.T) {
	good, head := logBytes(t, 4)
	lines := splitLines(good)
	next, _ := logBytes(t, 5)
	nextLine := splitLines(next)[4]
	for name, tail := range map[string][]byte{
		"half a line":           nextLine[:len(nextLine)/2],
		"a line but no newline": nextLine[:len(nextLine)-1],
		"one byte":              {'{'},
		"zeros":                 make([]byte, 300),
		"zeros and a newline":   append(make([]byte, 40), '\n'),
		"garbage line":          []byte("{\"n\":5,\"ts\x00\x00\x00\n"),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := os.WriteFile(path, append(append([]byte(nil), good...), tail...), 0o600); err != nil {
				t.Fatal(err)
			}
			l := openLog(t, dir)
			if l.Recovered() != int64(len(tail)) {
				t.Fatalf("cut %d bytes, want %d", l.Recovered(), len(tail))
			}
			if n, h := l.Head(); n != head.N || h != head.Hash {
				t.Fatalf("head %d %s", n, h)
			}
			b, _ := os.ReadFile(path)
			if !bytes.Equal(b, good) {
				t.Fatal("the file is not the good prefix")
			}
			e, err := l.Append(sample(4))
			if err != nil || e.N != 5 || e.Prev != head.Hash {
				t.Fatalf("append after recovery: %+v %v", e, err)
			}
			b, _ = os.ReadFile(path)
			if rep := verify(t, b); !rep.OK || rep.Entries != 5 {
				t.Fatalf("verify after recovery: %v", rep.Problem)
			}
		})
	}
	// A torn first line leaves an empty log.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileName), lines[0][:20], 0o600)
	l := openLog(t, dir)
	if n, h := l.Head(); n != 0 || h != ZeroHash || l.Recovered() != 20 {
		t.Fatalf("head %d %s cut %d", n, h, l.Recovered())
	}
}

func TestOpenRefusesDamage(t *testing.T) {
	good, _ := logBytes(t, 5)
	lines := splitLines(good)
	edited := bytes.Replace(good, []byte("legal hold"), []byte("legal hole"), 1)
	lastEdited := append([]byte(nil), good...)
	// The last line's hash changed: JSON, so not what a crash leaves.
	lastEdited[len(lastEdited)-5] ^= 1
	for name, b := range map[string][]byte{
		"edited first line": edited,
		"edited last line":  lastEdited,
		"dropped entry":     bytes.Join([][]byte{lines[0], lines[2], lines[3], lines[4]}, nil),
		"duplicated last":   append(append([]byte(nil), good...), lines[4]...),
		"garbage in middle": bytes.Join([][]byte{lines[0], []byte("\x00\x00\n"), lines[1]}, nil),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			os.WriteFile(path, b, 0o600)
			_, err := Open(dir)
			var p *Problem
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &p) {
				t.Fatalf("open: %v", err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, b) {
				t.Fatal("open changed a damaged log")
			}
		})
	}
}

func TestAppendRefuses(t *testing.T) {
	l := openLog(t, t.TempDir())
	fill(t, l, 2)
	n0, h0 := l.Head()
	for name, e := range map[string]Entry{
		"no kind":         {},
		"upper kind":      {Kind: "Pin"},
		"long kind":       {Kind: strings.Repeat("a", 33)},
		"bad utf8":        {Kind: KindPin, Recording: "\xff"},
		"bad utf8 detail": {Kind: KindPin, Details: map[string]any{"x": "\xffok"}},
		"bad utf8 key":    {Kind: KindPin, Details: map[string]any{"\xff": 1}},
		"negative bytes":  {Kind: KindDelete, BytesFreed: -1},
		"channel detail":  {Kind: KindPlan, Details: map[string]any{"c": make(chan int)}},
		"nan detail":      {Kind: KindPlan, Details: map[string]any{"x": math.NaN()}},
		"bad number":      {Kind: KindPlan, Details: map[string]any{"x": json.Number("1 ")}},
		"too big":         {Kind: KindPlan, Details: map[string]any{"x": strings.Repeat("y", MaxLineBytes)}},
	} {
		if _, err := l.Append(e); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n, h := l.Head(); n != n0 || h != h0 {
		t.Fatal("a refused append moved the head")
	}
	if rep, err := l.Verify(); err != nil || !rep.OK {
		t.Fatalf("%v %v", rep.Problem, err)
	}
}

func TestDetailsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	type sub struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	in := Entry{Kind: "custom_kind", Why: "quote \" backslash \\ newline \n tab \t <>& \u2028 é \x7f",
		Details: map[string]any{
			"uint64": uint64(math.MaxUint64),
			"int64":  int64(math.MinInt64),
			"float":  1.5e300,
			"small":  1e-7,
			"number": json.Number("-0.10e+5"),
			"nested": map[string]any{"z": []any{1, "two", nil, true, false}, "a": map[string]int{"k": 1}},
			"struct": sub{A: 7, B: "x"},
			"time":   time.Unix(0, 5).UTC(),
			"bytes":  []byte{1, 2, 3},
			"":       "empty key",
		}}
	got, err := l.Append(in)
	if err != nil {
		t.Fatal(err)
	}
	read, err := l.Entries(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(read, []Entry{got}) {
		t.Fatalf("read\n%#v\nappended\n%#v", read[0].Details, got.Details)
	}
	if got.Details["uint64"] != json.Number("18446744073709551615") || got.Details["float"] != json.Number("1.5e+300") {
		t.Fatalf("details %#v", got.Details)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if rep := verify(t, b); !rep.OK {
		t.Fatal(rep.Problem)
	}
}

func TestConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	const workers, each = 8, 40
	var wg sync.WaitGroup
	got := make([][]Entry, workers)
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e, err := l.Append(sample(w*each + i))
				if err != nil {
					errs[w] = err
					return
				}
				got[w] = append(got[w], e)
				// Readers run alongside the writers.
				if i%10 == 0 {
					if _, err := l.Entries(e.N-1, 5); err != nil {
						errs[w] = err
						return
					}
					l.Head()
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all, err := l.Entries(0, MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != workers*each {
		t.Fatalf("%d entries", len(all))
	}
	for _, es := range got {
		for _, e := range es {
			if !reflect.DeepEqual(all[e.N-1], e) {
				t.Fatalf("entry %d differs from what Append returned", e.N)
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	rep := verify(t, b)
	if n, h := l.Head(); !rep.OK || rep.Head != (Head{n, h}) || n != workers*each {
		t.Fatalf("verify %+v %v", rep, rep.Problem)
	}
}

func TestEntriesPages(t *testing.T) {
	l := openLog(t, t.TempDir())
	want := fill(t, l, 25)
	var got []Entry
	after := uint64(0)
	for pages := 0; ; pages++ {
		page, err := l.Entries(after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			if pages != 3 {
				t.Fatalf("%d pages", pages)
			}
			break
		}
		if len(page) > 10 {
			t.Fatalf("page of %d", len(page))
		}
		got = append(got, page...)
		after = page[len(page)-1].N
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("paged entries differ")
	}
	for _, c := range []struct {
		after  uint64
		limit  int
		first  uint64
		length int
	}{
		{0, 0, 1, 25}, {0, -1, 1, 25}, {0, 1, 1, 1}, {24, 10, 25, 1}, {25, 10, 0, 0},
		{100, 10, 0, 0}, {5, MaxPageSize + 1, 6, 20}, {12, 3, 13, 3},
	} {
		page, err := l.Entries(c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != c.length || (c.length > 0 && page[0].N != c.first) {
			t.Fatalf("Entries(%d, %d): %d entries", c.after, c.limit, len(page))
		}
		if page == nil {
			t.Fatal("nil page")
		}
	}
}

func TestPageSizeCapped(t *testing.T) {
	l := openLog(t, t.TempDir())
	for i := 0; i < MaxPageSize+5; i++ {
		if _, err := l.Append(Entry{Kind: KindSweep, TS: 1}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := l.Entries(0, MaxPageSize*2)
	if err != nil || len(page) != MaxPageSize {
		t.Fatalf("%d %v", len(page), err)
	}
	if page, _ := l.Entries(0, 0); len(page) != DefaultPageSize {
		t.Fatalf("default page %d", len(page))
	}
}

func TestTamperUnderRunningLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	l := openLog(t, dir)
	fill(t, l, 6)
	b, _ := os.ReadFile(path)
	lines := splitLines(b)
	// A byte of entry 4 changed in place.
	off := len(lines[0]) + len(lines[1]) + len(lines[2]) + 10
	b[off] ^= 1
	os.WriteFile(path, b, 0o600)
	var p *Problem
	if _, err := l.Entries(3, 2); !errors.Is(err, ErrCorrupt) || !errors.As(err, &p) || p.N != 4 {
		t.Fatalf("entries over an edited line: %v", err)
	}
	if _, err := l.Entries(0, 2); err != nil {
		t.Fatalf("entries before it: %v", err)
	}
	if rep, err := l.Verify(); err != nil || rep.OK || rep.Problem.Line != 4 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// Entry 4 forged with a recomputed hash: entry 5 no longer links.
	b[off] ^= 1
	os.WriteFile(path, forge(t, b, 4, false), 0o600)
	if _, err := l.Entries(4, 2); !errors.Is(err, ErrCorrupt) || !errors.As(err, &p) || p.N != 5 || p.Kind != Unlinked {
		t.Fatalf("entries over a forged entry: %v", err)
	}
	// Cut short under it: found against the log's own head.
	os.WriteFile(path, bytes.Join(lines[:5], nil), 0o600)
	if rep, err := l.Verify(); err != nil || rep.OK || rep.Problem.Kind != Truncated {
		t.Fatalf("verify after truncation: %+v %v", rep, err)
	}
}
