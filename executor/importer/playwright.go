package importer

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"mime"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/chromedp/cdproto/runtime"

	"github.com/flightrec/flightrec/event"
)

const pwFormat = "Playwright trace"

// Trace format versions Playwright writes in context-options.version that
// the importer reads: 3 (the first whose resource snapshots are HAR
// entries) to 10: 8 up to Playwright 1.62, 9 is 1.63, 10 is 1.64 on (see
// docs/design.md, Imports, for what each changed).
const (
	pwMinVersion = 3
	pwMaxVersion = 10
)

// maxPWMember bounds one member of the zip, uncompressed.
const maxPWMember = 1 << 30

// maxPWArgs bounds a receipt's action.args: larger parameters are left out.
const maxPWArgs = 64 << 10

// PlaywrightReader reads the whole of r into memory and imports it as
// Playwright does; a zip needs random access.
func PlaywrightReader(r io.Reader) ([]event.Envelope, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the Playwright trace: %w", err)
	}
	return Playwright(bytes.NewReader(data), int64(len(data)))
}

// Playwright reads a Playwright trace, the zip that
// context.tracing.stop({path}) writes: trace.trace (NDJSON trace events),
// trace.network (NDJSON resource-snapshot events, each a HAR entry) and
// the files its events name: screencast JPEGs and the bodies HAR entries
// refer to (format 9 on: a path in the zip, screencast-frame's file and a
// body's _file, such as screencast/page@….jpeg and resources/<sha1>.json;
// before: a name under resources/, sha1 and _sha1). Trace times are
// monotonic milliseconds; context-options pairs one with the wall clock
// (older traces: the first action's wallTime), and every time is converted
// to unix ns with that pair. It returns:
//
//   - seq 1, step 0: a meta event with versions.browser (context-options'
//     browserName), versions.browser_version (from the user agent: the
//     context's, else the first request's), versions.playwright and the
//     viewport (the context's, else the first snapshot's or frame's), and
//     labels imported_from=playwright, trace_version, platform, sdk_language
//     and title when set;
//   - each action becomes a step, numbered 1… in the order the actions
//     started: a call the trace records that Playwright's trace viewer lists
//     by default. Not steps: getters (textContent, isVisible…),
//     configuration calls (addInitScript, setExtraHTTPHeaders…) and routing
//     calls (route.fulfill…), which the viewer hides by default, calls nested
//     in another call (parentId), and tracing groups (their calls are steps).
//     A step opens with a receipt: the verb (goto, click, fill, type, press,
//     select, check, wait, expect, evaluate…, else the method in snake case),
//     the target from the selector (the selector, plus role and name for
//     getByRole, name for getByLabel, getByPlaceholder, getByAltText and
//     getByTitle), args from the call's other parameters, outcome done,
//     failed (error code from the error's name, TIMEOUT for a TimeoutError,
//     message without the call log) or outcome_unknown (no after event),
//     started_at and ended_at, and effects: the requests, console errors,
//     dialogs and downloads of the step and the main frame's navigation
//     between the before and after snapshots;
//   - a step's time window runs from its action's start to the next
//     action's start; resource snapshots, console messages, page errors and
//     screencast frames go to the step whose window holds their time
//     (a request's start), and whatever comes before the first action to
//     step 0;
//   - resource-snapshot → one har event, the entry as Playwright wrote it
//     with its bodies inlined from the zip (text, or base64 with encoding
//     "base64" when not UTF-8 text) and _file or _sha1 removed. A body
//     whose file is not in the zip is left out with a comment saying so; a
//     response Playwright never got (status -1) becomes status 0;
//   - console → console (level, text, url, 1-based line and column), and a
//     page error (event pageError) → console at level error;
//   - screencast-frame → frame (the JPEG from the zip, width and height
//     as recorded, at frameSwapWallTime when recorded);
//   - the before and after frame-snapshots of a step's action (main frame)
//     → snapshot events, view content, when before or after, origin the
//     frame's URL, text the page's visible text rendered from the snapshot
//     (references to earlier snapshots resolved; no script, style or input
//     values).
//
// Input snapshots, call logs, stdio, per-action screenshots and aria
// snapshots (format 9 on, with tracing's snapshots option) and other
// events are skipped. Traces of format versions 3 to 10 are read: steps
// from before/after events or the older action events; a snapshot is an
// action's before or after by the name the action gives it (to 8) or by
// its own phase and callId (9 on, where actions name none). On any
// problem — not a zip, a truncated or damaged zip, no trace.trace, a line
// that is not a trace event (named by file and line number), a screencast
// frame whose image is not in the zip — Playwright returns an *InputError
// and no events.
func Playwright(r io.ReaderAt, size int64) ([]event.Envelope, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil && !(errors.Is(err, zip.ErrInsecurePath) && zr != nil) {
		return nil, zipProblem(r, size, err)
	}
	members := map[string]*zip.File{}
	for _, f := range zr.File {
		// A body or frame is named by its content or its time, so a second
		// copy is the same file; anything else twice is ambiguous.
		blob := strings.HasPrefix(f.Name, "resources/") || strings.HasPrefix(f.Name, "screencast/")
		if _, dup := members[f.Name]; dup && !blob {
			return nil, inputErr(pwFormat, "the zip holds %s twice", f.Name)
		}
		if _, dup := members[f.Name]; !dup {
			members[f.Name] = f
		}
	}
	tf := members["trace.trace"]
	if tf == nil {
		n := 0
		for name := range members {
			if strings.HasSuffix(name, ".trace") {
				n++
			}
		}
		if n > 0 {
			return nil, inputErr(pwFormat, "no trace.trace in the zip (it holds %d other .trace files: only a browser context's trace, as tracing.stop({path}) writes it, is read)", n)
		}
		return nil, inputErr(pwFormat, "no trace.trace in the zip: not a Playwright trace")
	}
	p := &pwParser{members: members, frames: map[string]*pwFrameSnapshots{}, actions: map[string]*pwAction{}}
	if err := p.readFile(tf); err != nil {
		return nil, err
	}
	if nf := members["trace.network"]; nf != nil {
		if err := p.readFile(nf); err != nil {
			return nil, err
		}
	}
	return p.events()
}

