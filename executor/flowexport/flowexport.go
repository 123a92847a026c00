// Package flowexport turns a recording into something that runs it again:
// a flow file in the project's own format (executor/flow), which the
// reference recorder replays, and a Playwright Test spec, which goes into a
// fix's pull request. Both are built from one reading of the recording
// (Build): each step's verb and target, its waits and checks, which values
// were typed into masked fields (those become named parameters, never
// values), and where the run first failed.
//
// It reads events only (no store, no HTTP): the command that calls it
// fetches them from a data directory or a server.
package flowexport

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/flow"
)

// Recording is what an export reads of one recording.
type Recording struct {
	ID        string
	Flow      string // the flow's name, "" when the recording has none
	Verdict   string
	Signature string // the failure signature, "" for a passing run
	// Events are the recording's events in seq order (frames, DOM and
	// video need not be included: they are not read).
	Events []event.Envelope
	// Redacted lists, per event seq, the JSON pointers the redaction report
	// names: what redaction erased there.
	Redacted map[uint64][]string
}

// Param is a value the recording masked, which the export asks for.
type Param struct {
	Name   string // the flow's {{name}}
	Env    string // the Playwright spec's environment variable
	Target string // what it was typed into: textbox "Card number"
	Step   int    // the recording's step it was first typed in
}

// Request is a request a step made that failed (5xx or no answer).
type Request struct {
	Method, URL string // URL as recorded
	Path        string // its path (and query)
	Status      int    // 0: no answer
}

// Step is one step of the recording as the export has it.
type Step struct {
	Rec    int    // the recording's step number
	Action string // how the recording names it: click button "Pay"
	// Flow is the step in the flow format (URLs relative to {{base}},
	// masked values as {{param}}); nil when it cannot be expressed, Note
	// says why.
	Flow  *flow.Step
	Param string // the parameter Flow.Value is, "" when a literal
	Note  string
	// Outcome of the step in the recording, and its error.
	Failed         bool
	ErrCode        string
	ErrMsg         string
	FailedRequests []Request
}

// Export is a recording read for export.
type Export struct {
	Rec      *Recording
	Name     string
	Revision string
	Source   string // the executor or importer that made the recording
	Origin   string // the app's origin in the recording: {{base}}
	StartURL string // "" when the first step is a goto
	Viewport flow.Viewport
	Params   []Param
	Steps    []Step
	FailedAt int // index in Steps of the first failed step, -1 when none
}

// masked is the mark redaction leaves where it erased a value
// ("[redacted]", "[redacted:<hmac>]").
const masked = "[redacted"

func isMasked(s string) bool { return strings.Contains(s, masked) }

// Build reads a recording for export.
func Build(rec *Recording) (*Export, error) {
	x := &Export{Rec: rec, Name: rec.Flow, Viewport: flow.DefaultViewport, FailedAt: -1}
	if x.Name == "" {
		x.Name = "recording-" + rec.ID
	}
	steps := map[int]*stepEvents{}
	var order []int
	for i := range rec.Events {
		e := &rec.Events[i]
		se := steps[e.Step]
		if se == nil {
			se = &stepEvents{}
			steps[e.Step] = se
			order = append(order, e.Step)
		}
		se.add(e)
	}
	if s0 := steps[0]; s0 != nil {
		x.meta(s0)
		if u := s0.document(); u != "" {
			x.StartURL = u
		}
	}
	if x.StartURL == "" {
		x.StartURL = x.firstNavigationFrom(steps, order)
	}
	if x.StartURL != "" {
		x.Origin = origin(x.StartURL)
	}
	names := map[string]string{} // param name → the target it was typed into
	for _, n := range order {
		if n == 0 {
			continue
		}
		se := steps[n]
		if x.Origin == "" {
			if u := se.pageURL(); u != "" {
				x.Origin = origin(u)
			}
		}
		x.Steps = append(x.Steps, x.steps(n, se, names)...)
	}
	startsWithGoto := false
	for _, s := range x.Steps {
		if s.Flow != nil {
			startsWithGoto = s.Flow.Verb == flow.Goto
			break
		}
	}
	switch {
	case startsWithGoto:
		x.StartURL = "" // the first step says where to start
	case x.StartURL != "":
		x.StartURL = x.rel(x.StartURL)
	default:
		return nil, fmt.Errorf("recording %s: no page load and no goto: where the run started is unknown", rec.ID)
	}
	for i := range x.Steps {
		if x.Steps[i].Failed {
			x.FailedAt = i
			break
		}
	}
	if !x.hasFlowStep() {
		return nil, fmt.Errorf("recording %s has no step a flow can express (no receipts of actions and no page loads)", rec.ID)
	}
	return x, nil
}

