package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of screencast frames
	_ "image/png"
	"io"
	"math"
	"strings"

	"github.com/chromedp/cdproto"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
)

const cdpFormat = "DevTools log"

// cdpMethods are the events CDP reads; every other method is skipped.
var cdpMethods = map[string]bool{
	"Network.requestWillBeSent":          true,
	"Network.requestWillBeSentExtraInfo": true,
	"Network.responseReceived":           true,
	"Network.responseReceivedExtraInfo":  true,
	"Network.loadingFinished":            true,
	"Network.loadingFailed":              true,
	"Runtime.consoleAPICalled":           true,
	"Runtime.exceptionThrown":            true,
	"Log.entryAdded":                     true,
	"Page.screencastFrame":               true,
	"Page.frameNavigated":                true,
}

// cdpOptions decode params as the browser sends them (as chromedp does).
var cdpOptions = jsonv2.JoinOptions(jsonv2.DefaultOptionsV2(), jsonv2.AllowInvalidUTF8(true))

// maxStack bounds the frames kept of one console stack.
const maxStack = 50

// CDP reads a DevTools protocol log, a JSON array whose elements are
// protocol events {"method", "params"} in the order the browser sent them,
// or Chrome's performance-log entries {"message": "<JSON text of
// {\"message\": {\"method\", \"params\"}, \"webview\"}>", …} as
// ChromeDriver returns them. Elements without a method (command replies)
// and methods it does not use are skipped. It returns:
//
//   - seq 1, step 0: a meta event labelled imported_from=cdp, with the
//     viewport of the first screencast frame;
//   - Network.* → one har event per request hop, built by cdphar.Builder (no
//     response bodies: a log does not carry them), at requestWillBeSent's
//     wall time;
//   - Runtime.consoleAPICalled, Runtime.exceptionThrown, Log.entryAdded →
//     console events (level, text, url, 1-based line and column, stack);
//   - Page.screencastFrame → frame events (the JPEG or PNG, width and height
//     from the metadata's device size in CSS pixels);
//   - Page.frameNavigated of the main frame starts a new step. A request
//     belongs to the step of the navigation its loaderId names (so a page's
//     document request is in that page's step even though it precedes the
//     navigation event), a browser log entry to its request's step, and
//     everything else to the step current when it arrived. Events before
//     the first navigation form a step of their own, and steps are numbered
//     1… without gaps.
//
// On any problem CDP returns an *InputError and no events.
func CDP(r io.Reader) ([]event.Envelope, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the DevTools log: %w", err)
	}
	switch c := firstByte(data); {
	case c == 0:
		return nil, inputErr(cdpFormat, "the file is empty")
	case !json.Valid(data):
		var v any
		return nil, inputErr(cdpFormat, "%s", jsonProblem(data, json.Unmarshal(data, &v)))
	case c != '[':
		return nil, inputErr(cdpFormat, `a DevTools protocol log is a JSON array of {"method", "params"} events; this file holds %s`, jsonKind(c))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return nil, inputErr(cdpFormat, "%s", jsonProblem(data, err))
	}

	// Decode the events CDP uses, in order.
	type decoded struct {
		pos    int // element index
		method string
		ev     any
	}
	var evs []decoded
	for i, raw := range elems {
		method, params, err := unwrap(raw)
		if err != nil {
			return nil, inputErr(cdpFormat, "element %d: %v", i, err)
		}
		if !cdpMethods[method] {
			continue
		}
		if len(params) == 0 || string(params) == "null" {
			return nil, inputErr(cdpFormat, "element %d (%s): params are missing", i, method)
		}
		ev, err := cdproto.UnmarshalMessage(&cdproto.Message{Method: cdproto.MethodType(method), Params: jsonv2.Value(params)}, cdpOptions)
		if err != nil {
			return nil, inputErr(cdpFormat, "element %d (%s): params do not decode: %s", i, method, decodeProblem(err))
		}
		evs = append(evs, decoded{pos: i, method: method, ev: ev})
	}
	if len(evs) == 0 {
		return nil, inputErr(cdpFormat, "no Network, Runtime, Log or Page event in %d elements: nothing to import", len(elems))
	}

	// Steps: each main-frame navigation starts one (numbered 1… here,
	// with 0 for what came before the first; renumbered at the end).
	stepAt := make([]int, len(evs))
	loaderStep := map[string]int{}
	nav := 0
	for k, d := range evs {
		if fn, ok := d.ev.(*page.EventFrameNavigated); ok && fn.Frame != nil && fn.Frame.ParentID == "" {
			nav++
			if fn.Frame.LoaderID != "" {
				loaderStep[string(fn.Frame.LoaderID)] = nav
			}
		}
		stepAt[k] = nav
	}

	var items []item
	var viewport *event.Viewport
	b := cdphar.NewBuilder()
	for k, d := range evs {
		if b.Add(d.ev) {
			continue
		}
		it := item{step: stepAt[k], pos: d.pos}
		switch ev := d.ev.(type) {
		case *runtime.EventConsoleAPICalled:
			c, ok := consoleAPI(ev)
			if !ok {
				continue
			}
			it.kind, it.ts, it.data = event.KindConsole, msToNS(float64(ev.Timestamp)), rawJSON(c)
		case *runtime.EventExceptionThrown:
			it.kind, it.ts, it.data = event.KindConsole, msToNS(float64(ev.Timestamp)), rawJSON(exception(ev.ExceptionDetails))
		case *cdplog.EventEntryAdded:
			if ev.Entry == nil {
				continue
			}
			it.kind, it.ts, it.data = event.KindConsole, msToNS(float64(ev.Entry.Timestamp)), rawJSON(logEntry(ev.Entry))
			if id := string(ev.Entry.NetworkRequestID); id != "" {
				it.requestID = id
			}
		case *page.EventScreencastFrame:
			f, err := frame(ev)
			if err != nil {
				return nil, inputErr(cdpFormat, "element %d (%s): %v", d.pos, d.method, err)
			}
			if viewport == nil {
				viewport = &event.Viewport{Width: f.Width, Height: f.Height}
			}
			it.kind, it.data = event.KindFrame, rawJSON(f)
			if ev.Metadata != nil && ev.Metadata.Timestamp > 0 {
				it.ts = int64(ev.Metadata.Timestamp.Float64() * 1e9)
			}
		default:
			continue // Page.frameNavigated: only steps
		}
		items = append(items, it)
	}

	// Requests: in their navigation's step, else where they started.
	posStep := map[int]int{}
	for k, d := range evs {
		posStep[d.pos] = stepAt[k]
	}
	reqStep := map[string]int{}
	for _, e := range b.Entries() {
		pos := evs[e.Index].pos
		step, ok := loaderStep[e.LoaderID]
		if !ok {
			step = posStep[pos]
		}
		if _, seen := reqStep[e.RequestID]; !seen {
			reqStep[e.RequestID] = step
		}
		var ts int64
		if e.WallTime > 0 {
			ts = int64(e.WallTime * 1e9)
		}
		items = append(items, item{step: step, ts: ts, pos: pos, kind: event.KindHAR, data: e.JSON})
	}
	for k := range items {
		if s, ok := reqStep[items[k].requestID]; ok && items[k].requestID != "" {
			items[k].step = s
		}
	}
	if len(items) == 0 {
		return nil, inputErr(cdpFormat, "no request, console message or screencast frame in the log: nothing to import")
	}

	// Input order, then steps 1… without gaps.
	sortByPos(items)
	used := map[int]bool{}
	for _, it := range items {
		used[it.step] = true
	}
	renum := map[int]int{}
	n := 0
	for s := 0; s <= nav; s++ {
		if used[s] {
			n++
			renum[s] = n
		}
	}
	for k := range items {
		items[k].step = renum[items[k].step]
	}
	meta := event.Meta{Viewport: viewport, Labels: map[string]string{"imported_from": "cdp"}}
	return finish(cdpFormat, rawJSON(meta), items, false)
}

