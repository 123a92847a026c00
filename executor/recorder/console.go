package recorder

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/chromedp/cdproto/debugger"
	"github.com/chromedp/cdproto/log"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
)

// maxStackFrames bounds the frames kept of one stack.
const maxStackFrames = 32

// enableLogs turns on the domains console output comes from: Runtime
// (console API calls, uncaught exceptions), Log (the browser's own
// messages: failed loads, interventions) and Debugger (scripts and their
// source maps).
func (s *session) enableLogs(ctx context.Context) error {
	if _, err := chromedp.Call(ctx, log.Enable, struct{}{}); err != nil {
		return err
	}
	_, err := chromedp.Call(ctx, debugger.Enable, debugger.EnableParams{})
	return err
}

// onConsoleEvent queues console work of pg; it runs on the reader
// goroutine, and mapping a stack may fetch a source map.
func (s *session) onConsoleEvent(pg *followedPage, ev any) {
	step := -1
	switch ev := ev.(type) {
	case *debugger.EventScriptParsed:
		if ev.SourceMapURL != "" {
			s.maps.scriptParsed(string(ev.ScriptID), ev.URL, ev.SourceMapURL)
		}
		return
	case *cdpruntime.EventConsoleAPICalled:
		step = s.st.currentStep()
		c := consoleOf(ev)
		c.Page = pg.id
		ts := time.UnixMilli(int64(ev.Timestamp))
		s.queue(func() { s.sendConsole(step, ts, c, ev.StackTrace) })
	case *cdpruntime.EventExceptionThrown:
		step = s.st.currentStep()
		d := ev.ExceptionDetails
		if d == nil {
			return
		}
		c := event.Console{Level: "exception", Text: exceptionText(d), URL: d.URL,
			Line: int(d.LineNumber) + 1, Column: int(d.ColumnNumber) + 1, Page: pg.id}
		if d.Exception != nil && d.Exception.Description != "" {
			c.Text = d.Exception.Description
		}
		ts := time.UnixMilli(int64(ev.Timestamp))
		s.queue(func() { s.sendConsole(step, ts, c, d.StackTrace) })
	case *log.EventEntryAdded:
		e := ev.Entry
		if e == nil || (e.Level != log.EntryLevelError && e.Level != log.EntryLevelWarning) {
			return
		}
		step = s.st.currentStep()
		c := event.Console{Level: "error", Text: e.Text, URL: e.URL, Line: int(e.LineNumber), Page: pg.id}
		if e.Level == log.EntryLevelWarning {
			c.Level = "warn"
		}
		ts := time.UnixMilli(int64(e.Timestamp))
		s.queue(func() { s.sendConsole(step, ts, c, e.StackTrace) })
	}
}

// queue hands f to the console worker, in arrival order. A worker that
// falls far behind drops work rather than stall the browser's events.
func (s *session) queue(f func()) {
	select {
	case s.cwork <- f:
	default:
	}
}

func (s *session) consoleWorker() {
	defer close(s.cdone)
	for f := range s.cwork {
		f()
	}
}

// sendConsole adds the stack (and its source-mapped frames) and sends the
// message at the step it was logged in.
func (s *session) sendConsole(step int, ts time.Time, c event.Console, st *cdpruntime.StackTrace) {
	if st != nil {
		for _, f := range st.CallFrames {
			if len(c.Stack) == maxStackFrames {
				break
			}
			c.Stack = append(c.Stack, event.StackFrame{Function: f.FunctionName, URL: f.URL,
				Line: int(f.LineNumber) + 1, Column: int(f.ColumnNumber) + 1})
		}
		if c.URL == "" && len(st.CallFrames) > 0 {
			c.URL, c.Line, c.Column = c.Stack[0].URL, c.Stack[0].Line, c.Stack[0].Column
		}
		c.MappedStack = s.maps.mapFrames(st.CallFrames)
	}
	if c.Level == "error" || c.Level == "exception" || c.Level == "assert" {
		s.mu.Lock()
		s.consoleErrors[step]++
		if c.Level == "exception" && s.exceptions[step] == "" {
			first, _, _ := strings.Cut(c.Text, "\n")
			s.exceptions[step] = first
		}
		s.mu.Unlock()
	}
	s.st.emitAt(event.KindConsole, ts, step, c)
}

// pageException is the first uncaught exception of step n, if any. The
// console worker may still hold it: wait for the queue to drain a little.
func (s *session) pageException(n int) string {
	done := make(chan struct{})
	s.queue(func() { close(done) })
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exceptions[n]
}

// consoleOf is a console API call's level, text and place.
func consoleOf(ev *cdpruntime.EventConsoleAPICalled) event.Console {
	level := string(ev.Type)
	switch level {
	case "log", "debug", "info", "error", "trace", "assert":
	case "warning":
		level = "warn"
	default: // dir, table, count, timeEnd, group…: plain output
		level = "log"
	}
	parts := make([]string, 0, len(ev.Args))
	for _, a := range ev.Args {
		parts = append(parts, remoteText(a))
	}
	return event.Console{Level: level, Text: strings.Join(parts, " ")}
}

// remoteText renders a console argument the way DevTools prints it.
func remoteText(o *cdpruntime.RemoteObject) string {
	if o == nil {
		return ""
	}
	if len(o.Value) > 0 {
		var s string
		if json.Unmarshal([]byte(o.Value), &s) == nil {
			return s
		}
		return string(o.Value)
	}
	if o.UnserializableValue != "" {
		return string(o.UnserializableValue)
	}
	if o.Description != "" {
		return o.Description
	}
	return string(o.Type)
}
