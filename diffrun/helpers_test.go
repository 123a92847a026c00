package diffrun

import (
	"fmt"
	"strings"
)

// sp is a step in shorthand: verb, target, path.
func sp(verb, target, path string) Step {
	return Step{Verb: verb, Target: target, Path: path, Outcome: "done"}
}

func failed(s Step, code string) Step {
	s.Outcome, s.ErrorCode = "failed", code
	return s
}

// numbered numbers steps 1..n and gives them a second each.
func numbered(id, flow string, steps ...Step) *Run {
	r := &Run{ID: id, Flow: flow, State: "finished", Verdict: "pass"}
	for k, s := range steps {
		s.N = k + 1
		s.StartTS = int64(k+1) * 1e9
		s.EndTS = s.StartTS + 5e8
		r.Steps = append(r.Steps, s)
		if s.Outcome == "failed" {
			r.Verdict = "fail"
		}
	}
	return r
}

// demoOpts vary a synthetic run of the demo shop's gift-card checkout.
type demoOpts struct {
	bug     bool   // POST /api/checkout answers 500 GIFT_CARD_STATE
	refBase int    // where the run's refs start (@eN differ between runs)
	seed    int    // varies nonces, ids, timestamps, cache busters
	port    int    // the shop's loopback port
	host    string // instead of 127.0.0.1:port
}

