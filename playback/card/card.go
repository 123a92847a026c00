// Package card builds a recording's evidence card (wire.EvidenceCard) and
// renders it as GitHub-flavoured Markdown for an issue or pull request
// comment. It is pure: the caller (playback's evidence route, the CLI)
// reads the recording and hands its facts and the failing step's events to
// a Builder; nothing here reads a store or the network, so every cap is
// testable without one.
//
// The card's size is bounded by construction, whatever the recording: each
// text member is clipped to its cap with a marker, the lists keep at most
// wire.MaxCardConsole and wire.MaxCardRequests entries however many events
// are added, and Markdown refuses (clips) anything past
// wire.MaxCardMarkdown as a last guard.
package card

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/wire"
)

// Caps of the card's text members, in bytes.
const (
	capName      = 200  // project, flow, executor, version names and values
	capSignature = 500  // failure signature, group summaries
	capTarget    = 300  // action target, resolved target
	capMessage   = 1000 // error message, console text
	capNext      = 500
	capSource    = 300 // a console line's source frame
	capURL       = 500
	capNote      = 300
)

// Meta is what a card says about the recording as a whole.
type Meta struct {
	ID, Project, Flow, Executor, State, Verdict, Signature string
	Versions                                               map[string]string
	// Base is the server's base URL ("https://flightrec.example"), the
	// root of every link.
	Base string
	// Root and AttestationSHA256 are the finished recording's manifest
	// CID and the SHA-256 of its attestation (either may be empty).
	Root, AttestationSHA256 string
}

// Builder accumulates a card. Add may be called with any number of events:
// it keeps only what the card shows, so its memory is bounded too.
type Builder struct {
	c      wire.EvidenceCard
	errors []wire.CardConsole // console lines at error levels, first MaxCardConsole
	others []wire.CardConsole // the rest, first MaxCardConsole
	shot   string             // the failure screenshot's CID
	frame  string             // the step's last frame's CID
	shared *SharedLinks
}

// SharedLinks are the share links a shared card carries in place of links
// that need a token (the caller makes them, through access.Shares).
type SharedLinks struct {
	// Player is a player link's URL (BASE/r/ID#share=SECRET).
	Player string
	// Video and Evidence are a video link's and an evidence link's URLs
	// (BASE/s/SECRET); the thumbnail is the evidence link's
	// ?format=thumbnail.
	Video, Evidence string
	ExpiresAt       int64 // unix ns
}

// Shared makes the card carry l instead of links that need a token.
func (b *Builder) Shared(l SharedLinks) { b.shared = &l }

// Comments sets the failing step's comments (as stored, oldest first); the
// card keeps wire.MaxCardComments of them, each clipped.
func (b *Builder) Comments(cs []wire.CardComment) {
	b.c.CommentsTotal = len(cs)
	b.c.Comments = nil
	for i, c := range cs {
		if i == wire.MaxCardComments {
			break
		}
		c.Author, c.Text = clip(c.Author, capName), clip(c.Text, capMessage)
		b.c.Comments = append(b.c.Comments, c)
	}
}

// New starts the card of a recording.
func New(m Meta) *Builder {
	c := wire.EvidenceCard{
		Recording: m.ID, Project: clip(m.Project, capName), Flow: clip(m.Flow, capName),
		Executor: clip(m.Executor, capName), State: m.State, Verdict: m.Verdict,
		FailureSignature: clip(m.Signature, capSignature),
		Console:          []wire.CardConsole{}, FailedRequests: []wire.CardRequest{},
	}
	names := make([]string, 0, len(m.Versions))
	for k := range m.Versions {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		if i == wire.MaxCardVersions {
			c.Notes = append(c.Notes, fmt.Sprintf("%d more versions are in the recording's metadata", len(names)-i))
			break
		}
		c.Versions = append(c.Versions, wire.CardVersion{Name: clip(k, capName), Value: clip(m.Versions[k], capName)})
	}
	base := strings.TrimRight(m.Base, "/")
	if len(base) > capURL || link(base) == "#" {
		// A base is the request's Host (or --public-url): one that is
		// long or could break out of a link leaves the links relative.
		base = ""
	}
	rec := base + wire.Path(wire.RouteRecording, m.ID)
	c.Links = wire.CardLinks{Player: base + "/r/" + url.PathEscape(m.ID), HAR: rec + "/har", Evidence: rec + "/evidence?format=markdown"}
	c.Verify = wire.CardVerify{Root: m.Root, AttestationSHA256: m.AttestationSHA256}
	if m.Root != "" {
		c.Verify.Commands = verifyCommands(base, m.ID, m.AttestationSHA256 != "")
	}
	return &Builder{c: c}
}

