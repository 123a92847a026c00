package audit

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func expectProblem(t *testing.T, b []byte, line int, kinds ...ProblemKind) {
	t.Helper()
	rep := verify(t, b)
	if rep.OK || rep.Problem == nil {
		t.Fatalf("verified; want a problem at line %d", line)
	}
	p := rep.Problem
	ok := false
	for _, k := range kinds {
		ok = ok || p.Kind == k
	}
	if p.Line != line || !ok {
		t.Fatalf("problem %v; want line %d, one of %v", p, line, kinds)
	}
	if rep.Entries != uint64(line-1) && p.Kind != Truncated {
		t.Fatalf("%d entries verified before line %d", rep.Entries, line)
	}
}

func TestVerifyGood(t *testing.T) {
	for _, n := range []int{0, 1, 2, 10} {
		b, head := logBytes(t, n)
		rep := verify(t, b)
		if !rep.OK || rep.Problem != nil || rep.Entries != uint64(n) || rep.Head != head {
			t.Fatalf("%d entries: %+v %v", n, rep, rep.Problem)
		}
		rep, err := VerifyAgainst(bytes.NewReader(b), head)
		if err != nil || !rep.OK {
			t.Fatalf("against its own head: %v %v", rep.Problem, err)
		}
	}
}

func TestVerifyEveryEditedByte(t *testing.T) {
	b, _ := logBytes(t, 8)
	lines := splitLines(b)
	off := 0
	for i, line := range lines {
		for j := range line {
			for _, flip := range []byte{0x01, 0x20, 0x80} {
				m := append([]byte(nil), b...)
				m[off+j] ^= flip
				if off+j == len(b)-1 {
					// The last newline: the last line is torn.
					expectProblem(t, m, i+1, Torn, Edited)
					continue
				}
				expectProblem(t, m, i+1, Edited)
			}
		}
		// A byte inserted, one removed.
		m := append(append(append([]byte(nil), b[:off+5]...), ' '), b[off+5:]...)
		expectProblem(t, m, i+1, Edited)
		m = append(append([]byte(nil), b[:off+5]...), b[off+6:]...)
		expectProblem(t, m, i+1, Edited)
		off += len(line)
	}
}

func TestVerifyDroppedEntry(t *testing.T) {
	b, head := logBytes(t, 6)
	lines := splitLines(b)
	for i := range lines {
		m := bytes.Join(append(append([][]byte{}, lines[:i]...), lines[i+1:]...), nil)
		if i == len(lines)-1 {
			// The last one dropped is a shorter, valid log...
			if rep := verify(t, m); !rep.OK {
				t.Fatal(rep.Problem)
			}
			// ...found against the head remembered before.
			rep, _ := VerifyAgainst(bytes.NewReader(m), head)
			if rep.OK || rep.Problem.Kind != Truncated || rep.Problem.N != 6 || rep.Problem.Line != 6 {
				t.Fatalf("against the head: %v", rep.Problem)
			}
			continue
		}
		expectProblem(t, m, i+1, Missing)
	}
	// Several dropped.
	m := bytes.Join([][]byte{lines[0], lines[4], lines[5]}, nil)
	expectProblem(t, m, 2, Missing)
	if p := verify(t, m).Problem; !strings.Contains(p.Detail, "entries 2–4") {
		t.Fatal(p.Detail)
	}
}

func TestVerifySwappedPair(t *testing.T) {
	b, _ := logBytes(t, 6)
	lines := splitLines(b)
	for i := 0; i+1 < len(lines); i++ {
		m := make([][]byte, len(lines))
		copy(m, lines)
		m[i], m[i+1] = m[i+1], m[i]
		expectProblem(t, bytes.Join(m, nil), i+1, Reordered)
	}
	// Moved far.
	m := bytes.Join([][]byte{lines[0], lines[2], lines[3], lines[4], lines[1], lines[5]}, nil)
	expectProblem(t, m, 2, Reordered)
}

func TestVerifyDuplicatedEntry(t *testing.T) {
	b, _ := logBytes(t, 6)
	lines := splitLines(b)
	for i := range lines {
		m := bytes.Join(append(append(append([][]byte{}, lines[:i+1]...), lines[i]), lines[i+1:]...), nil)
		expectProblem(t, m, i+2, Duplicated)
	}
	// A copy of an early line at the end.
	expectProblem(t, append(append([]byte(nil), b...), lines[1]...), 7, Duplicated)
}