// zipProblem says why data is not a readable zip.
func zipProblem(r io.ReaderAt, size int64, err error) error {
	if size == 0 {
		return inputErr(pwFormat, "the file is empty")
	}
	head := make([]byte, 4)
	n, _ := r.ReadAt(head, 0)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("PK")) {
		why := "its central directory is missing or unreadable (the file ends early or was cut)"
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			why = "the file ends early"
		case errors.Is(err, zip.ErrFormat):
		default:
			why = "its directory does not read"
		}
		return inputErr(pwFormat, "the zip is truncated or damaged: %s", why)
	}
	switch c := firstByte(head); c {
	case '{', '[':
		return inputErr(pwFormat, "not a zip file: this file holds JSON (a HAR file or a DevTools log? import it as har or cdp)")
	}
	return inputErr(pwFormat, "not a zip file: a Playwright trace is the .zip that tracing.stop({path}) writes")
}

// readMember reads a member of the zip whole.
func readMember(f *zip.File, what string) ([]byte, error) {
	if f.UncompressedSize64 > maxPWMember {
		return nil, inputErr(pwFormat, "%s is %d bytes uncompressed, over the limit of %d", what, f.UncompressedSize64, maxPWMember)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, memberProblem(what, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxPWMember+1))
	if err != nil {
		return nil, memberProblem(what, err)
	}
	if len(data) > maxPWMember {
		return nil, inputErr(pwFormat, "%s is over the limit of %d bytes uncompressed", what, maxPWMember)
	}
	return data, nil
}

func memberProblem(what string, err error) error {
	var why string
	switch {
	case errors.Is(err, zip.ErrChecksum):
		why = "it fails its checksum"
	case errors.Is(err, zip.ErrAlgorithm):
		return inputErr(pwFormat, "%s is compressed with a method this importer does not read", what)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		why = "it ends early"
	case errors.Is(err, zip.ErrFormat):
		why = "its header does not read"
	case strings.HasPrefix(err.Error(), "flate:"):
		why = "it does not decompress"
	default:
		return fmt.Errorf("reading %s: %w", what, err)
	}
	return inputErr(pwFormat, "the zip is truncated or damaged: %s: %s", what, why)
}

// pwLine is one trace event: the members of every type the importer reads.
type pwLine struct {
	Type string `json:"type"`

	// context-options
	Version           *float64        `json:"version"`
	BrowserName       string          `json:"browserName"`
	Channel           string          `json:"channel"`
	Platform          string          `json:"platform"`
	PlaywrightVersion string          `json:"playwrightVersion"`
	SDKLanguage       string          `json:"sdkLanguage"`
	WallTime          *float64        `json:"wallTime"`
	MonotonicTime     *float64        `json:"monotonicTime"`
	Options           json.RawMessage `json:"options"`

	// before, after, action, input, log
	CallID         string          `json:"callId"`
	StartTime      *float64        `json:"startTime"`
	EndTime        *float64        `json:"endTime"`
	Title          string          `json:"title"`
	APIName        string          `json:"apiName"`
	Class          string          `json:"class"`
	Method         string          `json:"method"`
	Params         json.RawMessage `json:"params"`
	PageID         string          `json:"pageId"`
	ParentID       string          `json:"parentId"`
	BeforeSnapshot string          `json:"beforeSnapshot"`
	AfterSnapshot  string          `json:"afterSnapshot"`
	Error          json.RawMessage `json:"error"`
	Metadata       json.RawMessage `json:"metadata"`

	// event, console
	Time        *float64 `json:"time"`
	MessageType string   `json:"messageType"`
	Text        string   `json:"text"`
	Location    *struct {
		URL          string  `json:"url"`
		LineNumber   float64 `json:"lineNumber"`
		ColumnNumber float64 `json:"columnNumber"`
	} `json:"location"`

	// screencast-frame: file (format 9 on) or sha1 (before) names the image
	File              string   `json:"file"`
	SHA1              string   `json:"sha1"`
	Width             float64  `json:"width"`
	Height            float64  `json:"height"`
	Timestamp         *float64 `json:"timestamp"`
	FrameSwapWallTime *float64 `json:"frameSwapWallTime"`

	// frame-snapshot, resource-snapshot
	Snapshot json.RawMessage `json:"snapshot"`
}

// pwAction is one API call.
type pwAction struct {
	pos                   int // line order
	callID, class, method string
	title                 string // title or apiName, when recorded
	params                json.RawMessage
	parentID              string
	start, end            float64 // monotonic ms
	hasStart, hasEnd      bool
	wallTime              float64 // the before event's wallTime (older traces)
	errRaw                json.RawMessage
	beforeSnap, afterSnap string
	step                  int // 0: not a step
	beforeURL, afterURL   string
}

type pwTimed struct {
	pos  int
	mono float64 // monotonic ms; NaN when only wall is known
	wall int64   // unix ns when known directly (frameSwapWallTime, startedDateTime)
	it   item
	// effects it adds to its step's receipt
	request *event.RequestEffect
	dialog  *event.Dialog
	dl      string
	conErr  bool
}

type pwSnap struct {
	pos         int
	frame       *pwFrameSnapshots
	index       int
	name, phase string
	callID, url string
	main        bool
	mono        float64
	wall        float64
	viewport    *event.Viewport
}

type pwParser struct {
	members map[string]*zip.File

	ctx          *pwLine
	ctxLine      int
	actions      map[string]*pwAction
	order        []*pwAction
	timed        []pwTimed
	snaps        []pwSnap
	frames       map[string]*pwFrameSnapshots
	ua           string // the first request's User-Agent
	firstFrameVP *event.Viewport
	pos          int
}

func (p *pwParser) readFile(f *zip.File) error {
	data, err := readMember(f, f.Name)
	if err != nil {
		return err
	}
	line := 0
	for len(data) > 0 {
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		line++
		raw = bytes.TrimRight(raw, "\r")
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if err := p.line(f.Name, line, raw, data == nil); err != nil {
			return err
		}
	}
	return nil
}