// verifyCommands fetch a finished recording's bundle (and its attestation
// and the server's key, when it is signed) and check them offline.
func verifyCommands(base, id string, signed bool) []string {
	rec := base + wire.Path(wire.RouteRecording, id)
	auth := `-H "Authorization: Bearer $FLIGHTREC_TOKEN" `
	cmds := []string{"curl -fsS " + auth + "-o " + id + ".car " + rec + "/bundle"}
	if !signed {
		return append(cmds, "flightrec verify "+id+".car")
	}
	return append(cmds,
		"curl -fsS "+auth+"-o "+id+".intoto.json "+rec+"/attestation",
		"curl -fsS -o flightrec.pub "+base+wire.RouteAttestationKey,
		"sha256sum "+id+".intoto.json   # the attestation sha256 above",
		"flightrec verify --attestation "+id+".intoto.json --key flightrec.pub "+id+".car")
}

// Groups sets the groups the recording belongs to (newest first; the card
// keeps wire.MaxCardGroups).
func (b *Builder) Groups(gs []wire.CardGroup) {
	for i, g := range gs {
		if i == wire.MaxCardGroups {
			b.c.Notes = append(b.c.Notes, fmt.Sprintf("the recording is in %d more groups", len(gs)-i))
			break
		}
		g.Purpose, g.Summary = clip(g.Purpose, capName), clip(g.Summary, capSignature)
		b.c.Groups = append(b.c.Groups, g)
	}
}

// Note adds a line saying what the card could not include.
func (b *Builder) Note(s string) { b.c.Notes = append(b.c.Notes, clip(s, capNote)) }

// Failing sets the failing step from its receipt and time range.
func (b *Builder) Failing(step int, r event.Receipt, startTS, endTS int64) {
	s := &wire.CardStep{Step: step, Action: clip(r.Action.Verb, capName), Target: clip(targetText(r.Action.Target), capTarget),
		Resolved: clip(targetText(r.Resolved), capTarget), Outcome: clip(r.Outcome, capName), StartTS: startTS, EndTS: endTS}
	if r.Error != nil {
		s.Code, s.Message, s.Next = clip(r.Error.Code, capName), clip(r.Error.Message, capMessage), clip(r.Error.Next, capNext)
	}
	b.c.FailingStep = s
	base, _ := strings.CutSuffix(b.c.Links.Player, "/r/"+url.PathEscape(b.c.Recording))
	b.c.Links.Step = fmt.Sprintf("%s?step=%d", b.c.Links.Player, step)
	b.c.Links.StepJSON = fmt.Sprintf("%s/v1/recordings/%s/steps/%d", base, url.PathEscape(b.c.Recording), step)
}

// targetText is a target as a person reads it: role "name", else the
// selector, else the ref.
func targetText(t *event.Target) string {
	switch {
	case t == nil:
		return ""
	case t.Role != "" && t.Name != "":
		return t.Role + ` "` + t.Name + `"`
	case t.Role != "":
		return t.Role
	case t.Name != "":
		return `"` + t.Name + `"`
	case t.Selector != "":
		return t.Selector
	}
	return t.Ref
}