func (x *Export) hasFlowStep() bool {
	for _, s := range x.Steps {
		if s.Flow != nil {
			return true
		}
	}
	return x.StartURL != ""
}

// stepEvents are one step's events that an export reads.
type stepEvents struct {
	receipt     *event.Receipt
	receiptSeq  uint64
	checks      []event.Check
	har         []harEntry
	snapBefore  string
	meta        []json.RawMessage
	interactive string
	pageTitle   string // a HAR import's page: its title, often its URL
}

type harEntry struct {
	Request struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
	Response struct {
		Status  int `json:"status"`
		Content struct {
			MimeType string `json:"mimeType"`
		} `json:"content"`
	} `json:"response"`
	ResourceType string `json:"_resourceType"`
}

func (se *stepEvents) add(e *event.Envelope) {
	switch e.Kind {
	case event.KindReceipt:
		var r event.Receipt
		if json.Unmarshal(e.Data, &r) == nil && se.receipt == nil {
			se.receipt, se.receiptSeq = &r, e.Seq
		}
	case event.KindCheck:
		var c event.Check
		if json.Unmarshal(e.Data, &c) == nil {
			se.checks = append(se.checks, c)
		}
	case event.KindHAR:
		var h harEntry
		if json.Unmarshal(e.Data, &h) == nil {
			se.har = append(se.har, h)
		}
	case event.KindSnapshot:
		var s event.Snapshot
		if json.Unmarshal(e.Data, &s) == nil && s.View == "interactive" {
			if s.When == "before" && se.snapBefore == "" {
				se.snapBefore = s.Text
			}
			if se.interactive == "" {
				se.interactive = s.Text
			}
		}
	case event.KindMeta:
		se.meta = append(se.meta, e.Data)
		var m event.Meta
		if json.Unmarshal(e.Data, &m) == nil && se.pageTitle == "" {
			se.pageTitle = m.Labels["page_title"]
		}
	}
}

// document is the URL of the step's first page load: a GET answered
// with a document.
func (se *stepEvents) document() string {
	for _, h := range se.har {
		if h.Request.Method != "GET" || h.Response.Status < 200 || h.Response.Status >= 400 {
			continue
		}
		if strings.EqualFold(h.ResourceType, "document") || strings.HasPrefix(h.Response.Content.MimeType, "text/html") {
			return h.Request.URL
		}
	}
	return ""
}

// pageURL is the page the step loaded: its document, or the title of a
// HAR import's page when that is a URL (as Chrome titles them).
func (se *stepEvents) pageURL() string {
	if u := se.document(); u != "" {
		return u
	}
	if origin(se.pageTitle) != "" {
		return se.pageTitle
	}
	return ""
}

func (x *Export) meta(se *stepEvents) {
	for _, raw := range se.meta {
		var m event.Meta
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		if m.Viewport != nil && m.Viewport.Width >= 200 && m.Viewport.Height >= 200 {
			x.Viewport = flow.Viewport{Width: m.Viewport.Width, Height: m.Viewport.Height}
		}
		if r := m.Versions["flow_revision"]; r != "" && x.Revision == "" {
			x.Revision = r
		}
		switch {
		case m.Labels["imported_from"] != "":
			x.Source = "imported from " + m.Labels["imported_from"]
		case m.Versions["recorder"] != "":
			x.Source = m.Versions["recorder"]
		}
	}
}

