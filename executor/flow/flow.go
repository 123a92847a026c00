// Package flow reads flow files: the YAML scripts a recorder drives a
// browser along. It parses and checks them; running them is the
// recorder's job.
//
//	name: checkout-passes
//	revision: r1
//	start_url: "{{base}}/signin"
//	viewport: {width: 1280, height: 800}
//	steps:
//	  - fill: {target: textbox "Email", value: "buyer@acme.example"}
//	  - click: button "Pay"
//	  - wait: {text: "Thank you"}
//	  - expect: {state: {method: GET, url: "{{base}}/api/orders/last", status: 200, json: {state: paid}}}
//
// Every error names the file and line, like a compiler's.
package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Verb names what a step does.
type Verb string

// The verbs, in the order error messages list them.
const (
	Goto   Verb = "goto"
	Click  Verb = "click"
	Fill   Verb = "fill"
	Press  Verb = "press"
	Select Verb = "select"
	Check  Verb = "check"
	Wait   Verb = "wait"
	Expect Verb = "expect"
	// Switch moves the run to another page: the popup a step opened, or
	// back to the first one.
	Switch Verb = "switch"
	// Snapshot asks for a snapshot view beyond the ones every step gets.
	Snapshot Verb = "snapshot"
)

// Verbs lists every verb.
var Verbs = []Verb{Goto, Click, Fill, Press, Select, Check, Wait, Expect, Switch, Snapshot}

// The pages a switch step names.
const (
	PageMain  = "main"  // the run's first page
	PagePopup = "popup" // the newest page the run opened that is still open
)

// SnapshotFull is the view a snapshot step asks for: the whole
// accessibility tree, every node with a ref where it has a DOM node.
const SnapshotFull = "full"

// DefaultViewport is the viewport of a flow that names none.
var DefaultViewport = Viewport{Width: 1280, Height: 800}

// Flow is a parsed flow file.
type Flow struct {
	File     string // the name errors use, as given to Parse
	Name     string
	Revision string // "" when the file has none
	// StartURL is where the browser starts; it may hold {{base}}. When it
	// is empty the first step is a goto.
	StartURL string
	Viewport Viewport
	// Params are the flow's parameters, in file order: each {{name}} in a
	// value, text or URL is one, supplied when the flow runs (Bind).
	Params []Param
	Steps  []Step
}

// Viewport is the browser's viewport in CSS pixels.
type Viewport struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Step is one action of a flow. Which fields are set depends on Verb:
//
//	goto    URL
//	click   Target
//	fill    Target, Value
//	press   Key, and Target when the key goes to an element (else to the focused one)
//	select  Target, Value (the option's value or label)
//	check   Target (a checkbox, radio or switch to check)
//	wait    Wait
//	expect  Expect
//	switch  Page (main or popup)
//	snapshot View (full)
type Step struct {
	Line    int // 1-based line of the step in the file
	Verb    Verb
	URL     string
	Target  *Target
	Value   string
	Key     string
	Wait    *WaitFor
	Expect  *Expectation
	Page    string        // switch: PageMain or PagePopup
	View    string        // snapshot: SnapshotFull
	Timeout time.Duration // 0: the recorder's default
}

// Target picks one element: by ARIA role and accessible name, or by CSS.
// Frame, when set, looks inside a child frame (cross-origin ones too)
// rather than the top document: the frame whose element's title, or whose
// origin (scheme://host:port), is Frame. Refs exist only at run time, so
// a flow names a frame's element this way.
type Target struct {
	Frame string `json:"frame,omitempty"`
	Role  string `json:"role,omitempty"`
	Name  string `json:"name,omitempty"` // the accessible name; "" matches any
	CSS   string `json:"css,omitempty"`
}

// String spells the target the way flow files write it: button "Pay",
// css "#gift-code", or frame "Payment card" textbox "Card number".
func (t Target) String() string {
	var el string
	switch {
	case t.CSS != "":
		el = "css " + strconv.Quote(t.CSS)
	case t.Name != "":
		el = t.Role + " " + strconv.Quote(t.Name)
	default:
		el = t.Role
	}
	if t.Frame != "" {
		return "frame " + strconv.Quote(t.Frame) + " " + el
	}
	return el
}

