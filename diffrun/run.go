// Package diffrun compares recordings: it loads two runs step by step,
// aligns their steps (Needleman–Wunsch over step signatures, tolerating a
// retry, an extra wait or a skipped step), compares each aligned pair on
// every channel (outcome, network, console, interactive snapshot, pixels,
// timing, checks) after normalizing what differs between any two runs (ids,
// nonces, timestamps, refs), and names the first material divergence in one
// line. It also computes a run's failure signature and groups runs by it
// ("reproduced 3 of 4").
//
// docs/design.md (section diffrun) is the spec: costs, normalization and
// what is material.
package diffrun

// Run is one recording as diffrun compares it.
type Run struct {
	ID, Project, Flow, Verdict, State string // State: "open" or "finished"
	// Acked is the highest seq read: everything through it that the index
	// held when the run was loaded is in Steps.
	Acked uint64
	// Origin is the application's scheme://host (templated), from the first
	// document or snapshot. Requests to it are matched by path, so two runs
	// of the same app on different hosts compare. Optional: Diff derives it
	// from the requests when empty.
	Origin string
	Steps  []Step // steps 1..n in order (step 0, before the first action, is left out)
}

// Step is one step of a run.
type Step struct {
	N int
	// The alignment signature parts: action verb, target (role "name", or
	// css "selector" normalized, or for a target-less step what it waits
	// for or goes to), navigation path template at the step's start.
	Verb, Target, Path string
	// Outcome is done, failed or outcome_unknown ("" when the step has no
	// receipt yet).
	Outcome, ErrorCode, ErrorMessage string
	StartTS, EndTS                   int64 // unix ns
	// Navigation is the path template the step navigated to ("" if none).
	Navigation string
	Requests   []Request
	// Console holds error, exception and assert messages, and warnings
	// (Level "warn"), which are reported but never material.
	Console []ConsoleLine
	// Interactive is the interactive snapshot after the step (or the last
	// one in the step).
	Interactive string
	FrameCID    string // the step's last frame or screenshot
	Checks      []Check
	// Sockets are the WebSocket messages that went during the step, in
	// order, each as the socket's URL template, direction, opcode and
	// normalized payload ("ws://…/ws/cart: receive 1 {…}").
	Sockets []string
	// Observed says the step was inferred by an attached recorder (receipt
	// rule "observed"): its views were read when the next input was seen,
	// after the page's own handlers ran, not when the step ended.
	Observed bool
}

// Request is one request a step started.
type Request struct {
	Method, URL, Template string
	Status                int
	// Failed is the network error of a request that got no response.
	Failed string
	// ErrorCode is the "error" of a JSON body {"error":"X"} (or
	// {"error":{"code":"X"}}, {"code":"X"}) on a 4xx/5xx, when present.
	ErrorCode string
	// Type is the resource type (Document, XHR, Fetch, Script, …) when the
	// executor says it; "" is treated as a document/fetch/XHR-like request
	// unless the URL names a static asset.
	Type string
}

// ConsoleLine is one console message.
type ConsoleLine struct{ Level, Text, Normalized string }

// Check is one UI or state check of a step.
type Check struct {
	Type, Target string
	Passed       bool
}

// Signature is a step's alignment signature: verb, target and path.
func (s *Step) Signature() string {
	sig := s.Verb
	if s.Target != "" {
		sig += " " + s.Target
	}
	if s.Path != "" {
		sig += " @ " + s.Path
	}
	return sig
}

// action is a step's verb and target, as an explanation names it.
func (s *Step) action() string {
	if s.Target == "" {
		return s.Verb
	}
	return s.Verb + " " + s.Target
}