func (p *pwParser) line(file string, n int, raw []byte, last bool) error {
	where := fmt.Sprintf("%s line %d", file, n)
	if c := firstByte(raw); c != '{' {
		if !json.Valid(raw) {
			if last && (c == '{' || c == '[' || c == '"') {
				return inputErr(pwFormat, "%s: not valid JSON: the line ends early (is the file truncated?)", where)
			}
			return inputErr(pwFormat, "%s: not valid JSON", where)
		}
		return inputErr(pwFormat, "%s: a trace event is a JSON object; this line holds %s", where, jsonKind(c))
	}
	if !json.Valid(raw) {
		var v any
		msg := jsonProblem(raw, json.Unmarshal(raw, &v))
		if strings.Contains(msg, "ends early") {
			return inputErr(pwFormat, "%s: not valid JSON: the line ends early (is the file truncated?)", where)
		}
		return inputErr(pwFormat, "%s: %s", where, strings.Replace(msg, "at byte", "at column", 1))
	}
	var l pwLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return inputErr(pwFormat, "%s: %s", where, describe(err))
	}
	p.pos++
	pos := p.pos
	switch l.Type {
	case "":
		return inputErr(pwFormat, "%s: the event has no type", where)
	case "context-options":
		if p.ctx != nil {
			return nil // a later chunk's: times keep the first pairing
		}
		if l.Version == nil {
			return inputErr(pwFormat, "%s: context-options has no version", where)
		}
		v := *l.Version
		if v > pwMaxVersion {
			return inputErr(pwFormat, "%s: trace format version %g is newer than this importer reads (%d to %d)", where, v, pwMinVersion, pwMaxVersion)
		}
		if v < pwMinVersion {
			return inputErr(pwFormat, "%s: trace format version %g is older than this importer reads (%d to %d)", where, v, pwMinVersion, pwMaxVersion)
		}
		c := l
		p.ctx, p.ctxLine = &c, n
	case "before", "action":
		a := &pwAction{pos: pos, callID: l.CallID, class: l.Class, method: l.Method, params: l.Params,
			parentID: l.ParentID, beforeSnap: l.BeforeSnapshot, afterSnap: l.AfterSnapshot, errRaw: l.Error}
		a.title = l.Title
		if a.title == "" {
			a.title = l.APIName
		}
		if l.StartTime != nil {
			a.start, a.hasStart = *l.StartTime, true
		}
		if l.WallTime != nil {
			a.wallTime = *l.WallTime
		}
		if l.Type == "action" {
			if len(l.Metadata) > 0 && string(l.Metadata) != "null" {
				skip, err := a.fromMetadata(l.Metadata)
				if err != nil {
					return inputErr(pwFormat, "%s: action metadata: %s", where, err)
				}
				if skip {
					return nil
				}
			} else if l.EndTime != nil {
				a.end, a.hasEnd = *l.EndTime, true
			}
		}
		if a.callID == "" {
			return inputErr(pwFormat, "%s: %s event without callId", where, l.Type)
		}
		if !a.hasStart || !finite(a.start) {
			return inputErr(pwFormat, "%s: %s event without startTime", where, l.Type)
		}
		if a.method == "" {
			return inputErr(pwFormat, "%s: %s event without method", where, l.Type)
		}
		if _, dup := p.actions[a.callID]; dup {
			return inputErr(pwFormat, "%s: a second %s event for the same callId", where, l.Type)
		}
		p.actions[a.callID] = a
		p.order = append(p.order, a)
	case "after":
		a := p.actions[l.CallID]
		if a == nil {
			return nil // a call that started before tracing did
		}
		if l.EndTime != nil && finite(*l.EndTime) {
			a.end, a.hasEnd = *l.EndTime, true
		}
		if len(l.Error) > 0 && string(l.Error) != "null" {
			a.errRaw = l.Error
		}
		if l.AfterSnapshot != "" {
			a.afterSnap = l.AfterSnapshot
		}
	case "console":
		level, ok := consoleLevel(runtime.ConsoleAPICalledType(l.MessageType))
		if !ok {
			return nil
		}
		if l.Time == nil {
			return inputErr(pwFormat, "%s: console event without time", where)
		}
		c := event.Console{Level: level, Text: l.Text}
		if loc := l.Location; loc != nil {
			c.URL = loc.URL
			if c.URL != "" {
				c.Line, c.Column = int(loc.LineNumber)+1, int(loc.ColumnNumber)+1
			}
		}
		p.timed = append(p.timed, pwTimed{pos: pos, mono: *l.Time, conErr: level == "error",
			it: item{kind: event.KindConsole, data: rawJSON(c)}})
	case "event":
		if l.Time == nil {
			return nil
		}
		return p.contextEvent(where, pos, &l)
	case "screencast-frame":
		return p.frame(where, pos, &l)
	case "frame-snapshot":
		return p.frameSnapshot(where, pos, l.Snapshot)
	case "resource-snapshot":
		return p.resource(where, pos, l.Snapshot)
	}
	return nil // input, log, stdout, stderr, error, object…: not imported
}

