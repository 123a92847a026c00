package diffrun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// loadKinds are the kinds a comparison reads (not dom, video or meta).
// ruleObserved is the receipt rule of a step an attached recorder
// inferred (executor/recorder.RuleObserved; diffrun reads events, not
// executors).
const ruleObserved = "observed"

var loadKinds = []event.Kind{event.KindReceipt, event.KindSnapshot, event.KindHAR,
	event.KindConsole, event.KindCheck, event.KindFrame, event.KindScreenshot}

// Load reads a recording (finished or still open: then everything
// acknowledged and indexed so far, State "open"). Events are found through
// the index (one paged query per kind it compares, never the DOM stream)
// and their payloads read from the store's log, as playback serves them;
// frames are named by their blob CID without being read. Everything the
// index held through its cursor when Load started is read, nothing after
// it, and Acked says which seq that was.
//
// A recording the store knows but the index has not seen yet loads with no
// steps, and a finished one the index has not caught up with loads as
// "open": in both, what is missing is not yet known, and Diff does not
// count it as a run that ended early. An unknown id is an error wrapping
// store.ErrNotFound.
func Load(ctx context.Context, st *store.Store, idx store.Index, id string) (*Run, error) {
	if !store.ValidRecordingID(id) {
		return nil, fmt.Errorf("diffrun: recording %q: %w", id, store.ErrNotFound)
	}
	row, err := idx.Recording(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		r, _, merr := st.RowOf(id)
		if merr != nil {
			return nil, fmt.Errorf("diffrun: recording %s: %w", id, store.ErrNotFound)
		}
		// Nothing indexed yet: open, as far as a comparison can tell.
		return &Run{ID: id, Project: r.Project, Flow: r.Flow, Verdict: r.Verdict, State: store.StateOpen}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("diffrun: recording %s: %w", id, err)
	}
	run := &Run{ID: row.ID, Project: row.Project, Flow: row.Flow, Verdict: row.Verdict, State: row.State}
	if run.State != store.StateFinished {
		run.State = store.StateOpen
	} else if m, _, err := st.Manifest(id); err == nil && row.IndexedTo < m.LastSeq {
		// Finished, but the index has not caught up: what it holds so far
		// is compared as an open run's would be (its missing tail is no
		// divergence).
		run.State = store.StateOpen
	}
	l := &loader{id: id, idx: idx, rd: st.NewReader(), through: row.IndexedTo, steps: map[int]*stepAcc{}}
	defer l.rd.Close()
	for _, k := range loadKinds {
		if err := l.kind(ctx, k); err != nil {
			return nil, err
		}
	}
	l.build(run)
	run.Acked = l.through
	return run, nil
}

type loader struct {
	id      string
	idx     store.Index
	rd      *store.Reader
	through uint64
	steps   map[int]*stepAcc
	origin  string // the first snapshot's origin
	// messages are every WebSocket message, placed in steps by time in
	// build: a socket's entry is sent once, at the step it opened in, but
	// its messages belong to the steps they went in.
	messages []timedMessage
}

type timedMessage struct {
	ts  int64 // unix ns
	key string
}

// stepAcc gathers one step's events.
type stepAcc struct {
	receipt    *event.Receipt
	snapAfter  bool
	snapshot   string
	frameSeq   uint64
	frame      string
	requests   []Request
	docs       []string // URLs of successful document requests, in order
	console    []ConsoleLine
	checks     []Check
	minTS      int64
	maxTS      int64
	hasReceipt bool
}

func (l *loader) acc(step int, ts int64) *stepAcc {
	a := l.steps[step]
	if a == nil {
		a = &stepAcc{minTS: ts, maxTS: ts}
		l.steps[step] = a
	}
	a.minTS = min(a.minTS, ts)
	a.maxTS = max(a.maxTS, ts)
	return a
}

// kind reads every indexed event of one kind through the cursor.
func (l *loader) kind(ctx context.Context, k event.Kind) error {
	var after uint64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows, err := l.idx.Events(ctx, store.EventQuery{Recording: l.id, Kind: k, AfterSeq: after, Limit: store.MaxEventsPage})
		if err != nil {
			return fmt.Errorf("diffrun: recording %s: events: %w", l.id, err)
		}
		for i := range rows {
			if rows[i].Seq > l.through {
				return nil
			}
			if err := l.event(&rows[i]); err != nil {
				return err
			}
		}
		if len(rows) < store.MaxEventsPage {
			return nil
		}
		after = rows[len(rows)-1].Seq
	}
}

