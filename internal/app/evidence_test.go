package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/mcp"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// TestEvidenceCardBounded: a recording whose failing step logged a 5 MB
// console line and made 10,000 failed requests still gives a card under
// the comment limit, with the totals counted and the line clipped.
func TestEvidenceCardBounded(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	id := openRec(t, base)
	evs := testgen.Flood(5<<20, 10_000)
	if a := acked(t, appendBatch(t, base, id, evs)); a.AckedThrough != uint64(len(evs)) {
		t.Fatalf("append: %+v", a)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, id, uint64(len(evs)))
	r := do(t, "GET", base+"/v1/recordings/"+id+"/evidence?format=markdown", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("card: %d %s %.300s", r.status, r.header.Get("Content-Type"), r.body)
	}
	t.Logf("card of a 5 MB console line and 10,000 failed requests: %d bytes of Markdown", len(r.body))
	if len(r.body) >= wire.MaxCardMarkdown {
		t.Errorf("the card is %d bytes, want < %d", len(r.body), wire.MaxCardMarkdown)
	}
	var c wire.EvidenceCard
	do(t, "GET", base+"/v1/recordings/"+id+"/evidence?format=json", nil).decode(t, &c)
	if c.FailedRequestsTotal != 10_000 || len(c.FailedRequests) != wire.MaxCardRequests || c.FailedRequests[0].Code != "FLOOD" {
		t.Errorf("failed requests: %d shown of %d (first %+v), want %d of 10000 with code FLOOD",
			len(c.FailedRequests), c.FailedRequestsTotal, c.FailedRequests, wire.MaxCardRequests)
	}
	if c.ConsoleTotal != 1 || len(c.Console) != 1 || len(c.Console[0].Text) > 1100 || !strings.Contains(c.Console[0].Text, "… [+") {
		t.Errorf("console: %d of %d, the line %d bytes: want it clipped with a marker", len(c.Console), c.ConsoleTotal, len(c.Console[0].Text))
	}
	if c.FailingStep == nil || c.FailingStep.Code != "APP_ERROR" {
		t.Errorf("failing step %+v, want step 1 with APP_ERROR", c.FailingStep)
	}
	if r := do(t, "GET", base+"/v1/recordings/"+id+"/evidence?format=html", nil); r.status != http.StatusBadRequest || r.errCode(t) != "BAD_PARAMETER" {
		t.Errorf("format=html: %d %s, want 400 BAD_PARAMETER", r.status, r.body)
	}
}