// WaitFor is what a wait step waits for: exactly one is set.
type WaitFor struct {
	// Text appears in the page's visible text.
	Text string `json:"text,omitempty"`
	// URL is the page's URL: equal to it, or matching it where it has *
	// (any run of characters).
	URL string `json:"url,omitempty"`
	// Settled: no request in flight, no DOM change, for a short quiet time.
	Settled bool `json:"settled,omitempty"`
}

// Expectation is what an expect step checks: exactly one is set.
type Expectation struct {
	// Text is in the page's visible text.
	Text  string      `json:"text,omitempty"`
	State *StateCheck `json:"state,omitempty"`
}

// StateCheck is an HTTP request the recorder makes itself (with the
// browser's cookies for the URL) and what its answer must be.
type StateCheck struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"`
	// JSON, when set, must be contained in the answer's JSON body: every
	// member of an object is in the answer with a contained value, arrays
	// and scalars are equal.
	JSON json.RawMessage `json:"json,omitempty"`
}

// Error is one problem in a flow file. Line is 0 when the problem has no
// place (an empty file).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// maxErrors bounds how many problems one Parse reports.
const maxErrors = 20

// ParseFile reads and parses a flow file; errors name it as path.
func ParseFile(path string) (*Flow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses a flow file's bytes; file names it in errors. The error is
// an *Error, or several joined (errors.Join) when the file has more than
// one problem, each on a line of its own, in file order.
func Parse(file string, data []byte) (*Flow, error) {
	p := &parser{file: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty file: want a mapping with name and steps"}
		}
		return nil, p.yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: file, Line: extra.Line, Msg: "a second YAML document: a flow file holds one"}
	} else if !errors.Is(err, io.EOF) {
		return nil, p.yamlError(err)
	}
	f := p.flow(&doc)
	if err := p.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// err is the problems found, in line order: nil, one *Error, or several
// joined.
func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
	if len(p.errs) == 1 {
		return p.errs[0]
	}
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

type parser struct {
	file string
	errs []*Error
	uses []varUse // {{name}}s other than base, checked once params are read
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) {
	if len(p.errs) >= maxErrors {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns the YAML parser's "yaml: line 3: …" into file:3: ….
func (p *parser) yamlError(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{File: p.file, Line: n, Msg: "YAML: " + m[2]}
	}
	return &Error{File: p.file, Msg: "YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// deref follows aliases (*name) to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// field is one key: value pair of a mapping.
type field struct {
	key   string
	kn, v *yaml.Node
}

// mapping reads a mapping's pairs in order, reporting duplicate and
// non-string keys. what names the mapping in messages.
func (p *parser) mapping(n *yaml.Node, what string) ([]field, bool) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.errf(n, "%s must be a mapping, not %s", what, describe(n))
		return nil, false
	}
	var out []field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			p.errf(k, "%s: keys must be plain names", what)
			continue
		}
		if seen[k.Value] {
			p.errf(k, "%s: %q appears twice", what, k.Value)
			continue
		}
		seen[k.Value] = true
		out = append(out, field{key: k.Value, kn: k, v: v})
	}
	return out, true
}

// describe names a node's kind for messages, never its value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "empty"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "true/false"
		}
		return "a string"
	}
	return "something else"
}

