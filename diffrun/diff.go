package diffrun

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Options tune Diff.
type Options struct {
	// PixelThreshold is the ratio of changed pixels above which two steps'
	// last frames differ (default 0.02). A pixel changed when its
	// perceptual (YIQ) colour distance exceeds 10% of the largest possible,
	// so JPEG noise does not count.
	PixelThreshold float64
	// TimingFactor: a step whose duration changed by more than this factor
	// (default 2) and by more than a second is reported (never material).
	TimingFactor float64
	// Frame fetches a frame's bytes by CID; nil skips the pixel channel.
	Frame func(cid string) ([]byte, error)
}

// Defaults of Options.
const (
	DefaultPixelThreshold = 0.02
	DefaultTimingFactor   = 2.0
	timingFloor           = int64(time.Second)
)

// Channels of a Difference.
const (
	ChannelOutcome  = "outcome"
	ChannelNetwork  = "network"
	ChannelConsole  = "console"
	ChannelSnapshot = "snapshot"
	ChannelPixels   = "pixels"
	ChannelTiming   = "timing"
	ChannelCheck    = "check"
)

// Ops of a Pair.
const (
	OpMatch    = "match"    // the same signature on both sides
	OpChanged  = "changed"  // aligned, but the signature differs (another path or target)
	OpInserted = "inserted" // only in b
	OpDeleted  = "deleted"  // only in a
)

// RunSummary is one side of a report.
type RunSummary struct {
	ID        string `json:"id"`
	Project   string `json:"project,omitempty"`
	Flow      string `json:"flow"`
	Verdict   string `json:"verdict"`
	State     string `json:"state"`
	Steps     int    `json:"steps"`
	Signature string `json:"signature"`
	Acked     uint64 `json:"acked,omitempty"`
}

// Report is the comparison of two runs.
type Report struct {
	A        RunSummary `json:"a"`
	B        RunSummary `json:"b"`
	SameFlow bool       `json:"same_flow"`
	// Notes say what the comparison could not do or should be read with:
	// a run still being ingested, different flows, a banded alignment.
	Notes []string `json:"notes,omitempty"`
	// FirstDivergence is the first pair with a material difference; null
	// when there is none. Runs of different flows get one too (their
	// shared steps are compared), with a note saying they differ.
	FirstDivergence *Divergence `json:"first_divergence"`
	Pairs           []Pair      `json:"pairs"`
}

// Divergence names where two runs part and why, in one line.
type Divergence struct {
	StepA       int    `json:"step_a"`
	StepB       int    `json:"step_b"`
	Channel     string `json:"channel"`
	Explanation string `json:"explanation"`
}

// Pair is one line of the alignment.
type Pair struct {
	StepA       int          `json:"step_a"` // 0 = no step on that side
	StepB       int          `json:"step_b"`
	Op          string       `json:"op"`        // match, changed, inserted (only in b), deleted (only in a)
	Signature   string       `json:"signature"` // "a's → b's" for changed
	Material    bool         `json:"material"`
	Differences []Difference `json:"differences,omitempty"`
}

// Difference is one thing that differs in an aligned pair.
type Difference struct {
	Channel  string `json:"channel"` // outcome, network, console, snapshot, pixels, timing, check
	Kind     string `json:"kind"`
	Detail   string `json:"detail"`
	Material bool   `json:"material"`
}

