package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	b, _ := logBytes(f, 5)
	lines := splitLines(b)
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte("\n"))
	f.Add(lines[0])
	f.Add(b[:len(b)-1])
	f.Add(bytes.Join([][]byte{lines[1], lines[0], lines[2]}, nil))
	f.Add(append(append([]byte(nil), b...), lines[4]...))
	f.Add(bytes.Join([][]byte{lines[0], lines[2]}, nil))
	f.Add([]byte(`{"n":1,"ts":0,"kind":"pin","prev":"` + ZeroHash + `","hash":"` + ZeroHash + `"}` + "\n"))
	f.Add([]byte(`{"n":1,"details":{"a":[[[[{}]]]]}}` + "\n"))
}

// FuzzVerify: Verify never panics nor fails to read a byte slice, and what
// it reports is consistent with the input.
func FuzzVerify(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Verify(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK != (rep.Problem == nil) || rep.Head.N != rep.Entries {
			t.Fatalf("inconsistent report %+v", rep)
		}
		if rep.Entries == 0 && rep.Head.Hash != ZeroHash {
			t.Fatalf("empty prefix with head %s", rep.Head.Hash)
		}
		if !rep.OK {
			if rep.Problem.Line < 1 || rep.Problem.Kind == "" || rep.Problem.N != rep.Entries+1 {
				t.Fatalf("problem %+v", rep.Problem)
			}
			return
		}
		if n := uint64(bytes.Count(data, []byte("\n"))); n != rep.Entries || (len(data) > 0 && data[len(data)-1] != '\n') {
			t.Fatalf("verified %d entries in %d lines", rep.Entries, n)
		}
		// A verified log verifies against its own head, and every line
		// is its entry's canonical encoding.
		if r2, _ := VerifyAgainst(bytes.NewReader(data), rep.Head); !r2.OK {
			t.Fatalf("not against its own head: %v", r2.Problem)
		}
		for _, line := range splitLines(data) {
			e, why, _ := checkLine(line[:len(line)-1])
			l, h, err := encodeLine(&e)
			if why != "" || err != nil || !bytes.Equal(l, line) || h != e.Hash {
				t.Fatalf("verified line %q re-encodes as %q", line, l)
			}
		}
	})
}

// FuzzOpen: Open on any file either refuses it as corrupt, leaving it
// alone, or leaves a log that verifies, having cut at most its last line.
func FuzzOpen(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir)
		after, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			var p *Problem
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &p) || !bytes.Equal(after, data) {
				t.Fatalf("open: %v", err)
			}
			return
		}
		defer l.Close()
		if len(after) > len(data) || !bytes.Equal(after, data[:len(after)]) ||
			l.Recovered() != int64(len(data)-len(after)) ||
			(len(after) < len(data) && bytes.Contains(data[len(after):len(data)-1], []byte("\n"))) {
			t.Fatalf("open cut %d bytes wrongly", l.Recovered())
		}
		rep, _ := Verify(bytes.NewReader(after))
		n, h := l.Head()
		if !rep.OK || rep.Head != (Head{n, h}) {
			t.Fatalf("after open: %+v %v", rep, rep.Problem)
		}
		if _, err := l.Append(Entry{Kind: KindSweep}); err != nil {
			t.Fatal(err)
		}
		if rep, err := l.Verify(); err != nil || !rep.OK {
			t.Fatalf("after an append: %v %v", rep.Problem, err)
		}
	})
}