func (l *loader) read(row *store.EventRow) (json.RawMessage, error) {
	rec, err := l.rd.Read(l.id, row.Loc)
	if err != nil {
		return nil, fmt.Errorf("diffrun: recording %s: event %d: %w", l.id, row.Seq, err)
	}
	if rec.Seq != row.Seq {
		return nil, fmt.Errorf("diffrun: recording %s: the index points event %d at record %d (reindex)", l.id, row.Seq, rec.Seq)
	}
	return rec.Data, nil
}

// harEntry is the part of a HAR entry a comparison needs.
type harEntry struct {
	Request struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
	Response struct {
		Status  int              `json:"status"`
		Content event.HARContent `json:"content"`
		Error   string           `json:"_error"`
	} `json:"response"`
	ResourceType string                   `json:"_resourceType"`
	Messages     []event.WebSocketMessage `json:"_webSocketMessages"`
}

func (l *loader) event(row *store.EventRow) error {
	switch row.Kind {
	case event.KindFrame, event.KindScreenshot:
		if row.CID == "" || row.Step == 0 {
			return nil // dropped by redaction, or before the first action
		}
		a := l.acc(row.Step, row.TS)
		if row.Seq >= a.frameSeq {
			a.frameSeq, a.frame = row.Seq, row.CID
		}
		return nil
	}
	data, err := l.read(row)
	if err != nil {
		return err
	}
	a := l.acc(row.Step, row.TS)
	switch row.Kind {
	case event.KindReceipt:
		var r event.Receipt
		if json.Unmarshal(data, &r) != nil || r.Action.Verb == "" {
			return nil // a receipt redaction dropped
		}
		a.receipt, a.hasReceipt = &r, true
	case event.KindSnapshot:
		var s event.Snapshot
		if json.Unmarshal(data, &s) != nil {
			return nil
		}
		if l.origin == "" && s.Origin != "" {
			l.origin = s.Origin
		}
		if s.View != "interactive" {
			return nil
		}
		after := s.When == "after"
		if after || !a.snapAfter {
			a.snapAfter, a.snapshot = after, s.Text
		}
	case event.KindHAR:
		var h harEntry
		if json.Unmarshal(data, &h) != nil || h.Request.URL == "" {
			return nil
		}
		req := Request{Method: h.Request.Method, URL: h.Request.URL, Template: Template(h.Request.URL),
			Status: h.Response.Status, Failed: h.Response.Error, Type: h.ResourceType}
		for _, m := range h.Messages {
			l.messages = append(l.messages, timedMessage{ts: int64(m.Time * 1e9), key: req.Template + ": " + messageKey(m)})
		}
		if req.Status >= 400 {
			req.ErrorCode = h.Response.Content.ErrorCode()
		}
		a.requests = append(a.requests, req)
		if strings.EqualFold(req.Type, "document") && req.Status >= 200 && req.Status < 300 {
			a.docs = append(a.docs, req.URL)
		}
	case event.KindConsole:
		var c event.Console
		if json.Unmarshal(data, &c) != nil {
			return nil
		}
		level := ""
		switch c.Level {
		case "error", "exception", "assert":
			level = c.Level
		case "warn", "warning":
			level = "warn"
		default:
			return nil
		}
		a.console = append(a.console, ConsoleLine{Level: level, Text: c.Text, Normalized: NormalizeText(c.Text)})
	case event.KindCheck:
		var c event.Check
		if json.Unmarshal(data, &c) != nil || c.Type == "" {
			return nil
		}
		a.checks = append(a.checks, Check{Type: c.Type, Target: c.Target, Passed: c.Passed})
	}
	return nil
}

