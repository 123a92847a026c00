package flowexport_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/flowexport"
)

// recording builds a recording from (step, kind, data) triples.
func recording(t *testing.T, redacted map[uint64][]string, evs ...any) *flowexport.Recording {
	t.Helper()
	rec := &flowexport.Recording{ID: "00rec", Flow: "f", Verdict: "fail", Redacted: redacted}
	for i := 0; i+2 < len(evs); i += 3 {
		b, err := json.Marshal(evs[i+2])
		if err != nil {
			t.Fatal(err)
		}
		rec.Events = append(rec.Events, event.Envelope{Seq: uint64(len(rec.Events) + 1), Step: evs[i].(int), Kind: event.Kind(evs[i+1].(string)), Data: b})
	}
	return rec
}

func fill(target event.Target, resolved *event.Target, value string) event.Receipt {
	args, _ := json.Marshal(map[string]string{"value": value})
	return event.Receipt{Action: event.Action{Verb: "fill", Target: &target, Args: args}, Resolved: resolved, Outcome: "done"}
}

// TestTargetsAndParams: role and name where the recording had a unique
// one, CSS where the name is ambiguous or missing; a masked value (marked,
// or only named by the redaction report) is a parameter, the same field
// reusing it and another field of the same name numbered; odd names and
// values survive the round trip through the flow parser.
func TestTargetsAndParams(t *testing.T) {
	doc := map[string]any{"request": map[string]any{"method": "GET", "url": "http://app.test:8080/form"},
		"response": map[string]any{"status": 200, "content": map[string]any{"mimeType": "text/html"}}}
	snap := func(text string) event.Snapshot {
		return event.Snapshot{View: "interactive", When: "before", Text: text}
	}
	odd := `Note: "a, b" #1 {x}`
	rec := recording(t, map[uint64][]string{7: {"/action/args/value"}},
		0, "har", doc,
		1, "snapshot", snap(`textbox "Card number" @e1`+"\n"+`textbox "Name" @e2`+"\n"+`textbox "Name" @e3`),
		1, "receipt", fill(event.Target{Selector: "#cc"}, &event.Target{Role: "textbox", Name: "Card number"}, "[redacted:0011]"),
		2, "receipt", fill(event.Target{Selector: "#cc"}, &event.Target{Role: "textbox", Name: "Card number"}, "[redacted:0022]"),
		3, "snapshot", snap(`textbox "Name" @e2`+"\n"+`textbox "Name" @e3`),
		3, "receipt", fill(event.Target{Selector: "#name2"}, &event.Target{Role: "textbox", Name: "Name"}, "not secret"),
		4, "receipt", fill(event.Target{Role: "textbox", Name: odd}, nil, `it's "quoted", a: value`),
		5, "receipt", fill(event.Target{Role: "textbox", Name: "Card-number"}, nil, "[redacted]"),
		6, "receipt", fill(event.Target{Selector: "#x"}, nil, "{{not}} a param"),
	)
	// Seq 7 is step 4's receipt: only the report says its value was erased.
	x, err := flowexport.Build(rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range x.Params {
		got = append(got, p.Name+"="+p.Target)
	}
	want := []string{`card_number=textbox "Card number"`, `note_a_b_1_x=textbox "Note: \"a, b\" #1 {x}"`, `card_number_2=textbox "Card-number"`, `x=css "#x"`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("params:\n got %v\nwant %v", got, want)
	}
	body := x.Flow()
	fl, err := flow.Parse("x.yaml", body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if fl.StartURL != "{{base}}/form" || len(fl.Steps) != 6 {
		t.Fatalf("start %q, %d steps\n%s", fl.StartURL, len(fl.Steps), body)
	}
	steps := []struct{ target, value string }{
		{`textbox "Card number"`, "{{card_number}}"},
		{`textbox "Card number"`, "{{card_number}}"},
		{`css "#name2"`, "not secret"}, // "Name" is on the page twice
		{`textbox "Note: \"a, b\" #1 {x}"`, "{{note_a_b_1_x}}"},
		{`textbox "Card-number"`, "{{card_number_2}}"},
		{`css "#x"`, "{{x}}"}, // a literal {{…}} would read as a parameter
	}
	for i, w := range steps {
		if s := fl.Steps[i]; s.Target.String() != w.target || s.Value != w.value {
			t.Errorf("step %d: %s %q, want %s %q", i+1, s.Target, s.Value, w.target, w.value)
		}
	}
	if strings.Contains(string(body), "0011") || strings.Contains(string(body), "[redacted") {
		t.Errorf("the flow holds a redaction mark:\n%s", body)
	}
	spec := string(x.Playwright())
	for _, w := range []string{`param("CARD_NUMBER", process.env.CARD_NUMBER)`, `page.locator("#name2").fill("not secret")`,
		`getByRole("textbox", { name: "Note: \"a, b\" #1 {x}", exact: true })`} {
		if !strings.Contains(spec, w) {
			t.Errorf("the spec lacks %s:\n%s", w, spec)
		}
	}
}

// TestFrameTargets: an element typed into inside a child frame keeps its
// frame in the flow (frame "…" role "name") and in the spec
// (frameLocator by the frame's title, or by its src for an origin).
func TestFrameTargets(t *testing.T) {
	doc := map[string]any{"request": map[string]any{"method": "GET", "url": "http://app.test:8080/checkout"},
		"response": map[string]any{"status": 200, "content": map[string]any{"mimeType": "text/html"}}}
	rec := recording(t, nil,
		0, "har", doc,
		1, "receipt", fill(event.Target{Frame: "Payment card", Role: "textbox", Name: "Card number"},
			&event.Target{Ref: "@f1e1", Frame: "Payment card", Role: "textbox", Name: "Card number"}, "[redacted]"),
		2, "receipt", fill(event.Target{Frame: "http://127.0.0.1:9000", Selector: "#zip"}, nil, "12345"),
	)
	x, err := flowexport.Build(rec)
	if err != nil {
		t.Fatal(err)
	}
	body := x.Flow()
	fl, err := flow.Parse("x.yaml", body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	want := []string{`frame "Payment card" textbox "Card number"`, `frame "http://127.0.0.1:9000" css "#zip"`}
	for i, w := range want {
		if i >= len(fl.Steps) || fl.Steps[i].Target.String() != w {
			t.Errorf("step %d: want %s\n%s", i+1, w, body)
		}
	}
	spec := string(x.Playwright())
	for _, w := range []string{`page.frameLocator("iframe[title=\"Payment card\"]").getByRole("textbox", { name: "Card number", exact: true })`,
		`page.frameLocator("iframe[src^=\"http://127.0.0.1:9000/\"]").locator("#zip").fill("12345")`} {
		if !strings.Contains(spec, w) {
			t.Errorf("the spec lacks %s:\n%s", w, spec)
		}
	}
}

// TestPopupActionsMayClose: an action on a popup may close it (a Close
// button calling window.close()), so the spec takes the page closing as
// the action's result there; on the main page a click is a plain click.
func TestPopupActionsMayClose(t *testing.T) {
	doc := map[string]any{"request": map[string]any{"method": "GET", "url": "http://app.test:8080/shop"},
		"response": map[string]any{"status": 200, "content": map[string]any{"mimeType": "text/html"}}}
	click := func(name string) event.Receipt {
		return event.Receipt{Action: event.Action{Verb: "click", Target: &event.Target{Role: "button", Name: name}}, Outcome: "done"}
	}
	switchTo := func(page string) event.Receipt {
		args, _ := json.Marshal(map[string]string{"page": page})
		return event.Receipt{Action: event.Action{Verb: "switch", Args: args}, Outcome: "done"}
	}
	rec := recording(t, nil,
		0, "har", doc,
		1, "receipt", click("Terms"),
		2, "receipt", switchTo(flow.PagePopup),
		3, "receipt", click("Close"),
		4, "receipt", switchTo(flow.PageMain),
		5, "receipt", click("Pay"),
	)
	x, err := flowexport.Build(rec)
	if err != nil {
		t.Fatal(err)
	}
	spec := string(x.Playwright())
	for _, w := range []string{
		`await page.getByRole("button", { name: "Terms", exact: true }).click();`,
		`await closable(page, () => page.getByRole("button", { name: "Close", exact: true }).click());`,
		`await page.getByRole("button", { name: "Pay", exact: true }).click();`,
		"async function closable(p: Page",
		"import { test, expect, type Page }",
	} {
		if !strings.Contains(spec, w) {
			t.Errorf("the spec lacks %s:\n%s", w, spec)
		}
	}
}