// Diff aligns two runs step by step and compares each aligned pair; the
// first pair with a material difference is the first divergence. a is the
// reference (usually the passing run), b the run under suspicion: what is
// new in b is weighed more than what vanished from a (docs/design.md,
// diffrun, says exactly what is material). Neither run is modified.
func Diff(a, b *Run, o Options) *Report {
	if a == nil {
		a = &Run{}
	}
	if b == nil {
		b = &Run{}
	}
	if o.PixelThreshold <= 0 {
		o.PixelThreshold = DefaultPixelThreshold
	}
	if o.TimingFactor <= 1 {
		o.TimingFactor = DefaultTimingFactor
	}
	rep := &Report{A: summarize(a), B: summarize(b), Pairs: []Pair{}}
	rep.SameFlow = a.Flow == b.Flow || a.Flow == "" || b.Flow == ""
	for _, x := range []struct {
		name string
		r    *Run
	}{{"a", a}, {"b", b}} {
		if x.r.State == "open" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s is still being ingested: compared through seq %d", x.name, x.r.Acked))
		}
	}
	switch {
	case !rep.SameFlow:
		rep.Notes = append(rep.Notes, fmt.Sprintf("runs of different flows: %s vs %s; steps are aligned by signature only (a step one flow lacks is inserted or deleted, never forced to match, and a longer flow is not a divergence)", a.Flow, b.Flow))
	case a.Flow == "" && b.Flow == "" && (len(a.Steps) > 0 || len(b.Steps) > 0):
		rep.Notes = append(rep.Notes, "neither run names its flow: compared as the same flow")
	case a.Flow == "" || b.Flow == "":
		rep.Notes = append(rep.Notes, "one run does not name its flow: compared as the same flow")
	}
	if len(a.Steps) == 0 && len(b.Steps) == 0 {
		rep.Notes = append(rep.Notes, "neither run has a step")
	} else if len(a.Steps) == 0 {
		rep.Notes = append(rep.Notes, "a has no step")
	} else if len(b.Steps) == 0 {
		rep.Notes = append(rep.Notes, "b has no step")
	}

	in := interner{}
	ka, kb := keysOf(a.Steps, in), keysOf(b.Steps, in)
	pairs, banded := align(ka, kb, maxAlignCells)
	if banded {
		rep.Notes = append(rep.Notes, "runs too long for a full alignment: aligned within a band around the diagonal")
	}
	d := newDiffer(a, b, o)
	rep.Pairs = make([]Pair, 0, len(pairs))
	// Gaps after the last step of one side trail: that side ended early.
	lastAPos, lastBPos := -1, -1
	for k, p := range pairs {
		if p.i >= 0 {
			lastAPos = k
		}
		if p.j >= 0 {
			lastBPos = k
		}
	}
	lastA, aligned := -1, 0
	endedEarly := false
	for k, p := range pairs {
		var pr Pair
		switch {
		case p.i >= 0 && p.j >= 0:
			pr = d.pair(p.i, p.j, p.i-1, p.i+1)
			lastA = p.i
		case p.i >= 0:
			pr = d.deleted(p.i)
			lastA = p.i
			if rep.SameFlow && !endedEarly && k > lastBPos && b.State != "open" {
				endedEarly = true
				pr.Differences = append(pr.Differences, Difference{ChannelOutcome, "ended_early",
					endedText("b", b, "a", a), true})
			}
		default:
			pr = d.inserted(p.j, lastA, lastA+1)
			if rep.SameFlow && !endedEarly && k > lastAPos && a.State != "open" {
				endedEarly = true
				pr.Differences = append(pr.Differences, Difference{ChannelOutcome, "ended_early",
					endedText("a", a, "b", b), true})
			}
		}
		for _, x := range pr.Differences {
			pr.Material = pr.Material || x.Material
		}
		rep.Pairs = append(rep.Pairs, pr)
		if pr.Material && rep.FirstDivergence == nil {
			rep.FirstDivergence = d.explain(pr)
		}
		if p.i >= 0 && p.j >= 0 {
			aligned++
		}
	}
	if !rep.SameFlow && aligned == 0 && len(a.Steps) > 0 && len(b.Steps) > 0 {
		rep.Notes = append(rep.Notes, "the flows share no step: nothing was compared step to step, no divergence is named")
		rep.FirstDivergence = nil
	}
	if d.frameErrors > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d frame pairs could not be read or decoded: their pixels were not compared", d.frameErrors))
	}
	if rep.FirstDivergence == nil && a.Verdict != "" && b.Verdict != "" && a.Verdict != b.Verdict {
		rep.Notes = append(rep.Notes, fmt.Sprintf("verdicts differ (%s vs %s) but no step differs materially", a.Verdict, b.Verdict))
	}
	return rep
}

// endedText says that run short stopped while run long went on.
func endedText(sn string, short *Run, ln string, long *Run) string {
	last := long.Steps[len(long.Steps)-1].N
	if len(short.Steps) == 0 {
		return fmt.Sprintf("%s has no step; %s went on to step %d", sn, ln, last)
	}
	return fmt.Sprintf("%s ended after step %d; %s went on to step %d", sn, short.Steps[len(short.Steps)-1].N, ln, last)
}

func summarize(r *Run) RunSummary {
	return RunSummary{ID: r.ID, Project: r.Project, Flow: r.Flow, Verdict: r.Verdict, State: r.State,
		Steps: len(r.Steps), Signature: Signature(r), Acked: r.Acked}
}

// differ holds a comparison's per-run caches.
type differ struct {
	a, b        *Run
	o           Options
	oa, ob      string // the runs' origins
	snapA       map[string]*snapshot
	snapB       map[string]*snapshot
	lines       map[string]snapLine // parsed snapshot lines, without refs
	frameCache  map[string]*frameImage
	frameErrors int
}