// str reads a scalar as text (a number is its digits, as written).
func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errf(n, "%s must be a string, not %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

// nonEmpty is str that also refuses "".
func (p *parser) nonEmpty(n *yaml.Node, what string) (string, bool) {
	s, ok := p.str(n, what)
	if ok && strings.TrimSpace(s) == "" {
		p.errf(n, "%s is empty", what)
		return "", false
	}
	return s, ok
}

func (p *parser) integer(n *yaml.Node, what string, lo, hi int) (int, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.errf(n, "%s must be a whole number, not %s", what, describe(n))
		return 0, false
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < lo || v > hi {
		p.errf(n, "%s must be between %d and %d", what, lo, hi)
		return 0, false
	}
	return v, true
}

func (p *parser) unknownKey(f field, what string, want ...string) {
	p.errf(f.kn, "unknown key %q in %s (want %s)", f.key, what, strings.Join(want, ", "))
}

func (p *parser) flow(doc *yaml.Node) *Flow {
	root := doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	root = deref(root)
	f := &Flow{File: p.file, Viewport: DefaultViewport}
	fields, ok := p.mapping(root, "a flow file")
	if !ok {
		return f
	}
	have := map[string]bool{}
	var stepsNode *yaml.Node
	for _, fd := range fields {
		have[fd.key] = true
		switch fd.key {
		case "name":
			f.Name, _ = p.nonEmpty(fd.v, "name")
		case "revision":
			f.Revision, _ = p.nonEmpty(fd.v, "revision")
		case "start_url":
			if s, ok := p.nonEmpty(fd.v, "start_url"); ok && p.checkURL(fd.v, "start_url", s, true) {
				f.StartURL = s
			}
		case "viewport":
			f.Viewport = p.viewport(fd.v)
		case "params":
			f.Params = p.params(fd.v)
		case "steps":
			stepsNode = fd.v
		default:
			p.unknownKey(fd, "the flow", "name", "revision", "start_url", "viewport", "params", "steps")
		}
	}
	if !have["name"] {
		p.errf(root, `missing "name"`)
	}
	if stepsNode == nil {
		p.errf(root, `missing "steps"`)
		return f
	}
	stepsNode = deref(stepsNode)
	if stepsNode.Kind != yaml.SequenceNode {
		p.errf(stepsNode, "steps must be a list, not %s", describe(stepsNode))
		return f
	}
	if len(stepsNode.Content) == 0 {
		p.errf(stepsNode, "steps is empty")
		return f
	}
	for _, sn := range stepsNode.Content {
		if s, ok := p.step(deref(sn)); ok {
			f.Steps = append(f.Steps, s)
		}
	}
	p.checkUses(f.Params)
	if f.StartURL == "" && len(f.Steps) > 0 && f.Steps[0].Verb != Goto && len(p.errs) == 0 {
		p.errf(root, "no start_url, and the first step is not a goto: say where the browser starts")
	}
	return f
}

func (p *parser) viewport(n *yaml.Node) Viewport {
	vp := DefaultViewport
	fields, ok := p.mapping(n, "viewport")
	if !ok {
		return vp
	}
	have := map[string]bool{}
	for _, fd := range fields {
		have[fd.key] = true
		switch fd.key {
		case "width":
			vp.Width, _ = p.integer(fd.v, "viewport width", 200, 10000)
		case "height":
			vp.Height, _ = p.integer(fd.v, "viewport height", 200, 10000)
		default:
			p.unknownKey(fd, "viewport", "width", "height")
		}
	}
	if !have["width"] || !have["height"] {
		p.errf(deref(n), "viewport needs width and height")
	}
	return vp
}

var verbList = func() string {
	s := make([]string, len(Verbs))
	for i, v := range Verbs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}()

func isVerb(s string) bool {
	for _, v := range Verbs {
		if string(v) == s {
			return true
		}
	}
	return false
}

// step reads one item of steps: a mapping with one verb key (and an
// optional timeout).
func (p *parser) step(n *yaml.Node) (Step, bool) {
	s := Step{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		p.errf(n, `a step is a mapping such as click: button "Pay", not %s`, describe(n))
		return s, false
	}
	fields, ok := p.mapping(n, "a step")
	if !ok {
		return s, false
	}
	var verb, timeout *field
	bad := false
	for i := range fields {
		if fd := &fields[i]; isVerb(fd.key) {
			if verb != nil {
				p.errf(fd.kn, "a step has one action; this one has %s and %s", verb.key, fd.key)
				bad = true
				continue
			}
			verb = fd
		}
	}
	for i := range fields {
		fd := &fields[i]
		switch {
		case isVerb(fd.key):
		case fd.key == "timeout":
			timeout = fd
		case verb != nil:
			p.errf(fd.kn, "unknown key %q in a %s step (want timeout)", fd.key, verb.key)
			bad = true
		default:
			p.errf(fd.kn, "unknown step %q (want %s)", fd.key, verbList)
			bad = true
		}
	}
	if verb == nil {
		if !bad {
			p.errf(n, "a step needs an action (%s)", verbList)
		}
		return s, false
	}
	s.Verb = Verb(verb.key)
	nerr := len(p.errs)
	v := verb.v
	what := string(s.Verb)
	switch s.Verb {
	case Goto:
		if u, ok := p.nonEmpty(v, "goto"); ok && p.checkURL(v, "goto", u, true) {
			s.URL = u
		}
	case Click, Check:
		s.Target = p.target(v, what)
	case Fill, Select:
		s.Target, s.Value = p.targetValue(v, what)
	case Press:
		s.Target, s.Key = p.press(v)
	case Wait:
		s.Wait = p.wait(v)
	case Expect:
		s.Expect = p.expect(v)
	case Switch:
		if pg, ok := p.nonEmpty(v, "switch"); ok {
			if pg != PageMain && pg != PagePopup {
				p.errf(v, "switch to what? want main (the first page) or popup (the newest page the run opened)")
			}
			s.Page = pg
		}
	case Snapshot:
		if view, ok := p.nonEmpty(v, "snapshot"); ok {
			if view != SnapshotFull {
				p.errf(v, "snapshot: want full (interactive and content come with every step)")
			}
			s.View = view
		}
	}
	if timeout != nil {
		if t, ok := p.nonEmpty(timeout.v, "timeout"); ok {
			d, err := time.ParseDuration(t)
			if err != nil || d <= 0 || d > 10*time.Minute {
				p.errf(timeout.v, "timeout must be a duration such as 5s, above 0 and at most 10m")
			} else {
				s.Timeout = d
			}
		}
	}
	return s, !bad && len(p.errs) == nerr
}

// ariaRoles are the roles a target may name (WAI-ARIA 1.2, concrete roles,
// plus image and the roles Chromium's accessibility tree reports for
// generic text).
var ariaRoles = map[string]bool{}

func init() {
	for _, r := range strings.Fields(`alert alertdialog application article banner blockquote button caption cell
		checkbox code columnheader combobox complementary contentinfo definition deletion dialog directory
		document emphasis feed figure form generic grid gridcell group heading image img insertion link list
		listbox listitem log main marquee math menu menubar menuitem menuitemcheckbox menuitemradio meter
		navigation none note option paragraph presentation progressbar radio radiogroup region row rowgroup
		rowheader scrollbar search searchbox separator slider spinbutton status strong subscript superscript
		switch tab table tablist tabpanel term textbox time timer toolbar tooltip tree treegrid treeitem`) {
		ariaRoles[r] = true
	}
}

var shorthand = regexp.MustCompile(`^(?:frame\s+("(?:[^"\\]|\\.)*")\s+)?([a-z]+)\s+("(?:[^"\\]|\\.)*")\s*$`)

const targetForms = `role "name" (button "Pay"), css "#id", {role: button, name: Pay} or {css: "#id"}`

// target reads a TARGET: the shorthand role "name" or css "selector"
// (after frame "title or origin" for an element inside a frame), or a
// mapping {role, name} or {css}, with an optional frame.
func (p *parser) target(n *yaml.Node, what string) *Target {
	n = deref(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			p.errf(n, "%s needs a target: %s", what, targetForms)
			return nil
		}
		m := shorthand.FindStringSubmatch(n.Value)
		if m == nil {
			p.errf(n, "bad target for %s: want %s", what, targetForms)
			return nil
		}
		var frame string
		if m[1] != "" {
			f, err := strconv.Unquote(m[1])
			if err != nil || strings.TrimSpace(f) == "" {
				p.errf(n, "bad target for %s: the frame must be a non-empty quoted title or origin", what)
				return nil
			}
			frame = f
		}
		name, err := strconv.Unquote(m[3])
		if err != nil {
			p.errf(n, "bad target for %s: the name is not a valid quoted string", what)
			return nil
		}
		if m[2] == "css" {
			if strings.TrimSpace(name) == "" {
				p.errf(n, "bad target for %s: the CSS selector is empty", what)
				return nil
			}
			return &Target{Frame: frame, CSS: name}
		}
		if !ariaRoles[m[2]] {
			p.errf(n, "bad target for %s: unknown role %q", what, m[2])
			return nil
		}
		return &Target{Frame: frame, Role: m[2], Name: name}
	case yaml.MappingNode:
		fields, _ := p.mapping(n, what+" target")
		t := &Target{}
		ok := true
		for _, fd := range fields {
			switch fd.key {
			case "role":
				r, good := p.nonEmpty(fd.v, "role")
				if good && !ariaRoles[r] {
					p.errf(fd.v, "bad target for %s: unknown role %q", what, r)
					good = false
				}
				t.Role, ok = r, ok && good
			case "name":
				var good bool
				t.Name, good = p.str(fd.v, "name")
				ok = ok && good
			case "css":
				var good bool
				t.CSS, good = p.nonEmpty(fd.v, "css")
				ok = ok && good
			case "frame":
				var good bool
				t.Frame, good = p.nonEmpty(fd.v, "frame")
				ok = ok && good
			default:
				p.unknownKey(fd, what+" target", "frame", "role", "name", "css")
				ok = false
			}
		}
		switch {
		case !ok:
			return nil
		case t.CSS != "" && (t.Role != "" || t.Name != ""):
			p.errf(n, "bad target for %s: give role and name, or css, not both", what)
			return nil
		case t.CSS == "" && t.Role == "":
			if t.Name != "" {
				p.errf(n, "bad target for %s: a name needs a role", what)
			} else {
				p.errf(n, "bad target for %s: want %s", what, targetForms)
			}
			return nil
		}
		return t
	default:
		p.errf(n, "bad target for %s: want %s", what, targetForms)
		return nil
	}
}

