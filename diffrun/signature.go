package diffrun

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flightrec/flightrec/store"
)

// Signature is a run's failure signature ("" for a passing run): what its
// first failure was, normalized, so that runs failing the same way share
// it. For the first failed step, the first of:
//
//   - a request of the step that failed: "POST /api/checkout 500
//     GIFT_CARD_STATE" (method, path template relative to the app's origin,
//     status or network error, the body's error code);
//   - a failed check of the step: "check failed: state \"GET /api/orders/last\"";
//   - a console error of the step: "console error: checkout failed: X";
//   - the step's error code and action: "NOT_FOUND click button \"Pay\"".
//
// Without a failed step, the first failed check, then the first console
// error; a failing verdict without any of them is "verdict fail". A run
// whose verdict is pass or not_run has none.
func Signature(r *Run) string {
	if r == nil || r.Verdict == "pass" || r.Verdict == "not_run" {
		return ""
	}
	origin := runOrigin(r)
	for i := range r.Steps {
		if s := &r.Steps[i]; s.Outcome == "failed" {
			return stepSignature(s, origin)
		}
	}
	for i := range r.Steps {
		for k := range r.Steps[i].Checks {
			if c := &r.Steps[i].Checks[k]; !c.Passed {
				return "check failed: " + checkKey(c, origin)
			}
		}
	}
	for i := range r.Steps {
		for k := range r.Steps[i].Console {
			if c := &r.Steps[i].Console[k]; c.Level != "warn" && c.Level != "warning" {
				return consoleSignature(c, origin)
			}
		}
	}
	switch r.Verdict {
	case "fail", "flaky", "blocked":
		return "verdict " + r.Verdict
	}
	return ""
}

func stepSignature(s *Step, origin string) string {
	// A 5xx or network error first, then an error answer with a code.
	var coded *Request
	for k := range s.Requests {
		q := &s.Requests[k]
		if !fetchLike(q) {
			continue
		}
		if failing(q) {
			return requestSignature(q, origin)
		}
		if coded == nil && q.Status >= 400 && q.ErrorCode != "" {
			coded = q
		}
	}
	if coded != nil {
		return requestSignature(coded, origin)
	}
	for k := range s.Checks {
		if c := &s.Checks[k]; !c.Passed {
			return "check failed: " + checkKey(c, origin)
		}
	}
	for k := range s.Console {
		if c := &s.Console[k]; c.Level != "warn" && c.Level != "warning" {
			return consoleSignature(c, origin)
		}
	}
	code := s.ErrorCode
	if code == "" {
		code = "FAILED"
	}
	if a := s.action(); a != "" {
		return code + " " + a
	}
	return code
}

// requestSignature: method, path template (no query: it varies), status
// or network error, error code.
func requestSignature(q *Request, origin string) string {
	rel := reqRel(q, origin)
	rel, _, _ = strings.Cut(rel, "?")
	return q.Method + " " + rel + " " + statusText(q)
}

func consoleSignature(c *ConsoleLine, origin string) string {
	key, _ := consoleKey(c, origin)
	_, t, _ := strings.Cut(key, "\x00")
	// The first line: a stack below it varies with the build.
	t, _, _ = strings.Cut(t, " at ")
	return "console " + levelOf(c) + ": " + clip(strings.TrimSpace(t), 200)
}

// OddRun is a run outside a group's signature, with its own.
type OddRun struct {
	ID        string `json:"id"`
	Signature string `json:"signature"`
}

// GroupReport says how many runs share the most common failure signature.
type GroupReport struct {
	Reproduced int      `json:"reproduced"`
	Of         int      `json:"of"`
	Signature  string   `json:"signature"`
	Members    []string `json:"members"` // run ids sharing it
	Odd        []OddRun `json:"odd,omitempty"`
}

// Group finds the most common non-empty failure signature among runs (the
// first seen wins a tie): "reproduced k of n". Passing runs count in n and
// are listed as odd with an empty signature.
func Group(runs []*Run) GroupReport { return GroupAgainst(runs, "") }

// GroupAgainst is Group counting the runs that show want, the seed's
// signature a rerun tries to reproduce; "" counts the most common one.
func GroupAgainst(runs []*Run, want string) GroupReport {
	g := GroupReport{Of: len(runs), Members: []string{}}
	sigs := make([]string, len(runs))
	count := map[string]int{}
	for k, r := range runs {
		sigs[k] = Signature(r)
		if sigs[k] != "" {
			count[sigs[k]]++
		}
	}
	for _, s := range sigs {
		if s != "" && count[s] > g.Reproduced {
			g.Reproduced, g.Signature = count[s], s
		}
	}
	if want != "" {
		g.Reproduced, g.Signature = count[want], want
	}
	for k, r := range runs {
		id := ""
		if r != nil {
			id = r.ID
		}
		if g.Signature != "" && sigs[k] == g.Signature {
			g.Members = append(g.Members, id)
		} else {
			g.Odd = append(g.Odd, OddRun{ID: id, Signature: sigs[k]})
		}
	}
	return g
}

// Verdict is a group's verdict: reproduced when every run shows the
// signature, not_reproduced when none does (or there is none), flaky when
// some do.
func (g GroupReport) Verdict() string {
	switch {
	case g.Signature == "" || g.Reproduced == 0:
		return "not_reproduced"
	case g.Reproduced == g.Of:
		return "reproduced"
	}
	return "flaky"
}

// Summary says the verdict in one line: "reproduced 3 of 3: SIGNATURE",
// "flaky: reproduced 2 of 3: SIGNATURE", "not_reproduced: 0 of 3 show
// SIGNATURE" (or "… no run failed").
func (g GroupReport) Summary() string {
	switch v := g.Verdict(); {
	case v == "flaky":
		return "flaky: " + g.String()
	case v == "reproduced":
		return g.String()
	case g.Signature == "":
		return fmt.Sprintf("not_reproduced: no failure signature in %d runs", g.Of)
	default:
		return fmt.Sprintf("not_reproduced: 0 of %d show %s", g.Of, g.Signature)
	}
}

// String is "reproduced 3 of 4: SIGNATURE".
func (g GroupReport) String() string {
	if g.Signature == "" {
		return fmt.Sprintf("no failure signature in %d runs", g.Of)
	}
	return fmt.Sprintf("reproduced %d of %d: %s", g.Reproduced, g.Of, g.Signature)
}

// RecordSignature derives finished recording id's failure signature from
// its indexed events and records it: in the store (so a reindex restores
// it) and in the index's row (so search finds it). The verdict and the
// row written come from the store's manifest, the truth, never from an
// index row that may not show the finish yet (ClickHouse reads can lag
// its writes). A passing run has no signature and nothing is written; a
// recording that is gone is not an error.
func RecordSignature(ctx context.Context, st *store.Store, idx store.Index, id string) error {
	row, _, err := st.RowOf(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// A finished recording's signature never changes: one recorded is
	// final.
	if row.State != store.StateFinished || row.Verdict == "pass" || row.Verdict == "not_run" || row.FailureSignature != "" {
		return nil
	}
	run, err := Load(ctx, st, idx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	run.Verdict = row.Verdict
	sig := Signature(run)
	if sig == "" {
		return nil
	}
	if err := st.SetFailureSignature(id, sig); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	row.FailureSignature = sig
	return idx.PutRecording(ctx, row)
}
