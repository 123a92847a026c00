package card

import (
	"fmt"
	"strings"
	"time"

	"github.com/flightrec/flightrec/wire"
)

// Markdown renders a card as GitHub-flavoured Markdown: a heading with the
// verdict, a table of the recording, the failing step as a table, its
// failed requests as a table, its console lines and the offline check in
// collapsed <details>, links into the player. Everything that came from the
// recording (names, targets, messages, URLs, console text) is in code spans
// or a fenced block, so a page's text cannot become markup, a link or a
// mention in the comment. The result is always shorter than
// wire.MaxCardMarkdown.
func Markdown(c wire.EvidenceCard) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	title := "flightrec evidence: " + code(c.Project)
	if c.Flow != "" {
		title += " / " + code(c.Flow)
	}
	verdict := c.Verdict
	if verdict == "" {
		verdict = c.State
	}
	w("### %s %s — %s\n\n", mark(verdict), title, code(verdict))

	w("| | |\n|---|---|\n")
	w("| Recording | [%s](%s) |\n", code(c.Recording), link(c.Links.Player))
	w("| Project | %s |\n", cell(c.Project))
	if c.Flow != "" {
		w("| Flow | %s |\n", cell(c.Flow))
	}
	if c.Executor != "" {
		w("| Executor | %s |\n", cell(c.Executor))
	}
	w("| Verdict | %s (%s) |\n", cell(verdict), cell(c.State))
	if c.FailureSignature != "" {
		w("| Failure signature | %s |\n", cell(c.FailureSignature))
	}
	for _, g := range c.Groups {
		w("| Reproduced | %s, group %s |\n", cell(fmt.Sprintf("reproduced %d of %d", g.Reproduced, g.Of)), cell(g.ID))
	}
	if len(c.Versions) > 0 {
		parts := make([]string, len(c.Versions))
		for i, v := range c.Versions {
			parts[i] = cell(v.Name + ": " + v.Value)
		}
		w("| Versions | %s |\n", strings.Join(parts, "<br>"))
	}
	w("\n")

	if s := c.FailingStep; s != nil {
		head := fmt.Sprintf("Failing step %d: %s", s.Step, code(s.Action))
		if s.Target != "" {
			head += " " + code(s.Target)
		}
		w("#### %s\n\n", head)
		w("| | |\n|---|---|\n")
		w("| Action | %s |\n", cell(strings.TrimSpace(s.Action+" "+s.Target)))
		if s.Resolved != "" {
			w("| Resolved target | %s |\n", cell(s.Resolved))
		}
		w("| Outcome | %s |\n", cell(s.Outcome))
		if s.Code != "" {
			w("| Error code | %s |\n", cell(s.Code))
		}
		if s.Message != "" {
			w("| Message | %s |\n", cell(s.Message))
		}
		if s.Next != "" {
			w("| Next | %s |\n", cell(s.Next))
		}
		if s.EndTS > s.StartTS && s.StartTS > 0 {
			w("| Duration | %s |\n", time.Duration(s.EndTS-s.StartTS).Round(time.Millisecond))
		}
		w("\n")
		if c.Links.Thumbnail != "" {
			// A shared card shows the screenshot itself, opening the
			// player at the step.
			w("[![failure screenshot of step %d](%s)](%s)\n\n", s.Step, link(c.Links.Thumbnail), link(c.Links.Step))
		}
		links := []string{fmt.Sprintf("[Open the player at step %d](%s)", s.Step, link(c.Links.Step))}
		if c.Links.Screenshot != "" {
			links = append(links, fmt.Sprintf("[failure screenshot](%s) (%s)", link(c.Links.Screenshot), code(s.Screenshot)))
		}
		links = append(links, otherLinks(c.Links)...)
		w("%s\n\n", strings.Join(links, " · "))

		if len(c.Comments) > 0 {
			w("#### Comments on step %d (%s)\n\n", s.Step, shown(len(c.Comments), c.CommentsTotal))
			for _, cm := range c.Comments {
				at := ""
				if cm.T > 0 {
					at = fmt.Sprintf(" at %.1f s", cm.T)
				}
				w("- %s%s: %s\n", code(cm.Author), at, code(cm.Text))
			}
			w("\n")
		}

		if c.FailedRequestsTotal > 0 {
			w("#### Failed requests (%s)\n\n", shown(len(c.FailedRequests), c.FailedRequestsTotal))
			w("| Method | URL | Status | Error code |\n|---|---|---|---|\n")
			for _, r := range c.FailedRequests {
				st := "no response"
				if r.Status != 0 {
					st = fmt.Sprint(r.Status)
				}
				w("| %s | %s | %s | %s |\n", cell(r.Method), cell(r.URL), st, cell(r.Code))
			}
			w("\n")
		}
		if c.ConsoleTotal > 0 {
			w("<details><summary>Console of step %d (%s)</summary>\n\n", s.Step, shown(len(c.Console), c.ConsoleTotal))
			var lines strings.Builder
			for _, l := range c.Console {
				fmt.Fprintf(&lines, "%-7s %s\n", l.Level, l.Text)
				if l.Source != "" {
					at := "at"
					if l.Mapped {
						at = "at (source-mapped)"
					}
					fmt.Fprintf(&lines, "        %s %s\n", at, l.Source)
				}
			}
			w("%s\n</details>\n\n", fenced("text", lines.String()))
		}
	} else {
		links := append([]string{fmt.Sprintf("[Open the player](%s)", link(c.Links.Player))}, otherLinks(c.Links)...)
		w("#### No failing step\n\nNo step of this recording failed. %s\n\n", strings.Join(links, " · "))
	}

	if c.Verify.Root != "" {
		w("<details><summary>Verify offline</summary>\n\n")
		w("| | |\n|---|---|\n| Manifest root | %s |\n", cell(c.Verify.Root))
		if c.Verify.AttestationSHA256 != "" {
			w("| Attestation sha256 | %s |\n", cell(c.Verify.AttestationSHA256))
		}
		w("\n%s\n</details>\n\n", fenced("sh", strings.Join(c.Verify.Commands, "\n")+"\n"))
	}
	for _, n := range c.Notes {
		w("> %s\n", code(n))
	}
	if len(c.Notes) > 0 {
		w("\n")
	}
	if c.Links.SharesExpireAt != 0 {
		w("<sub>Redacted as stored. These share links open without a token until %s. [This card](%s)</sub>\n",
			time.Unix(0, c.Links.SharesExpireAt).UTC().Format(time.RFC3339), link(c.Links.Evidence))
	} else {
		w("<sub>Redacted as stored. [This card](%s)</sub>\n", link(c.Links.Evidence))
	}
	return limit(b.String())
}