// targetValue reads {target: TARGET, value: "..."}.
func (p *parser) targetValue(n *yaml.Node, what string) (*Target, string) {
	fields, ok := p.mapping(n, what)
	if !ok {
		return nil, ""
	}
	var t *Target
	var value string
	have := map[string]bool{}
	typo := false // an unknown key is likely the missing one misspelt
	for _, fd := range fields {
		have[fd.key] = true
		switch fd.key {
		case "target":
			t = p.target(fd.v, what)
		case "value":
			value, _ = p.str(fd.v, what+" value")
			p.use(fd.v, what+" value", value)
		default:
			p.unknownKey(fd, what, "target", "value")
			typo = true
		}
	}
	for _, k := range []string{"target", "value"} {
		if !have[k] && !typo {
			p.errf(deref(n), "%s needs %s", what, k)
		}
	}
	return t, value
}

// press reads press: KEY or {target?, key}.
func (p *parser) press(n *yaml.Node) (*Target, string) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode {
		k, _ := p.nonEmpty(n, "press key")
		return nil, k
	}
	fields, ok := p.mapping(n, "press")
	if !ok {
		return nil, ""
	}
	var t *Target
	var key string
	haveKey, typo := false, false
	for _, fd := range fields {
		switch fd.key {
		case "target":
			t = p.target(fd.v, "press")
		case "key":
			haveKey = true
			key, _ = p.nonEmpty(fd.v, "press key")
		default:
			p.unknownKey(fd, "press", "target", "key")
			typo = true
		}
	}
	if !haveKey && !typo {
		p.errf(n, "press needs key (Enter, Tab, Control+A …)")
	}
	return t, key
}