// demoRun is a synthetic recording of the gift-card checkout (the shape
// executor/recorder gives the demo shop's flow): requests with ids,
// cache busters and nonces, console messages with addresses, snapshots
// with refs and masked values.
func demoRun(id string, o demoOpts) *Run {
	if o.port == 0 {
		o.port = 41000 + o.seed
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", o.port)
	if o.host != "" {
		base = "https://" + o.host
	}
	nonce := fmt.Sprintf("%08x", 0x3c1a9f20+o.seed*7919)
	uuid := fmt.Sprintf("%08x-4b1c-4d2e-9f3a-%012x", 0x1a2b3c4d+o.seed, 0x5e6f7a8b9c0d+o.seed)
	ts := 1_767_225_600_000 + o.seed*1234
	order := 48213 + o.seed
	ref := o.refBase
	refs := func() string { ref++; return fmt.Sprintf("@e%d", ref) }
	snap := func(page string, extra ...string) string {
		lines := []string{
			"banner",
			" link \"Acme shop\" " + refs(),
			"main",
			" heading \"" + page + "\" level=1",
		}
		lines = append(lines, extra...)
		lines = append(lines, "contentinfo", " link \"Privacy\" "+refs())
		return strings.Join(lines, "\n")
	}
	checkout := func(states string) string {
		return snap("Checkout",
			" form",
			"  textbox \"Email\" required value=\"buyer@acme.example\" "+refs(),
			"  textbox \"Card number\" value=\"[redacted:"+fmt.Sprintf("%016x", 0xabc0+o.seed)+"]\" "+refs(),
			"  textbox \"Gift card\" "+refs(),
			"  button \"Apply\" "+refs(),
			"  button \"Pay\""+states+" "+refs())
	}
	req := func(method, path string, status int, typ string) Request {
		return Request{Method: method, URL: base + path, Status: status, Type: typ}
	}
	assets := []Request{
		req("GET", "/static/app.min.js?v="+nonce, 200, "Script"),
		req("GET", fmt.Sprintf("/api/session?_=%d", ts), 200, "XHR"),
	}
	r := &Run{ID: id, Project: "shop", Flow: "checkout", State: "finished", Verdict: "pass"}
	add := func(verb, target, path string, s Step) {
		s.N = len(r.Steps) + 1
		s.Verb, s.Target, s.Path = verb, target, path
		if s.Outcome == "" {
			s.Outcome = "done"
		}
		s.StartTS = int64(1_767_225_600+s.N*2)*1e9 + int64(o.seed)*1e6
		s.EndTS = s.StartTS + 400e6 + int64(o.seed%7)*1e6
		s.FrameCID = fmt.Sprintf("bafkrei%s%04d", nonce, s.N)
		s.Console = append(s.Console, ConsoleLine{Level: "warn",
			Text: fmt.Sprintf("[analytics] session %s flushed 0x%x at %d", uuid, 0x7ffe0000+o.seed, ts)})
		r.Steps = append(r.Steps, s)
	}
	signin := snap("Sign in", " form", "  textbox \"Email\" "+refs(), "  textbox \"Password\" value=\"[masked]\" "+refs(), "  button \"Sign in\" "+refs())
	product := snap("Kettle", "  button \"Add to cart\" "+refs(), "  link \"Checkout\" "+refs())
	add("fill", `textbox "Email"`, "/signin", Step{Interactive: signin})
	add("fill", `css "#password"`, "/signin", Step{Interactive: signin})
	add("click", `button "Sign in"`, "/signin", Step{Navigation: "/product", Interactive: product,
		Requests: append([]Request{req("POST", "/api/signin", 200, "Fetch"), req("GET", "/product", 200, "Document")}, assets...)})
	add("wait", "url /product", "/product", Step{Interactive: product})
	add("click", `button "Add to cart"`, "/product", Step{Interactive: product + "\n status \"Added to cart\"",
		Requests: []Request{req("POST", "/api/cart/"+uuid+"/items", 200, "Fetch")}})
	add("wait", `text "Added to cart"`, "/product", Step{Interactive: product})
	add("click", `link "Checkout"`, "/product", Step{Navigation: "/checkout", Interactive: checkout(""),
		Requests: append([]Request{req("GET", "/checkout", 200, "Document")}, assets...)})
	add("wait", "url /checkout", "/checkout", Step{Interactive: checkout("")})
	add("fill", `textbox "Email"`, "/checkout", Step{Interactive: checkout("")})
	add("fill", `textbox "Card number"`, "/checkout", Step{Interactive: checkout("")})
	add("fill", `css "#gift-code"`, "/checkout", Step{Interactive: checkout("")})
	add("click", `button "Apply"`, "/checkout", Step{Interactive: checkout("") + "\n status \"Gift card applied\"",
		Requests: []Request{req("POST", "/api/gift", 200, "Fetch")}})
	add("wait", `text "Gift card applied"`, "/checkout", Step{Interactive: checkout("")})
	pay := req("POST", "/api/checkout", 200, "Fetch")
	if o.bug {
		pay.Status, pay.ErrorCode = 500, "GIFT_CARD_STATE"
		add("click", `button "Pay"`, "/checkout", Step{Outcome: "failed", ErrorCode: "APP_ERROR",
			ErrorMessage: "POST " + base + "/api/checkout answered 500",
			Interactive:  checkout("") + "\n alert \"Payment failed: GIFT_CARD_STATE\"",
			Requests:     []Request{pay},
			Console: []ConsoleLine{{Level: "error", Text: "checkout failed: GIFT_CARD_STATE"},
				{Level: "error", Text: fmt.Sprintf("Failed to load resource: the server responded with a status of 500 (%s/api/checkout)", base)}}})
		add("wait", `text "Thank you for your order"`, "/checkout", Step{Outcome: "failed", ErrorCode: "NOT_SETTLED",
			ErrorMessage: `text "Thank you for your order" did not appear (waited 5s)`, Interactive: checkout("")})
		add("expect", `text "is confirmed"`, "/checkout", Step{Outcome: "failed", ErrorCode: "EXPECT_FAILED",
			Interactive: checkout(""), Checks: []Check{{Type: "ui", Target: "page text", Passed: false}}})
		r.Verdict = "fail"
	} else {
		confirmation := snap("Order confirmed", fmt.Sprintf("  link \"Order #%d\" ", order)+refs(), "  link \"Continue shopping\" "+refs())
		add("click", `button "Pay"`, "/checkout", Step{Navigation: "/orders/{id}", Interactive: confirmation,
			Requests: []Request{pay, req("GET", fmt.Sprintf("/orders/%d?t=%d", order, ts), 200, "Document")}})
		add("wait", `text "Thank you for your order"`, "/orders/{id}", Step{Interactive: confirmation})
		add("expect", `text "is confirmed"`, "/orders/{id}", Step{Interactive: confirmation,
			Checks: []Check{{Type: "ui", Target: "page text", Passed: true}}})
	}
	return r
}