// fromMetadata fills a from a version 3 action event's metadata; skip is
// true for the internal and tracing calls Playwright leaves out.
func (a *pwAction) fromMetadata(raw json.RawMessage) (skip bool, err error) {
	var m struct {
		ID        string          `json:"id"`
		APIName   string          `json:"apiName"`
		Type      string          `json:"type"`
		Method    string          `json:"method"`
		Params    json.RawMessage `json:"params"`
		PageID    string          `json:"pageId"`
		StartTime *float64        `json:"startTime"`
		EndTime   *float64        `json:"endTime"`
		WallTime  *float64        `json:"wallTime"`
		Internal  bool            `json:"internal"`
		Error     json.RawMessage `json:"error"`
		Snapshots []struct {
			Title        string `json:"title"`
			SnapshotName string `json:"snapshotName"`
		} `json:"snapshots"`
	}
	if firstByte(raw) != '{' {
		return false, errors.New("must be an object")
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return false, errors.New(describe(err))
	}
	if m.Internal || strings.HasPrefix(m.Method, "tracing") {
		return true, nil
	}
	a.callID, a.class, a.method, a.params, a.title = m.ID, m.Type, m.Method, m.Params, m.APIName
	if m.StartTime != nil {
		a.start, a.hasStart = *m.StartTime, true
	}
	if m.EndTime != nil && finite(*m.EndTime) {
		a.end, a.hasEnd = *m.EndTime, true
	}
	if m.WallTime != nil {
		a.wallTime = *m.WallTime
	}
	a.errRaw = m.Error
	for _, s := range m.Snapshots {
		switch s.Title {
		case "before":
			a.beforeSnap = s.SnapshotName
		case "after":
			a.afterSnap = s.SnapshotName
		}
	}
	return false, nil
}

// contextEvent reads a context event: page errors, dialogs, downloads.
func (p *pwParser) contextEvent(where string, pos int, l *pwLine) error {
	switch l.Method {
	case "pageError":
		var pe struct {
			Error struct {
				Error *struct {
					Name    string `json:"name"`
					Message string `json:"message"`
					Stack   string `json:"stack"`
				} `json:"error"`
			} `json:"error"`
			Location *struct {
				URL    string  `json:"url"`
				Line   float64 `json:"line"`
				Column float64 `json:"column"`
			} `json:"location"`
		}
		if len(l.Params) > 0 && json.Unmarshal(l.Params, &pe) != nil {
			return inputErr(pwFormat, "%s: pageError params are not the expected shape", where)
		}
		c := event.Console{Level: "error", Text: "Uncaught (a value that is not an Error)"}
		if e := pe.Error.Error; e != nil {
			c.Text = e.Message
			if e.Name != "" {
				c.Text = e.Name + ": " + e.Message
			}
			c.Stack = parseJSStack(e.Stack)
		}
		if loc := pe.Location; loc != nil && loc.URL != "" {
			c.URL, c.Line, c.Column = loc.URL, int(loc.Line)+1, int(loc.Column)+1
		} else if len(c.Stack) > 0 {
			c.URL, c.Line, c.Column = c.Stack[0].URL, c.Stack[0].Line, c.Stack[0].Column
		}
		p.timed = append(p.timed, pwTimed{pos: pos, mono: *l.Time, conErr: true,
			it: item{kind: event.KindConsole, data: rawJSON(c)}})
	case "dialog":
		var d struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		if len(l.Params) > 0 && json.Unmarshal(l.Params, &d) == nil && d.Type != "" {
			p.timed = append(p.timed, pwTimed{pos: pos, mono: *l.Time, dialog: &event.Dialog{Type: d.Type, Message: d.Message}})
		}
	case "download":
		var d struct {
			URL string `json:"url"`
		}
		if len(l.Params) > 0 && json.Unmarshal(l.Params, &d) == nil && d.URL != "" {
			p.timed = append(p.timed, pwTimed{pos: pos, mono: *l.Time, dl: d.URL})
		}
	}
	return nil
}

func (p *pwParser) frame(where string, pos int, l *pwLine) error {
	name := pwResource(l.File, l.SHA1)
	if name == "" {
		return inputErr(pwFormat, "%s: screencast-frame without file or sha1", where)
	}
	if l.Timestamp == nil || !finite(*l.Timestamp) {
		return inputErr(pwFormat, "%s: screencast-frame without timestamp", where)
	}
	rf := p.members[name]
	if rf == nil {
		return inputErr(pwFormat, "%s: the screencast frame's image is not in the zip", where)
	}
	img, err := readMember(rf, "the image of the screencast frame on "+where)
	if err != nil {
		return err
	}
	f := event.Frame{Image: img, Width: int(math.Round(l.Width)), Height: int(math.Round(l.Height))}
	switch {
	case bytes.HasPrefix(img, []byte("\xff\xd8")):
		f.Mime = "image/jpeg"
	case bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")):
		f.Mime = "image/png"
	default:
		return inputErr(pwFormat, "%s: the screencast frame's image is not a JPEG or PNG", where)
	}
	if f.Width <= 0 || f.Height <= 0 {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(img))
		if err != nil {
			return inputErr(pwFormat, "%s: the screencast frame's image does not decode", where)
		}
		f.Width, f.Height = cfg.Width, cfg.Height
	}
	if p.firstFrameVP == nil {
		p.firstFrameVP = &event.Viewport{Width: f.Width, Height: f.Height}
	}
	t := pwTimed{pos: pos, mono: *l.Timestamp, it: item{kind: event.KindFrame, data: rawJSON(f)}}
	if w := l.FrameSwapWallTime; w != nil {
		t.wall = wallNS(*w, 0)
	}
	p.timed = append(p.timed, t)
	return nil
}

func (p *pwParser) frameSnapshot(where string, pos int, raw json.RawMessage) error {
	var s struct {
		CallID       string          `json:"callId"`
		SnapshotName string          `json:"snapshotName"`
		Phase        string          `json:"phase"`
		PageID       string          `json:"pageId"`
		FrameID      string          `json:"frameId"`
		FrameURL     string          `json:"frameUrl"`
		Timestamp    *float64        `json:"timestamp"`
		WallTime     *float64        `json:"wallTime"`
		HTML         json.RawMessage `json:"html"`
		IsMainFrame  bool            `json:"isMainFrame"`
		Viewport     *event.Viewport `json:"viewport"`
	}
	if firstByte(raw) != '{' {
		return inputErr(pwFormat, "%s: frame-snapshot without a snapshot object", where)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return inputErr(pwFormat, "%s: snapshot.%s", where, describe(err))
	}
	if s.FrameID == "" {
		return inputErr(pwFormat, "%s: frame-snapshot without frameId", where)
	}
	if len(s.HTML) == 0 {
		return inputErr(pwFormat, "%s: frame-snapshot without html", where)
	}
	f := p.frames[s.FrameID]
	if f == nil {
		f = &pwFrameSnapshots{}
		p.frames[s.FrameID] = f
	}
	sn := pwSnap{pos: pos, frame: f, index: f.add(s.HTML), name: s.SnapshotName, phase: s.Phase,
		callID: s.CallID, url: s.FrameURL, main: s.IsMainFrame, mono: math.NaN(), viewport: s.Viewport}
	if s.Timestamp != nil && finite(*s.Timestamp) {
		sn.mono = *s.Timestamp
	}
	if s.WallTime != nil && finite(*s.WallTime) {
		sn.wall = *s.WallTime
	}
	p.snaps = append(p.snaps, sn)
	return nil
}