// firstNavigationFrom is where the first navigation a receipt names
// started: the page the run was on before its first step.
func (x *Export) firstNavigationFrom(steps map[int]*stepEvents, order []int) string {
	for _, n := range order {
		if r := steps[n].receipt; r != nil && r.Effects != nil && r.Effects.Navigation != nil && r.Effects.Navigation.From != "" {
			if r.Action.Verb == "goto" {
				return ""
			}
			return r.Effects.Navigation.From
		}
	}
	return ""
}

// origin is scheme://host[:port] of u, "" when it has none.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https") {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// rel writes a URL of the recorded app relative to {{base}}.
func (x *Export) rel(u string) string {
	if x.Origin != "" && strings.HasPrefix(u, x.Origin) {
		rest := u[len(x.Origin):]
		if rest == "" || strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "?") {
			if rest == "" {
				rest = "/"
			}
			return "{{base}}" + rest
		}
	}
	return u
}

// steps turns one recorded step into export steps: its action, and the
// checks it made when its action is not itself an expect.
func (x *Export) steps(n int, se *stepEvents, names map[string]string) []Step {
	r := se.receipt
	if r == nil {
		// A HAR import's page, or a step without a receipt: its page load
		// is all a flow can replay.
		s := Step{Rec: n}
		if u := se.pageURL(); u != "" {
			s.Action = "goto " + u
			s.Flow = &flow.Step{Verb: flow.Goto, URL: x.rel(u)}
			if isMasked(u) {
				s.Flow.URL, s.Param = "{{"+x.param(names, fmt.Sprintf("step_%d_url", n), "the URL of step "+strconv.Itoa(n), n)+"}}", fmt.Sprintf("step_%d_url", n)
			}
		} else {
			s.Action = "no action"
			s.Note = fmt.Sprintf("the recording has no action and no page load in this step (%d requests)", len(se.har))
		}
		return []Step{s}
	}
	s := Step{Rec: n, Action: describe(r)}
	if r.Outcome == event.OutcomeFailed && r.Error != nil {
		s.Failed, s.ErrCode, s.ErrMsg = true, r.Error.Code, r.Error.Message
		if r.Effects != nil {
			for _, q := range r.Effects.Requests {
				if q.Status >= 500 || q.Status == 0 {
					s.FailedRequests = append(s.FailedRequests, Request{Method: q.Method, URL: q.URL, Path: pathOf(q.URL), Status: q.Status})
				}
			}
		}
	}
	var args recArgs
	if len(r.Action.Args) > 0 {
		_ = json.Unmarshal(r.Action.Args, &args)
	}
	out := []Step{s}
	st := &out[0]
	verb := strings.ToLower(r.Action.Verb)
	switch verb {
	case "goto":
		if args.URL == "" {
			st.Note = "the goto's URL is not in the recording"
			break
		}
		st.Flow = &flow.Step{Verb: flow.Goto, URL: x.rel(args.URL)}
		if isMasked(args.URL) {
			name := x.param(names, fmt.Sprintf("step_%d_url", n), "the URL of step "+strconv.Itoa(n), n)
			st.Flow.URL, st.Param = "{{"+name+"}}", name
		}
	case "click", "check", "fill", "type", "select", "press":
		x.targeted(st, verb, r, args, se, names, n)
	case "wait":
		if text := selectorText(r.Action.Target); text != "" && !isMasked(text) {
			// Playwright's getByText(…).waitFor()
			st.Flow = &flow.Step{Verb: flow.Wait, Wait: &flow.WaitFor{Text: text}}
			break
		}
		st.Flow, st.Note = x.wait(args)
	case "expect":
		if args.Expect != nil {
			st.Flow, st.Note = x.expect(args.Expect)
			if st.Flow != nil {
				st.Action = summary(st.Flow)
			}
			return out
		}
		st.Note = "the expectation is not in the recording's arguments"
	case "switch":
		if args.Page != flow.PageMain && args.Page != flow.PagePopup {
			st.Note = "the page switched to is not in the recording's arguments"
			break
		}
		st.Flow = &flow.Step{Verb: flow.Switch, Page: args.Page}
	case "snapshot":
		if args.View != flow.SnapshotFull {
			st.Note = "the snapshot view is not in the recording's arguments"
			break
		}
		st.Flow = &flow.Step{Verb: flow.Snapshot, View: args.View}
	default:
		st.Note = fmt.Sprintf("%q has no counterpart in a flow", r.Action.Verb)
	}
	if r.Action.Target == nil && st.Flow != nil {
		st.Action = summary(st.Flow)
	}
	// Checks the step made beside its action (an executor's own checks).
	for _, c := range se.checks {
		out = append(out, x.check(n, c))
	}
	return out
}

