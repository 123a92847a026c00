package diffrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
)

// ops lists a report's pairs as "a:b:op".
func ops(r *Report) string {
	var parts []string
	for _, p := range r.Pairs {
		parts = append(parts, stepCell(p.StepA)+":"+stepCell(p.StepB)+":"+p.Op)
	}
	return strings.Join(parts, " ")
}

func materialPairs(r *Report) []Pair {
	var out []Pair
	for _, p := range r.Pairs {
		if p.Material {
			out = append(out, p)
		}
	}
	return out
}

func TestFirstDivergenceGiftCard(t *testing.T) {
	a := demoRun("a", demoOpts{seed: 1, refBase: 0})
	b := demoRun("b", demoOpts{seed: 2, refBase: 40, bug: true})
	rep := Diff(a, b, Options{})
	if !rep.SameFlow {
		t.Fatal("same flow expected")
	}
	d := rep.FirstDivergence
	if d == nil {
		t.Fatalf("no divergence:\n%s", rep.Table())
	}
	want := `runs diverge at step 14 (click button "Pay"): POST /api/checkout 200 → 500 GIFT_CARD_STATE`
	if d.Explanation != want || d.StepA != 14 || d.StepB != 14 || d.Channel != ChannelNetwork {
		t.Fatalf("divergence = %+v\nwant %q\n%s", d, want, rep.Table())
	}
	// Everything before step 14 matches without a material difference.
	for _, p := range rep.Pairs[:13] {
		if p.Material || p.Op != OpMatch {
			t.Errorf("pair %d/%d: %s material=%v %+v", p.StepA, p.StepB, p.Op, p.Material, p.Differences)
		}
	}
	p14 := rep.Pairs[13]
	kinds := map[string]bool{}
	for _, x := range p14.Differences {
		if x.Material {
			kinds[x.Channel+"/"+x.Kind] = true
		}
	}
	for _, k := range []string{"network/status", "outcome/outcome", "outcome/navigation", "console/new_error", "snapshot/missing_element"} {
		if !kinds[k] {
			t.Errorf("step 14 lacks material %s: %+v", k, p14.Differences)
		}
	}
	if rep.B.Signature != "POST /api/checkout 500 GIFT_CARD_STATE" || rep.A.Signature != "" {
		t.Errorf("signatures a=%q b=%q", rep.A.Signature, rep.B.Signature)
	}
	if got := ops(rep); got != "1:1:match 2:2:match 3:3:match 4:4:match 5:5:match 6:6:match 7:7:match 8:8:match 9:9:match 10:10:match 11:11:match 12:12:match 13:13:match 14:14:match 15:15:changed 16:16:changed" {
		t.Errorf("ops = %s", got)
	}
	tab := rep.Table()
	if !strings.Contains(tab, want) || !strings.Contains(tab, `> match    click button "Pay" @ /checkout`) {
		t.Errorf("table:\n%s", tab)
	}
	// The report is JSON with the documented names.
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"a":{`, `"b":{`, `"same_flow":true`, `"first_divergence":{"step_a":14,"step_b":14,"channel":"network"`, `"pairs":[`, `"op":"match"`} {
		if !bytes.Contains(js, []byte(k)) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

// TestPassVsPassNoise: two passing runs whose ids, nonces, timestamps,
// cache busters, refs, masked pseudonyms, ports and frames all differ
// have no material difference.
func TestPassVsPassNoise(t *testing.T) {
	a := demoRun("a", demoOpts{seed: 1, refBase: 0})
	b := demoRun("b", demoOpts{seed: 977, refBase: 123, port: 52311})
	rep := Diff(a, b, Options{})
	if rep.FirstDivergence != nil {
		t.Fatalf("divergence %+v\n%s", rep.FirstDivergence, rep.Table())
	}
	if m := materialPairs(rep); len(m) > 0 {
		t.Fatalf("material pairs: %+v", m)
	}
	for _, p := range rep.Pairs {
		if p.Op != OpMatch {
			t.Errorf("pair %d/%d is %s", p.StepA, p.StepB, p.Op)
		}
		for _, x := range p.Differences {
			if x.Channel != ChannelPixels && x.Channel != ChannelTiming {
				t.Errorf("step %d: unexpected difference %+v", p.StepA, x)
			}
		}
	}
	// The same app on another host compares by path.
	c := demoRun("c", demoOpts{seed: 5, host: "staging.acme.example"})
	c.Origin = "https://staging.acme.example"
	if rep := Diff(a, c, Options{}); len(materialPairs(rep)) > 0 {
		t.Fatalf("other host: %+v", materialPairs(rep))
	}
}

func TestRetryInserted(t *testing.T) {
	a := numbered("a", "f", sp("fill", `textbox "Email"`, "/checkout"), sp("click", `button "Pay"`, "/checkout"), sp("wait", `text "Thanks"`, "/done"))
	b := numbered("b", "f", sp("fill", `textbox "Email"`, "/checkout"),
		failed(sp("click", `button "Pay"`, "/checkout"), "APP_ERROR"),
		sp("click", `button "Pay"`, "/checkout"), sp("wait", `text "Thanks"`, "/done"))
	b.Steps[1].Requests = []Request{{Method: "POST", URL: "http://shop/api/checkout", Status: 503}}
	b.Verdict = "pass"
	rep := Diff(a, b, Options{})
	if got := ops(rep); got != "1:1:match -:2:inserted 2:3:match 3:4:match" {
		t.Fatalf("ops = %s", got)
	}
	if rep.FirstDivergence != nil {
		t.Fatalf("a tolerated retry diverged: %+v", rep.FirstDivergence)
	}
	if d := rep.Pairs[1].Differences; len(d) == 0 || d[0].Kind != "retry" {
		t.Fatalf("retry not reported: %+v", d)
	}
	// Two failed attempts, then one that works.
	b3 := numbered("b3", "f", sp("fill", `textbox "Email"`, "/checkout"),
		failed(sp("click", `button "Pay"`, "/checkout"), "APP_ERROR"), failed(sp("click", `button "Pay"`, "/checkout"), "APP_ERROR"),
		sp("click", `button "Pay"`, "/checkout"), sp("wait", `text "Thanks"`, "/done"))
	rep = Diff(a, b3, Options{})
	if got := ops(rep); got != "1:1:match -:2:inserted -:3:inserted 2:4:match 3:5:match" || rep.FirstDivergence != nil {
		t.Fatalf("ops = %s, divergence %+v", got, rep.FirstDivergence)
	}
	if d := rep.Pairs[1].Differences; len(d) == 0 || d[0].Detail != "failed APP_ERROR, retried until step 4" {
		t.Fatalf("%+v", d)
	}
	// The same inserted failure without a successful retry is material.
	b2 := numbered("b2", "f", sp("fill", `textbox "Email"`, "/checkout"),
		failed(sp("click", `button "Retry"`, "/checkout"), "NOT_FOUND"),
		sp("click", `button "Pay"`, "/checkout"), sp("wait", `text "Thanks"`, "/done"))
	rep = Diff(a, b2, Options{})
	if d := rep.FirstDivergence; d == nil || d.StepA != 0 || d.StepB != 2 ||
		d.Explanation != `runs diverge at step 2 of b (only in b) (click button "Retry"): a step only b has failed: failed NOT_FOUND` {
		t.Fatalf("divergence = %+v\n%s", d, rep.Table())
	}
}

func TestDeletedAndExtraWait(t *testing.T) {
	a := numbered("a", "f", sp("goto", "url /", ""), sp("click", `link "Skip intro"`, "/"), sp("click", `button "Buy"`, "/"), sp("wait", "settled", "/"))
	b := numbered("b", "f", sp("goto", "url /", ""), sp("click", `button "Buy"`, "/"), sp("wait", "settled", "/"), sp("wait", "settled", "/"))
	rep := Diff(a, b, Options{})
	if got := ops(rep); got != "1:1:match 2:-:deleted 3:2:match -:3:inserted 4:4:match" {
		t.Fatalf("ops = %s", got)
	}
	if rep.FirstDivergence != nil {
		t.Fatalf("divergence %+v", rep.FirstDivergence)
	}
}

func TestEndedEarly(t *testing.T) {
	a := numbered("a", "f", sp("click", `button "A"`, "/"), sp("click", `button "B"`, "/"), sp("click", `button "C"`, "/"))
	b := numbered("b", "f", sp("click", `button "A"`, "/"))
	rep := Diff(a, b, Options{})
	if d := rep.FirstDivergence; d == nil || d.StepA != 2 || !strings.Contains(d.Explanation, "b ended after step 1; a went on to step 3") {
		t.Fatalf("divergence = %+v", d)
	}
	// While b is still being ingested its missing tail is not a divergence.
	b.State, b.Acked = "open", 17
	rep = Diff(a, b, Options{})
	if rep.FirstDivergence != nil {
		t.Fatalf("open b diverged: %+v", rep.FirstDivergence)
	}
	if !hasNote(rep, "b is still being ingested: compared through seq 17") {
		t.Fatalf("notes = %q", rep.Notes)
	}
}

func hasNote(r *Report, s string) bool {
	for _, n := range r.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

func TestDifferentFlows(t *testing.T) {
	// The demo's two flows: the passing one has no gift-card steps.
	a := demoRun("a", demoOpts{seed: 1})
	a.Flow = "checkout-passes"
	a.Steps = append(a.Steps[:10:10], a.Steps[13:]...)
	for k := range a.Steps {
		a.Steps[k].N = k + 1
	}
	b := demoRun("b", demoOpts{seed: 2, bug: true})
	b.Flow = "checkout-with-gift-card-fails"
	rep := Diff(a, b, Options{})
	if rep.SameFlow || !hasNote(rep, "runs of different flows: checkout-passes vs checkout-with-gift-card-fails") {
		t.Fatalf("same_flow=%v notes=%q", rep.SameFlow, rep.Notes)
	}
	want := `runs diverge at step 11 of a, step 14 of b (click button "Pay"): POST /api/checkout 200 → 500 GIFT_CARD_STATE`
	if d := rep.FirstDivergence; d == nil || d.Explanation != want || d.StepA != 11 || d.StepB != 14 {
		t.Fatalf("divergence = %+v\n%s", d, rep.Table())
	}
	if got := ops(rep); got != "1:1:match 2:2:match 3:3:match 4:4:match 5:5:match 6:6:match 7:7:match 8:8:match 9:9:match 10:10:match -:11:inserted -:12:inserted -:13:inserted 11:14:match 12:15:changed 13:16:changed" {
		t.Errorf("ops = %s", got)
	}
	if !strings.Contains(rep.Table(), "note: runs of different flows") {
		t.Fatal(rep.Table())
	}
	// Flows without a step in common: nothing is substituted, nothing
	// diverges, and a longer flow is not a run that ended early.
	x := numbered("x", "checkout", sp("click", `button "Pay"`, "/checkout"))
	y := numbered("y", "signup", sp("fill", `textbox "Name"`, "/signup"), sp("click", `button "Join"`, "/signup"))
	rep = Diff(x, y, Options{})
	if got := ops(rep); got != "1:-:deleted -:1:inserted -:2:inserted" {
		t.Fatalf("ops = %s", got)
	}
	if rep.FirstDivergence != nil || !hasNote(rep, "the flows share no step") {
		t.Fatalf("divergence %+v, notes %q", rep.FirstDivergence, rep.Notes)
	}
}

func TestEmptyAndOneStep(t *testing.T) {
	empty := &Run{ID: "e", Flow: "f", State: "finished"}
	one := numbered("one", "f", sp("click", `button "Go"`, "/"))
	for _, c := range []struct {
		name   string
		a, b   *Run
		ops    string
		diverg bool
	}{
		{"nil nil", nil, nil, "", false},
		{"empty empty", empty, empty, "", false},
		{"empty one", empty, one, "-:1:inserted", true},
		{"one empty", one, empty, "1:-:deleted", true},
		{"one one", one, one, "1:1:match", false},
		{"one other", one, numbered("o", "f", sp("click", `button "Stop"`, "/")), "1:1:changed", false},
		{"one failed", one, numbered("o", "f", failed(sp("click", `button "Go"`, "/"), "NOT_ACTIONABLE")), "1:1:match", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := Diff(c.a, c.b, Options{})
			if got := ops(rep); got != c.ops {
				t.Errorf("ops = %q, want %q", got, c.ops)
			}
			if (rep.FirstDivergence != nil) != c.diverg {
				t.Errorf("divergence = %+v", rep.FirstDivergence)
			}
			_ = rep.Table()
			if _, err := json.Marshal(rep); err != nil {
				t.Fatal(err)
			}
		})
	}
	rep := Diff(one, empty, Options{})
	if d := rep.FirstDivergence; d == nil || !strings.Contains(d.Explanation, "b has no step; a went on to step 1") {
		t.Fatalf("divergence = %+v", rep.FirstDivergence)
	}
	rep = Diff(one, numbered("o", "f", failed(sp("click", `button "Go"`, "/"), "NOT_ACTIONABLE")), Options{})
	if d := rep.FirstDivergence; d == nil || d.Explanation != `runs diverge at step 1 (click button "Go"): outcome done → failed NOT_ACTIONABLE` {
		t.Fatalf("divergence = %+v", d)
	}
}

func TestChannels(t *testing.T) {
	base := func() Step {
		s := sp("click", `button "Apply"`, "/checkout")
		s.Requests = []Request{{Method: "POST", URL: "http://h/api/gift", Status: 200, Type: "Fetch"},
			{Method: "GET", URL: "http://h/img/banner.png", Status: 200, Type: "Image"}}
		s.Interactive = "main\n button \"Apply\" @e3\n button \"Pay\" @e4\n textbox \"Code\" value=\"x\" @e5"
		s.Checks = []Check{{Type: "ui", Target: "page text", Passed: true}}
		s.Console = []ConsoleLine{{Level: "error", Text: "old error at 0x7ffe01"}}
		return s
	}
	material := func(x, y Step) []string {
		a, b := numbered("a", "f", x), numbered("b", "f", y)
		var out []string
		for _, d := range Diff(a, b, Options{}).Pairs[0].Differences {
			if d.Material {
				out = append(out, d.Channel+"/"+d.Kind+": "+d.Detail)
			}
		}
		return out
	}
	for _, c := range []struct {
		name string
		mod  func(*Step)
		want []string
	}{
		{"same", func(s *Step) {}, nil},
		{"refs and addresses", func(s *Step) {
			s.Interactive = strings.ReplaceAll(s.Interactive, "@e", "@e9")
			s.Console[0].Text = "old error at 0x55aa10"
		}, nil},
		{"status within class", func(s *Step) { s.Requests[0].Status = 204 }, nil},
		{"image 404 is new but not a fetch", func(s *Step) {
			s.Requests = append(s.Requests, Request{Method: "GET", URL: "http://h/img/x.png", Status: 404, Type: "Image"})
		}, nil},
		{"new successful request", func(s *Step) {
			s.Requests = append(s.Requests, Request{Method: "GET", URL: "http://h/api/recs", Status: 200, Type: "XHR"})
		}, nil},
		{"new failing fetch", func(s *Step) {
			s.Requests = append(s.Requests, Request{Method: "GET", URL: "http://h/api/recs", Status: 502, Type: "XHR"})
		}, []string{"network/new_failed_request: new request GET /api/recs 502"}},
		{"network error", func(s *Step) { s.Requests[0].Status, s.Requests[0].Failed = 0, "net::ERR_CONNECTION_RESET" }, []string{
			"network/status: POST /api/gift 200 → failed net::ERR_CONNECTION_RESET"}},
		{"aborted", func(s *Step) { s.Requests[0].Status, s.Requests[0].Failed = 0, "net::ERR_ABORTED" }, nil},
		{"missing request", func(s *Step) { s.Requests = s.Requests[1:] }, nil},
		{"new console error", func(s *Step) {
			s.Console = append(s.Console, ConsoleLine{Level: "exception", Text: "TypeError: x is undefined"})
		}, []string{`console/new_error: new console exception "TypeError: x is undefined"`}},
		{"vanished console error", func(s *Step) { s.Console = nil }, nil},
		{"new warning", func(s *Step) { s.Console = append(s.Console, ConsoleLine{Level: "warn", Text: "slow"}) }, nil},
		{"missing button", func(s *Step) { s.Interactive = "main\n button \"Apply\" @e3\n textbox \"Code\" value=\"x\" @e5" },
			[]string{`snapshot/missing_element: missing button "Pay"`}},
		{"disabled button", func(s *Step) { s.Interactive = strings.Replace(s.Interactive, `"Pay"`, `"Pay" disabled`, 1) },
			[]string{`snapshot/disabled_element: now disabled: button "Pay": (none) → disabled`}},
		{"value change", func(s *Step) { s.Interactive = strings.Replace(s.Interactive, `value="x"`, `value="y"`, 1) }, nil},
		{"new element", func(s *Step) { s.Interactive += "\n link \"Help\" @e6" }, nil},
		{"check fails", func(s *Step) { s.Checks[0].Passed = false }, []string{`check/failed: check ui "page text" passed → failed`}},
		{"new failed check", func(s *Step) { s.Checks = append(s.Checks, Check{Type: "state", Target: "GET http://h/api/x"}) },
			[]string{`check/new_failed_check: new check state "GET /api/x" failed`}},
		{"slow", func(s *Step) { s.EndTS = s.StartTS + 9e9 }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := base()
			c.mod(&y)
			got := material(base(), y)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("material =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestConsoleMovedByAStep: an error a logged one step later is not new.
func TestConsoleMovedByAStep(t *testing.T) {
	x1, x2 := sp("click", `button "A"`, "/"), sp("wait", "settled", "/")
	x2.Console = []ConsoleLine{{Level: "error", Text: "late error 12345"}}
	y1, y2 := x1, sp("wait", "settled", "/")
	y1.Console = []ConsoleLine{{Level: "error", Text: "late error 67890"}}
	rep := Diff(numbered("a", "f", x1, x2), numbered("b", "f", y1, y2), Options{})
	if rep.FirstDivergence != nil {
		t.Fatalf("divergence %+v", rep.FirstDivergence)
	}
	if rep.Pairs[0].Differences[0].Kind != "moved_error" {
		t.Fatalf("%+v", rep.Pairs[0].Differences)
	}
}

func TestTiming(t *testing.T) {
	x := sp("click", `button "A"`, "/")
	y := x
	x.StartTS, x.EndTS = 1e9, 2e9
	y.StartTS, y.EndTS = 1e9, 1e9+5e9
	rep := Diff(&Run{Flow: "f", Steps: []Step{x}}, &Run{Flow: "f", Steps: []Step{y}}, Options{TimingFactor: 3})
	if d := rep.Pairs[0].Differences; len(d) != 1 || d[0].Channel != ChannelTiming || d[0].Material || d[0].Detail != "1.0s → 5.0s" {
		t.Fatalf("%+v", d)
	}
	y.EndTS = 1e9 + 2.5e9 // 2.5× but only 1.5 s more: under the factor
	rep = Diff(&Run{Flow: "f", Steps: []Step{x}}, &Run{Flow: "f", Steps: []Step{y}}, Options{TimingFactor: 3})
	if d := rep.Pairs[0].Differences; len(d) != 0 {
		t.Fatalf("%+v", d)
	}
	// Under the floor: 0.1 s → 0.9 s is 9× but less than a second.
	x.EndTS, y.EndTS = x.StartTS+1e8, y.StartTS+9e8
	rep = Diff(&Run{Flow: "f", Steps: []Step{x}}, &Run{Flow: "f", Steps: []Step{y}}, Options{})
	if d := rep.Pairs[0].Differences; len(d) != 0 {
		t.Fatalf("%+v", d)
	}
}

func pngOf(t testing.TB, w, h int, paint func(x, y int) color.Color) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, paint(x, y))
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPixels(t *testing.T) {
	white := func(x, y int) color.Color { return color.White }
	frames := map[string][]byte{
		"white": pngOf(t, 100, 100, white),
		"noise": pngOf(t, 100, 100, func(x, y int) color.Color { return color.RGBA{250, 252, 251, 255} }),
		"dialog": pngOf(t, 100, 100, func(x, y int) color.Color {
			return pick(x > 20 && x < 80 && y > 20 && y < 80, color.Black, color.White)
		}),
		"dot":    pngOf(t, 100, 100, func(x, y int) color.Color { return pick(x < 10 && y < 10, color.Black, color.White) }),
		"small":  pngOf(t, 50, 100, white),
		"broken": []byte("not an image"),
	}
	fetch := func(c string) ([]byte, error) {
		if b, ok := frames[c]; ok {
			return b, nil
		}
		return nil, errors.New("no such frame")
	}
	for _, c := range []struct{ a, b, want string }{
		{"white", "white", ""},
		{"white", "noise", ""},
		{"white", "dot", ""}, // 1% < 2%
		{"white", "dialog", "pixels/frame: 34.8% of pixels changed"},
		{"white", "small", "pixels/size: frame size 100×100 → 50×100"},
		{"white", "broken", ""},
		{"white", "missing", ""},
	} {
		x, y := sp("click", `button "A"`, "/"), sp("click", `button "A"`, "/")
		x.FrameCID, y.FrameCID = c.a, c.b
		rep := Diff(numbered("a", "f", x), numbered("b", "f", y), Options{Frame: fetch})
		var got []string
		for _, d := range rep.Pairs[0].Differences {
			if d.Material {
				t.Errorf("%s/%s: pixels are never material: %+v", c.a, c.b, d)
			}
			got = append(got, d.Channel+"/"+d.Kind+": "+d.Detail)
		}
		if strings.Join(got, ";") != c.want {
			t.Errorf("%s vs %s: %q, want %q", c.a, c.b, got, c.want)
		}
		if (c.b == "broken" || c.b == "missing") && !hasNote(rep, "could not be read") {
			t.Errorf("%s: notes %q", c.b, rep.Notes)
		}
	}
	// Without a fetcher the channel is skipped.
	x, y := sp("click", `button "A"`, "/"), sp("click", `button "A"`, "/")
	x.FrameCID, y.FrameCID = "white", "dialog"
	if d := Diff(numbered("a", "f", x), numbered("b", "f", y), Options{}).Pairs[0].Differences; len(d) != 0 {
		t.Fatalf("%+v", d)
	}
}

func pick(c bool, a, b color.Color) color.Color {
	if c {
		return a
	}
	return b
}

func TestSignature(t *testing.T) {
	pass := demoRun("p", demoOpts{seed: 1})
	fail := demoRun("f", demoOpts{seed: 2, bug: true})
	for _, c := range []struct {
		name string
		r    *Run
		want string
	}{
		{"nil", nil, ""},
		{"pass", pass, ""},
		{"gift card", fail, "POST /api/checkout 500 GIFT_CARD_STATE"},
		{"not found", numbered("x", "f", failed(sp("click", `button "Pay"`, "/c"), "NOT_FOUND")), `NOT_FOUND click button "Pay"`},
		{"network error", func() *Run {
			s := failed(sp("click", `button "Pay"`, "/c"), "APP_ERROR")
			s.Requests = []Request{{Method: "POST", URL: "http://127.0.0.1:4000/api/pay?nonce=abc123XYZ789qq", Failed: "net::ERR_CONNECTION_REFUSED"}}
			return numbered("x", "f", s)
		}(), "POST /api/pay failed net::ERR_CONNECTION_REFUSED"},
		{"4xx with a code", func() *Run {
			s := failed(sp("click", `button "Pay"`, "/c"), "EXPECT_FAILED")
			s.Requests = []Request{{Method: "POST", URL: "http://h/api/orders/12345", Status: 409, ErrorCode: "OUT_OF_STOCK"}}
			return numbered("x", "f", s)
		}(), "POST /api/orders/{id} 409 OUT_OF_STOCK"},
		{"failed check", func() *Run {
			s := failed(sp("expect", `state GET /api/orders/last`, "/c"), "STATE_MISMATCH")
			s.Checks = []Check{{Type: "state", Target: "GET http://127.0.0.1:9999/api/orders/last", Passed: false}}
			r := numbered("x", "f", s)
			r.Origin = "http://127.0.0.1:9999"
			return r
		}(), `check failed: state "GET /api/orders/last"`},
		{"console", func() *Run {
			s := failed(sp("click", `button "Go"`, "/"), "PAGE_ERROR")
			s.Console = []ConsoleLine{{Level: "exception", Text: "TypeError: order 123456 is null\n    at pay (http://127.0.0.1:5173/app.3f9a8c7d.js:1:2345)"}}
			return numbered("x", "f", s)
		}(), "console exception: TypeError: order {n} is null"},
		{"fail verdict only", &Run{Verdict: "fail"}, "verdict fail"},
		{"open, nothing failed", &Run{State: "open", Steps: []Step{sp("click", "x", "/")}}, ""},
	} {
		if got := Signature(c.r); got != c.want {
			t.Errorf("%s: Signature = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestGroup(t *testing.T) {
	runs := []*Run{
		demoRun("r1", demoOpts{seed: 1, bug: true}),
		demoRun("r2", demoOpts{seed: 2, bug: true, port: 40001}),
		demoRun("r3", demoOpts{seed: 3}),
		demoRun("r4", demoOpts{seed: 4, bug: true, refBase: 99}),
	}
	g := Group(runs)
	if g.Reproduced != 3 || g.Of != 4 || g.Signature != "POST /api/checkout 500 GIFT_CARD_STATE" ||
		strings.Join(g.Members, ",") != "r1,r2,r4" || len(g.Odd) != 1 || g.Odd[0] != (OddRun{ID: "r3"}) {
		t.Fatalf("%+v", g)
	}
	if s := g.String(); s != "reproduced 3 of 4: POST /api/checkout 500 GIFT_CARD_STATE" {
		t.Fatal(s)
	}
	// A tie goes to the signature seen first; passing runs only: none.
	x := numbered("x", "f", failed(sp("click", `button "A"`, "/"), "NOT_FOUND"))
	y := numbered("y", "f", failed(sp("click", `button "B"`, "/"), "NOT_FOUND"))
	if g := Group([]*Run{y, x, x, y}); g.Signature != `NOT_FOUND click button "B"` || g.Reproduced != 2 {
		t.Fatalf("%+v", g)
	}
	if g := Group([]*Run{runs[2]}); g.Reproduced != 0 || g.Signature != "" || g.String() != "no failure signature in 1 runs" {
		t.Fatalf("%+v", g)
	}
	if g := Group(nil); g.Of != 0 || g.Members == nil {
		t.Fatalf("%+v", g)
	}
}

// TestGroupVerdict: counted against a seed's signature, the runs are
// reproduced (all show it), flaky (some) or not_reproduced (none, or no
// signature at all), each said in one line.
func TestGroupVerdict(t *testing.T) {
	const sig = "POST /api/checkout 500 GIFT_CARD_STATE"
	bug := func(id string) *Run { return demoRun(id, demoOpts{seed: 1, bug: true}) }
	ok := func(id string) *Run { return demoRun(id, demoOpts{seed: 2}) }
	other := numbered("o", "f", failed(sp("click", `button "A"`, "/"), "NOT_FOUND"))
	for _, c := range []struct {
		runs    []*Run
		want    string
		verdict string
		summary string
	}{
		{[]*Run{bug("a"), bug("b"), bug("c")}, sig, "reproduced", "reproduced 3 of 3: " + sig},
		{[]*Run{bug("a"), ok("b"), bug("c")}, sig, "flaky", "flaky: reproduced 2 of 3: " + sig},
		{[]*Run{ok("a"), other, ok("c")}, sig, "not_reproduced", "not_reproduced: 0 of 3 show " + sig},
		// Without a seed's signature, the most common; passing runs have none.
		{[]*Run{other, other}, "", "reproduced", `reproduced 2 of 2: NOT_FOUND click button "A"`},
		{[]*Run{ok("a"), ok("b")}, "", "not_reproduced", "not_reproduced: no failure signature in 2 runs"},
	} {
		g := GroupAgainst(c.runs, c.want)
		if g.Verdict() != c.verdict || g.Summary() != c.summary {
			t.Errorf("%s against %q: %s, %q; want %s, %q", g, c.want, g.Verdict(), g.Summary(), c.verdict, c.summary)
		}
	}
}

// TestObservedSnapshotsNotMaterial: an element that b's view lacks is a
// material difference between driven steps, and reported but not material
// when b's step was observed (an attached recording reads its views late).
func TestObservedSnapshotsNotMaterial(t *testing.T) {
	a := &Step{Interactive: "button \"Add to cart\" @e1\nbutton \"Pay\" @e2\n"}
	for _, observed := range []bool{false, true} {
		b := &Step{Interactive: "button \"Pay\" @e2\n", Observed: observed}
		d := newDiffer(&Run{}, &Run{}, Options{})
		diffs := d.snapshot(nil, a, b)
		if len(diffs) == 0 {
			t.Fatalf("observed %v: no difference reported", observed)
		}
		material := false
		for _, x := range diffs {
			material = material || x.Material
		}
		if material == observed {
			t.Errorf("observed %v: material %v (%+v)", observed, material, diffs)
		}
	}
}