// Add takes one event of the failing step (as stored: redacted, binary
// members as CIDs). Console lines, failed requests and the screenshot are
// kept; other kinds are ignored. Events must come in seq order.
func (b *Builder) Add(e event.Envelope) {
	switch e.Kind {
	case event.KindConsole:
		var c event.Console
		if json.Unmarshal(e.Data, &c) != nil {
			return
		}
		b.c.ConsoleTotal++
		line := wire.CardConsole{Seq: e.Seq, Level: clip(c.Level, capName)}
		keep := &b.others
		if errorLevel(c.Level) {
			keep = &b.errors
		}
		if len(*keep) < wire.MaxCardConsole {
			line.Text = clip(c.Text, capMessage)
			line.Source, line.Mapped = consoleSource(c)
			*keep = append(*keep, line)
		}
	case event.KindHAR:
		var h event.HAR
		if json.Unmarshal(e.Data, &h) != nil {
			return
		}
		st := h.Response.Status
		if st != 0 && st < 400 {
			return
		}
		b.c.FailedRequestsTotal++
		if len(b.c.FailedRequests) < wire.MaxCardRequests {
			b.c.FailedRequests = append(b.c.FailedRequests, wire.CardRequest{Seq: e.Seq, Method: clip(h.Request.Method, capName),
				URL: clip(h.Request.URL, capURL), Status: st,
				Code: clip(h.Response.Content.ErrorCode(), capName)})
		}
	case event.KindScreenshot:
		var s event.Screenshot
		if json.Unmarshal(e.Data, &s) == nil && s.ImageCID != "" && (s.Reason == "failure" || b.shot == "") {
			b.shot = s.ImageCID
		}
	case event.KindFrame:
		var f event.Frame
		if json.Unmarshal(e.Data, &f) == nil && f.ImageCID != "" {
			b.frame = f.ImageCID
		}
	}
}

func errorLevel(l string) bool { return l == "error" || l == "exception" || l == "assert" }

// consoleSource is where a console line came from: the first source-mapped
// frame (what the author wrote), else the first frame, else the message's
// own location.
func consoleSource(c event.Console) (string, bool) {
	f := func(s event.StackFrame) string {
		loc := s.URL
		if s.Line > 0 {
			loc += fmt.Sprintf(":%d:%d", s.Line, s.Column)
		}
		if s.Function != "" {
			return clip(s.Function+" ("+loc+")", capSource)
		}
		return clip(loc, capSource)
	}
	switch {
	case len(c.MappedStack) > 0:
		return f(c.MappedStack[0]), true
	case len(c.Stack) > 0:
		return f(c.Stack[0]), false
	case c.URL != "":
		return f(event.StackFrame{URL: c.URL, Line: c.Line, Column: c.Column}), false
	}
	return "", false
}

// Card returns the card built so far.
func (b *Builder) Card() wire.EvidenceCard {
	c := b.c
	// Errors first, then other levels, up to the cap; shown in seq order.
	lines := append(slices.Clone(b.errors), b.others...)
	if len(lines) > wire.MaxCardConsole {
		lines = lines[:wire.MaxCardConsole]
	}
	slices.SortFunc(lines, func(x, y wire.CardConsole) int { return cmp.Compare(x.Seq, y.Seq) })
	c.Console = append([]wire.CardConsole{}, lines...)
	c.FailedRequests = slices.Clone(c.FailedRequests)
	c.Versions, c.Groups, c.Notes = slices.Clone(c.Versions), slices.Clone(c.Groups), slices.Clone(c.Notes)
	c.Comments = slices.Clone(c.Comments)
	if l := b.shared; l != nil {
		c.Links = wire.CardLinks{Player: l.Player, Video: l.Video, Evidence: l.Evidence, SharesExpireAt: l.ExpiresAt}
		if c.FailingStep != nil {
			// The step goes in the query, before the fragment that
			// carries the secret.
			page, frag, _ := strings.Cut(l.Player, "#")
			c.Links.Step = fmt.Sprintf("%s?step=%d#%s", page, c.FailingStep.Step, frag)
		}
	}
	if c.FailingStep != nil {
		s := *c.FailingStep
		if s.Screenshot = b.shot; s.Screenshot == "" {
			s.Screenshot = b.frame
		}
		if s.Screenshot != "" {
			c.Links.Screenshot = c.Links.Step
			if b.shared != nil {
				c.Links.Thumbnail = b.shared.Evidence + "?format=thumbnail"
			}
		}
		c.FailingStep = &s
	}
	return c
}

// clip cuts s to at most n bytes (at a rune boundary) plus a marker saying
// how much was cut; invalid UTF-8 is replaced so the card is valid text.
func clip(s string, n int) string {
	if len(s) <= n {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + fmt.Sprintf("… [+%d bytes]", len(s)-cut)
}
