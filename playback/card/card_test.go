package card_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/playback/card"
	"github.com/flightrec/flightrec/wire"
)

func env(seq uint64, kind event.Kind, v any) event.Envelope {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return event.Envelope{Seq: seq, Step: 3, Kind: kind, Data: b}
}

func failedHAR(seq uint64, url string, status int, body string) event.Envelope {
	return env(seq, event.KindHAR, event.HAR{Request: event.HARRequest{Method: "POST", URL: url},
		Response: event.HARResponse{Status: status, Content: event.HARContent{MimeType: "application/json", Text: body}}})
}

// TestCardBoundedWhateverTheRecording: every member of the recording as
// large as it can be (a 5 MB console line, 10,000 failed requests, long
// names, versions and messages, a 1 MB base) still gives Markdown under the
// comment limit, with the lists capped and the totals counted.
func TestCardBoundedWhateverTheRecording(t *testing.T) {
	huge := strings.Repeat("lorem ipsum ", 5<<20/12)
	versions := map[string]string{}
	for i := range 100 {
		versions[fmt.Sprintf("v%03d-%s", i, huge[:1000])] = huge[:5000]
	}
	for _, base := range []string{"https://flightrec.example", "http://" + strings.Repeat("h", 1<<20)} {
		b := card.New(card.Meta{ID: "rec_x", Project: huge, Flow: huge, Executor: huge, State: "finished", Verdict: "fail",
			Signature: huge, Versions: versions, Base: base, Root: "bafkreiroot", AttestationSHA256: strings.Repeat("a", 64)})
		var gs []wire.CardGroup
		for i := range 50 {
			gs = append(gs, wire.CardGroup{ID: fmt.Sprint("grp_", i), Summary: huge, Purpose: huge, Reproduced: 1, Of: 2})
		}
		b.Groups(gs)
		seq := uint64(1)
		for i := range 20 {
			text := huge[:4000] // one 5 MB line; the others long enough to clip
			if i == 0 {
				text = huge
			}
			b.Add(env(seq, event.KindConsole, event.Console{Level: []string{"error", "log"}[i%2], Text: text,
				MappedStack: []event.StackFrame{{Function: huge[:4000], URL: huge[:4000], Line: 1, Column: 2}}}))
			seq++
		}
		for range 10_000 {
			b.Add(failedHAR(seq, "https://shop.example/api/"+huge[:2000], 500, `{"error":{"code":"`+huge[:2000]+`"}}`))
			seq++
		}
		b.Failing(3, event.Receipt{Action: event.Action{Verb: huge, Target: &event.Target{Role: huge, Name: huge}},
			Resolved: &event.Target{Selector: huge}, Outcome: "failed",
			Error: &event.StepError{Code: huge, Message: huge, Next: huge}}, 1, 2)
		var cs []wire.CardComment
		for range 1000 {
			cs = append(cs, wire.CardComment{Author: huge[:5000], Text: huge[:8<<10], T: 1})
		}
		b.Comments(cs)
		c := b.Card()
		md := card.Markdown(c)
		js, _ := json.Marshal(c)
		t.Logf("base %d bytes: Markdown %d bytes, JSON %d bytes", len(base), len(md), len(js))
		if len(md) >= wire.MaxCardMarkdown {
			t.Errorf("Markdown is %d bytes, want < %d", len(md), wire.MaxCardMarkdown)
		}
		if strings.Contains(md, "card cut at the comment size limit") {
			t.Error("the last guard cut the card: the caps should keep it well under")
		}
		if len(js) >= wire.MaxCardMarkdown {
			t.Errorf("JSON is %d bytes, want < %d", len(js), wire.MaxCardMarkdown)
		}
		if len(c.Console) != wire.MaxCardConsole || c.ConsoleTotal != 20 {
			t.Errorf("console: %d shown of %d, want %d of 20", len(c.Console), c.ConsoleTotal, wire.MaxCardConsole)
		}
		for _, l := range c.Console {
			if l.Level != "error" {
				t.Errorf("a %s line is shown while errors were left out", l.Level)
			}
		}
		if len(c.FailedRequests) != wire.MaxCardRequests || c.FailedRequestsTotal != 10_000 {
			t.Errorf("requests: %d shown of %d, want %d of 10000", len(c.FailedRequests), c.FailedRequestsTotal, wire.MaxCardRequests)
		}
		if len(c.Comments) != wire.MaxCardComments || c.CommentsTotal != 1000 || len(c.Comments[0].Text) > 1100 {
			t.Errorf("comments: %d shown of %d (the first %d bytes), want %d of 1000 clipped",
				len(c.Comments), c.CommentsTotal, len(c.Comments[0].Text), wire.MaxCardComments)
		}
		if len(c.Versions) != wire.MaxCardVersions || len(c.Groups) != wire.MaxCardGroups {
			t.Errorf("%d versions, %d groups: want the caps", len(c.Versions), len(c.Groups))
		}
		if !strings.Contains(md, "… [+") {
			t.Error("no truncation marker in a card of clipped fields")
		}
		doc := testenv.ParseMarkdown([]byte(md))
		if len(doc.Headings) < 3 || len(doc.Tables) < 3 {
			t.Errorf("headings %q, %d tables: want the title, the failing step and the requests, and their tables", doc.Headings, len(doc.Tables))
		}
	}
}

