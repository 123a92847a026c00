// Package importer turns recordings made elsewhere into flightrec events:
// a HAR 1.2 file as Chrome DevTools exports it (HAR), a DevTools protocol
// log (CDP) and a Playwright trace zip (Playwright). An importer reads the whole input and returns every
// event, or an error and nothing: a file that is not what it claims stores
// nothing partial. Send then stores the events through the ingest API like
// any executor's, so redaction applies to imports exactly as to live
// recordings.
package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/wire"
)

// InputError is an input the importer refuses: not the format it claims,
// or an event in it that would not validate. Its message names where in
// the input (a member, an element index, a byte offset), never a value.
type InputError struct {
	Format string // "HAR", "DevTools log" or "Playwright trace"
	Msg    string
}

func (e *InputError) Error() string { return e.Format + ": " + e.Msg }

func inputErr(format, f string, args ...any) *InputError {
	return &InputError{Format: format, Msg: fmt.Sprintf(f, args...)}
}

// jsonProblem describes why data is not one JSON value, for an InputError.
func jsonProblem(data []byte, err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		if syn.Offset >= int64(len(strings.TrimRight(string(data), " \t\r\n"))) {
			return fmt.Sprintf("the JSON ends early at byte %d: is the file truncated?", len(data))
		}
		return fmt.Sprintf("not valid JSON at byte %d", syn.Offset)
	}
	return "not valid JSON"
}

// firstByte is the first non-space byte of data, or 0.
func firstByte(data []byte) byte {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// jsonKind names the kind of the JSON value starting with c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// item is one event before sequencing: where it goes and what it holds.
type item struct {
	step int
	ts   int64 // unix ns; 0 while unknown
	pos  int   // order within the input, for ties
	kind event.Kind
	data json.RawMessage
	// requestID ties a browser log entry to its request's step.
	requestID string
}

// sortByPos puts items in input order.
func sortByPos(items []item) {
	sort.SliceStable(items, func(i, j int) bool { return items[i].pos < items[j].pos })
}

// finish fills unknown timestamps (from the nearest known one before, else
// after, else now), orders items by step and then by (ts when byTS, input
// order), puts meta first at step 0 with the earliest time, numbers seqs
// 1…n and validates every event. Items must come in input order.
func finish(format string, meta json.RawMessage, items []item, byTS bool) ([]event.Envelope, error) {
	var last int64
	for i := range items {
		if items[i].ts > 0 {
			last = items[i].ts
		} else {
			items[i].ts = last
		}
	}
	var next int64
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].ts > 0 {
			next = items[i].ts
		} else {
			items[i].ts = next
		}
	}
	first := time.Now().UnixNano()
	for _, it := range items {
		if it.ts > 0 {
			first = min(first, it.ts)
		}
	}
	for i := range items {
		if items[i].ts <= 0 {
			items[i].ts = first
		}
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.step != b.step {
			return a.step < b.step
		}
		if byTS && a.ts != b.ts {
			return a.ts < b.ts
		}
		return a.pos < b.pos
	})
	out := make([]event.Envelope, 0, len(items)+1)
	out = append(out, event.Envelope{Seq: 1, TS: first, Step: 0, Kind: event.KindMeta, Data: meta})
	for _, it := range items {
		out = append(out, event.Envelope{Seq: uint64(len(out) + 1), TS: it.ts, Step: it.step, Kind: it.kind, Data: it.data})
	}
	if err := Check(out); err != nil {
		return nil, &InputError{Format: format, Msg: err.Error()}
	}
	return out, nil
}

// Check validates events as the server will (envelope, payload, the
// default event size limit), so that an import the server would refuse
// half-way is refused before anything is sent.
func Check(evs []event.Envelope) error {
	lim := event.DefaultLimits
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			return fmt.Errorf("event %d: seq %d, want %d", i+1, e.Seq, i+1)
		}
		if _, err := event.Decode(e, lim); err != nil {
			return fmt.Errorf("event %d (%s, step %d): %w", e.Seq, e.Kind, e.Step, err)
		}
		if n := len(e.Data) + 128; n > lim.MaxEventBytes {
			return fmt.Errorf("event %d (%s, step %d): %d bytes, over the event limit of %d", e.Seq, e.Kind, e.Step, n, lim.MaxEventBytes)
		}
	}
	return nil
}

// Result is what Send stored.
type Result struct {
	ID           string `json:"id"`
	Events       int    `json:"events"`
	Steps        int    `json:"steps"`
	AckedThrough uint64 `json:"acked_through"`
	Root         string `json:"root"`
	Verdict      string `json:"verdict"`
}

// Send opens a recording with open, appends evs (in batches, resuming as
// the client does) and finishes it with verdict. The events are checked
// first: nothing is opened for events the server would refuse.
func Send(ctx context.Context, c *client.Client, open wire.OpenRequest, evs []event.Envelope, verdict string) (Result, error) {
	if err := Check(evs); err != nil {
		return Result{}, err
	}
	lines := make([]client.Line, len(evs))
	steps := 0
	for i, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			return Result{}, fmt.Errorf("event %d: %w", e.Seq, err)
		}
		lines[i] = client.Line{Seq: e.Seq, JSON: b}
		steps = max(steps, e.Step)
	}
	rep, err := c.Open(ctx, open)
	if err != nil {
		return Result{}, err
	}
	res := Result{ID: rep.ID, Events: len(evs), Steps: steps, Verdict: verdict}
	if res.AckedThrough, err = c.Send(ctx, rep.ID, lines, 1000, 4<<20, nil); err != nil {
		return res, err
	}
	fin, err := c.Finish(ctx, rep.ID, verdict)
	if err != nil {
		return res, err
	}
	res.Root = fin.Root
	return res, nil
}

// Without returns evs without the events of kind k, renumbered 1…n (the
// step-0 meta stays). A DevTools log's screencast frames, say: they come
// with no mask rectangles, so redaction can mask nothing in them.
func Without(evs []event.Envelope, k event.Kind) []event.Envelope {
	out := make([]event.Envelope, 0, len(evs))
	for _, e := range evs {
		if e.Kind != k {
			e.Seq = uint64(len(out) + 1)
			out = append(out, e)
		}
	}
	return out
}

// rawJSON marshals v, which cannot fail for the types used here.
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("importer: " + err.Error())
	}
	return b
}