// resource reads a resource snapshot: a HAR entry whose bodies are files
// in the zip.
func (p *pwParser) resource(where string, pos int, raw json.RawMessage) error {
	if firstByte(raw) != '{' {
		return inputErr(pwFormat, "%s: resource-snapshot without a snapshot object", where)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return inputErr(pwFormat, "%s: the resource snapshot does not decode", where)
	}
	req, _ := m["request"].(map[string]any)
	rsp, _ := m["response"].(map[string]any)
	if req == nil || rsp == nil {
		return inputErr(pwFormat, "%s: the resource snapshot has no request or response: an older format this importer does not read", where)
	}
	if st, ok := rsp["status"].(json.Number); ok {
		if v, err := st.Float64(); err == nil && v < 0 {
			rsp["status"] = 0
			if _, has := rsp["comment"]; !has {
				rsp["comment"] = "no response before the trace ended"
			}
		}
	}
	if pd, ok := req["postData"].(map[string]any); ok {
		if err := p.inlineBody(where, pd); err != nil {
			return err
		}
	}
	if c, ok := rsp["content"].(map[string]any); ok {
		if err := p.inlineBody(where, c); err != nil {
			return err
		}
	}
	if p.ua == "" {
		if hs, ok := req["headers"].([]any); ok {
			for _, h := range hs {
				if hm, ok := h.(map[string]any); ok {
					if n, _ := hm["name"].(string); strings.EqualFold(n, "user-agent") {
						p.ua, _ = hm["value"].(string)
						break
					}
				}
			}
		}
	}
	t := pwTimed{pos: pos, mono: math.NaN()}
	if mt, ok := m["_monotonicTime"].(json.Number); ok {
		if v, err := mt.Float64(); err == nil && finite(v) {
			t.mono = v
		}
	}
	if s, ok := m["startedDateTime"].(string); ok && s != "" {
		if ns, err := parseHARTime(s); err == nil {
			t.wall = ns
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return inputErr(pwFormat, "%s: the resource snapshot does not encode", where)
	}
	if data, err = fitEntry(data); err != nil {
		return inputErr(pwFormat, "%s: %v", where, err)
	}
	if _, err := event.Decode(event.Envelope{Seq: 1, TS: 1, Kind: event.KindHAR, Data: data}, event.DefaultLimits); err != nil {
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "data."), "data: ")
		return inputErr(pwFormat, "%s: the resource snapshot: %s", where, msg)
	}
	var h event.HAR
	_ = json.Unmarshal(data, &h)
	t.request = &event.RequestEffect{Method: h.Request.Method, URL: h.Request.URL, Status: h.Response.Status}
	t.it = item{kind: event.KindHAR, data: data}
	p.timed = append(p.timed, t)
	return nil
}

// pwResource is the zip member an event names: file, a path in the zip
// (format 9 on), else sha1, a name under resources/ (earlier formats; a
// trace written between the two may carry either).
func pwResource(file, sha1 string) string {
	if file != "" {
		return file
	}
	if sha1 != "" {
		return "resources/" + sha1
	}
	return ""
}

// inlineBody replaces a body's _file (or _sha1) with the resource's bytes:
// text when the type is textual and the bytes UTF-8, else base64.
func (p *pwParser) inlineBody(where string, obj map[string]any) error {
	file, _ := obj["_file"].(string)
	sha, _ := obj["_sha1"].(string)
	name := pwResource(file, sha)
	if name == "" {
		return nil
	}
	delete(obj, "_file")
	delete(obj, "_sha1")
	if t, _ := obj["text"].(string); t != "" {
		return nil // the body is there already
	}
	rf := p.members[name]
	if rf == nil {
		delete(obj, "text")
		obj["comment"] = "body left out on import: its resource is not in the trace zip"
		return nil
	}
	body, err := readMember(rf, "a body of the resource snapshot on "+where)
	if err != nil {
		return err
	}
	mt, _ := obj["mimeType"].(string)
	if textual(mt) && utf8.Valid(body) {
		obj["text"] = string(body)
		delete(obj, "encoding")
	} else {
		obj["text"] = base64.StdEncoding.EncodeToString(body)
		obj["encoding"] = "base64"
	}
	return nil
}

// textual reports whether a MIME type holds text.
func textual(mt string) bool {
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		t = strings.ToLower(strings.TrimSpace(strings.SplitN(mt, ";", 2)[0]))
	}
	switch {
	case strings.HasPrefix(t, "text/"), strings.HasSuffix(t, "+json"), strings.HasSuffix(t, "+xml"),
		strings.Contains(t, "json"), strings.Contains(t, "javascript"), strings.Contains(t, "ecmascript"):
		return true
	}
	switch t {
	case "application/xml", "application/x-www-form-urlencoded", "image/svg+xml", "application/graphql":
		return true
	}
	return false
}

// clock converts trace times to unix ns: wall = wall0 + (mono - mono0).
type pwClock struct{ wall0, mono0 float64 }

func (c pwClock) ns(mono float64) int64 {
	if !finite(mono) {
		return 0
	}
	return wallNS(c.wall0, mono-c.mono0)
}