// TestEvidenceOfTheDemo is issue 23's acceptance on real recordings: the
// demo's failing checkout (and its passing one), recorded in Debian's
// Chromium, as an evidence card and through the MCP server.
func TestEvidenceOfTheDemo(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	base := srv.Base
	shop, _ := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	fail := testenv.Record(t, base, shop, testenv.DemoFlow(t, "checkout-with-gift-card-fails"))
	pass := testenv.Record(t, base, shop, testenv.DemoFlow(t, "checkout-passes"))
	waitIndexed(t, base, fail.ID, fail.Total)
	waitIndexed(t, base, pass.ID, pass.Total)
	var g store.Group
	do(t, "POST", base+"/v1/groups", []byte(`{"ids":["`+fail.ID+`"]}`)).decode(t, &g)

	// The Pay step, its console error and its mapped frame, as stored.
	pay, _ := payStep(t, base, fail.ID)
	var consoleErr event.Console
	var page wire.EventPage
	do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/events?kind=console&step=%d", base, fail.ID, pay), nil).decode(t, &page)
	for _, e := range page.Events {
		var c event.Console
		if json.Unmarshal(e.Data, &c) == nil && c.Level == "error" && len(c.MappedStack) > 0 {
			consoleErr = c
		}
	}
	if len(consoleErr.MappedStack) == 0 {
		t.Fatalf("the demo's failing run: Pay step %d, console error with a mapped stack %+v", pay, consoleErr)
	}
	mapped := consoleErr.MappedStack[0]

	md := do(t, "GET", base+"/v1/recordings/"+fail.ID+"/evidence", nil)
	js := do(t, "GET", base+"/v1/recordings/"+fail.ID+"/evidence?format=json", nil)
	if md.status != 200 || js.status != 200 {
		t.Fatalf("card: %d %s / %d %s", md.status, md.body, js.status, js.body)
	}
	t.Logf("the demo's evidence card (%d bytes):\n%s", len(md.body), md.body)

	t.Run("card", func(t *testing.T) {
		var c wire.EvidenceCard
		js.decode(t, &c)
		s := c.FailingStep
		if s == nil || s.Step != pay || s.Code != "APP_ERROR" || !strings.Contains(s.Target, "Pay") || s.Next == "" {
			t.Fatalf("failing step %+v, want step %d, Pay, APP_ERROR with a next", s, pay)
		}
		if c.Verdict != "fail" || c.FailureSignature != "POST /api/checkout 500 GIFT_CARD_STATE" {
			t.Errorf("verdict %q, signature %q", c.Verdict, c.FailureSignature)
		}
		if len(c.Groups) != 1 || c.Groups[0].ID != g.ID || c.Groups[0].Reproduced != 1 || c.Groups[0].Of != 1 {
			t.Errorf("groups %+v, want %s reproduced 1 of 1", c.Groups, g.ID)
		}
		checkout := false
		for _, r := range c.FailedRequests {
			checkout = checkout || (r.Method == "POST" && strings.HasSuffix(r.URL, "/api/checkout") && r.Status == 500 && r.Code == "GIFT_CARD_STATE")
		}
		if !checkout {
			t.Errorf("failed requests %+v: want POST /api/checkout 500 GIFT_CARD_STATE", c.FailedRequests)
		}
		var src string
		for _, l := range c.Console {
			if l.Level == "error" && l.Mapped {
				src = l.Source
			}
		}
		if !strings.Contains(src, fmt.Sprintf("%s:%d:%d", mapped.URL, mapped.Line, mapped.Column)) {
			t.Errorf("console source %q: want the mapped frame %+v", src, mapped)
		}
		if c.Verify.Root != fail.Root || len(c.Verify.AttestationSHA256) != 64 || len(c.Verify.Commands) == 0 {
			t.Errorf("verify %+v: want root %s, an attestation sha256 and commands", c.Verify, fail.Root)
		}
		// The attestation the card names is the one the server serves.
		att := do(t, "GET", base+"/v1/recordings/"+fail.ID+"/attestation", nil)
		if sum := sha256.Sum256(att.body); hex.EncodeToString(sum[:]) != c.Verify.AttestationSHA256 {
			t.Errorf("the card's attestation sha256 %s, the served one's %x", c.Verify.AttestationSHA256, sum)
		}

		doc := testenv.ParseMarkdown(md.body)
		wantHead := map[string]bool{}
		for _, h := range doc.Headings {
			wantHead[h] = true
		}
		for _, h := range []string{"❌ flightrec evidence: default / checkout-with-gift-card-fails — fail",
			fmt.Sprintf("Failing step %d: click button \"Pay\"", pay), "Failed requests (1)"} {
			if !wantHead[h] {
				t.Errorf("no heading %q in %q", h, doc.Headings)
			}
		}
		row := findRow(doc.Tables, "POST")
		if len(row) != 4 || !strings.HasSuffix(row[1], "/api/checkout") || row[2] != "500" || row[3] != "GIFT_CARD_STATE" {
			t.Errorf("failed-requests row %q: want POST …/api/checkout 500 GIFT_CARD_STATE", row)
		}
		if row := findRow(doc.Tables, "Error code"); len(row) != 2 || row[1] != "APP_ERROR" {
			t.Errorf("error code row %q", row)
		}
		stepLink := fmt.Sprintf("%s/r/%s?step=%d", base, fail.ID, pay)
		links := map[string]string{}
		for _, l := range doc.Links {
			links[l.Text] = l.URL
		}
		if links[fmt.Sprintf("Open the player at step %d", pay)] != stepLink || links["failure screenshot"] != stepLink {
			t.Errorf("links %q: want the player at step %d (%s) and the screenshot there", links, pay, stepLink)
		}
		if links[fail.ID] != base+"/r/"+fail.ID {
			t.Errorf("no link to the player: %q", links)
		}
		if !strings.Contains(string(md.body), mapped.URL) || !strings.Contains(string(md.body), "flightrec verify --attestation") {
			t.Error("the Markdown lacks the mapped frame or the verify command")
		}
		// No secret typed into the shop reached the card.
		c2 := testenv.Corpus{"card markdown": md.body, "card json": js.body}
		if hits := c2.Hits(demoSecrets()); len(hits) > 0 {
			t.Errorf("secrets in the card: %s", strings.Join(hits, "; "))
		}
	})

	t.Run("mcp", func(t *testing.T) {
		ctx := context.Background()
		call := mcpSession(t, ctx, base, 0)
		tools, err := call.session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		for _, want := range []string{mcp.ToolSearch, mcp.ToolTimeline, mcp.ToolStep, mcp.ToolPage, mcp.ToolCompare, mcp.ToolEvidence} {
			if !strings.Contains(strings.Join(names, " "), want) {
				t.Errorf("tools %q lack %s", names, want)
			}
		}
		id := fail.ID
		expectText(t, call.text(mcp.ToolSearch, map[string]any{"query": "code:APP_ERROR"}), id, "APP_ERROR")
		expectText(t, call.text(mcp.ToolSearch, map[string]any{"verdict": "fail"}), id, "GIFT_CARD_STATE")
		expectText(t, call.text(mcp.ToolTimeline, map[string]any{"recording": id}),
			fmt.Sprintf("failed steps: %d", pay), fmt.Sprintf("step %d ", pay), `button "Pay"`, "failed APP_ERROR")
		step := call.text(mcp.ToolStep, map[string]any{"recording": id, "step": pay})
		expectText(t, step, "outcome failed APP_ERROR", "POST ", "/api/checkout → 500 GIFT_CARD_STATE", "source-mapped", mapped.URL, "<<<page-content nonce=")
		pageText := call.text(mcp.ToolPage, map[string]any{"recording": id, "step": pay, "when": "after"})
		expectText(t, pageText, mcp.PageBoundary, "<<<page-content nonce=", "<<<end page-content nonce=", `origin="http://127.0.0.1`)
		checkBoundaries(t, pageText)
		t.Logf("%s of step %d:\n%s\n%s of step %d:\n%.1500s", mcp.ToolStep, pay, step, mcp.ToolPage, pay, pageText)
		expectText(t, call.text(mcp.ToolCompare, map[string]any{"a": pass.ID, "b": id}),
			fmt.Sprintf("step %d of b): runs diverge", pay), "POST /api/checkout 200 → 500 GIFT_CARD_STATE")
		expectText(t, call.text(mcp.ToolEvidence, map[string]any{"recording": id}), "APP_ERROR", "GIFT_CARD_STATE", "### ")
		if res := call.raw(mcp.ToolStep, map[string]any{"recording": "rec_nope", "step": 1}); !res.IsError || !strings.Contains(textOf(res), "RECORDING_NOT_FOUND") {
			t.Errorf("an unknown recording: %+v, want a tool error naming RECORDING_NOT_FOUND", textOf(res))
		}

		// Paged at a small cap: every page fits, the cursors walk the
		// whole step, and the pages together hold what one reply did.
		small := mcpSession(t, ctx, base, 2048)
		var all strings.Builder
		cursor, pages := "", 0
		for {
			args := map[string]any{"recording": id, "step": pay}
			if cursor != "" {
				args["cursor"] = cursor
			}
			p := small.text(mcp.ToolStep, args)
			if len(p) > 2048 {
				t.Fatalf("page %d is %d bytes, over the 2048 cap", pages, len(p))
			}
			pages++
			all.WriteString(p)
			_, after, ok := strings.Cut(p, "call again with cursor \"")
			if !ok {
				break
			}
			cursor, _, _ = strings.Cut(after, "\"")
			if pages > 1000 {
				t.Fatal("the cursors do not end")
			}
		}
		if pages < 2 || !strings.Contains(all.String(), "/api/checkout → 500 GIFT_CARD_STATE") || !strings.Contains(all.String(), "<<<end page-content") {
			t.Errorf("%d pages at 2 KiB: want several holding the step's requests and snapshots", pages)
		}
		checkBoundaries(t, all.String())
		replies := testenv.Corpus{"get_step": []byte(step), "get_page_text": []byte(pageText), "paged get_step": []byte(all.String())}
		if hits := replies.Hits(demoSecrets()); len(hits) > 0 {
			t.Errorf("secrets in MCP replies: %s", strings.Join(hits, "; "))
		}
	})

	// Last, since once a token exists every request needs one: the MCP
	// server sees what its token sees.
	t.Run("mcp with a token", func(t *testing.T) {
		ctx := context.Background()
		other, _, err := srv.App.Tokens.Create("other", []string{"read"}, 0, "mcp test")
		if err != nil {
			t.Fatal(err)
		}
		all, _, err := srv.App.Tokens.Create("*", []string{"read"}, 0, "mcp test")
		if err != nil {
			t.Fatal(err)
		}
		if res := mcpSessionAs(t, ctx, base, 0, "").raw(mcp.ToolEvidence, map[string]any{"recording": fail.ID}); !res.IsError || !strings.Contains(textOf(res), "UNAUTHENTICATED") {
			t.Errorf("no token: %q, want UNAUTHENTICATED", textOf(res))
		}
		o := mcpSessionAs(t, ctx, base, 0, other)
		if res := o.raw(mcp.ToolStep, map[string]any{"recording": fail.ID, "step": pay}); !res.IsError || !strings.Contains(textOf(res), "RECORDING_NOT_FOUND") {
			t.Errorf("another project's token: %q, want RECORDING_NOT_FOUND", textOf(res))
		}
		expectText(t, o.text(mcp.ToolSearch, map[string]any{"verdict": "fail"}), "0 recordings")
		expectText(t, mcpSessionAs(t, ctx, base, 0, all).text(mcp.ToolEvidence, map[string]any{"recording": fail.ID}), "APP_ERROR")
	})
}