// TestCardTextStaysText: what a recorded page said (a pipe, backticks,
// HTML, a mention, a link, newlines) lands in code spans and fenced blocks:
// it adds no table cell, link, HTML or heading to the comment.
func TestCardTextStaysText(t *testing.T) {
	evil := "a | b ``` `x` <img src=x onerror=alert(1)> @octocat [click](https://evil.example)\n### heading\n</details>"
	b := card.New(card.Meta{ID: "rec_x", Project: evil, Flow: "f", State: "finished", Verdict: "fail", Signature: evil,
		Base: "https://flightrec.example", Root: "bafkreiroot"})
	b.Add(env(1, event.KindConsole, event.Console{Level: "error", Text: evil + "\n```\n" + evil}))
	b.Add(failedHAR(2, "https://shop.example/api/x?q="+evil, 500, `{"error":{"code":"`+strings.ReplaceAll(evil, `"`, "")+`"}}`))
	b.Failing(3, event.Receipt{Action: event.Action{Verb: "click", Target: &event.Target{Role: "button", Name: evil}},
		Outcome: "failed", Error: &event.StepError{Code: "APP_ERROR", Message: evil, Next: evil}}, 1, 2)
	b.Comments([]wire.CardComment{{Author: evil, Text: evil}})
	md := card.Markdown(b.Card())
	doc := testenv.ParseMarkdown([]byte(md))
	for _, l := range doc.Links {
		if !strings.HasPrefix(l.URL, "https://flightrec.example/") {
			t.Errorf("link %q → %q: page text became a link", l.Text, l.URL)
		}
	}
	for _, h := range doc.Headings {
		if strings.HasPrefix(h, "heading") {
			t.Errorf("page text became a heading: %q", h)
		}
	}
	for i, tb := range doc.Tables {
		for _, row := range tb {
			if want := len(tb[0]); len(row) != want {
				t.Errorf("table %d: a row of %d cells in a table of %d: a pipe split a cell: %q", i, len(row), want, row)
			}
		}
	}
	// <details> ×3 opened and closed, <br> none here: raw HTML is only ours.
	if strings.Contains(md, "<img") && !inCode(md, "<img") {
		t.Error("an <img> tag outside code")
	}
	if doc.HTML > 8 {
		t.Errorf("%d raw HTML nodes: page text became HTML\n%s", doc.HTML, md)
	}
}

// inCode reports whether every occurrence of s in md is inside a code
// span or fenced block (between backticks on its line, or in a fence).
func inCode(md, s string) bool {
	fence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if i := strings.Index(line, s); i >= 0 && !fence && !strings.Contains(line[:i], "`") {
			return false
		}
	}
	return true
}

// TestSharedCard: a card given share links carries them instead of links
// needing a token: the player (and the step, in its query before the
// fragment with the secret), the video, the thumbnail as an image linking
// to the step, no HAR or step JSON; its comments show under a heading.
func TestSharedCard(t *testing.T) {
	const base = "https://flightrec.example"
	b := card.New(card.Meta{ID: "rec_x", Project: "shop", State: "finished", Verdict: "fail", Base: base, Root: "bafkreiroot"})
	b.Shared(card.SharedLinks{Player: base + "/r/rec_x#share=frs_p", Video: base + "/s/frs_v", Evidence: base + "/s/frs_e",
		ExpiresAt: 1_800_000_000_000_000_000})
	b.Add(env(1, event.KindScreenshot, event.Screenshot{Frame: event.Frame{Mime: "image/jpeg", ImageCID: "bafkshot", Width: 8, Height: 8},
		Reason: "failure"}))
	b.Failing(3, event.Receipt{Action: event.Action{Verb: "click"}, Outcome: "failed", Error: &event.StepError{Code: "APP_ERROR"}}, 1, 2)
	b.Comments([]wire.CardComment{{Author: "tok_alice", Text: "the gift card was spent", T: 1.5}})
	c := b.Card()
	want := wire.CardLinks{Player: base + "/r/rec_x#share=frs_p", Step: base + "/r/rec_x?step=3#share=frs_p",
		Screenshot: base + "/r/rec_x?step=3#share=frs_p", Evidence: base + "/s/frs_e", Video: base + "/s/frs_v",
		Thumbnail: base + "/s/frs_e?format=thumbnail", SharesExpireAt: 1_800_000_000_000_000_000}
	if c.Links != want {
		t.Fatalf("links %+v\nwant  %+v", c.Links, want)
	}
	md := card.Markdown(c)
	doc := testenv.ParseMarkdown([]byte(md))
	if len(doc.Images) != 1 || doc.Images[0].URL != want.Thumbnail {
		t.Fatalf("images %+v, want the thumbnail\n%s", doc.Images, md)
	}
	urls := map[string]bool{}
	for _, l := range doc.Links {
		urls[l.URL] = true
		if !strings.Contains(l.URL, "frs_") {
			t.Errorf("link %q → %q needs a token", l.Text, l.URL)
		}
	}
	if !urls[want.Step] || !urls[want.Video] || !urls[want.Evidence] || !urls[want.Player] {
		t.Errorf("links %v, want the step, the video, the card and the player", urls)
	}
	if !slices.Contains(doc.Headings, "Comments on step 3 (1)") || !strings.Contains(md, "`tok_alice` at 1.5 s: `the gift card was spent`") ||
		!strings.Contains(md, "until 2027-01-15T08:00:00Z") {
		t.Errorf("comments or expiry missing:\n%s", md)
	}
}
