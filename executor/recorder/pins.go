package recorder

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
)

// CodeNetworkNotRecorded fails a step whose API request, under the network
// pin, has no answer in the recording.
const CodeNetworkNotRecorded = "NETWORK_NOT_RECORDED"

// Pins make a run repeatable (flightrec rerun --pin): the page's clock,
// its randomness, and its API answers.
type Pins struct {
	// Clock starts the page's Date and performance.now at Start; they
	// move only when a timer fires, to the time it was due.
	Clock bool
	Start time.Time
	// Random seeds Math.random and crypto.getRandomValues (and
	// randomUUID) with Seed in every document.
	Random bool
	Seed   uint32
	// Network, when set, answers every API request from a recording.
	Network *Replay
}

// Names lists the pins set, in the order the flag spells them.
func (p Pins) Names() []string {
	var out []string
	if p.Clock {
		out = append(out, "clock")
	}
	if p.Random {
		out = append(out, "random")
	}
	if p.Network != nil {
		out = append(out, "network")
	}
	return out
}

func (p Pins) any() bool { return p.Clock || p.Random || p.Network != nil }

//go:embed pins.js
var pinsJS string

// script is the page script that installs the clock, random and
// WebSocket pins; it must run before any of the page's own.
func (p Pins) script() string {
	r := strings.NewReplacer("__CLOCK__", strconv.FormatBool(p.Clock), "__START__", strconv.FormatInt(p.Start.UnixMilli(), 10),
		"__RANDOM__", strconv.FormatBool(p.Random), "__SEED__", strconv.FormatUint(uint64(p.Seed), 10),
		"__NETWORK__", strconv.FormatBool(p.Network != nil))
	return r.Replace(pinsJS)
}

// IsAPI says whether a request is one the network pin answers from the
// recording rather than from the app: anything but GET, HEAD and OPTIONS
// (form posts included), a path under /api/, or a request that sends or
// asks for JSON. Pages and static assets are GETs of other paths and come
// from the app under test.
func IsAPI(method, rawURL string, header func(string) string) bool {
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS":
	default:
		return true
	}
	if u, err := url.Parse(rawURL); err == nil && strings.HasPrefix(u.Path, "/api/") {
		return true
	}
	return strings.Contains(header("Content-Type"), "json") || strings.Contains(header("Accept"), "application/json")
}

// Replay answers a pinned run's API requests from a recording's HAR
// entries (and its state checks from the recording's check events).
type Replay struct {
	base    *url.URL
	origin  string // the recorded app's origin, replaced by base's
	redact  func(event.HARRequest) event.HARRequest
	mu      sync.Mutex
	entries []*replayEntry
	states  map[string]json.RawMessage // normalized "METHOD url" → the recorded answer
}

type replayEntry struct {
	key  string // method and normalized URL
	body string
	har  event.HAR
	used bool
}

// Answer is a recorded reply the replay gives.
type Answer struct {
	Status  int
	Phrase  string
	Headers []*fetch.HeaderEntry
	Body    []byte
	Failed  bool   // the recorded request got no answer
	Note    string // "" or what the receipt says about it (body redacted, cut at 64 KiB)
	Matched string // the recorded request, "METHOD URL"
}

// NewReplay indexes a recording's HAR entries and state checks for
// answering requests made against base. redact, when given, redacts a
// live request as the recording's plan redacted the recorded one, so a
// body holding a secret matches its redacted recording; without it a
// redaction mark in a recorded body matches any value in its place.
func NewReplay(base string, hars []event.HAR, checks []event.Check, redact func(event.HARRequest) event.HARRequest) (*Replay, error) {
	b, err := url.Parse(base)
	if err != nil || b.Host == "" {
		return nil, fmt.Errorf("the network pin needs an absolute --base URL, got %q", base)
	}
	r := &Replay{base: b, redact: redact, states: map[string]json.RawMessage{}}
	for _, h := range hars {
		if r.origin == "" {
			if u, err := url.Parse(h.Request.URL); err == nil && u.Host != "" {
				r.origin = u.Scheme + "://" + u.Host
			}
		}
		if !IsAPI(h.Request.Method, h.Request.URL, harHeader(h.Request.Headers)) {
			continue
		}
		e := &replayEntry{key: r.key(h.Request.Method, h.Request.URL), har: h}
		if h.Request.PostData != nil {
			e.body = h.Request.PostData.Text
		}
		r.entries = append(r.entries, e)
	}
	for _, c := range checks {
		method, u, ok := strings.Cut(c.Target, " ")
		if c.Type == "state" && ok && len(c.Actual) > 0 {
			r.states[r.key(method, u)] = c.Actual
		}
	}
	return r, nil
}

