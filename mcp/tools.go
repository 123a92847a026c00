package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/wire"
)

// Caps of one block, in bytes: a line of a list, a console message, a
// receipt's JSON.
const (
	capLine    = 600
	capText    = 1000
	capReceipt = 4000
	// eventsPerKind is how many events of one kind a step reply reads (one
	// page of the events route); a reply says when there were more.
	eventsPerKind = 1000
)

// The read API's replies the wire contract does not type yet, decoded as
// far as the tools need them (the fields are the API's, docs/design.md
// "Reads"): a recording's row is the stored manifest's metadata plus the
// index's counters (store.RecordingRow), and a diff is diffrun's report.
type (
	recordingRow struct {
		ID               string            `json:"id"`
		Project          string            `json:"project"`
		Flow             string            `json:"flow"`
		Verdict          string            `json:"verdict"`
		State            string            `json:"state"`
		FailureSignature string            `json:"failure_signature"`
		Versions         map[string]string `json:"versions"`
		Steps            int               `json:"steps"`
		Events           int64             `json:"events"`
		CreatedAt        int64             `json:"created_at"`
		Root             string            `json:"root"`
		Groups           []string          `json:"groups"`
	}
	recordingList struct {
		Recordings []recordingRow `json:"recordings"`
	}
	diffReport struct {
		A, B struct {
			ID, Flow, Verdict, Signature string
			Steps                        int
		}
		SameFlow        bool     `json:"same_flow"`
		Notes           []string `json:"notes"`
		FirstDivergence *struct {
			StepA       int    `json:"step_a"`
			StepB       int    `json:"step_b"`
			Channel     string `json:"channel"`
			Explanation string `json:"explanation"`
		} `json:"first_divergence"`
		Pairs []struct {
			StepA       int    `json:"step_a"`
			StepB       int    `json:"step_b"`
			Op          string `json:"op"`
			Signature   string `json:"signature"`
			Material    bool   `json:"material"`
			Differences []struct {
				Channel, Kind, Detail string
				Material              bool
			} `json:"differences"`
		} `json:"pairs"`
	}
)

// SearchIn are search_recordings' arguments.
type SearchIn struct {
	Query   string `json:"query,omitempty" jsonschema:"words and terms (status:500 code:APP_ERROR url:/api/checkout kind:console); empty lists the newest recordings"`
	Project string `json:"project,omitempty" jsonschema:"only this project"`
	Flow    string `json:"flow,omitempty" jsonschema:"only this flow (listing without a query)"`
	Verdict string `json:"verdict,omitempty" jsonschema:"only this verdict: pass, fail, flaky, blocked, not_run, aborted (listing without a query)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many hits or recordings (default 50, at most 500)"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"the cursor a previous reply named, for its next page"`
}

func (t *tools) search(ctx context.Context, _ *sdk.CallToolRequest, in SearchIn) (*sdk.CallToolResult, any, error) {
	limit := in.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if in.Project != "" {
		q.Set("project", in.Project)
	}
	var blocks []string
	if strings.TrimSpace(in.Query) != "" {
		q.Set("q", in.Query)
		var res wire.SearchResult
		if err := t.api.getJSON(ctx, wire.RouteSearch, q, &res); err != nil {
			return nil, nil, toolError(err)
		}
		blocks = append(blocks, fmt.Sprintf("%d hits for %q%s", len(res.Hits), in.Query, map[bool]string{true: " (more: narrow the query)"}[res.Truncated]))
		for _, h := range res.Hits {
			line := fmt.Sprintf("recording %s step %d", h.Recording, h.Step)
			if h.Kind != "" {
				line += fmt.Sprintf(" %s seq %d", h.Kind, h.Seq)
			}
			line += ":" + summaryText(h.Summary)
			if h.Field != "" {
				line += " [matched " + h.Field + "]"
			}
			blocks = append(blocks, oneLine(line, capLine))
		}
		return t.reply(blocks, in.Cursor)
	}
	for k, v := range map[string]string{"flow": in.Flow, "verdict": in.Verdict} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var list recordingList
	if err := t.api.getJSON(ctx, wire.RouteRecordings, q, &list); err != nil {
		return nil, nil, toolError(err)
	}
	blocks = append(blocks, fmt.Sprintf("%d recordings, newest first", len(list.Recordings)))
	for _, r := range list.Recordings {
		blocks = append(blocks, oneLine(recordingLine(r), capLine))
	}
	return t.reply(blocks, in.Cursor)
}

