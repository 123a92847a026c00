package flowexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/flightrec/flightrec/executor/flow"
)

// Flow writes the export as a flow file: a header naming the recording,
// its failure and the parameters it needs, then every step with a comment
// naming the recording's step (and why a step could not be expressed).
// The result parses with flow.Parse.
func (x *Export) Flow() []byte {
	var b bytes.Buffer
	x.header(&b, "# ", func(p Param) string { return "{{" + p.Name + "}}" }, func(p Param) string {
		return fmt.Sprintf("--param %s=…, %s, or a --persona file", p.Name, flow.ParamEnv(p.Name))
	})
	fmt.Fprintf(&b, "# Recorded against %s, written here as {{base}}: flightrec record FILE --base URL\n", orUnknown(x.Origin))
	fmt.Fprintf(&b, "name: %s\n", yq(x.Name))
	if x.Revision != "" {
		fmt.Fprintf(&b, "revision: %s\n", yq(x.Revision))
	}
	if x.StartURL != "" {
		fmt.Fprintf(&b, "start_url: %s\n", yq(x.StartURL))
	}
	fmt.Fprintf(&b, "viewport: {width: %d, height: %d}\n", x.Viewport.Width, x.Viewport.Height)
	if len(x.Params) > 0 {
		b.WriteString("params:\n")
		for _, p := range x.Params {
			fmt.Fprintf(&b, "  %s: %s\n", p.Name, yq(fmt.Sprintf("typed into %s (masked in recording %s, step %d)", p.Target, x.Rec.ID, p.Step)))
		}
	}
	b.WriteString("steps:\n")
	for _, s := range x.Steps {
		c := fmt.Sprintf("recording %s step %d: %s", x.Rec.ID, s.Rec, s.Action)
		if s.Failed {
			c += fmt.Sprintf(" (failed in the recording: %s: %s)", s.ErrCode, s.ErrMsg)
		}
		if s.Flow == nil {
			fmt.Fprintf(&b, "  # %s\n  #   not exported: %s\n", comment(c), comment(s.Note))
			continue
		}
		fmt.Fprintf(&b, "  # %s\n", comment(c))
		if s.Note != "" {
			fmt.Fprintf(&b, "  #   %s\n", comment(s.Note))
		}
		fmt.Fprintf(&b, "  - %s\n", stepYAML(s.Flow))
	}
	return b.Bytes()
}

// header writes what both exports begin with, each line after prefix:
// the recording, its verdict and signature, the first failed step and
// the parameters (named as name says, supplied as supply says).
func (x *Export) header(b *bytes.Buffer, prefix string, name, supply func(Param) string) {
	line := func(format string, args ...any) { b.WriteString(prefix + comment(fmt.Sprintf(format, args...)) + "\n") }
	src := ""
	if x.Source != "" {
		src = ", " + x.Source
	}
	line("Exported by flightrec from recording %s (flow %s, verdict %s%s).", x.Rec.ID, x.Name, orUnknown(x.Rec.Verdict), src)
	if x.Rec.Signature != "" {
		line("Failure signature: %s", x.Rec.Signature)
	}
	if x.FailedAt >= 0 {
		s := x.Steps[x.FailedAt]
		line("First failed step: recording step %d (%s): %s: %s", s.Rec, s.Action, s.ErrCode, s.ErrMsg)
	}
	if len(x.Params) == 0 {
		line("Parameters: none (no value was typed into a masked field).")
		return
	}
	line("Parameters (typed into masked fields; the recording kept no value, so none is written here):")
	for _, p := range x.Params {
		line("- %s typed into %s at step %d: %s", name(p), p.Target, p.Step, supply(p))
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// comment keeps a comment on one line.
func comment(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// yq quotes a YAML scalar: JSON's double-quoted string is YAML's too.
func yq(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// plainTarget: a target spelled role "name" that YAML reads unquoted
// inside a flow mapping.
var plainTarget = regexp.MustCompile(`^[a-z]+ "[A-Za-z0-9 _.()'!?&/-]*"$`)

// targetYAML spells a target as flow files write it.
func targetYAML(t *flow.Target) string {
	s := t.String()
	if plainTarget.MatchString(s) && !strings.Contains(s, ": ") && !strings.Contains(s, " #") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func stepYAML(s *flow.Step) string {
	switch s.Verb {
	case flow.Goto:
		return "goto: " + yq(s.URL)
	case flow.Click, flow.Check:
		return string(s.Verb) + ": " + targetYAML(s.Target)
	case flow.Fill, flow.Select:
		return fmt.Sprintf("%s: {target: %s, value: %s}", s.Verb, targetYAML(s.Target), yq(s.Value))
	case flow.Press:
		if s.Target == nil {
			return "press: " + yq(s.Key)
		}
		return fmt.Sprintf("press: {target: %s, key: %s}", targetYAML(s.Target), yq(s.Key))
	case flow.Wait:
		switch w := s.Wait; {
		case w.Text != "":
			return "wait: {text: " + yq(w.Text) + "}"
		case w.URL != "":
			return "wait: {url: " + yq(w.URL) + "}"
		}
		return "wait: settled"
	case flow.Switch:
		return "switch: " + s.Page
	case flow.Snapshot:
		return "snapshot: " + s.View
	case flow.Expect:
		if st := s.Expect.State; st != nil {
			out := fmt.Sprintf("expect: {state: {method: %s, url: %s, status: %d", st.Method, yq(st.URL), st.Status)
			if len(st.JSON) > 0 {
				out += ", json: " + string(compactJSON(st.JSON))
			}
			return out + "}}"
		}
		return "expect: {text: " + yq(s.Expect.Text) + "}"
	}
	return "# unknown verb " + string(s.Verb)
}

// compactJSON is JSON on one line, which YAML reads as a flow mapping.
func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return []byte("null")
	}
	return b.Bytes()
}