// payStep is the step of a demo checkout that clicked Pay, and the
// recording's timeline.
func payStep(t *testing.T, base, id string) (int, wire.Timeline) {
	t.Helper()
	var tl wire.Timeline
	do(t, "GET", base+"/v1/recordings/"+id+"/steps", nil).decode(t, &tl)
	for _, s := range tl.Steps {
		if s.Action == "click" && strings.Contains(s.Target, "Pay") {
			return s.Step, tl
		}
	}
	t.Fatalf("no Pay step in %+v", tl.Steps)
	return -1, tl
}

// demoSecrets are what the demo flows type that must never be served:
// the card number (as typed and as digits) and the password, with labels.
func demoSecrets() ([]string, []string) {
	return []string{demoapp.Card, strings.ReplaceAll(demoapp.Card, " ", ""), demoapp.Password},
		[]string{"card number", "card number (digits)", "password"}
}

// findRow is the first table row whose first cell is first.
func findRow(tables [][][]string, first string) []string {
	for _, tb := range tables {
		for _, row := range tb {
			if len(row) > 0 && row[0] == first {
				return row
			}
		}
	}
	return nil
}

// mcpClient calls the tools of an MCP server reading base, connected over
// the SDK's in-memory transport.
type mcpClient struct {
	t       *testing.T
	ctx     context.Context
	session *sdk.ClientSession
}