func newDiffer(a, b *Run, o Options) *differ {
	return &differ{a: a, b: b, o: o, oa: runOrigin(a), ob: runOrigin(b),
		snapA: map[string]*snapshot{}, snapB: map[string]*snapshot{}, lines: map[string]snapLine{}}
}

var emptyStep Step

// pair compares aligned steps i of a and j of b; na, nb are the a steps
// next to i (for console messages that moved by a step).
func (d *differ) pair(i, j, na, nb int) Pair {
	x, y := &d.a.Steps[i], &d.b.Steps[j]
	pr := Pair{StepA: x.N, StepB: y.N, Op: OpMatch, Signature: x.Signature()}
	if sx, sy := x.Signature(), y.Signature(); sx != sy {
		pr.Op, pr.Signature = OpChanged, sx+" → "+sy
		pr.Differences = append(pr.Differences, Difference{ChannelOutcome, "step", "step " + stepChange(x, y), false})
	}
	var diffs []Difference
	diffs = d.outcome(diffs, x, y)
	diffs = d.network(diffs, x, y)
	diffs = d.console(diffs, x, y, na, nb)
	diffs = d.checks(diffs, x, y)
	diffs = d.snapshot(diffs, x, y)
	diffs = d.pixels(diffs, x, y)
	diffs = d.timing(diffs, x, y)
	pr.Differences = append(pr.Differences, diffs...)
	return pr
}

// inserted reports b's step j, which a does not have. A failed step is
// material unless it is a retry: the steps after it repeat its action
// until one does not fail (then nothing of it is material).
func (d *differ) inserted(j, na, nb int) Pair {
	y := &d.b.Steps[j]
	pr := Pair{StepB: y.N, Op: OpInserted, Signature: y.Signature()}
	var diffs []Difference
	retry := false
	if y.Outcome == "failed" {
		// A retry: the same action again, until an attempt does not fail.
		k := j + 1
		for ; k < len(d.b.Steps); k++ {
			nx := &d.b.Steps[k]
			if nx.Verb != y.Verb || nx.Target != y.Target {
				break
			}
			if nx.Outcome != "failed" {
				retry = true
				break
			}
		}
		if retry {
			diffs = append(diffs, Difference{ChannelOutcome, "retry",
				fmt.Sprintf("failed %s, retried until step %d", y.ErrorCode, d.b.Steps[k].N), false})
		} else {
			diffs = append(diffs, Difference{ChannelOutcome, "new_failed_step",
				fmt.Sprintf("a step only b has failed: %s", outcomeText(y)), true})
		}
	}
	diffs = d.network(diffs, &emptyStep, y)
	diffs = d.console(diffs, &emptyStep, y, na, nb)
	diffs = d.checks(diffs, &emptyStep, y)
	if retry {
		for k := range diffs {
			diffs[k].Material = false
		}
	}
	pr.Differences = diffs
	return pr
}

// deleted reports a's step i, which b does not have: nothing of it is
// material by itself (a skipped step; a b that ended early is weighed by
// Diff).
func (d *differ) deleted(i int) Pair {
	x := &d.a.Steps[i]
	pr := Pair{StepA: x.N, Op: OpDeleted, Signature: x.Signature()}
	var diffs []Difference
	diffs = d.network(diffs, x, &emptyStep)
	diffs = d.console(diffs, x, &emptyStep, -1, -1)
	diffs = d.checks(diffs, x, &emptyStep)
	pr.Differences = diffs
	return pr
}

