package recorder_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/playback"
)

// stepsPage is a page with one of each thing a step can trip over.
const stepsPage = `<!doctype html><html><head><title>steps</title>
<style>#overlay{position:fixed;left:0;top:0;width:400px;height:60px;background:#eee}</style></head>
<body><main>
<button id="covered" style="position:absolute;left:10px;top:10px">Covered</button><div id="overlay"></div>
<div style="margin-top:80px">
<button disabled>Disabled</button>
<p>one</p><p>two</p>
<form id="f"><label>Name <input name="who"></label>
<label>Size <select name="size"><option value="s">Small</option><option value="l">Large</option></select></label>
<label><input type="checkbox" name="gift"> Gift wrap</label></form>
<div id="out" role="status"></div>
<button onclick="null.boom()">Throw</button>
</div></main>
<script>
document.getElementById("f").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = e.target;
  document.getElementById("out").textContent = "ordered " + f.who.value + " " + f.size.value + (f.gift.checked ? " wrapped" : "");
});
</script></body></html>`

// stepsServer serves stepsPage on loopback for t.
func stepsServer(t *testing.T) *httptest.Server {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, stepsPage)
	}))
	t.Cleanup(page.Close)
	return page
}

// runSteps records a flow of the given steps (YAML list items) against
// the steps page and returns the result and the recording's events.
func runSteps(t *testing.T, base, page string, steps ...string) (recorder.Result, []event.Envelope) {
	t.Helper()
	src := "name: steps\nstart_url: \"{{base}}/\"\nviewport: {width: 800, height: 600}\nsteps:\n"
	for _, s := range steps {
		src += "  - " + s + "\n"
	}
	fl, err := flow.Parse("steps.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The step timeout bounds how long the failing cases wait; the
	// opening goto gets twice it to load, which a loaded CI machine has
	// been seen to need more than 1.4 s for.
	res, err := recorder.Record(ctx, recorder.Config{Chromium: testenv.RequireChromium(t), StepTimeout: 2 * time.Second},
		fl.Expand(page), client.New(base))
	if err != nil {
		t.Fatal(err)
	}
	indexed(t, base, res.ID, res.Total)
	return res, allEvents(t, base, res.ID)
}

func receiptOf(t *testing.T, evs []event.Envelope, step int) event.Receipt {
	t.Helper()
	for _, e := range evs {
		if e.Kind == event.KindReceipt && e.Step == step {
			return decode[event.Receipt](t, e)
		}
	}
	t.Fatalf("no receipt for step %d", step)
	return event.Receipt{}
}

// TestStepFailures: each way a step fails gets its code, a message that
// says why, a next, a screenshot, and stops the flow (the step after it
// never runs).
func TestStepFailures(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	page := stepsServer(t)
	for _, c := range []struct {
		step, code, msg string
	}{
		{`click: button "Missing"`, recorder.CodeNotFound, `no element matches button "Missing"`},
		{`click: button "Covered"`, recorder.CodeNotActionable, "covered by div#overlay"},
		{`click: button "Disabled"`, recorder.CodeNotActionable, "disabled"},
		{`click: {css: "p"}`, recorder.CodeAmbiguous, "2 visible elements"},
		{`click: {css: "p[["}`, recorder.CodeBadTarget, "not a valid selector"},
		{`select: {target: combobox "Size", value: "XL"}`, recorder.CodeNoOption, `no option "XL"`},
		{`wait: {text: "Never shown"}`, recorder.CodeNotSettled, `text "Never shown" did not appear`},
		{`expect: {text: "Absent"}`, recorder.CodeExpectFailed, `text "Absent" is not on the page`},
	} {
		t.Run(c.code+" "+c.step, func(t *testing.T) {
			res, evs := runSteps(t, srv.Base, page.URL, c.step, `click: button "Throw"`)
			if res.Verdict != "fail" || res.Steps != 1 || len(res.Failed) != 1 {
				t.Fatalf("verdict %s, %d steps ran, failed %+v: want fail at step 1, flow stopped", res.Verdict, res.Steps, res.Failed)
			}
			rc := receiptOf(t, evs, 1)
			if rc.Outcome != event.OutcomeFailed || rc.Error == nil || rc.Error.Code != c.code ||
				!strings.Contains(rc.Error.Message, c.msg) || rc.Error.Next == "" {
				t.Errorf("receipt %s %+v, want %s with %q and a next", rc.Outcome, rc.Error, c.code, c.msg)
			}
			shots := 0
			for _, e := range evs {
				if e.Kind == event.KindScreenshot && e.Step == 1 {
					if s := decode[event.Screenshot](t, e); s.Reason == "failure" && s.ImageCID != "" {
						shots++
					}
				}
				if e.Step == 2 {
					t.Errorf("an event of step 2 (%s): the flow went on after a failed step", e.Kind)
				}
			}
			if shots != 1 {
				t.Errorf("%d failure screenshots in step 1, want 1", shots)
			}
			if c.code == recorder.CodeExpectFailed {
				found := false
				for _, e := range evs {
					if e.Kind == event.KindCheck {
						ck := decode[event.Check](t, e)
						found = ck.Type == "ui" && !ck.Passed
					}
				}
				if !found {
					t.Error("a failed text expectation sent no failed ui check")
				}
			}
		})
	}
}

// TestStepsThatWork: fill, select, check and press work as a person's
// input would (the page's own submit handler sees the values), an
// uncaught exception fails its step as PAGE_ERROR without stopping the
// flow, and refs in receipts match the interactive snapshot.
func TestStepsThatWork(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	page := stepsServer(t)
	res, evs := runSteps(t, srv.Base, page.URL,
		`fill: {target: textbox "Name", value: "Ada"}`,
		`select: {target: combobox "Size", value: "Large"}`,
		`check: checkbox "Gift wrap"`,
		`press: {target: textbox "Name", key: Enter}`,
		`wait: {text: "ordered Ada l wrapped"}`,
		`click: button "Throw"`,
		`expect: {text: "ordered Ada"}`,
	)
	if res.Steps != 7 || len(res.Failed) != 1 || res.Failed[0].Step != 6 || res.Failed[0].Code != recorder.CodePageError {
		t.Fatalf("steps %d, failed %+v: want 7 steps, only step 6 failed with PAGE_ERROR", res.Steps, res.Failed)
	}
	rc := receiptOf(t, evs, 6)
	if !strings.Contains(rc.Error.Message, "TypeError") || rc.Effects == nil || rc.Effects.ConsoleErrors == 0 {
		t.Errorf("step 6 receipt %+v effects %+v: want the TypeError and a console error", rc.Error, rc.Effects)
	}
	fill := receiptOf(t, evs, 1)
	if fill.Resolved == nil || !strings.HasPrefix(fill.Resolved.Ref, "@e") {
		t.Fatalf("fill resolved %+v", fill.Resolved)
	}
	// The after snapshot of step 1 lists the textbox with that ref and
	// its new value; the checkbox is checked after step 3.
	var after1, after3 string
	for _, e := range evs {
		if e.Kind == event.KindSnapshot {
			s := decode[event.Snapshot](t, e)
			if s.View == "interactive" && s.When == "after" && e.Step == 1 {
				after1 = s.Text
			}
			if s.View == "interactive" && s.When == "after" && e.Step == 3 {
				after3 = s.Text
			}
		}
	}
	// The tree's shape (which landmark or form the textbox sits under,
	// how deep) is Chromium's and changes between releases; the product
	// promises the textbox, its value and its ref on one line.
	if !regexp.MustCompile(`(?m)^\s*textbox "Name"( \w+)* value="Ada"( \w+)* ` + regexp.QuoteMeta(fill.Resolved.Ref) + `$`).MatchString(after1) {
		t.Errorf("step 1's interactive snapshot lacks the filled textbox with ref %s:\n%s", fill.Resolved.Ref, after1)
	}
	if !regexp.MustCompile(`(?m)^\s*checkbox "Gift wrap"( \w+)* checked( \w+)* @e\d+$`).MatchString(after3) {
		t.Errorf("step 3's interactive snapshot does not show the checkbox checked:\n%s", after3)
	}
	if d := receiptOf(t, evs, 3).Effects; d == nil || !regexp.MustCompile(`(?m)^\+\s*checkbox "Gift wrap"( \w+)* checked( \w+)* @e\d+$`).MatchString(d.SnapshotDelta) {
		t.Errorf("step 3's snapshot delta: %+v", d)
	}
}

// TestSnapshotPages: a page of 50,000 buttons makes an interactive
// snapshot far over a page's size; the event keeps it whole and the API
// gives it in pages, each with the handle of the next, which together
// are the snapshot.
func TestSnapshotPages(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	const n = 50_000
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><title>many</title></head><body><main>")
	for i := range n {
		fmt.Fprintf(&b, "<button>Item %d</button>", i)
	}
	b.WriteString("</main></body></html>")
	body := b.String()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	defer page.Close()
	// Not runSteps: loading and reading 50,000 controls takes longer than
	// its step timeout on a loaded machine.
	fl, err := flow.Parse("many.yaml", []byte("name: many\nstart_url: \"{{base}}/\"\nsteps:\n  - wait: {text: \"Item 49999\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := recorder.Record(ctx, recorder.Config{Chromium: testenv.RequireChromium(t), StepTimeout: time.Minute},
		fl.Expand(page.URL), client.New(srv.Base))
	if err != nil || len(res.Failed) > 0 {
		t.Fatalf("recording: %v %+v", err, res.Failed)
	}
	indexed(t, srv.Base, res.ID, res.Total)
	evs := allEvents(t, srv.Base, res.ID)
	var seq uint64
	for _, e := range evs {
		if e.Kind == event.KindSnapshot {
			if s := decode[event.Snapshot](t, e); s.View == "interactive" && s.When == "after" {
				seq = e.Seq
				if s.Truncated || len(s.Text) < n*20 {
					t.Fatalf("the stored snapshot is %d bytes, truncated %v: want all %d buttons", len(s.Text), s.Truncated, n)
				}
			}
		}
	}
	if seq == 0 {
		t.Fatal("no interactive snapshot after the step")
	}
	var all strings.Builder
	pages := 0
	for cursor := ""; ; pages++ {
		var pg playback.SnapshotPage
		getJSON(t, fmt.Sprintf("%s/v1/recordings/%s/snapshots/%d?cursor=%s", srv.Base, res.ID, seq, cursor), &pg)
		if len(pg.Text) > playback.DefaultSnapshotPage {
			t.Fatalf("page %d is %d bytes, over the page size", pages, len(pg.Text))
		}
		if pages == 0 && (!pg.Truncated || pg.Next == "") {
			t.Fatalf("the first page is not truncated with a handle: %d of %d bytes", len(pg.Text), pg.TotalBytes)
		}
		all.WriteString(pg.Text)
		if pg.Next == "" {
			if pg.Truncated {
				t.Fatal("a truncated page without a handle")
			}
			break
		}
		cursor = pg.Next
	}
	got := all.String()
	for _, i := range []int{0, 1, 25_000, n - 1} {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s*button "Item %d" @e\d+$`, i)).MatchString(got) {
			t.Errorf("the pages lack button %d", i)
		}
	}
	if c := strings.Count(got, `button "Item `); c != n {
		t.Errorf("the pages list %d buttons, want %d", c, n)
	}
	t.Logf("%d bytes in %d pages", len(got), pages+1)
}