// wait reads wait: settled, or {text | url | settled}.
func (p *parser) wait(n *yaml.Node) *WaitFor {
	n = deref(n)
	const forms = `{text: "…"}, {url: "…"} or settled`
	if n.Kind == yaml.ScalarNode {
		if n.Value == "settled" {
			return &WaitFor{Settled: true}
		}
		p.errf(n, "wait for what? want %s", forms)
		return nil
	}
	fields, ok := p.mapping(n, "wait")
	if !ok {
		return nil
	}
	w := &WaitFor{}
	for _, fd := range fields {
		switch fd.key {
		case "text":
			w.Text, _ = p.nonEmpty(fd.v, "wait text")
			p.use(fd.v, "wait text", w.Text)
		case "url":
			if u, ok := p.nonEmpty(fd.v, "wait url"); ok && p.checkURL(fd.v, "wait url", u, false) {
				w.URL = u
			}
		case "settled":
			v := deref(fd.v)
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Value != "true" {
				p.errf(fd.v, "settled must be true")
			}
			w.Settled = true
		default:
			p.unknownKey(fd, "wait", "text", "url", "settled")
		}
	}
	if len(fields) != 1 {
		p.errf(n, "wait takes exactly one of text, url, settled")
	}
	return w
}

// expect reads {text: "..."} or {state: {method, url, status, json?}}.
func (p *parser) expect(n *yaml.Node) *Expectation {
	fields, ok := p.mapping(n, "expect")
	if !ok {
		return nil
	}
	e := &Expectation{}
	for _, fd := range fields {
		switch fd.key {
		case "text":
			e.Text, _ = p.nonEmpty(fd.v, "expect text")
			p.use(fd.v, "expect text", e.Text)
		case "state":
			e.State = p.state(fd.v)
		default:
			p.unknownKey(fd, "expect", "text", "state")
		}
	}
	if len(fields) != 1 {
		p.errf(deref(n), "expect takes exactly one of text, state")
	}
	return e
}