// recArgs are the receipt arguments an export reads: the reference
// recorder's (url, value, key, wait, expect) and a Playwright import's
// (url, value, text, key, options).
type recArgs struct {
	URL     string            `json:"url"`
	Value   any               `json:"value"`
	Text    string            `json:"text"`
	Key     string            `json:"key"`
	Options []json.RawMessage `json:"options"`
	Wait    *flow.WaitFor     `json:"wait"`
	Expect  *flow.Expectation `json:"expect"`
	Page    string            `json:"page"` // a switch's
	View    string            `json:"view"` // a snapshot's
}

// value is what a fill or select put in: a string, or the first option
// a Playwright selectOption named.
func (a recArgs) value() (string, bool) {
	switch v := a.Value.(type) {
	case string:
		return v, true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	if a.Text != "" {
		return a.Text, true
	}
	for _, o := range a.Options {
		var opt struct{ ValueOrLabel, Value, Label string }
		if json.Unmarshal(o, &opt) == nil {
			for _, v := range []string{opt.ValueOrLabel, opt.Value, opt.Label} {
				if v != "" {
					return v, true
				}
			}
		}
	}
	return "", false
}

// summary names a target-less step: wait for url /product, expect text
// "Thank you", expect state GET /api/orders/last.
func summary(s *flow.Step) string {
	switch {
	case s.Verb == flow.Goto:
		return "goto " + s.URL
	case s.Wait != nil && s.Wait.Text != "":
		return "wait for text " + strconv.Quote(s.Wait.Text)
	case s.Wait != nil && s.Wait.URL != "":
		return "wait for url " + s.Wait.URL
	case s.Wait != nil:
		return "wait until settled"
	case s.Expect != nil && s.Expect.State != nil:
		return "expect state " + s.Expect.State.Method + " " + s.Expect.State.URL
	case s.Expect != nil:
		return "expect text " + strconv.Quote(s.Expect.Text)
	case s.Verb == flow.Press:
		return "press " + s.Key
	case s.Verb == flow.Switch:
		return "switch to " + s.Page
	case s.Verb == flow.Snapshot:
		return "snapshot " + s.View
	}
	return string(s.Verb)
}

func describe(r *event.Receipt) string {
	d := r.Action.Verb
	if t := r.Action.Target; t != nil {
		switch {
		case t.Role != "" && t.Name != "":
			d += " " + t.Role + " " + strconv.Quote(t.Name)
		case t.Selector != "":
			d += " " + t.Selector
		case t.Name != "":
			d += " " + strconv.Quote(t.Name)
		}
	}
	return d
}

func pathOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Path == "" {
		return u
	}
	if p.RawQuery != "" {
		return p.Path + "?" + p.RawQuery
	}
	return p.Path
}

// targeted fills in a step that acts on an element.
func (x *Export) targeted(st *Step, verb string, r *event.Receipt, args recArgs, se *stepEvents, names map[string]string, n int) {
	t, why := target(verb, r, se.snapBefore)
	if t == nil && !(verb == "press" && r.Action.Target == nil) {
		st.Note = why
		return
	}
	fs := &flow.Step{Target: t}
	switch verb {
	case "click":
		fs.Verb = flow.Click
	case "check":
		fs.Verb = flow.Check
	case "press":
		fs.Verb, fs.Key = flow.Press, args.Key
		if fs.Key == "" || isMasked(fs.Key) {
			st.Note = "the key pressed is not in the recording"
			return
		}
	case "fill", "type", "select":
		fs.Verb = flow.Fill
		if verb == "select" {
			fs.Verb = flow.Select
		}
		v, ok := args.value()
		if !ok {
			st.Note = "the value is not in the recording"
			return
		}
		fs.Value = v
		// A value holding {{ would read as a parameter in a flow file, so
		// it is asked for too (the header says where it was typed).
		if isMasked(v) || x.redactedArgs(se.receiptSeq) || strings.Contains(v, "{{") {
			name := paramName(t, r)
			name = x.param(names, name, t.String(), n)
			fs.Value, st.Param = "{{"+name+"}}", name
		}
	}
	st.Flow = fs
}