func TestVerifyTruncatedAgainstHead(t *testing.T) {
	full, _ := logBytes(t, 12)
	lines := splitLines(full)
	remembered, head10 := logBytes(t, 10)
	if !bytes.Equal(remembered, bytes.Join(lines[:10], nil)) {
		t.Fatal("logs with the same clock and entries differ")
	}
	// Grown since: fine.
	if rep, _ := VerifyAgainst(bytes.NewReader(full), head10); !rep.OK {
		t.Fatal(rep.Problem)
	}
	for _, keep := range []int{9, 5, 1, 0} {
		m := bytes.Join(lines[:keep], nil)
		if rep := verify(t, m); !rep.OK {
			t.Fatalf("cut to %d: %v", keep, rep.Problem)
		}
		rep, err := VerifyAgainst(bytes.NewReader(m), head10)
		if err != nil || rep.OK || rep.Problem.Kind != Truncated || rep.Problem.N != uint64(keep+1) ||
			rep.Entries != uint64(keep) {
			t.Fatalf("cut to %d: %+v %v", keep, rep, rep.Problem)
		}
	}
}

// forge rewrites entry k (1-based) of a log with a new why and a
// recomputed hash, as anyone who can write the file can; with relink, the
// entries after it are relinked (prev and hash recomputed) too.
func forge(t *testing.T, b []byte, k int, relink bool) []byte {
	t.Helper()
	var out []byte
	prev := ZeroHash
	for i, line := range splitLines(b) {
		e, why, _ := checkLine(line[:len(line)-1])
		if why != "" {
			t.Fatal(why)
		}
		if n := i + 1; n == k {
			e.Why = "nothing to see here"
		} else if relink && n > k {
			e.Prev = prev
		}
		l, h, err := encodeLine(&e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l...)
		prev = h
	}
	return out
}

func TestVerifyForgedEntries(t *testing.T) {
	b, head := logBytes(t, 8)
	// One entry replaced with a recomputed hash: the next one no longer
	// links to it.
	m := forge(t, b, 4, false)
	expectProblem(t, m, 5, Unlinked)
	// The chain rewritten from entry 4 on verifies by itself; only the
	// remembered head finds it.
	m = forge(t, b, 4, true)
	if rep := verify(t, m); !rep.OK {
		t.Fatal(rep.Problem)
	}
	rep, _ := VerifyAgainst(bytes.NewReader(m), head)
	if rep.OK || rep.Problem.Kind != Diverged || rep.Problem.Line != 8 {
		t.Fatalf("against the head: %v", rep.Problem)
	}
	// The last entry forged: nothing after it to unlink; found against the head.
	m = forge(t, b, 8, false)
	if rep := verify(t, m); !rep.OK {
		t.Fatal(rep.Problem)
	}
	rep, _ = VerifyAgainst(bytes.NewReader(m), head)
	if rep.OK || rep.Problem.Kind != Diverged {
		t.Fatalf("against the head: %v", rep.Problem)
	}
}

func TestVerifyMalformed(t *testing.T) {
	b, _ := logBytes(t, 3)
	lines := splitLines(b)
	long := append(bytes.Repeat([]byte("x"), MaxLineBytes+10), '\n')
	for name, c := range map[string]struct {
		b    []byte
		line int
		kind ProblemKind
	}{
		"empty line":         {[]byte("\n"), 1, Edited},
		"blank middle":       {bytes.Join([][]byte{lines[0], []byte("\n"), lines[1]}, nil), 2, Edited},
		"crlf":               {bytes.Replace(b, []byte("}\n"), []byte("}\r\n"), 1), 1, Edited},
		"long line":          {append(append([]byte(nil), lines[0]...), long...), 2, Edited},
		"long unterminated":  {long[:len(long)-1], 1, Edited},
		"not an object":      {[]byte("[1,2]\n"), 1, Edited},
		"torn":               {append(append([]byte(nil), lines[0]...), lines[1][:9]...), 2, Torn},
		"unknown field":      {bytes.Replace(b, []byte(`{"n":2,`), []byte(`{"n":2,"x":1,`), 1), 2, Edited},
		"upper-case hash":    {[]byte(strings.ToUpper(string(lines[0]))), 1, Edited},
		"starts after 1":     {lines[1], 1, Missing},
		"prefix is whole":    {append(append([]byte(nil), lines[0]...), "{}\n"...), 2, Edited},
		"trailing json junk": {bytes.Replace(b, []byte("}\n"), []byte("} \n"), 1), 1, Edited},
	} {
		t.Run(name, func(t *testing.T) { expectProblem(t, c.b, c.line, c.kind) })
	}
}

type failingReader struct{ r io.Reader }

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("disk on fire")
	}
	return n, err
}

func TestVerifyReadError(t *testing.T) {
	b, _ := logBytes(t, 2)
	if _, err := Verify(failingReader{bytes.NewReader(b)}); err == nil || !strings.Contains(err.Error(), "fire") {
		t.Fatalf("err %v", err)
	}
}