func (p *parser) state(n *yaml.Node) *StateCheck {
	fields, ok := p.mapping(n, "state")
	if !ok {
		return nil
	}
	sc := &StateCheck{}
	have := map[string]bool{}
	typo := false
	for _, fd := range fields {
		have[fd.key] = true
		switch fd.key {
		case "method":
			m, ok := p.nonEmpty(fd.v, "state method")
			switch m = strings.ToUpper(m); m {
			case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
				sc.Method = m
			default:
				if ok {
					p.errf(fd.v, "state method must be GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS")
				}
			}
		case "url":
			if u, ok := p.nonEmpty(fd.v, "state url"); ok && p.checkURL(fd.v, "state url", u, true) {
				sc.URL = u
			}
		case "status":
			sc.Status, _ = p.integer(fd.v, "state status", 100, 599)
		case "json":
			sc.JSON = p.json(fd.v)
		default:
			p.unknownKey(fd, "state", "method", "url", "status", "json")
			typo = true
		}
	}
	for _, k := range []string{"method", "url", "status"} {
		if !have[k] && !typo {
			p.errf(deref(n), "state needs %s", k)
		}
	}
	return sc
}

// json converts a YAML value to JSON.
func (p *parser) json(n *yaml.Node) json.RawMessage {
	var v any
	if err := deref(n).Decode(&v); err != nil {
		p.errf(n, "json: %v", err)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		p.errf(n, "json: not expressible as JSON (mapping keys must be strings)")
		return nil
	}
	return b
}

var variable = regexp.MustCompile(`\{\{\s*([^}]*?)\s*\}\}`)

// checkURL checks a URL field: its variables are {{base}} and the flow's
// params; an absolute one (abs) starts with {{base}}, a param, http(s)://,
// about: or / (a path under base).
func (p *parser) checkURL(n *yaml.Node, what, u string, abs bool) bool {
	p.use(n, what, u)
	if !abs {
		return true
	}
	for _, pre := range []string{"{{", "http://", "https://", "about:", "/"} {
		if strings.HasPrefix(u, pre) {
			return true
		}
	}
	p.errf(n, "%s: want {{base}}/…, an http(s) URL or a path starting with /", what)
	return false
}

// Expand returns a copy of f with {{base}} replaced by base in every URL,
// and paths starting with / made absolute under base.
func (f *Flow) Expand(base string) *Flow {
	base = strings.TrimRight(base, "/")
	x := func(u string) string {
		u = variable.ReplaceAllStringFunc(u, func(m string) string {
			if variable.FindStringSubmatch(m)[1] == "base" {
				return base
			}
			return m // a param: Bind supplies it
		})
		if strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "//") {
			u = base + u
		}
		return u
	}
	out := *f
	out.StartURL = x(f.StartURL)
	out.Steps = make([]Step, len(f.Steps))
	for i, s := range f.Steps {
		if s.URL != "" {
			s.URL = x(s.URL)
		}
		if s.Wait != nil && s.Wait.URL != "" {
			w := *s.Wait
			w.URL = x(w.URL)
			s.Wait = &w
		}
		if s.Expect != nil && s.Expect.State != nil {
			e, st := *s.Expect, *s.Expect.State
			st.URL = x(st.URL)
			e.State = &st
			s.Expect = &e
		}
		out.Steps[i] = s
	}
	return &out
}

// ValidRole says whether a target may name role.
func ValidRole(role string) bool { return ariaRoles[role] }