// build turns the gathered events into steps, following the page's URL
// from step to step for the path part of each signature.
func (l *loader) build(run *Run) {
	nums := make([]int, 0, len(l.steps))
	for n := range l.steps {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	cur := "" // the page's URL
	if a := l.steps[0]; a != nil && len(a.docs) > 0 {
		cur = a.docs[len(a.docs)-1]
	}
	if cur != "" {
		run.Origin, _ = splitOrigin(Template(cur))
	} else if l.origin != "" {
		run.Origin, _ = splitOrigin(Template(l.origin))
	}
	for i, n := range nums {
		if n == 0 {
			continue
		}
		a := l.steps[n]
		if !a.hasReceipt && run.State == store.StateOpen && i == len(nums)-1 {
			break // the step in progress: its receipt has not come yet
		}
		s := Step{N: n, StartTS: a.minTS, EndTS: a.maxTS, Requests: a.requests, Console: a.console,
			Interactive: a.snapshot, FrameCID: a.frame, Checks: a.checks}
		from, to := cur, ""
		if r := a.receipt; r != nil {
			s.Verb = r.Action.Verb
			s.Target = describeTarget(r.Action, r.Resolved)
			s.Outcome = r.Outcome
			s.Observed = r.Rule == ruleObserved
			if r.Error != nil {
				s.ErrorCode, s.ErrorMessage = r.Error.Code, r.Error.Message
			}
			if r.StartedAt > 0 {
				s.StartTS = r.StartedAt
			}
			if r.EndedAt > 0 {
				s.EndTS = r.EndedAt
			}
			if e := r.Effects; e != nil && e.Navigation != nil {
				if e.Navigation.From != "" {
					from = e.Navigation.From
				}
				to = e.Navigation.To
			}
		} else if len(a.docs) > 0 {
			to = a.docs[len(a.docs)-1]
		}
		if from != "" {
			s.Path = PathTemplate(from)
		}
		if to != "" {
			s.Navigation = PathTemplate(to)
			cur = to
			if run.Origin == "" {
				run.Origin, _ = splitOrigin(Template(to))
			}
		}
		run.Steps = append(run.Steps, s)
	}
	placeMessages(run.Steps, l.messages)
}

// placeMessages puts each WebSocket message in the step that was running
// when it went: the last step started at or before it (none before the
// first step).
func placeMessages(steps []Step, msgs []timedMessage) {
	slices.SortStableFunc(msgs, func(a, b timedMessage) int { return cmp.Compare(a.ts, b.ts) })
	k := -1
	for _, m := range msgs {
		for k+1 < len(steps) && steps[k+1].StartTS <= m.ts {
			k++
		}
		if k >= 0 {
			steps[k].Sockets = append(steps[k].Sockets, m.key)
		}
	}
}

// describeTarget names what a step acted on, the same way in every run: a
// role and name, a normalized selector, or (a ref being different in every
// recording) what the ref resolved to; a target-less step is named by
// what it goes to, waits for or expects.
func describeTarget(a event.Action, resolved *event.Target) string {
	if t := a.Target; t != nil {
		if d := roleName(t); d != "" {
			return d
		}
		if resolved != nil {
			if d := roleName(&event.Target{Role: resolved.Role, Name: resolved.Name}); d != "" {
				return d
			}
		}
		if t.Ref != "" {
			return "ref"
		}
	}
	if len(a.Args) == 0 {
		return ""
	}
	var args struct {
		URL    string          `json:"url"`
		Key    string          `json:"key"`
		Wait   json.RawMessage `json:"wait"`
		Expect json.RawMessage `json:"expect"`
	}
	if json.Unmarshal(a.Args, &args) != nil {
		return ""
	}
	switch {
	case args.URL != "":
		return "url " + relTemplate(args.URL)
	case len(args.Wait) > 0:
		var w struct {
			Text    string `json:"text"`
			URL     string `json:"url"`
			Settled bool   `json:"settled"`
		}
		if json.Unmarshal(args.Wait, &w) != nil {
			return ""
		}
		switch {
		case w.URL != "":
			return "url " + relTemplate(w.URL)
		case w.Text != "":
			return "text " + strconv.Quote(NormalizeText(w.Text))
		case w.Settled:
			return "settled"
		}
	case len(args.Expect) > 0:
		var x struct {
			Text  string `json:"text"`
			State *struct {
				Method string `json:"method"`
				URL    string `json:"url"`
			} `json:"state"`
		}
		if json.Unmarshal(args.Expect, &x) != nil {
			return ""
		}
		switch {
		case x.State != nil:
			return "state " + x.State.Method + " " + relTemplate(x.State.URL)
		case x.Text != "":
			return "text " + strconv.Quote(NormalizeText(x.Text))
		}
	case args.Key != "":
		return "key " + strconv.Quote(args.Key)
	}
	return ""
}

func roleName(t *event.Target) string {
	switch {
	case t.Role != "" && t.Name != "":
		return t.Role + " " + strconv.Quote(NormalizeText(t.Name))
	case t.Role != "":
		return t.Role
	case t.Selector != "":
		return "css " + strconv.Quote(normSelector(t.Selector))
	case t.Name != "":
		return strconv.Quote(NormalizeText(t.Name))
	}
	return ""
}

// relTemplate is a URL's template without its scheme and host.
func relTemplate(u string) string {
	_, rest := splitOrigin(Template(u))
	return rest
}