// otherLinks are the card's links besides the player's that it has: the
// step as JSON and the HAR (a token's card), the video (a shared card).
func otherLinks(l wire.CardLinks) []string {
	var out []string
	if l.StepJSON != "" {
		out = append(out, fmt.Sprintf("[step as JSON](%s)", link(l.StepJSON)))
	}
	if l.HAR != "" {
		out = append(out, fmt.Sprintf("[HAR](%s)", link(l.HAR)))
	}
	if l.Video != "" {
		out = append(out, fmt.Sprintf("[video](%s)", link(l.Video)))
	}
	return out
}

// limit is the last guard on the size: the caps keep a card far below
// MaxCardMarkdown, but a card is never longer than it.
func limit(s string) string {
	const tail = "\n\n… [card cut at the comment size limit]\n"
	if len(s) < wire.MaxCardMarkdown {
		return s
	}
	return s[:cutAt(s, wire.MaxCardMarkdown-len(tail)-1)] + tail
}

// cutAt is the last line boundary at or before n.
func cutAt(s string, n int) int {
	if i := strings.LastIndexByte(s[:n], '\n'); i > 0 {
		return i
	}
	return 0
}

func shown(n, total int) string {
	if n == total {
		return fmt.Sprint(total)
	}
	return fmt.Sprintf("%d of %d", n, total)
}

// mark is the verdict's sign.
func mark(v string) string {
	switch v {
	case "pass":
		return "✅"
	case "fail", "blocked", "aborted":
		return "❌"
	case "flaky":
		return "⚠️"
	}
	return "⏺"
}

// oneLine makes s one line of printable text.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f:
			return -1
		}
		return r
	}, s)
}

// code is s as an inline code span: a fence one backtick longer than any
// run of backticks in s, padded when s starts or ends with one.
func code(s string) string {
	s = oneLine(s)
	if strings.TrimSpace(s) == "" {
		return ""
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || (s[0] == ' ' && s[len(s)-1] == ' ') {
		s = " " + s + " "
	}
	return fence + s + fence
}

// cell is a code span inside a table row: GFM splits cells at a pipe
// before it reads code spans, so a pipe is escaped.
func cell(s string) string { return strings.ReplaceAll(code(s), "|", `\|`) }

// fenced is s as a fenced code block longer than any fence inside it.
func fenced(info, s string) string {
	s = strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			return -1
		}
		return r
	}, s)
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return fence + info + "\n" + s + fence + "\n"
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// link is u as a link destination, or "#" when u could break out of one
// (the base URL comes from the request's Host).
func link(u string) string {
	if u == "" || strings.ContainsAny(u, " ()<>\"'`\\\n\r\t") {
		return "#"
	}
	return u
}