// redactedArgs says whether the redaction report names a place in the
// receipt's action arguments.
func (x *Export) redactedArgs(seq uint64) bool {
	for _, p := range x.Rec.Redacted[seq] {
		if strings.HasPrefix(p, "/action/args") {
			return true
		}
	}
	return false
}

// param declares (or reuses) the parameter for a value typed into what:
// the same field typed into again is the same parameter; another field
// of the same name gets a numbered one.
func (x *Export) param(names map[string]string, name, what string, step int) string {
	base := name
	for i := 2; ; i++ {
		prev, ok := names[name]
		if !ok {
			break
		}
		if prev == what {
			return name
		}
		name = fmt.Sprintf("%s_%d", base, i)
	}
	names[name] = what
	x.Params = append(x.Params, Param{Name: name, Env: strings.ToUpper(name), Target: what, Step: step})
	return name
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// paramName names a masked value after its field: the accessible name
// ("Card number" → card_number), else the CSS selector's words.
func paramName(t *flow.Target, r *event.Receipt) string {
	var from string
	switch {
	case t.Name != "":
		from = t.Name
	case r.Resolved != nil && r.Resolved.Name != "":
		from = r.Resolved.Name
	default:
		from = t.CSS
	}
	name := strings.Trim(nonWord.ReplaceAllString(strings.ToLower(from), "_"), "_")
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "_")
	}
	switch {
	case name == "" || name == "base":
		name = "value"
	case name[0] >= '0' && name[0] <= '9':
		name = "field_" + name
	}
	return name
}

// target is the flow target for a receipt: role and name as the action or
// the resolved element had them, CSS only where no accessible name is
// known or the name is not unique on the page (the interactive snapshot
// before the step lists it more than once).
//
// An element inside a child frame keeps its frame (title or origin).
func target(verb string, r *event.Receipt, before string) (*flow.Target, string) {
	t, why := elementTarget(verb, r, before)
	if t != nil && r.Action.Target != nil {
		t.Frame = r.Action.Target.Frame
	}
	return t, why
}

func elementTarget(verb string, r *event.Receipt, before string) (*flow.Target, string) {
	at := r.Action.Target
	if at == nil {
		return nil, "the recording names no target"
	}
	if at.Role != "" && at.Name != "" && flow.ValidRole(at.Role) {
		return &flow.Target{Role: at.Role, Name: at.Name}, ""
	}
	css := cssOf(at.Selector)
	if rs := r.Resolved; rs != nil && rs.Role != "" && rs.Name != "" && flow.ValidRole(rs.Role) && !isMasked(rs.Name) &&
		(css == "" || countLines(before, rs.Role, rs.Name) <= 1) {
		return &flow.Target{Role: rs.Role, Name: rs.Name}, ""
	}
	if at.Role == "" && at.Name != "" && !isMasked(at.Name) {
		// A label, placeholder, alt text or title (a Playwright import):
		// the role the verb implies.
		role := map[string]string{"fill": "textbox", "type": "textbox", "select": "combobox", "check": "checkbox"}[verb]
		if role != "" && css == "" {
			return &flow.Target{Role: role, Name: at.Name}, ""
		}
	}
	if css != "" {
		return &flow.Target{CSS: css}, ""
	}
	return nil, fmt.Sprintf("the target (%s) has no role and name and no CSS selector", strings.TrimSpace(at.Selector+" "+at.Ref))
}

