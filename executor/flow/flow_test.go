package flow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/internal/demoapp"
)

func TestShippedFlowsParse(t *testing.T) {
	for _, name := range demoapp.FlowNames() {
		file, data, err := demoapp.FlowFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := flow.Parse(file, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Name != name || f.Revision == "" || f.StartURL != "{{base}}/signin" || f.Viewport != (flow.Viewport{Width: 1280, Height: 800}) {
			t.Errorf("%s: header %+v", name, f)
		}
		var pay, last *flow.Step
		for i := range f.Steps {
			s := &f.Steps[i]
			if s.Verb == flow.Click && s.Target != nil && *s.Target == (flow.Target{Role: "button", Name: "Pay"}) {
				pay = s
			}
			last = s
		}
		if pay == nil {
			t.Fatalf("%s: no click on button \"Pay\"", name)
		}
		if last.Verb != flow.Expect || last.Expect.State == nil || last.Expect.State.Method != "GET" || last.Expect.State.Status != 200 {
			t.Fatalf("%s: last step %+v", name, last)
		}
		x := f.Expand("http://127.0.0.1:8000/")
		if x.StartURL != "http://127.0.0.1:8000/signin" || x.Expand("x").Steps[len(x.Steps)-1].Expect.State.URL != "http://127.0.0.1:8000/api/orders/last" {
			t.Errorf("%s: expanded %q", name, x.StartURL)
		}
		if f.StartURL != "{{base}}/signin" {
			t.Errorf("Expand changed the original")
		}
		if strings.Contains(name, "gift") {
			var gift bool
			for _, s := range f.Steps {
				if s.Verb == flow.Fill && s.Target.CSS == "#gift-code" && s.Value == demoapp.GiftCode {
					gift = true
				}
			}
			if !gift || string(last.Expect.State.JSON) != `{"error":"GIFT_CARD_STATE","http_status":500,"state":"failed"}` {
				t.Errorf("%s: gift code filled %v, state json %s", name, gift, last.Expect.State.JSON)
			}
		}
	}
}

// TestUnknownStepNamesItsLine: the error points at the line of the typo.
func TestUnknownStepNamesItsLine(t *testing.T) {
	src := `name: typo
revision: r3
start_url: "{{base}}/"
viewport:
  width: 1024
  height: 768
steps:
  - goto: "{{base}}/signin"
  - fill:
      target: textbox "Email"
      value: a@b.example
  - clik: button "Sign in"
  - wait: settled
`
	_, err := flow.Parse("flow.yaml", []byte(src))
	want := `flow.yaml:12: unknown step "clik" (want goto, click, fill, press, select, check, wait, expect, switch, snapshot)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	var fe *flow.Error
	if !errors.As(err, &fe) || fe.Line != 12 || fe.File != "flow.yaml" {
		t.Fatalf("not a *flow.Error on line 12: %#v", err)
	}
}

func TestParsesEveryForm(t *testing.T) {
	src := `name: forms
start_url: https://shop.example/
steps:
  - goto: /signin
  - click: {role: button, name: "Sign \"in\""}
  - click: css "#x > .y"
  - check: checkbox "Remember me"
  - select: {target: combobox "Country", value: NZ}
  - fill: {target: {css: "#card"}, value: 4242424242424242}
  - press: Enter
  - press: {target: textbox "Search", key: Control+A}
    timeout: 3s
  - wait: {url: "*/checkout*"}
  - wait: {settled: true}
  - wait: {text: Done}
  - expect: {text: Done}
  - expect: {state: {method: post, url: "{{base}}/api/x", status: 201, json: [1, {a: b}]}}
  - fill: {target: frame "Payment card" textbox "Card number", value: "4242"}
  - click: {frame: "http://127.0.0.1:9000", css: "#pay"}
`
	f, err := flow.Parse("forms.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Steps
	if len(s) != 15 || f.Viewport != flow.DefaultViewport || f.Revision != "" {
		t.Fatalf("%d steps, %+v", len(s), f)
	}
	checks := []struct {
		ok   bool
		what string
	}{
		{s[0].Verb == flow.Goto && s[0].URL == "/signin" && s[0].Line == 4, "goto"},
		{*s[1].Target == flow.Target{Role: "button", Name: `Sign "in"`}, "click mapping"},
		{*s[2].Target == flow.Target{CSS: "#x > .y"} && s[2].Target.String() == `css "#x > .y"`, "css shorthand"},
		{s[3].Verb == flow.Check && s[3].Target.String() == `checkbox "Remember me"`, "check"},
		{s[4].Verb == flow.Select && s[4].Value == "NZ", "select"},
		{s[5].Value == "4242424242424242" && s[5].Target.CSS == "#card", "fill with a number"},
		{s[6].Key == "Enter" && s[6].Target == nil, "press shorthand"},
		{s[7].Key == "Control+A" && s[7].Target.Name == "Search" && s[7].Timeout == 3*time.Second, "press with timeout"},
		{s[8].Wait.URL == "*/checkout*", "wait url"},
		{s[9].Wait.Settled, "wait settled"},
		{s[10].Wait.Text == "Done", "wait text"},
		{s[11].Expect.Text == "Done", "expect text"},
		{s[12].Expect.State.Method == "POST" && s[12].Expect.State.Status == 201 && string(s[12].Expect.State.JSON) == `[1,{"a":"b"}]`, "state"},
		{*s[13].Target == flow.Target{Frame: "Payment card", Role: "textbox", Name: "Card number"} &&
			s[13].Target.String() == `frame "Payment card" textbox "Card number"`, "frame shorthand"},
		{*s[14].Target == flow.Target{Frame: "http://127.0.0.1:9000", CSS: "#pay"}, "frame mapping"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: %+v", c.what, s)
		}
	}
	if x := f.Expand("http://h:1"); x.Steps[0].URL != "http://h:1/signin" || x.Steps[12].Expect.State.URL != "http://h:1/api/x" {
		t.Errorf("expand: %s %s", x.Steps[0].URL, x.Steps[12].Expect.State.URL)
	}
}

// TestMalformed: each malformed file is refused with the line and the
// reason.
func TestMalformed(t *testing.T) {
	head := "name: bad\nstart_url: \"{{base}}/\"\nsteps:\n"
	cases := []struct {
		name, src, want string
	}{
		{"empty file", "", `f.yaml: empty file: want a mapping with name and steps`},
		{"not a mapping", "- a\n- b\n", `f.yaml:1: a flow file must be a mapping, not a list`},
		{"yaml syntax", "name: x\nsteps: [\n", `f.yaml:2: YAML: did not find expected node content`},
		{"two documents", "name: x\nsteps: [{goto: /}]\n---\nname: y\n", `f.yaml:3: a second YAML document: a flow file holds one`},
		{"missing name", "steps:\n  - goto: /\n", `f.yaml:1: missing "name"`},
		{"missing steps", "name: x\n", `f.yaml:1: missing "steps"`},
		{"empty steps", "name: x\nsteps: []\n", `f.yaml:2: steps is empty`},
		{"steps not a list", "name: x\nsteps: {goto: /}\n", `f.yaml:2: steps must be a list, not a mapping`},
		{"unknown top key", "name: x\nstep: []\nsteps: [{goto: /}]\n", `f.yaml:2: unknown key "step" in the flow (want name, revision, start_url, viewport, params, steps)`},
		{"duplicate key", "name: x\nname: y\nsteps: [{goto: /}]\n", `f.yaml:2: a flow file: "name" appears twice`},
		{"no start", "name: x\nsteps:\n  - click: button \"A\"\n", `f.yaml:1: no start_url, and the first step is not a goto: say where the browser starts`},
		{"bad viewport", "name: x\nviewport: {width: wide, height: 800}\nsteps: [{goto: /}]\n", `f.yaml:2: viewport width must be a whole number, not a string`},
		{"viewport half", "name: x\nviewport: {width: 900}\nsteps: [{goto: /}]\n", `f.yaml:2: viewport needs width and height`},
		{"step not a mapping", head + "  - click\n", `f.yaml:4: a step is a mapping such as click: button "Pay", not a string`},
		{"two verbs", head + "  - click: button \"A\"\n    fill: {target: textbox \"B\", value: x}\n", `f.yaml:5: a step has one action; this one has click and fill`},
		{"extra key", head + "  - click: button \"A\"\n    timout: 2s\n", `f.yaml:5: unknown key "timout" in a click step (want timeout)`},
		{"bad timeout", head + "  - click: button \"A\"\n    timeout: 5\n", `f.yaml:5: timeout must be a duration such as 5s, above 0 and at most 10m`},
		{"empty goto", head + "  - goto: \"\"\n", `f.yaml:4: goto is empty`},
		{"relative goto", head + "  - goto: signin\n", `f.yaml:4: goto: want {{base}}/…, an http(s) URL or a path starting with /`},
		{"unknown variable", head + "  - goto: \"{{host}}/x\"\n", `f.yaml:4: goto: unknown variable {{host}} (declare it under params; {{base}} is the app's base URL)`},
		{"click no target", head + "  - click:\n", `f.yaml:4: click needs a target: role "name" (button "Pay"), css "#id", {role: button, name: Pay} or {css: "#id"}`},
		{"target unquoted", head + "  - click: button Pay\n", `f.yaml:4: bad target for click: want role "name" (button "Pay"), css "#id", {role: button, name: Pay} or {css: "#id"}`},
		{"unknown role", head + "  - click: buton \"Pay\"\n", `f.yaml:4: bad target for click: unknown role "buton"`},
		{"unknown role mapping", head + "  - click: {role: knob, name: Pay}\n", `f.yaml:4: bad target for click: unknown role "knob"`},
		{"role and css", head + "  - click: {role: button, css: \"#pay\"}\n", `f.yaml:4: bad target for click: give role and name, or css, not both`},
		{"name without role", head + "  - click: {name: Pay}\n", `f.yaml:4: bad target for click: a name needs a role`},
		{"target key typo", head + "  - click: {rol: button}\n", `f.yaml:4: unknown key "rol" in click target (want frame, role, name, css)`},
		{"frame empty", head + "  - click: frame \"\" button \"Pay\"\n", `f.yaml:4: bad target for click: the frame must be a non-empty quoted title or origin`},
		{"fill without value", head + "  - fill: {target: textbox \"Email\"}\n", `f.yaml:4: fill needs value`},
		{"fill without target", head + "  - fill:\n      value: x\n", `f.yaml:5: fill needs target`},
		{"fill scalar", head + "  - fill: hello\n", `f.yaml:4: fill must be a mapping, not a string`},
		{"select key typo", head + "  - select: {target: combobox \"C\", valeu: NZ}\n", `f.yaml:4: unknown key "valeu" in select (want target, value)`},
		{"press no key", head + "  - press: {target: textbox \"Q\"}\n", `f.yaml:4: press needs key (Enter, Tab, Control+A …)`},
		{"wait nothing", head + "  - wait: later\n", `f.yaml:4: wait for what? want {text: "…"}, {url: "…"} or settled`},
		{"wait two", head + "  - wait: {text: a, url: /b}\n", `f.yaml:4: wait takes exactly one of text, url, settled`},
		{"wait settled false", head + "  - wait: {settled: false}\n", `f.yaml:4: settled must be true`},
		{"expect empty text", head + "  - expect: {text: \"\"}\n", `f.yaml:4: expect text is empty`},
		{"expect unknown", head + "  - expect: {title: Shop}\n", `f.yaml:4: unknown key "title" in expect (want text, state)`},
		{"state without status", head + "  - expect:\n      state: {method: GET, url: /x}\n", `f.yaml:5: state needs status`},
		{"state bad status", head + "  - expect:\n      state: {method: GET, url: /x, status: 99}\n", `f.yaml:5: state status must be between 100 and 599`},
		{"state bad method", head + "  - expect:\n      state: {method: FETCH, url: /x, status: 200}\n", `f.yaml:5: state method must be GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS`},
		{"state json keys", head + "  - expect:\n      state: {method: GET, url: /x, status: 200, json: {1: a}}\n", `f.yaml:5: json: not expressible as JSON (mapping keys must be strings)`},
	}
	for _, c := range cases {
		_, err := flow.Parse("f.yaml", []byte(c.src))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, err, c.want)
		}
	}
}