func stepChange(x, y *Step) string {
	var parts []string
	if x.Verb != y.Verb {
		parts = append(parts, "verb "+x.Verb+" → "+y.Verb)
	}
	if x.Target != y.Target {
		parts = append(parts, "target "+orNone(x.Target)+" → "+orNone(y.Target))
	}
	if x.Path != y.Path {
		parts = append(parts, "path "+orNone(x.Path)+" → "+orNone(y.Path))
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func outcomeText(s *Step) string {
	switch {
	case s.Outcome == "":
		return "(no receipt)"
	case s.ErrorCode != "":
		return s.Outcome + " " + s.ErrorCode
	}
	return s.Outcome
}

// outcome: a changed outcome or error code is material (unless a side has
// no receipt, which says nothing); so is a navigation to another page.
func (d *differ) outcome(diffs []Difference, x, y *Step) []Difference {
	if x.Outcome != y.Outcome || x.ErrorCode != y.ErrorCode {
		diffs = append(diffs, Difference{ChannelOutcome, "outcome",
			"outcome " + outcomeText(x) + " → " + outcomeText(y), x.Outcome != "" && y.Outcome != ""})
	} else if x.ErrorMessage != y.ErrorMessage {
		mx := stripOrigin(NormalizeText(x.ErrorMessage), d.oa)
		my := stripOrigin(NormalizeText(y.ErrorMessage), d.ob)
		if mx != my {
			diffs = append(diffs, Difference{ChannelOutcome, "error_message",
				"error message " + strconv.Quote(clip(mx, 160)) + " → " + strconv.Quote(clip(my, 160)), false})
		}
	}
	if x.Navigation != y.Navigation && x.Outcome != "" && y.Outcome != "" {
		diffs = append(diffs, Difference{ChannelOutcome, "navigation",
			"navigation " + navText(x.Navigation) + " → " + navText(y.Navigation), true})
	}
	return diffs
}

func navText(p string) string {
	if p == "" {
		return "(stayed)"
	}
	return p
}

// timing: a step that took more than TimingFactor times as long (or as
// short), and more than a second more (or less). Never material.
func (d *differ) timing(diffs []Difference, x, y *Step) []Difference {
	dx, dy := x.EndTS-x.StartTS, y.EndTS-y.StartTS
	if dx <= 0 || dy <= 0 {
		return diffs
	}
	f := d.o.TimingFactor
	switch {
	case float64(dy) > f*float64(dx) && dy-dx > timingFloor:
		diffs = append(diffs, Difference{ChannelTiming, "slower", fmtDur(dx) + " → " + fmtDur(dy), false})
	case float64(dx) > f*float64(dy) && dx-dy > timingFloor:
		diffs = append(diffs, Difference{ChannelTiming, "faster", fmtDur(dx) + " → " + fmtDur(dy), false})
	}
	return diffs
}

func fmtDur(ns int64) string {
	return strconv.FormatFloat(float64(ns)/1e9, 'f', 1, 64) + "s"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// stripOrigin writes requests and URLs to the run's own application by
// path, so runs on different hosts compare.
func stripOrigin(s, origin string) string {
	if origin == "" || !strings.Contains(s, origin) {
		return s
	}
	return strings.ReplaceAll(s, origin+"/", "/")
}

// runOrigin is r.Origin, or else the most common origin of its requests.
func runOrigin(r *Run) string {
	if r.Origin != "" {
		o, _ := splitOrigin(Template(r.Origin))
		return o
	}
	count := map[string]int{}
	best, bestN := "", 0
	for i := range r.Steps {
		for k := range r.Steps[i].Requests {
			q := &r.Steps[i].Requests[k]
			t := q.Template
			if t == "" {
				t = Template(q.URL)
			}
			o, _ := splitOrigin(t)
			if o == "" {
				continue
			}
			count[o]++
			if count[o] > bestN {
				best, bestN = o, count[o]
			}
		}
	}
	return best
}

// explain writes the first divergence's one line.
func (d *differ) explain(p Pair) *Divergence {
	best := -1
	for k, x := range p.Differences {
		if x.Material && (best < 0 || channelRank(x.Channel) < channelRank(p.Differences[best].Channel)) {
			best = k
		}
	}
	if best < 0 {
		return nil
	}
	x := p.Differences[best]
	var where, action string
	switch {
	case p.StepA > 0 && p.StepB > 0:
		if p.StepA == p.StepB {
			where = fmt.Sprintf("step %d", p.StepA)
		} else {
			where = fmt.Sprintf("step %d of a, step %d of b", p.StepA, p.StepB)
		}
		action = d.stepByN(d.a, p.StepA).action()
	case p.StepB > 0:
		where = fmt.Sprintf("step %d of b (only in b)", p.StepB)
		action = d.stepByN(d.b, p.StepB).action()
	default:
		where = fmt.Sprintf("step %d of a (only in a)", p.StepA)
		action = d.stepByN(d.a, p.StepA).action()
	}
	line := "runs diverge at " + where
	if action != "" {
		line += " (" + action + ")"
	}
	return &Divergence{StepA: p.StepA, StepB: p.StepB, Channel: x.Channel, Explanation: line + ": " + x.Detail}
}

func (d *differ) stepByN(r *Run, n int) *Step {
	for i := range r.Steps {
		if r.Steps[i].N == n {
			return &r.Steps[i]
		}
	}
	return &emptyStep
}

// channelRank orders channels by how well they explain a divergence: the
// request that failed says why the step failed, the step's outcome says
// what failed, then checks, console, the page.
func channelRank(c string) int {
	switch c {
	case ChannelNetwork:
		return 0
	case ChannelOutcome:
		return 1
	case ChannelCheck:
		return 2
	case ChannelConsole:
		return 3
	case ChannelSnapshot:
		return 4
	}
	return 5
}