// Len is how many recorded API requests the replay can answer.
func (r *Replay) Len() int { return len(r.entries) }

func harHeader(hs []event.NameValue) func(string) string {
	return func(name string) string {
		for _, h := range hs {
			if strings.EqualFold(h.Name, name) {
				return h.Value
			}
		}
		return ""
	}
}

// key is a request's method and URL, normalized: the recorded app's
// origin (and base's) written as base's, query parameters sorted, no
// fragment. Another port of the app's host (recorded or base's) is a
// service started with the app, whose port changes from run to run (the
// demo's payment provider): it is written as one peer origin, the same
// whichever port, apart from the app's.
func (r *Replay) key(method, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return strings.ToUpper(method) + " " + raw
	}
	u.Fragment, u.RawFragment = "", ""
	switch o := u.Scheme + "://" + u.Host; {
	case o == r.origin || o == r.base.Scheme+"://"+r.base.Host:
		u.Scheme, u.Host = r.base.Scheme, r.base.Host
	case u.Hostname() == r.base.Hostname() || (r.origin != "" && u.Hostname() == hostnameOf(r.origin)):
		u.Scheme, u.Host = r.base.Scheme, "peer.of."+r.base.Hostname()
	}
	u.RawQuery = u.Query().Encode()
	return strings.ToUpper(method) + " " + u.String()
}