// wallNS is unix ms wall plus delta ms, in unix ns, rounded to the ns
// without losing precision to float64 (unix ns are past 2^53); 0 when out
// of range.
func wallNS(wall, delta float64) int64 {
	if !finite(wall) || !finite(delta) || wall <= 0 || wall > 1e13 {
		return 0
	}
	whole := math.Floor(wall)
	ns := int64(whole)*1_000_000 + int64(math.Round((wall-whole+delta)*1e6))
	if ns <= 0 {
		return 0
	}
	return ns
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// clock pairs the monotonic clock with the wall clock: context-options
// (format 7 on), else the first action's wallTime.
func (p *pwParser) clock() (pwClock, error) {
	c := p.ctx
	if c.WallTime != nil && *c.WallTime > 0 && c.MonotonicTime != nil && *c.Version >= 7 {
		return pwClock{*c.WallTime, *c.MonotonicTime}, nil
	}
	for _, a := range p.order {
		if a.wallTime > 0 {
			return pwClock{a.wallTime, a.start}, nil
		}
	}
	if c.WallTime != nil && *c.WallTime > 0 {
		mono := 0.0
		if c.MonotonicTime != nil {
			mono = *c.MonotonicTime
		}
		return pwClock{*c.WallTime, mono}, nil
	}
	return pwClock{}, inputErr(pwFormat, "trace.trace line %d: context-options has no wallTime: the trace's times cannot be placed", p.ctxLine)
}

func (p *pwParser) events() ([]event.Envelope, error) {
	if p.ctx == nil {
		return nil, inputErr(pwFormat, "trace.trace has no context-options event: not a browser context's trace")
	}
	clk, err := p.clock()
	if err != nil {
		return nil, err
	}

	// Steps: the actions the viewer lists, in start order.
	acts := append([]*pwAction(nil), p.order...)
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].start < acts[j].start })
	var steps []*pwAction
	for _, a := range acts {
		if p.isStep(a) {
			steps = append(steps, a)
			a.step = len(steps)
		}
	}
	starts := make([]int64, len(steps))
	for i, a := range steps {
		starts[i] = clk.ns(a.start)
	}
	stepAt := func(ts int64) int {
		return sort.Search(len(starts), func(i int) bool { return starts[i] > ts })
	}
	// A request that starts while a wait runs (an action that gives the
	// page no input: waitFor…, expect) was caused by the step before it:
	// a click's fetch can start after Playwright's click returned and the
	// script's expect began. cause[n] is the step whose requests step n's
	// are.
	cause := make([]int, len(steps)+1)
	for i, a := range steps {
		cause[i+1] = i + 1
		if i > 0 && pwPassive(a.method) {
			cause[i+1] = cause[i]
		}
	}

	type effects struct {
		requests []event.RequestEffect
		dialogs  []event.Dialog
		dls      []string
		conErrs  int
	}
	eff := make([]effects, len(steps)+1)
	var items []item
	for _, t := range p.timed {
		ts := t.wall
		if finite(t.mono) {
			if t.it.kind == event.KindFrame && t.wall > 0 {
				ts = t.wall // when the frame was drawn, not when it arrived
			} else {
				ts = clk.ns(t.mono)
			}
		}
		step := stepAt(ts)
		if t.request != nil {
			step = cause[step]
		}
		e := &eff[step]
		switch {
		case t.request != nil:
			e.requests = append(e.requests, *t.request)
		case t.dialog != nil:
			e.dialogs = append(e.dialogs, *t.dialog)
		case t.dl != "":
			e.dls = append(e.dls, t.dl)
		}
		if t.conErr {
			e.conErrs++
		}
		if t.it.kind != "" {
			it := t.it
			it.step, it.ts, it.pos = step, ts, len(steps)+t.pos
			items = append(items, it)
		}
	}

	// Snapshots: the before and after of each step's action.
	type snapRole struct {
		a    *pwAction
		when string
	}
	roles := map[string]snapRole{}
	for _, a := range steps {
		if a.beforeSnap != "" {
			roles[a.beforeSnap] = snapRole{a, "before"}
		}
		if a.afterSnap != "" {
			roles[a.afterSnap] = snapRole{a, "after"}
		}
	}
	var viewport *event.Viewport
	if c := p.ctx; len(c.Options) > 0 {
		var o struct {
			Viewport          *event.Viewport `json:"viewport"`
			NoDefaultViewport bool            `json:"noDefaultViewport"`
			UserAgent         string          `json:"userAgent"`
		}
		if json.Unmarshal(c.Options, &o) == nil {
			if o.Viewport != nil && o.Viewport.Width > 0 && o.Viewport.Height > 0 && !o.NoDefaultViewport {
				viewport = o.Viewport
			}
			if o.UserAgent != "" {
				p.ua = o.UserAgent
			}
		}
	}
	for _, s := range p.snaps {
		if !s.main {
			continue
		}
		if viewport == nil && s.viewport != nil && s.viewport.Width > 0 && s.viewport.Height > 0 {
			viewport = s.viewport
		}
		role, ok := roles[s.name]
		if s.name == "" {
			// Without a name, the phase and the call say whose it is.
			a := p.actions[s.callID]
			if a == nil || a.step == 0 || (s.phase != "before" && s.phase != "after") {
				continue
			}
			role, ok = snapRole{a, s.phase}, true
		}
		if !ok {
			continue // an input snapshot, or a call that is not a step
		}
		text, trunc := snapshotText(s.frame, s.index)
		ts := int64(0)
		if s.wall > 0 {
			ts = wallNS(s.wall, 0)
		} else {
			ts = clk.ns(s.mono)
		}
		if role.when == "before" {
			role.a.beforeURL = s.url
		} else {
			role.a.afterURL = s.url
		}
		items = append(items, item{step: role.a.step, ts: ts, pos: len(steps) + s.pos, kind: event.KindSnapshot,
			data: rawJSON(event.Snapshot{View: "content", When: role.when, Origin: s.url, Text: text, Truncated: trunc})})
	}
	if viewport == nil {
		viewport = p.firstFrameVP
	}

	// Receipts.
	for i, a := range steps {
		r := event.Receipt{Step: a.step, Action: a.action(), Outcome: event.OutcomeDone, StartedAt: starts[i]}
		if a.hasEnd {
			r.EndedAt = clk.ns(a.end)
			if r.EndedAt < r.StartedAt {
				r.EndedAt = r.StartedAt
			}
		} else {
			r.Outcome = event.OutcomeUnknown
		}
		if se := stepError(a.errRaw); se != nil {
			r.Outcome, r.Error = event.OutcomeFailed, se
		}
		e := eff[a.step]
		ef := event.Effects{Requests: e.requests, Dialogs: e.dialogs, Downloads: e.dls, ConsoleErrors: e.conErrs}
		if a.afterURL != "" && a.beforeURL != a.afterURL {
			ef.Navigation = &event.Navigation{From: a.beforeURL, To: a.afterURL}
		}
		if ef.Navigation != nil || len(ef.Requests) > 0 || len(ef.Dialogs) > 0 || len(ef.Downloads) > 0 || ef.ConsoleErrors > 0 {
			r.Effects = &ef
		}
		items = append(items, item{step: a.step, ts: starts[i], pos: i, kind: event.KindReceipt, data: rawJSON(r)})
	}
	if len(items) == 0 {
		return nil, inputErr(pwFormat, "no action, request, console message, screencast frame or snapshot in the trace: nothing to import")
	}

	c := p.ctx
	meta := event.Meta{Versions: map[string]string{}, Viewport: viewport, Labels: map[string]string{
		"imported_from": "playwright", "trace_version": strconv.FormatFloat(*c.Version, 'f', -1, 64)}}
	set := func(m map[string]string, k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set(meta.Versions, "browser", c.BrowserName)
	set(meta.Versions, "browser_channel", c.Channel)
	set(meta.Versions, "browser_version", uaVersion(p.ua))
	set(meta.Versions, "playwright", c.PlaywrightVersion)
	set(meta.Labels, "platform", c.Platform)
	set(meta.Labels, "sdk_language", c.SDKLanguage)
	set(meta.Labels, "title", c.Title)
	if len(meta.Versions) == 0 {
		meta.Versions = nil
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].pos < items[j].pos })
	return finish(pwFormat, rawJSON(meta), items, true)
}

