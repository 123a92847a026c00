package event

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Summary is the handful of columns an index keeps per event for search and
// timelines. It is derived from the payload once, at ingest.
type Summary struct {
	URL       string `json:"url,omitempty"`
	Method    string `json:"method,omitempty"`
	Status    int    `json:"status,omitempty"`
	Level     string `json:"level,omitempty"`
	Text      string `json:"text,omitempty"`
	Action    string `json:"action,omitempty"`
	Outcome   string `json:"outcome,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
}

// MaxSummaryText bounds Summary.Text so an index row stays small.
const MaxSummaryText = 512

// Summarize derives the index columns of a decoded event.
func Summarize(d *Decoded) Summary {
	var s Summary
	switch p := d.Payload.(type) {
	case *Receipt:
		s.Action = p.Action.Verb
		if t := p.Action.Target; t != nil {
			s.Text = describeTarget(t)
		}
		// A timeline names the page a step acted on when it is not the
		// first (a popup's id), and where a switch went.
		switch {
		case p.Action.Verb == "switch" && p.Page == "":
			s.Text = "to the first page"
		case p.Action.Verb == "switch":
			s.Text = "to page " + p.Page
		case p.Page != "":
			s.Text = strings.TrimSpace(s.Text + " (page " + p.Page + ")")
		}
		s.Outcome = p.Outcome
		if p.Error != nil {
			s.ErrorCode = p.Error.Code
			if p.Error.Message != "" {
				s.Text = joinText(s.Text, p.Error.Message)
			}
		}
	case *HAR:
		s.URL, s.Method, s.Status = p.Request.URL, p.Request.Method, p.Response.Status
	case *Console:
		s.Level, s.Text, s.URL = p.Level, p.Text, p.URL
	case *Snapshot:
		s.URL = p.Origin
	case *Download:
		s.Text = p.Name
	case *Check:
		s.Action = "check:" + p.Type
		s.Text = p.Target
		if p.Passed {
			s.Outcome = "passed"
		} else {
			s.Outcome = "failed"
		}
	}
	s.Text = clip(s.Text, MaxSummaryText)
	s.URL = clip(s.URL, 2048)
	return s
}

func describeTarget(t *Target) string {
	if t.Frame != "" {
		f := *t
		f.Frame = ""
		return fmt.Sprintf("frame %q %s", t.Frame, describeTarget(&f))
	}
	switch {
	case t.Role != "" && t.Name != "":
		return fmt.Sprintf("%s %q", t.Role, t.Name)
	case t.Selector != "":
		return t.Selector
	case t.Name != "":
		return fmt.Sprintf("%q", t.Name)
	default:
		return t.Ref
	}
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + ": " + b
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Binary returns the bytes an event carries inline (a frame's or
// screenshot's image, a video chunk) and the field they travel in, or
// ("", nil) for kinds without one.
func Binary(d *Decoded) (field string, data []byte) {
	switch p := d.Payload.(type) {
	case *Frame:
		return "image", p.Image
	case *Screenshot:
		return "image", p.Image
	case *Video:
		return "chunk", p.Chunk
	case *Download:
		return "data", p.Data
	}
	return "", nil
}
