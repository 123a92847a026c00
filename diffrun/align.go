package diffrun

// Alignment costs (see docs/design.md, diffrun). Two steps are
// comparable when their signatures (verb, target, path template at the
// step's start) agree; a gap is a step only one run has.
const (
	costGap = 8 // a step only in a (deleted) or only in b (inserted)
	// Substituting step x of a by step y of b:
	costSame       = 0  // the same signature and the same outcome and error code
	costOutcome    = 1  // added when the outcome or error code differs (prefers the retry that agrees)
	costPath       = 4  // same verb and target, another path (the page moved)
	costTarget     = 12 // same verb and path, another target (a renamed button)
	costImpossible = 1 << 28
	// Anything else (another verb; or another target and another path) is
	// never substituted: a deletion and an insertion (16) are cheaper.
)

// maxAlignCells bounds the dynamic programme: beyond it the alignment is
// computed in a band around the diagonal (and the report says so).
const maxAlignCells = 16 << 20

// stepKey is a step's signature parts as small integers.
type stepKey struct {
	sig, vt, vp, out int32 // signature; verb+target; verb+path; outcome+error code
}

// interner gives equal strings equal ids.
type interner map[string]int32

func (in interner) id(s string) int32 {
	if v, ok := in[s]; ok {
		return v
	}
	v := int32(len(in))
	in[s] = v
	return v
}

func keysOf(steps []Step, in interner) []stepKey {
	out := make([]stepKey, len(steps))
	for i := range steps {
		s := &steps[i]
		out[i] = stepKey{
			sig: in.id(s.Verb + "\x00" + s.Target + "\x00" + s.Path),
			vt:  in.id(s.Verb + "\x00" + s.Target + "\x01"),
			vp:  in.id(s.Verb + "\x02" + s.Path),
			out: in.id(s.Outcome + "\x03" + s.ErrorCode),
		}
	}
	return out
}

func subst(x, y stepKey) int32 {
	var c int32
	switch {
	case x.sig == y.sig:
		c = costSame
	case x.vt == y.vt:
		c = costPath
	case x.vp == y.vp:
		c = costTarget
	default:
		return costImpossible
	}
	if x.out != y.out {
		c += costOutcome
	}
	return c
}

// ipair is an aligned pair of step indices; -1 is no step on that side.
type ipair struct{ i, j int }

// align aligns two step sequences with minimal total cost
// (Needleman–Wunsch). Of equal-cost alignments it prefers, read from the
// end, substitutions to gaps, so a gap lands as early as possible (the
// extra, failed attempt of a retry is the unmatched one, and the attempt
// that agrees with the other run is matched), and in a run of gaps it puts
// a's steps before b's. Identical leading and
// trailing steps are matched before the programme runs. It reports whether
// a band had to be used.
func align(a, b []stepKey, maxCells int) ([]ipair, bool) {
	n, m := len(a), len(b)
	p := 0
	for p < n && p < m && subst(a[p], b[p]) == costSame {
		p++
	}
	s := 0
	for s < n-p && s < m-p && subst(a[n-1-s], b[m-1-s]) == costSame {
		s++
	}
	out := make([]ipair, 0, max(n, m)+8)
	for k := 0; k < p; k++ {
		out = append(out, ipair{k, k})
	}
	mid, banded := nw(a[p:n-s], b[p:m-s], maxCells)
	for _, q := range mid {
		if q.i >= 0 {
			q.i += p
		}
		if q.j >= 0 {
			q.j += p
		}
		out = append(out, q)
	}
	for k := s; k > 0; k-- {
		out = append(out, ipair{n - k, m - k})
	}
	return out, banded
}

// Traceback directions.
const (
	dirDiag byte = iota
	dirUp        // a's step alone (deleted)
	dirLeft      // b's step alone (inserted)
)

// nw is the dynamic programme over a (rows) and b (columns), restricted to
// a band of half-width w around the diagonal when the full matrix would
// exceed maxCells.
func nw(a, b []stepKey, maxCells int) ([]ipair, bool) {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		out := make([]ipair, 0, n+m)
		for i := range n {
			out = append(out, ipair{i, -1})
		}
		for j := range m {
			out = append(out, ipair{-1, j})
		}
		return out, false
	}
	w := m
	banded := false
	if int64(n+1)*int64(m+1) > int64(maxCells) {
		w = maxCells / (2 * (n + 1))
		minW := (m+n-1)/n + 1 // ceil(m/n)+1 keeps consecutive rows' bands connected
		w = max(w, minW)
		banded = w < m
	}
	lo := make([]int, n+1)
	hi := make([]int, n+1)
	off := make([]int, n+2)
	for i := 0; i <= n; i++ {
		c := int(int64(i) * int64(m) / int64(n))
		lo[i] = max(0, c-w)
		hi[i] = min(m, c+w)
		off[i+1] = off[i] + hi[i] - lo[i] + 1
	}
	dir := make([]byte, off[n+1])
	prev := make([]int32, 0, 2*w+2)
	cur := make([]int32, 0, 2*w+2)
	// Row 0: only insertions.
	for j := lo[0]; j <= hi[0]; j++ {
		prev = append(prev, int32(j)*costGap)
		dir[off[0]+j-lo[0]] = dirLeft
	}
	const inf = int32(costImpossible) * 2
	for i := 1; i <= n; i++ {
		cur = cur[:0]
		plo, phi := lo[i-1], hi[i-1]
		x := a[i-1]
		d := dir[off[i]:off[i+1]]
		for j := lo[i]; j <= hi[i]; j++ {
			best, bd := inf, dirDiag
			if j >= 1 && j-1 >= plo && j-1 <= phi {
				if c := subst(x, b[j-1]); c < costImpossible {
					best = prev[j-1-plo] + c
				}
			}
			if j > lo[i] {
				if v := cur[j-1-lo[i]] + costGap; v < best {
					best, bd = v, dirLeft
				}
			}
			if j >= plo && j <= phi {
				if v := prev[j-plo] + costGap; v < best {
					best, bd = v, dirUp
				}
			}
			cur = append(cur, best)
			d[j-lo[i]] = bd
		}
		prev, cur = cur, prev
	}
	// Traceback from (n, m).
	out := make([]ipair, 0, max(n, m)+8)
	i, j := n, m
	for i > 0 || j > 0 {
		var dd byte
		switch {
		case i == 0:
			dd = dirLeft
		case j == 0:
			dd = dirUp
		case j < lo[i] || j > hi[i]:
			dd = dirUp // cannot happen with a connected band; stay safe
		default:
			dd = dir[off[i]+j-lo[i]]
		}
		switch dd {
		case dirDiag:
			out = append(out, ipair{i - 1, j - 1})
			i, j = i-1, j-1
		case dirUp:
			out = append(out, ipair{i - 1, -1})
			i--
		default:
			out = append(out, ipair{-1, j - 1})
			j--
		}
	}
	for l, r := 0, len(out)-1; l < r; l, r = l+1, r-1 {
		out[l], out[r] = out[r], out[l]
	}
	return out, banded
}