func mcpSession(t *testing.T, ctx context.Context, base string, maxReply int) *mcpClient {
	t.Helper()
	return mcpSessionAs(t, ctx, base, maxReply, "")
}

// mcpSessionAs is mcpSession reading with token.
func mcpSessionAs(t *testing.T, ctx context.Context, base string, maxReply int, token string) *mcpClient {
	t.Helper()
	srv, err := mcp.NewServer(mcp.Config{Server: base, Token: token, MaxReplyBytes: maxReply, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return &mcpClient{t: t, ctx: ctx, session: cs}
}

func (c *mcpClient) raw(name string, args map[string]any) *sdk.CallToolResult {
	c.t.Helper()
	res, err := c.session.CallTool(c.ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	return res
}

// text calls a tool that must succeed and returns its text.
func (c *mcpClient) text(name string, args map[string]any) string {
	c.t.Helper()
	res := c.raw(name, args)
	if res.IsError {
		c.t.Fatalf("%s %v: tool error %s", name, args, textOf(res))
	}
	return textOf(res)
}

func textOf(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func expectText(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("reply lacks %q:\n%.3000s", w, got)
		}
	}
}

// checkBoundaries: every page-content block that opens closes with the
// same nonce before another opens, so no page text is outside them.
func checkBoundaries(t *testing.T, s string) {
	t.Helper()
	open := ""
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "<<<page-content nonce="):
			if open != "" {
				t.Fatalf("a page-content block opens inside another (%s)", open)
			}
			open, _, _ = strings.Cut(strings.TrimPrefix(line, "<<<page-content nonce="), " ")
		case strings.HasPrefix(line, "<<<end page-content nonce="):
			if got := strings.TrimSuffix(strings.TrimPrefix(line, "<<<end page-content nonce="), ">>>"); got != open {
				t.Fatalf("a block opened with nonce %q closes with %q", open, got)
			}
			open = ""
		}
	}
	if open != "" {
		t.Fatalf("a page-content block (nonce %s) never closes", open)
	}
}
