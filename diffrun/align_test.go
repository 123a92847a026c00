package diffrun

import (
	"math/rand/v2"
	"testing"
)

// alignCost is the total cost of an alignment, checking that it is one:
// every step of each side once, in order.
func alignCost(t *testing.T, a, b []stepKey, ps []ipair) int32 {
	t.Helper()
	ni, nj := 0, 0
	var c int32
	for _, p := range ps {
		if p.i >= 0 {
			if p.i != ni {
				t.Fatalf("a's steps out of order at %+v (want %d)", p, ni)
			}
			ni++
		}
		if p.j >= 0 {
			if p.j != nj {
				t.Fatalf("b's steps out of order at %+v (want %d)", p, nj)
			}
			nj++
		}
		switch {
		case p.i >= 0 && p.j >= 0:
			s := subst(a[p.i], b[p.j])
			if s >= costImpossible {
				t.Fatalf("impossible substitution %+v", p)
			}
			c += s
		case p.i < 0 && p.j < 0:
			t.Fatal("an empty pair")
		default:
			c += costGap
		}
	}
	if ni != len(a) || nj != len(b) {
		t.Fatalf("covers %d/%d and %d/%d steps", ni, len(a), nj, len(b))
	}
	return c
}

// bestCost is the optimum by the plain recurrence.
func bestCost(a, b []stepKey) int32 {
	prev := make([]int32, len(b)+1)
	for j := range prev {
		prev[j] = int32(j) * costGap
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int32, len(b)+1)
		cur[0] = int32(i) * costGap
		for j := 1; j <= len(b); j++ {
			best := min(prev[j], cur[j-1]) + costGap
			if s := subst(a[i-1], b[j-1]); s < costImpossible {
				best = min(best, prev[j-1]+s)
			}
			cur[j] = best
		}
		prev = cur
	}
	return prev[len(b)]
}

func randomKeys(r *rand.Rand, n int) []stepKey {
	out := make([]stepKey, n)
	for i := range out {
		v := int32(r.IntN(4))
		t := int32(r.IntN(3))
		p := int32(r.IntN(2))
		out[i] = stepKey{sig: v*100 + t*10 + p, vt: v*10 + t, vp: v*10 + p + 1000, out: int32(r.IntN(2))}
	}
	return out
}

func TestAlignOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 500; k++ {
		a, b := randomKeys(r, r.IntN(12)), randomKeys(r, r.IntN(12))
		ps, banded := align(a, b, maxAlignCells)
		if banded {
			t.Fatal("banded on a tiny input")
		}
		if got, want := alignCost(t, a, b, ps), bestCost(a, b); got != want {
			t.Fatalf("case %d: cost %d, optimum %d\na=%v\nb=%v\n%v", k, got, want, a, b, ps)
		}
	}
}

// TestAlignBanded forces the band: the result is still an alignment, and
// optimal when the edits stay near the diagonal.
func TestAlignBanded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	in := interner{}
	var sa []Step
	for i := range 600 {
		sa = append(sa, sp("click", "button "+string(rune('A'+i%26))+string(rune('a'+i/26%26)), "/p"))
	}
	sb := append([]Step(nil), sa...)
	// A few retries and skipped steps.
	for k := 0; k < 6; k++ {
		i := 50 + r.IntN(500)
		sb = append(sb[:i+1], sb[i:]...)
		sb[i].Outcome = "failed"
		j := 50 + r.IntN(500)
		sb = append(sb[:j], sb[j+1:]...)
	}
	a, b := keysOf(sa, in), keysOf(sb, in)
	full, banded := align(a, b, maxAlignCells)
	if banded {
		t.Fatal("banded")
	}
	narrow, banded := align(a, b, 40*len(a))
	if !banded {
		t.Fatal("not banded")
	}
	if cf, cn := alignCost(t, a, b, full), alignCost(t, a, b, narrow); cf != cn || cf != bestCost(a, b) {
		t.Fatalf("full %d, banded %d, optimum %d", cf, cn, bestCost(a, b))
	}
	// Very different lengths with the narrowest band still align.
	long := keysOf(append(append([]Step(nil), sa...), sa...), in)
	ps, _ := align(a[:7], long, 1)
	alignCost(t, a[:7], long, ps)
	ps, _ = align(long, a[:3], 1)
	alignCost(t, long, a[:3], ps)

	// Through Diff, with a note.
	ra, rb := numbered("a", "f", sa...), numbered("b", "f", sb...)
	_ = Diff(ra, rb, Options{})
}

func TestAlignRetryPrefersAgreeingAttempt(t *testing.T) {
	in := interner{}
	pay := sp("click", `button "Pay"`, "/c")
	a := keysOf([]Step{pay, sp("wait", "x", "/c")}, in)
	// b retried: the failed first attempt is the gap, whatever the order.
	b := keysOf([]Step{failed(pay, "APP_ERROR"), pay, sp("wait", "x", "/c")}, in)
	ps, _ := align(a, b, maxAlignCells)
	if len(ps) != 3 || ps[0] != (ipair{-1, 0}) || ps[1] != (ipair{0, 1}) {
		t.Fatalf("%v", ps)
	}
	b = keysOf([]Step{pay, failed(pay, "APP_ERROR"), sp("wait", "x", "/c")}, in)
	ps, _ = align(a, b, maxAlignCells)
	if len(ps) != 3 || ps[0] != (ipair{0, 0}) || ps[1] != (ipair{-1, 1}) {
		t.Fatalf("%v", ps)
	}
}