func hostnameOf(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// markRE finds the marks redaction writes in place of a value.
var markRE = regexp.MustCompile(`\[redacted(?::[0-9a-f]+)?\]`)

// bodiesMatch says whether a live body (already redacted when a plan was
// given) is the recorded one: equal; the same JSON (redaction writes JSON
// back with its keys sorted) where a string holding a redaction mark
// stands for any value in its place; text equal but for its marks; or,
// for a body cut at the cap, the recorded one's prefix.
func bodiesMatch(rec, live string, truncated bool) bool {
	if rec == live {
		return true
	}
	if truncated {
		return len(rec) > 0 && markedMatch(rec, live, true)
	}
	var x, y any
	if json.Unmarshal([]byte(rec), &x) == nil && json.Unmarshal([]byte(live), &y) == nil {
		return jsonMatch(x, y)
	}
	return markedMatch(rec, live, false)
}

// markedMatch compares text where each redaction mark in rec stands for
// any run of characters; prefix accepts a live text that goes on.
func markedMatch(rec, live string, prefix bool) bool {
	if !markRE.MatchString(rec) {
		return rec == live || (prefix && strings.HasPrefix(live, rec))
	}
	parts := markRE.Split(rec, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	pat := "^" + strings.Join(parts, `(?s:.*?)`)
	if !prefix {
		pat += "$"
	}
	re, err := regexp.Compile(pat)
	return err == nil && re.MatchString(live)
}

// jsonMatch compares decoded JSON values, a recorded string with a mark
// matching as markedMatch says.
func jsonMatch(rec, live any) bool {
	switch r := rec.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok || len(l) != len(r) {
			return false
		}
		for k, v := range r {
			lv, ok := l[k]
			if !ok || !jsonMatch(v, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(r) {
			return false
		}
		for i := range r {
			if !jsonMatch(r[i], l[i]) {
				return false
			}
		}
		return true
	case string:
		if markRE.MatchString(r) {
			// A secret may have been a number the page sent.
			ls, ok := live.(string)
			if !ok {
				b, _ := json.Marshal(live)
				ls = string(b)
			}
			return markedMatch(r, ls, false)
		}
		return live == r
	default:
		return live == rec
	}
}

// Match finds the recorded answer to a live request: the first unused
// entry with its method, normalized URL and body, else (a retry, a poll)
// the last used one. ok is false when the recording has none.
func (r *Replay) Match(method, rawURL string, body []byte, mime string) (Answer, bool) {
	live := event.HARRequest{Method: method, URL: rawURL}
	if len(body) > 0 {
		live.PostData = &event.PostData{MimeType: mime, Text: string(body)}
	}
	if r.redact != nil {
		live = r.redact(live)
	}
	text := ""
	if live.PostData != nil {
		text = live.PostData.Text
	}
	k := r.key(method, rawURL)
	r.mu.Lock()
	defer r.mu.Unlock()
	var again *replayEntry
	for _, e := range r.entries {
		if e.key != k || !bodiesMatch(e.body, text, e.har.Truncated) {
			continue
		}
		if !e.used {
			e.used = true
			return e.answer(), true
		}
		again = e
	}
	if again != nil {
		return again.answer(), true
	}
	return Answer{}, false
}

// State is the recorded answer of a state check, if the recording has one.
func (r *Replay) State(method, rawURL string) (json.RawMessage, bool) {
	a, ok := r.states[r.key(method, rawURL)]
	return a, ok
}

// replayDropHeaders are response headers the recorded body no longer fits
// (it is stored decoded, whole or cut) or that carry no meaning replayed.
var replayDropHeaders = map[string]bool{"content-length": true, "content-encoding": true, "transfer-encoding": true,
	"connection": true, "keep-alive": true}

func (e *replayEntry) answer() Answer {
	h := e.har
	a := Answer{Status: h.Response.Status, Phrase: h.Response.StatusText, Failed: h.Response.Status == 0,
		Matched: h.Request.Method + " " + h.Request.URL}
	for _, hv := range h.Response.Headers {
		// A header whose value was redacted (a session cookie) would set
		// the mark itself: left out.
		if replayDropHeaders[strings.ToLower(hv.Name)] || markRE.MatchString(hv.Value) || strings.HasPrefix(hv.Name, ":") {
			continue
		}
		a.Headers = append(a.Headers, &fetch.HeaderEntry{Name: hv.Name, Value: hv.Value})
	}
	c := h.Response.Content
	a.Body = []byte(c.Text)
	if c.Encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(c.Text); err == nil {
			a.Body = b
		}
	}
	var notes []string
	if markRE.MatchString(c.Text) {
		notes = append(notes, "body redacted")
	}
	if h.Truncated {
		notes = append(notes, fmt.Sprintf("body cut at %d KiB", event.MaxHARBody>>10))
	}
	a.Note = "answered from the recording"
	if len(notes) > 0 {
		a.Note += " as recorded (" + strings.Join(notes, ", ") + ")"
	}
	return a
}

// replayMiss is a request the recording could not answer.
type replayMiss struct{ method, url string }

// onRequestPaused answers one intercepted request (on its own goroutine):
// an API request from the recording, anything else from the app.
func (s *session) onRequestPaused(pg *followedPage, ev *fetch.EventRequestPaused) {
	req := ev.Request
	hdr := func(name string) string {
		for k, v := range req.Headers {
			if strings.EqualFold(k, name) {
				if str, ok := v.(string); ok {
					return str
				}
			}
		}
		return ""
	}
	full := req.URL + req.URLFragment
	if !IsAPI(req.Method, full, hdr) {
		_, _ = chromedp.Call(pg.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		return
	}
	var body []byte
	for _, p := range req.PostDataEntries {
		body = append(body, p.Bytes...)
	}
	a, ok := s.cfg.Pins.Network.Match(req.Method, req.URL, body, hdr("Content-Type"))
	step := s.st.currentStep()
	if !ok {
		s.mu.Lock()
		s.misses[step] = append(s.misses[step], replayMiss{req.Method, req.URL})
		s.mu.Unlock()
		_, _ = chromedp.Call(pg.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
		return
	}
	s.mu.Lock()
	s.replayed[req.Method+" "+req.URL] = append(s.replayed[req.Method+" "+req.URL], a.Note)
	s.mu.Unlock()
	if a.Failed {
		_, _ = chromedp.Call(pg.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonFailed})
		return
	}
	_, _ = chromedp.Call(pg.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID,
		ResponseCode: int64(a.Status), ResponseHeaders: a.Headers, Body: a.Body, ResponsePhrase: a.Phrase})
}

// replayNote takes the note of a replayed request, for its receipt.
func (s *session) replayNote(method, u string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := method + " " + u
	notes := s.replayed[k]
	if len(notes) == 0 {
		return ""
	}
	s.replayed[k] = notes[1:]
	return notes[0]
}

// takeMisses returns (and forgets) step n's unanswered API requests.
func (s *session) takeMisses(n int) []replayMiss {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.misses[n]
	delete(s.misses, n)
	return m
}
