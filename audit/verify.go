package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ProblemKind says what is wrong at the first bad line.
type ProblemKind string

const (
	// Edited: the line is not an intact entry — not JSON, not the
	// canonical encoding, or its hash does not recompute: a byte was
	// changed, added or removed (or the line is longer than MaxLineBytes,
	// or numbered 0).
	Edited ProblemKind = "edited"
	// Missing: the line holds a later entry than expected, and the
	// expected one is nowhere after it.
	Missing ProblemKind = "missing"
	// Reordered: the line holds a later entry than expected, and the
	// expected one comes after it.
	Reordered ProblemKind = "reordered"
	// Duplicated: the line holds an entry whose number already came.
	Duplicated ProblemKind = "duplicated"
	// Unlinked: an intact entry with the right number whose prev is not
	// the hash of the entry before: that one was replaced by a forged
	// entry with a recomputed hash, or this one was.
	Unlinked ProblemKind = "unlinked"
	// Torn: the last line has no newline (a write that never finished;
	// Open cuts it).
	Torn ProblemKind = "torn"
	// Truncated: the log verifies but ends before the remembered head.
	Truncated ProblemKind = "truncated"
	// Diverged: the remembered head's entry is there with another hash:
	// the chain was rewritten up to it.
	Diverged ProblemKind = "diverged"
)

// Problem is the first bad line Verify found.
type Problem struct {
	Line   int         `json:"line"` // 1-based line of the file
	N      uint64      `json:"n"`    // the entry expected there
	Kind   ProblemKind `json:"kind"`
	Detail string      `json:"detail"`

	off      int64 // where the line starts
	last     bool  // nothing follows the line
	cuttable bool  // not JSON or no newline: what a crash leaves
}

func (p *Problem) Error() string {
	return fmt.Sprintf("line %d (entry %d): %s: %s", p.Line, p.N, p.Kind, p.Detail)
}

// VerifyReport is what Verify found. Entries and Head describe the prefix
// that verified (all of the log when OK).
type VerifyReport struct {
	OK      bool     `json:"ok"`
	Entries uint64   `json:"entries"`
	Head    Head     `json:"head"`
	Problem *Problem `json:"problem,omitempty"`
}

// Verify reads a log and checks it line by line, trusting nothing in it:
// every line is a whole, intact entry (canonical encoding, hash recomputes,
// at most MaxLineBytes), numbered 1, 2, 3… without gaps or repeats, each
// prev the hash of the entry before (ZeroHash for entry 1). It reports the
// first bad line and what is wrong with it; the error is only for reading
// r. A log cut short, or rewritten from some entry to its end, verifies:
// use VerifyAgainst with a head remembered elsewhere to find that.
func Verify(r io.Reader) (VerifyReport, error) {
	return VerifyAgainst(r, Head{})
}

// VerifyAgainst is Verify, and also checks the log against a head
// remembered from before (a zero want checks nothing more): the log must
// reach entry want.N (else Truncated), and that entry's hash must be
// want.Hash (else Diverged). The log may have grown since.
func VerifyAgainst(r io.Reader, want Head) (VerifyReport, error) {
	rep, p, err := scan(r, want, nil)
	if err != nil {
		return rep, err
	}
	rep.Problem = p
	rep.OK = p == nil
	return rep, nil
}

type lineReader struct {
	br   *bufio.Reader
	off  int64 // where the next line starts
	line int   // lines read
}

// next reads a line. It returns its bytes without the newline (nil when
// longer than MaxLineBytes; the rest is skipped), where it starts and
// whether it ended in a newline; io.EOF at the end.
func (lr *lineReader) next() (b []byte, start int64, term, long bool, err error) {
	start = lr.off
	b, err = lr.br.ReadSlice('\n')
	lr.off += int64(len(b))
	switch {
	case err == nil:
		lr.line++
		return b[:len(b)-1], start, true, false, nil
	case errors.Is(err, io.EOF):
		if len(b) == 0 {
			return nil, start, false, false, io.EOF
		}
		lr.line++
		return b, start, false, false, nil
	case errors.Is(err, bufio.ErrBufferFull):
		lr.line++
		for {
			b, err = lr.br.ReadSlice('\n')
			lr.off += int64(len(b))
			switch {
			case err == nil:
				return nil, start, true, true, nil
			case errors.Is(err, io.EOF):
				return nil, start, false, true, nil
			case !errors.Is(err, bufio.ErrBufferFull):
				return nil, start, false, true, err
			}
		}
	default:
		return nil, start, false, false, err
	}
}