// summaryText is an event's index summary as one phrase.
func summaryText(s event.Summary) string {
	var parts []string
	if s.Action != "" {
		parts = append(parts, s.Action)
	}
	if s.Method != "" || s.URL != "" {
		parts = append(parts, strings.TrimSpace(s.Method+" "+s.URL))
	}
	if s.Status != 0 {
		parts = append(parts, strconv.Itoa(s.Status))
	}
	if s.Level != "" {
		parts = append(parts, s.Level)
	}
	if s.Outcome != "" {
		parts = append(parts, s.Outcome)
	}
	if s.ErrorCode != "" {
		parts = append(parts, s.ErrorCode)
	}
	if s.Text != "" {
		parts = append(parts, strconv.Quote(s.Text))
	}
	return " " + strings.Join(parts, " ")
}

func recordingLine(r recordingRow) string {
	line := fmt.Sprintf("%s  project %s  flow %s  %s", r.ID, r.Project, r.Flow, r.State)
	if r.Verdict != "" {
		line += "  verdict " + r.Verdict
	}
	line += fmt.Sprintf("  %d steps", r.Steps)
	if r.CreatedAt > 0 {
		line += "  created " + time.Unix(0, r.CreatedAt).UTC().Format(time.RFC3339)
	}
	if r.FailureSignature != "" {
		line += "  signature: " + r.FailureSignature
	}
	return line
}

// RecordingIn names a recording, and a page of the reply.
type RecordingIn struct {
	Recording string `json:"recording" jsonschema:"the recording id (from search_recordings)"`
	Cursor    string `json:"cursor,omitempty" jsonschema:"the cursor a previous reply named, for its next page"`
}