// TestSeveralErrors: every problem is reported, each with its line, in
// file order.
func TestSeveralErrors(t *testing.T) {
	src := "name: x\nstart_url: /\nsteps:\n  - clik: button \"A\"\n  - goto: nowhere\n  - fill: {target: knob \"B\", value: v}\n"
	_, err := flow.Parse("f.yaml", []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "f.yaml:4: unknown step") ||
		!strings.HasPrefix(lines[1], "f.yaml:5: goto:") || !strings.HasPrefix(lines[2], "f.yaml:6: bad target for fill: unknown role") {
		t.Fatalf("%q", lines)
	}
}

func TestAliasesAndValuesAreNotQuoted(t *testing.T) {
	src := "name: x\nstart_url: /\nsteps:\n  - fill: &f {target: textbox \"Card\", value: \"4111 1111 1111 1111\"}\n  - fill: *f\n  - fill: {target: textbox \"Card\", value: [1]}\n"
	_, err := flow.Parse("f.yaml", []byte(src))
	if err == nil || err.Error() != "f.yaml:6: fill value must be a string, not a list" {
		t.Fatalf("%v", err)
	}
	if strings.Contains(err.Error(), "4111") {
		t.Fatal("an error quotes a value")
	}
}

// TestParams: a flow declares its parameters, uses them in values, texts
// and URLs, and Bind supplies them (once, never re-expanded); an
// undeclared one is an error at its line, a missing value names them all.
func TestParams(t *testing.T) {
	src := `name: p
start_url: "{{base}}/signin"
params:
  card_number: typed into textbox "Card number" (masked)
  password:
steps:
  - fill: {target: textbox "Card number", value: "{{card_number}}"}
  - fill: {target: {css: "#password"}, value: "{{ password }}"}
  - expect: {text: "Card {{card_number}}"}
  - goto: "{{base}}/x"
`
	f, err := flow.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Params) != 2 || f.Params[0].Name != "card_number" || f.Params[0].Line != 4 || f.Params[1].Description != "" {
		t.Fatalf("params: %+v", f.Params)
	}
	_, err = f.Bind(map[string]string{"other": "x"})
	var me *flow.MissingParamsError
	if !errors.As(err, &me) || strings.Join(me.Names, ",") != "card_number,password" {
		t.Fatalf("Bind without values: %v", err)
	}
	b, err := f.Bind(map[string]string{"card_number": "4242 {{password}}", "password": "pw"})
	if err != nil {
		t.Fatal(err)
	}
	b = b.Expand("http://h:1")
	if b.Steps[0].Value != "4242 {{password}}" || b.Steps[1].Value != "pw" || b.Steps[2].Expect.Text != "Card 4242 {{password}}" ||
		b.Steps[3].URL != "http://h:1/x" || f.Steps[0].Value != "{{card_number}}" {
		t.Errorf("bound: %+v %+v %+v %+v", b.Steps[0], b.Steps[1], b.Steps[2].Expect, b.Steps[3])
	}
	for _, c := range []struct{ src, want string }{
		{"name: p\nstart_url: \"{{base}}/\"\nsteps:\n  - fill: {target: textbox \"A\", value: \"{{nope}}\"}\n",
			"p.yaml:4: fill value: unknown variable {{nope}} (declare it under params"},
		{"name: p\nstart_url: \"{{base}}/\"\nparams: {Bad-Name: x}\nsteps:\n  - goto: /\n", `p.yaml:3: params: "Bad-Name" is not a parameter name`},
	} {
		if _, err := flow.Parse("p.yaml", []byte(c.src)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
	pv, err := flow.ParsePersona("buyer.yaml", []byte("card_number: \"4242\"\npassword: 1234\n"))
	if err != nil || pv["card_number"] != "4242" || pv["password"] != "1234" {
		t.Errorf("persona: %v %v", pv, err)
	}
	if _, err := flow.ParsePersona("buyer.yaml", []byte("card_number: [1]\n")); err == nil || !strings.Contains(err.Error(), "buyer.yaml:1:") {
		t.Errorf("bad persona: %v", err)
	}
}

// TestSwitchAndSnapshotSteps: switch names main or popup, snapshot full;
// anything else is refused at its line.
func TestSwitchAndSnapshotSteps(t *testing.T) {
	head := "name: x\nstart_url: /\nsteps:\n"
	f, err := flow.Parse("f.yaml", []byte(head+"  - switch: popup\n  - snapshot: full\n  - switch: main\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Steps; s[0].Verb != flow.Switch || s[0].Page != flow.PagePopup || s[1].Verb != flow.Snapshot || s[1].View != flow.SnapshotFull ||
		s[2].Page != flow.PageMain {
		t.Errorf("steps %+v", s)
	}
	for src, want := range map[string]string{
		"  - switch: tab2\n":         `f.yaml:4: switch to what? want main (the first page) or popup (the newest page the run opened)`,
		"  - snapshot: everything\n": `f.yaml:4: snapshot: want full (interactive and content come with every step)`,
	} {
		if _, err := flow.Parse("f.yaml", []byte(head+src)); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", src, err, want)
		}
	}
}