// isStep: a call Playwright's trace viewer lists by default, not nested in
// another call.
func (p *pwParser) isStep(a *pwAction) bool {
	if a.class == "Tracing" || pwHidden(a.class, a.method) {
		return false
	}
	seen := map[string]bool{a.callID: true}
	for id := a.parentID; id != "" && !seen[id]; {
		seen[id] = true
		parent := p.actions[id]
		if parent == nil {
			break
		}
		if parent.class != "Tracing" {
			return false // nested in a call: part of that call's step
		}
		id = parent.parentID
	}
	return true
}

// pwPassive: calls that only wait for the page (they give it no input),
// so a request starting during one is the previous step's doing.
func pwPassive(method string) bool {
	return strings.HasPrefix(method, "waitFor") || method == "expect"
}

// pwHidden: calls the trace viewer hides by default — getters,
// configuration and routing.
func pwHidden(class, method string) bool {
	switch class {
	case "Route", "WebSocketRoute", "CDPSession", "Debugger":
		return true
	}
	switch method {
	// getters
	case "textContent", "innerText", "innerHTML", "inputValue", "getAttribute", "isChecked", "isDisabled",
		"isEnabled", "isEditable", "isHidden", "isVisible", "ariaSnapshot", "frameElement", "contentFrame",
		"ownerFrame", "cookies", "title", "jsonValue", "getProperty", "getPropertyList", "body",
		"fetchResponseBody", "storageState", "consoleMessages", "pageErrors", "requests",
		"webStorageItems", "webStorageGetItem", "credentialsGet":
		return true
	// configuration
	case "addCookies", "addInitScript", "clearCookies", "clearPermissions", "exposeBinding", "grantPermissions",
		"setExtraHTTPHeaders", "setGeolocation", "setHTTPCredentials", "setStorageState", "newCDPSession",
		"newBrowserCDPSession", "startTracing", "stopTracing", "credentialsInstall", "credentialsCreate",
		"credentialsDelete", "requestGC", "startJSCoverage", "stopJSCoverage", "startCSSCoverage",
		"stopCSSCoverage", "pickLocator", "cancelPickLocator", "hideHighlight", "webStorageSetItem",
		"webStorageRemoveItem", "webStorageClear", "shell":
		return true
	// routing
	case "setNetworkInterceptionPatterns", "setWebSocketInterceptionPatterns":
		return true
	}
	return strings.HasPrefix(method, "screencast")
}

// pwVerbs maps Playwright methods to flightrec's verbs; other methods
// become their name in snake case.
var pwVerbs = map[string]string{
	"goto": "goto", "click": "click", "mouseClick": "click", "dblclick": "dblclick", "tap": "tap",
	"touchscreenTap": "tap", "fill": "fill", "type": "type", "keyboardType": "type",
	"keyboardInsertText": "type", "press": "press", "keyboardPress": "press", "selectOption": "select",
	"check": "check", "setChecked": "check", "uncheck": "uncheck", "hover": "hover",
	"waitForSelector": "wait", "waitForTimeout": "wait", "waitForFunction": "wait",
	"waitForLoadState": "wait", "waitForURL": "wait", "waitForNavigation": "wait",
	"waitForElementState": "wait", "waitForEventInfo": "wait", "__waitInfo__": "wait",
	"expect": "expect", "expectScreenshot": "expect",
	"evaluateExpression": "evaluate", "evaluateExpressionHandle": "evaluate",
	"evalOnSelector": "evaluate", "evalOnSelectorAll": "evaluate",
}

func pwVerb(method string) string {
	if v, ok := pwVerbs[method]; ok {
		return v
	}
	var b strings.Builder
	for i, r := range strings.Trim(method, "_") {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "call"
	}
	return b.String()
}

// pwNoise are parameters that say how, not what: left out of args.
var pwNoise = map[string]bool{"selector": true, "strict": true, "timeout": true, "omitReturnValue": true,
	"waitId": true, "phase": true}