func (t *tools) timeline(ctx context.Context, _ *sdk.CallToolRequest, in RecordingIn) (*sdk.CallToolResult, any, error) {
	var rec recordingRow
	if err := t.api.getJSON(ctx, wire.Path(wire.RouteRecording, in.Recording), nil, &rec); err != nil {
		return nil, nil, toolError(err)
	}
	var tl wire.CompactTimeline
	if err := t.api.getJSON(ctx, wire.Path(wire.RouteSteps, in.Recording), url.Values{"form": {"compact"}}, &tl); err != nil {
		return nil, nil, toolError(err)
	}
	head := recordingLine(rec)
	if len(rec.Groups) > 0 {
		head += "  groups " + strings.Join(rec.Groups, ", ")
	}
	blocks := []string{oneLine(head, capText)}
	if len(tl.Failed) > 0 {
		blocks = append(blocks, fmt.Sprintf("failed steps: %s (read one with %s)", joinInts(tl.Failed), ToolStep))
	}
	for i, n := range tl.Step {
		line := fmt.Sprintf("step %d  +%.1fs  %s", n, float64(tl.Start[i])/1e6, tl.Action[i])
		if tl.Target[i] != "" {
			line += " " + tl.Target[i]
		}
		if tl.Outcome[i] != "" {
			line += "  " + tl.Outcome[i]
		}
		if tl.ErrorCode[i] != "" {
			line += " " + tl.ErrorCode[i]
		}
		line += fmt.Sprintf("  (network %d, console %d)", tl.HAR[i], tl.Console[i])
		blocks = append(blocks, oneLine(line, capLine))
	}
	return t.reply(blocks, in.Cursor)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// StepIn names a step of a recording.
type StepIn struct {
	Recording string `json:"recording" jsonschema:"the recording id (from search_recordings)"`
	Step      int    `json:"step" jsonschema:"the step number (from get_timeline)"`
	Cursor    string `json:"cursor,omitempty" jsonschema:"the cursor a previous reply named, for its next page"`
}

// stepEvents reads the first page of a step's events of one kind.
func (t *tools) stepEvents(ctx context.Context, id string, step int, kind event.Kind) (wire.EventPage, error) {
	var p wire.EventPage
	err := t.api.getJSON(ctx, wire.Path(wire.RouteEvents, id), url.Values{"step": {strconv.Itoa(step)}, "kind": {string(kind)},
		"limit": {strconv.Itoa(eventsPerKind)}}, &p)
	return p, err
}

func (t *tools) step(ctx context.Context, _ *sdk.CallToolRequest, in StepIn) (*sdk.CallToolResult, any, error) {
	kinds := []event.Kind{event.KindReceipt, event.KindCheck, event.KindConsole, event.KindHAR, event.KindSnapshot}
	pages := map[event.Kind]wire.EventPage{}
	for _, k := range kinds {
		p, err := t.stepEvents(ctx, in.Recording, in.Step, k)
		if err != nil {
			return nil, nil, toolError(err)
		}
		pages[k] = p
	}
	blocks := []string{fmt.Sprintf("recording %s step %d", in.Recording, in.Step)}
	more := func(k event.Kind, what string) {
		if pages[k].NextAfterSeq != 0 {
			blocks = append(blocks, fmt.Sprintf("(the step has more than %d %s; search the recording to narrow)", eventsPerKind, what))
		}
	}
	for _, e := range pages[event.KindReceipt].Events {
		var r event.Receipt
		if json.Unmarshal(e.Data, &r) == nil {
			blocks = append(blocks, oneLine(receiptLine(r), capText))
		}
		blocks = append(blocks, "receipt: "+clip(string(e.Data), capReceipt))
	}
	if len(pages[event.KindReceipt].Events) == 0 {
		blocks = append(blocks, "no receipt (a step before the first action, or one the executor did not finish)")
	}
	for _, e := range pages[event.KindCheck].Events {
		blocks = append(blocks, "check: "+clip(string(e.Data), capText))
	}
	blocks = append(blocks, fmt.Sprintf("console: %d lines", len(pages[event.KindConsole].Events)))
	for _, e := range pages[event.KindConsole].Events {
		var c event.Console
		if json.Unmarshal(e.Data, &c) != nil {
			continue
		}
		line := fmt.Sprintf("  %s %s", c.Level, c.Text)
		if len(c.MappedStack) > 0 {
			f := c.MappedStack[0]
			line += fmt.Sprintf("  at %s (%s:%d:%d, source-mapped)", f.Function, f.URL, f.Line, f.Column)
		} else if len(c.Stack) > 0 {
			f := c.Stack[0]
			line += fmt.Sprintf("  at %s (%s:%d:%d)", f.Function, f.URL, f.Line, f.Column)
		}
		blocks = append(blocks, oneLine(line, capText))
	}
	more(event.KindConsole, "console lines")
	blocks = append(blocks, fmt.Sprintf("network: %d requests", len(pages[event.KindHAR].Events)))
	for _, e := range pages[event.KindHAR].Events {
		var h event.HAR
		if json.Unmarshal(e.Data, &h) != nil {
			continue
		}
		status := strconv.Itoa(h.Response.Status)
		if h.Response.Status == 0 {
			status = "no response"
		}
		line := fmt.Sprintf("  %s %s → %s", h.Request.Method, h.Request.URL, status)
		if h.Response.Status >= 400 {
			if code := h.Response.Content.ErrorCode(); code != "" {
				line += " " + code
			}
		}
		line += fmt.Sprintf(" (%.0f ms)", h.Time)
		blocks = append(blocks, oneLine(line, capLine))
	}
	more(event.KindHAR, "requests")
	snaps := pages[event.KindSnapshot].Events
	blocks = append(blocks, fmt.Sprintf("snapshots: %d. %s", len(snaps), PageBoundary))
	for _, e := range snaps {
		var s event.Snapshot
		if json.Unmarshal(e.Data, &s) != nil {
			continue
		}
		blocks = append(blocks, pageChunks(s.Text, s.Nonce, s.Origin, snapLabel(in.Step, s), t.max/2)...)
	}
	return t.reply(blocks, in.Cursor)
}

func receiptLine(r event.Receipt) string {
	line := "action: " + r.Action.Verb
	if tg := r.Action.Target; tg != nil {
		line += fmt.Sprintf(" target role=%q name=%q", tg.Role, tg.Name)
		if tg.Selector != "" {
			line += fmt.Sprintf(" selector=%q", tg.Selector)
		}
	}
	if r.Resolved != nil {
		line += fmt.Sprintf("; resolved role=%q name=%q", r.Resolved.Role, r.Resolved.Name)
	}
	line += "; outcome " + r.Outcome
	if r.Error != nil {
		line += fmt.Sprintf(" %s: %s (next: %s)", r.Error.Code, r.Error.Message, r.Error.Next)
	}
	return line
}

func snapLabel(step int, s event.Snapshot) string {
	l := fmt.Sprintf("step=%d view=%s", step, s.View)
	if s.When != "" {
		l += " when=" + s.When
	}
	if s.Truncated {
		l += " truncated=true"
	}
	return l
}

// PageIn names the page at a step.
type PageIn struct {
	Recording string `json:"recording" jsonschema:"the recording id (from search_recordings)"`
	Step      int    `json:"step" jsonschema:"the step number (from get_timeline)"`
	When      string `json:"when,omitempty" jsonschema:"before or after the step (default after)"`
	View      string `json:"view,omitempty" jsonschema:"interactive, content or full (default: the fullest the step has)"`
	Cursor    string `json:"cursor,omitempty" jsonschema:"the cursor a previous reply named, for its next page"`
}

// viewRank prefers the fullest text of a page.
var viewRank = map[string]int{"full": 3, "content": 2, "interactive": 1}

func (t *tools) page(ctx context.Context, _ *sdk.CallToolRequest, in PageIn) (*sdk.CallToolResult, any, error) {
	when := in.When
	if when == "" {
		when = "after"
	}
	if when != "before" && when != "after" {
		return nil, nil, toolError(wire.New(0, "BAD_PARAMETER", `pass when as "before" or "after"`, "when is %q", in.When))
	}
	p, err := t.stepEvents(ctx, in.Recording, in.Step, event.KindSnapshot)
	if err != nil {
		return nil, nil, toolError(err)
	}
	var best *event.Snapshot
	for _, e := range p.Events {
		var s event.Snapshot
		if json.Unmarshal(e.Data, &s) != nil || (s.When != "" && s.When != when) || (in.View != "" && s.View != in.View) {
			continue
		}
		if best == nil || viewRank[s.View] >= viewRank[best.View] {
			best = &s // the fullest view, the last of its rank
		}
	}
	if best == nil {
		return nil, nil, toolError(wire.New(0, "NO_SNAPSHOT", "try when=before, another view, or another step; get_step lists a step's snapshots",
			"step %d has no %s snapshot %s it", in.Step, in.View, when))
	}
	blocks := append([]string{PageBoundary}, pageChunks(best.Text, best.Nonce, best.Origin, snapLabel(in.Step, *best), t.max-400)...)
	return t.reply(blocks, in.Cursor)
}

// CompareIn names two runs.
type CompareIn struct {
	A      string `json:"a" jsonschema:"one recording id (say, the passing run)"`
	B      string `json:"b" jsonschema:"the other recording id (say, the failing run)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the cursor a previous reply named, for its next page"`
}

func (t *tools) compare(ctx context.Context, _ *sdk.CallToolRequest, in CompareIn) (*sdk.CallToolResult, any, error) {
	var d diffReport
	if err := t.api.getJSON(ctx, wire.RouteDiff, url.Values{"a": {in.A}, "b": {in.B}}, &d); err != nil {
		return nil, nil, toolError(err)
	}
	blocks := []string{
		oneLine(fmt.Sprintf("a: %s flow %s verdict %s, %d steps, signature %q", d.A.ID, d.A.Flow, d.A.Verdict, d.A.Steps, d.A.Signature), capLine),
		oneLine(fmt.Sprintf("b: %s flow %s verdict %s, %d steps, signature %q", d.B.ID, d.B.Flow, d.B.Verdict, d.B.Steps, d.B.Signature), capLine),
	}
	if fd := d.FirstDivergence; fd != nil {
		blocks = append(blocks, oneLine(fmt.Sprintf("first divergence (%s, step %d of a, step %d of b): %s", fd.Channel, fd.StepA, fd.StepB, fd.Explanation), capText))
	} else {
		blocks = append(blocks, "no material divergence: the runs did the same")
	}
	for _, n := range d.Notes {
		blocks = append(blocks, oneLine("note: "+n, capLine))
	}
	for _, p := range d.Pairs {
		if p.Op == "match" && len(p.Differences) == 0 {
			continue
		}
		line := fmt.Sprintf("step %d ↔ %d %s %s", p.StepA, p.StepB, p.Op, p.Signature)
		if p.Material {
			line += " [material]"
		}
		for _, x := range p.Differences {
			line += fmt.Sprintf("; %s %s: %s", x.Channel, x.Kind, x.Detail)
		}
		blocks = append(blocks, oneLine(line, capText))
	}
	return t.reply(blocks, in.Cursor)
}

func (t *tools) evidence(ctx context.Context, _ *sdk.CallToolRequest, in RecordingIn) (*sdk.CallToolResult, any, error) {
	body, err := t.api.get(ctx, wire.Path(wire.RouteEvidence, in.Recording), url.Values{"format": {"markdown"}})
	if err != nil {
		return nil, nil, toolError(err)
	}
	// Lines are the blocks: a page of the card ends at a line.
	return t.reply(strings.Split(strings.TrimSuffix(string(body), "\n"), "\n"), in.Cursor)
}