func (lr *lineReader) atEOF() bool {
	_, err := lr.br.Peek(1)
	return err != nil
}

// scan verifies r, calling onEntry (if set) for each entry that verified
// with the offset of its line. It stops at the first problem.
func scan(r io.Reader, want Head, onEntry func(Entry, int64)) (VerifyReport, *Problem, error) {
	lr := &lineReader{br: bufio.NewReaderSize(r, MaxLineBytes)}
	rep := VerifyReport{Head: Head{Hash: ZeroHash}}
	for {
		b, off, term, long, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rep, nil, err
		}
		expect := rep.Head.N + 1
		p := &Problem{Line: lr.line, N: expect, off: off}
		switch {
		case long:
			p.Kind, p.Detail = Edited, fmt.Sprintf("the line is longer than %d bytes", MaxLineBytes)
			p.cuttable = !term
		case !term:
			p.Kind, p.Detail = Torn, "the last line has no newline (a write that never finished)"
			p.cuttable = true
		default:
			e, why, unparsable := checkLine(b)
			switch {
			case why != "":
				p.Kind, p.Detail, p.cuttable = Edited, why, unparsable
			case e.N == expect && e.Prev == rep.Head.Hash:
				if e.N == want.N && e.Hash != want.Hash {
					p.Kind = Diverged
					p.Detail = fmt.Sprintf("entry %d's hash is not the remembered head's: the chain was rewritten", e.N)
					break
				}
				rep.Head, rep.Entries = Head{N: e.N, Hash: e.Hash}, e.N
				if onEntry != nil {
					onEntry(e, off)
				}
				continue
			case e.N == expect:
				p.Kind = Unlinked
				if expect == 1 {
					p.Detail = "entry 1's prev is not the zero hash"
				} else {
					p.Detail = fmt.Sprintf("prev is not the hash of entry %d on the line before: one of the two was replaced", expect-1)
				}
			case e.N == 0:
				p.Kind, p.Detail = Edited, "n is 0; entries are numbered from 1"
			case e.N < expect:
				p.Kind = Duplicated
				if e.Hash == rep.Head.Hash {
					p.Detail = fmt.Sprintf("a copy of entry %d on the line before", e.N)
				} else {
					p.Detail = fmt.Sprintf("entry %d again, after entry %d", e.N, expect-1)
				}
			default:
				p.last = lr.atEOF()
				found, err := findEntry(lr, expect)
				if err != nil {
					return rep, nil, err
				}
				if found > 0 {
					p.Kind = Reordered
					p.Detail = fmt.Sprintf("the line holds entry %d; entry %d comes later, on line %d", e.N, expect, found)
				} else {
					p.Kind = Missing
					if e.N == expect+1 {
						p.Detail = fmt.Sprintf("entry %d is missing: the line holds entry %d", expect, e.N)
					} else {
						p.Detail = fmt.Sprintf("entries %d–%d are missing: the line holds entry %d", expect, e.N-1, e.N)
					}
				}
				return rep, p, nil
			}
		}
		p.last = !term || lr.atEOF()
		return rep, p, nil
	}
	if want.N > rep.Head.N {
		return rep, &Problem{Line: lr.line + 1, N: rep.Head.N + 1, Kind: Truncated, off: lr.off, last: true,
			Detail: fmt.Sprintf("the log ends at entry %d but the remembered head is entry %d", rep.Head.N, want.N)}, nil
	}
	return rep, nil, nil
}

// findEntry reads on for an intact line holding entry n and returns its
// line number (0 if there is none).
func findEntry(lr *lineReader, n uint64) (int, error) {
	for {
		b, _, term, long, err := lr.next()
		if errors.Is(err, io.EOF) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if long || !term {
			continue
		}
		if e, why, _ := checkLine(b); why == "" && e.N == n {
			return lr.line, nil
		}
	}
}