// action builds a receipt's action from a call.
func (a *pwAction) action() event.Action {
	act := event.Action{Verb: pwVerb(a.method)}
	var params map[string]json.RawMessage
	if firstByte(a.params) == '{' {
		_ = json.Unmarshal(a.params, &params)
	}
	if sel := jsonString(params["selector"]); sel != "" {
		act.Target = selectorTarget(sel)
	}
	args := map[string]json.RawMessage{}
	for k, v := range params {
		if pwNoise[k] || (k == "event" && jsonString(v) == "") {
			continue
		}
		args[k] = v
	}
	if a.title != "" {
		args["api"] = rawJSON(a.title)
	}
	if len(args) > 0 {
		if b := rawJSON(args); len(b) <= maxPWArgs {
			act.Args = b
		} else {
			act.Args = rawJSON(map[string]string{"omitted": fmt.Sprintf("%d bytes of parameters, over %d", len(b), maxPWArgs)})
		}
	}
	return act
}

func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// selectorTarget names what a Playwright selector aims at: the selector
// itself, and from its last part the role and name of getByRole, the name
// of getByLabel, getByPlaceholder, getByAltText and getByTitle.
func selectorTarget(sel string) *event.Target {
	t := &event.Target{Selector: sel}
	last := sel
	if i := strings.LastIndex(sel, " >> "); i >= 0 {
		last = sel[i+4:]
	}
	switch {
	case strings.HasPrefix(last, "internal:role="):
		rest := strings.TrimPrefix(last, "internal:role=")
		role := rest
		if i := strings.IndexByte(rest, '['); i >= 0 {
			role = rest[:i]
			if n, ok := selectorAttr(rest[i:], "name"); ok {
				t.Name = n
			}
		}
		t.Role = role
	case strings.HasPrefix(last, "internal:label="):
		t.Name, _ = quotedSelectorText(strings.TrimPrefix(last, "internal:label="))
	case strings.HasPrefix(last, "internal:attr="):
		rest := strings.TrimPrefix(last, "internal:attr=")
		for _, a := range []string{"placeholder", "alt", "title"} {
			if n, ok := selectorAttr(rest, a); ok {
				t.Name = n
				break
			}
		}
	}
	return t
}

// selectorAttr reads [name="value"i] from the start of s.
func selectorAttr(s, name string) (string, bool) {
	i := strings.Index(s, "["+name+"=")
	if i < 0 {
		return "", false
	}
	return quotedSelectorText(s[i+len(name)+2:])
}

// quotedSelectorText reads the JSON string at the start of s ("Email"i).
func quotedSelectorText(s string) (string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var v string
	if dec.Decode(&v) != nil {
		return "", false
	}
	return v, true
}

// stepError reads a call's error: {message, name, stack}, or the older
// {error: {…}} or a plain string.
func stepError(raw json.RawMessage) *event.StepError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var e struct {
		Message string          `json:"message"`
		Name    string          `json:"name"`
		Error   json.RawMessage `json:"error"`
		Value   json.RawMessage `json:"value"`
	}
	switch firstByte(raw) {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		e.Message = s
	case '{':
		_ = json.Unmarshal(raw, &e)
		if e.Message == "" && len(e.Error) > 0 && string(e.Error) != "null" {
			return stepError(e.Error)
		}
		if e.Message == "" && e.Name == "" {
			if len(e.Value) == 0 {
				return nil
			}
			e.Message = "a value that is not an Error was thrown"
		}
	default:
		return nil
	}
	msg := e.Message
	if i := strings.Index(msg, "\nCall log:"); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	if len(msg) > 2000 {
		msg = clipUTF8(msg, 2000) + "…"
	}
	return &event.StepError{Code: errorCode(e.Name), Message: msg}
}

// errorCode turns an error's name into a code: TimeoutError → TIMEOUT,
// TargetClosedError → TARGET_CLOSED, Error or none → ACTION_FAILED.
func errorCode(name string) string {
	name = strings.TrimSuffix(name, "Error")
	if name == "" {
		return "ACTION_FAILED"
	}
	var b strings.Builder
	prevLower := false
	for _, r := range name {
		switch {
		case unicode.IsUpper(r):
			if prevLower {
				b.WriteByte('_')
			}
			b.WriteRune(r)
			prevLower = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToUpper(r))
			prevLower = true
		default:
			b.WriteByte('_')
			prevLower = false
		}
	}
	return b.String()
}

func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// uaVersion is the browser version a user agent names.
func uaVersion(ua string) string {
	for _, tok := range []string{"HeadlessChrome/", "Chrome/", "Firefox/", "Version/"} {
		if i := strings.Index(ua, tok); i >= 0 {
			v := ua[i+len(tok):]
			if j := strings.IndexAny(v, " ;)"); j >= 0 {
				v = v[:j]
			}
			return v
		}
	}
	return ""
}

// parseJSStack reads V8's "    at fn (url:line:col)" lines.
func parseJSStack(s string) []event.StackFrame {
	var out []event.StackFrame
	for _, ln := range strings.Split(s, "\n") {
		ln = strings.TrimSpace(ln)
		if !strings.HasPrefix(ln, "at ") || len(out) == maxStack {
			continue
		}
		ln = strings.TrimPrefix(ln, "at ")
		fn, loc := "", ln
		if i := strings.LastIndex(ln, " ("); i >= 0 && strings.HasSuffix(ln, ")") {
			fn, loc = ln[:i], ln[i+2:len(ln)-1]
		}
		f := event.StackFrame{Function: fn, URL: loc}
		if i := strings.LastIndexByte(loc, ':'); i > 0 {
			if col, err := strconv.Atoi(loc[i+1:]); err == nil {
				rest := loc[:i]
				if j := strings.LastIndexByte(rest, ':'); j > 0 {
					if line, err := strconv.Atoi(rest[j+1:]); err == nil {
						f.URL, f.Line, f.Column = rest[:j], line, col
					}
				}
			}
		}
		out = append(out, f)
	}
	return out
}