// selectorText is the text of a Playwright text selector
// (internal:text="Added to cart"i), "" for any other target.
func selectorText(t *event.Target) string {
	if t == nil {
		return ""
	}
	rest, ok := strings.CutPrefix(t.Selector, "internal:text=")
	if !ok || strings.Contains(rest, ">>") {
		return ""
	}
	var text string
	if json.NewDecoder(strings.NewReader(rest)).Decode(&text) != nil {
		return ""
	}
	return text
}

// cssOf is a selector if it is CSS (not a Playwright engine selector).
func cssOf(sel string) string {
	sel = strings.TrimSpace(sel)
	if sel == "" || strings.Contains(sel, ">>") || strings.HasPrefix(sel, "internal:") || strings.HasPrefix(sel, "xpath=") ||
		strings.HasPrefix(sel, "text=") || strings.HasPrefix(sel, "//") {
		return ""
	}
	return strings.TrimPrefix(sel, "css=")
}

// countLines counts the interactive snapshot's lines for role "name".
func countLines(snapshot, role, name string) int {
	prefix := role + " " + strconv.Quote(name)
	n := 0
	for _, l := range strings.Split(snapshot, "\n") {
		l = strings.TrimSpace(l)
		if l == prefix || strings.HasPrefix(l, prefix+" ") {
			n++
		}
	}
	return n
}

func (x *Export) wait(a recArgs) (*flow.Step, string) {
	switch w := a.Wait; {
	case w != nil && w.Text != "" && !isMasked(w.Text):
		return &flow.Step{Verb: flow.Wait, Wait: &flow.WaitFor{Text: w.Text}}, ""
	case w != nil && w.URL != "" && !isMasked(w.URL):
		return &flow.Step{Verb: flow.Wait, Wait: &flow.WaitFor{URL: x.rel(w.URL)}}, ""
	case w != nil && w.Settled:
		return &flow.Step{Verb: flow.Wait, Wait: &flow.WaitFor{Settled: true}}, ""
	case w != nil:
		return nil, "what the wait waited for was redacted"
	case a.URL != "" && !isMasked(a.URL): // Playwright's waitForURL
		return &flow.Step{Verb: flow.Wait, Wait: &flow.WaitFor{URL: x.rel(a.URL)}}, ""
	}
	return &flow.Step{Verb: flow.Wait, Wait: &flow.WaitFor{Settled: true}}, "a wait the recording does not describe: waits until the page settles"
}

func (x *Export) expect(e *flow.Expectation) (*flow.Step, string) {
	switch {
	case e.State != nil:
		if isMasked(e.State.URL) || isMasked(string(e.State.JSON)) {
			return nil, "the state check's request or expected answer was redacted"
		}
		st := *e.State
		st.URL = x.rel(st.URL)
		return &flow.Step{Verb: flow.Expect, Expect: &flow.Expectation{State: &st}}, ""
	case e.Text != "" && !isMasked(e.Text):
		return &flow.Step{Verb: flow.Expect, Expect: &flow.Expectation{Text: e.Text}}, ""
	}
	return nil, "the expected text was redacted"
}

// check turns a check event made beside an action into an expect step.
func (x *Export) check(n int, c event.Check) Step {
	s := Step{Rec: n, Action: "check " + c.Type + " " + c.Target}
	switch c.Type {
	case "ui":
		var want struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(c.Expect, &want) == nil && want.Text != "" {
			s.Flow, s.Note = x.expect(&flow.Expectation{Text: want.Text})
			return s
		}
	case "state":
		method, u, _ := strings.Cut(c.Target, " ")
		var want struct {
			Status int             `json:"status"`
			JSON   json.RawMessage `json:"json"`
		}
		if json.Unmarshal(c.Expect, &want) == nil && want.Status >= 100 && u != "" {
			s.Flow, s.Note = x.expect(&flow.Expectation{State: &flow.StateCheck{Method: strings.ToUpper(method), URL: u, Status: want.Status, JSON: want.JSON}})
			return s
		}
	}
	s.Note = "the check's expectation is not one a flow can state"
	return s
}