// unwrap reads one element: {"method","params"}, or a performance-log
// entry whose message holds that (as JSON text or as an object). An
// element without a method yields "".
func unwrap(raw json.RawMessage) (method string, params json.RawMessage, err error) {
	var el struct {
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Message json.RawMessage `json:"message"`
	}
	if firstByte(raw) != '{' || json.Unmarshal(raw, &el) != nil {
		return "", nil, fmt.Errorf(`want an object {"method", "params"} or {"message": …}`)
	}
	if el.Method != "" || len(el.Message) == 0 {
		return el.Method, el.Params, nil
	}
	msg := []byte(el.Message)
	if firstByte(msg) == '"' {
		var s string
		if err := json.Unmarshal(msg, &s); err != nil {
			return "", nil, fmt.Errorf("message is not a string")
		}
		msg = []byte(s)
	}
	var inner struct {
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Message *struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"message"`
	}
	if firstByte(msg) != '{' || json.Unmarshal(msg, &inner) != nil {
		return "", nil, fmt.Errorf("message does not hold a JSON object with a protocol event")
	}
	if inner.Message != nil {
		return inner.Message.Method, inner.Message.Params, nil
	}
	return inner.Method, inner.Params, nil
}

// decodeProblem keeps the first line of a decode error.
func decodeProblem(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func msToNS(ms float64) int64 {
	if ms <= 0 || math.IsNaN(ms) || math.IsInf(ms, 0) {
		return 0
	}
	return int64(ms * 1e6)
}

// consoleLevel maps a console API call type to a console level; ok is
// false for calls that print nothing (clear, endGroup, profile…).
func consoleLevel(t runtime.ConsoleAPICalledType) (string, bool) {
	switch t {
	case "log", "debug", "info", "error", "trace", "assert":
		return string(t), true
	case "warning":
		return "warn", true
	case "clear", "endGroup", "profile", "profileEnd":
		return "", false
	}
	return "log", true // dir, dirxml, table, count, timeEnd, startGroup…
}

func consoleAPI(ev *runtime.EventConsoleAPICalled) (event.Console, bool) {
	level, ok := consoleLevel(ev.Type)
	if !ok {
		return event.Console{}, false
	}
	parts := make([]string, 0, len(ev.Args))
	for _, a := range ev.Args {
		parts = append(parts, objectText(a))
	}
	c := event.Console{Level: level, Text: strings.Join(parts, " "), Stack: stack(ev.StackTrace)}
	if len(c.Stack) > 0 {
		c.URL, c.Line, c.Column = c.Stack[0].URL, c.Stack[0].Line, c.Stack[0].Column
	}
	return c, true
}

// objectText prints a console argument as the console would, roughly.
func objectText(o *runtime.RemoteObject) string {
	switch {
	case o == nil:
		return ""
	case o.Type == runtime.RemoteObjectTypeString && len(o.Value) > 0:
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
		return string(o.Value)
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	case o.Type == runtime.RemoteObjectTypeUndefined:
		return "undefined"
	case len(o.Value) > 0:
		return string(o.Value)
	case o.Description != "":
		return o.Description
	case o.Subtype == runtime.RemoteObjectSubtypeNull:
		return "null"
	}
	return string(o.Type)
}

func exception(d *runtime.ExceptionDetails) event.Console {
	if d == nil {
		return event.Console{Level: "error", Text: "Uncaught exception"}
	}
	text := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		first, _, _ := strings.Cut(d.Exception.Description, "\n")
		if !strings.Contains(text, first) {
			text = strings.TrimSpace(text + " " + first)
		}
	} else if d.Exception != nil {
		text = strings.TrimSpace(text + " " + objectText(d.Exception))
	}
	c := event.Console{Level: "error", Text: text, URL: d.URL, Line: int(d.LineNumber) + 1,
		Column: int(d.ColumnNumber) + 1, Stack: stack(d.StackTrace)}
	if c.URL == "" && len(c.Stack) > 0 {
		c.URL, c.Line, c.Column = c.Stack[0].URL, c.Stack[0].Line, c.Stack[0].Column
	}
	return c
}

func logEntry(e *cdplog.Entry) event.Console {
	level := "info"
	switch e.Level {
	case cdplog.EntryLevelVerbose:
		level = "debug"
	case cdplog.EntryLevelWarning:
		level = "warn"
	case cdplog.EntryLevelError:
		level = "error"
	}
	c := event.Console{Level: level, Text: e.Text, URL: e.URL, Stack: stack(e.StackTrace)}
	if e.LineNumber > 0 {
		c.Line = int(e.LineNumber) + 1
	}
	if c.URL == "" && len(c.Stack) > 0 {
		c.URL, c.Line, c.Column = c.Stack[0].URL, c.Stack[0].Line, c.Stack[0].Column
	}
	return c
}

// stack turns a CDP stack (0-based lines and columns) into console frames
// (1-based), the top frame first.
func stack(st *runtime.StackTrace) []event.StackFrame {
	if st == nil {
		return nil
	}
	var out []event.StackFrame
	for _, f := range st.CallFrames {
		if f == nil || len(out) == maxStack {
			continue
		}
		out = append(out, event.StackFrame{Function: f.FunctionName, URL: f.URL,
			Line: int(f.LineNumber) + 1, Column: int(f.ColumnNumber) + 1})
	}
	return out
}

func frame(ev *page.EventScreencastFrame) (event.Frame, error) {
	var mime string
	switch {
	case bytes.HasPrefix(ev.Data, []byte("\xff\xd8")):
		mime = "image/jpeg"
	case bytes.HasPrefix(ev.Data, []byte("\x89PNG\r\n\x1a\n")):
		mime = "image/png"
	default:
		return event.Frame{}, fmt.Errorf("data is not a JPEG or PNG image")
	}
	f := event.Frame{Mime: mime, Image: ev.Data}
	if m := ev.Metadata; m != nil {
		f.Width, f.Height = int(math.Round(m.DeviceWidth)), int(math.Round(m.DeviceHeight))
	}
	if f.Width <= 0 || f.Height <= 0 {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(ev.Data))
		if err != nil {
			return event.Frame{}, fmt.Errorf("the image does not decode: %v", err)
		}
		f.Width, f.Height = cfg.Width, cfg.Height
	}
	return f, nil
}
