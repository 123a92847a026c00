package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store"
)

// consoleWatch collects what a page writes to the console as errors, and
// the exceptions nothing caught.
type consoleWatch struct {
	mu   sync.Mutex
	errs []string
}

func watchConsole(t *testing.T, ctx context.Context) *consoleWatch {
	t.Helper()
	w := &consoleWatch{}
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.ConsoleAPICalledTypeError && e.Type != runtime.ConsoleAPICalledTypeAssert {
				return
			}
			var parts []string
			for _, a := range e.Args {
				if a.Description != "" {
					parts = append(parts, a.Description)
				} else {
					parts = append(parts, string(a.Value))
				}
			}
			w.add("console." + string(e.Type) + ": " + strings.Join(parts, " "))
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if x := e.ExceptionDetails.Exception; x != nil && x.Description != "" {
				msg += " " + x.Description
			}
			w.add("exception: " + msg)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *consoleWatch) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, s)
}

// check fails the test with every error logged since the last check.
func (w *consoleWatch) check(t *testing.T, when string) {
	t.Helper()
	w.mu.Lock()
	errs := w.errs
	w.errs = nil
	w.mu.Unlock()
	for _, e := range errs {
		t.Errorf("%s: %s", when, e)
	}
}

// openPage navigates to url and waits until the page says it is rendered.
func openPage(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body && document.body.dataset.ready === "1"`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("%s: not ready: %v", url, err)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate: %v\n%s", err, js)
	}
	return v
}

// compareState is what the compare page shows, as the tests read it.
type compareState struct {
	Rows        int
	Divergent   int // .divergent elements
	DivA, DivB  int
	DivIndex    int
	InView      bool
	Explanation string
	Selected    int // data-index of the selected row
	Focused     int // data-index of the focused row, -1 if none
	ChIndex     int // #channels' row
	ChA, ChB    int
	Channels    string
	HookOK      bool // the divergent row answers #pairs [data-a-step=…][data-b-step=…]
	Error       string
	ErrorShown  bool
	FormShown   bool
	Overflow    bool // wider than the window
	ColsStacked bool // #channels below the steps
	TopInView   bool // the runs and the explanation are on screen
}

const compareStateJS = `(() => {
	const q = (s) => document.querySelector(s);
	const d = q('#pairs .divergent');
	const r = d ? d.getBoundingClientRect() : null;
	const sel = q('#pairs tr.selected');
	const ch = q('#channels');
	const sides = q('#channels .sides');
	const foc = document.activeElement && document.activeElement.closest ? document.activeElement.closest('tr.pair') : null;
	const pw = q('.pairs-wrap'), cw = q('#channels');
	return {
		Rows: document.querySelectorAll('#pairs tr.pair').length,
		Divergent: document.querySelectorAll('.divergent').length,
		DivA: d ? +d.dataset.aStep : 0,
		DivB: d ? +d.dataset.bStep : 0,
		DivIndex: d ? +d.dataset.index : -1,
		InView: !!r && r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth,
		Explanation: q('#explanation') && !q('#explanation').hidden ? q('#explanation').textContent : '',
		Selected: sel ? +sel.dataset.index : -1,
		Focused: foc ? +foc.dataset.index : -1,
		ChIndex: ch && ch.dataset.index ? +ch.dataset.index : -1,
		ChA: sides ? +sides.dataset.aStep : -1,
		ChB: sides ? +sides.dataset.bStep : -1,
		Channels: ch ? ch.textContent : '',
		HookOK: !!d && !!q('#pairs [data-a-step="' + d.dataset.aStep + '"][data-b-step="' + d.dataset.bStep + '"].divergent'),
		Error: q('#error').textContent,
		ErrorShown: !q('#error').hidden,
		FormShown: !q('#pick').hidden,
		Overflow: document.documentElement.scrollWidth > innerWidth + 1,
		TopInView: ['#runs', '#explanation'].every((s) => { const b = q(s).getBoundingClientRect(); return b.height > 0 && b.top >= 0 && b.bottom <= innerHeight; }),
		ColsStacked: !!pw && !!cw && cw.getBoundingClientRect().top >= pw.getBoundingClientRect().bottom - 1,
	};
})()`

// TestUICompare is the compare view's acceptance test: the demo's passing
// and failing checkouts side by side in Chromium, the first divergence
// highlighted, in view and explained as GET /v1/diff names it, the
// differences of a selected row, keyboard selection, and the errors of a
// bad comparison.
func TestUICompare(t *testing.T) {
	srv, ids := demoRuns(t, "checkout-passes", "checkout-with-gift-card-fails")
	pass, fail := ids[0], ids[1]

	var rep diffrun.Report
	r := do(t, "GET", srv.Base+"/v1/diff?a="+pass+"&b="+fail, nil)
	if r.status != 200 {
		t.Fatalf("diff: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	fd := rep.FirstDivergence
	if fd == nil {
		t.Fatalf("the demo runs do not diverge: %s", r.body)
	}

	ctx := testenv.Chromium(t)
	console := watchConsole(t, ctx)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	page := srv.Base + "/compare?a=" + pass + "&b=" + fail
	openPage(t, ctx, page)
	console.check(t, "on load")

	st := evalJS[compareState](t, ctx, compareStateJS)
	if st.Rows != len(rep.Pairs) {
		t.Errorf("%d rows, the report has %d pairs", st.Rows, len(rep.Pairs))
	}
	if st.Divergent != 1 || !st.HookOK {
		t.Fatalf("divergent rows: %d (hook %v); want 1: %+v", st.Divergent, st.HookOK, st)
	}
	if st.DivA != fd.StepA || st.DivB != fd.StepB {
		t.Errorf("divergent row a %d, b %d; GET /v1/diff says a %d, b %d", st.DivA, st.DivB, fd.StepA, fd.StepB)
	}
	if !st.InView {
		t.Errorf("the divergent row is not in the viewport after load")
	}
	for _, want := range []string{"500", "POST /api/checkout", fd.Explanation} {
		if !strings.Contains(st.Explanation, want) {
			t.Errorf("explanation %q does not contain %q", st.Explanation, want)
		}
	}
	if st.Selected != st.DivIndex || st.ChIndex != st.DivIndex || st.ChA != fd.StepA || st.ChB != fd.StepB {
		t.Errorf("selection %d, channels of row %d (a %d, b %d); want the divergent row %d", st.Selected, st.ChIndex, st.ChA, st.ChB, st.DivIndex)
	}
	if !strings.Contains(st.Channels, "500") || !strings.Contains(st.Channels, "Requests and statuses") {
		t.Errorf("#channels of the divergent row does not show the request: %q", st.Channels)
	}
	if st.Overflow || !st.TopInView || st.ErrorShown || st.FormShown {
		t.Errorf("at 1280×800: overflow %v, runs and explanation in view %v, error %v %q, form %v", st.Overflow, st.TopInView, st.ErrorShown, st.Error, st.FormShown)
	}
	links := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#pairs .divergent a, #runs a')].map(a => a.getAttribute('href'))`)
	for _, want := range []string{fmt.Sprintf("/r/%s?step=%d", pass, fd.StepA), fmt.Sprintf("/r/%s?step=%d", fail, fd.StepB)} {
		found := false
		for _, l := range links {
			found = found || l == want
		}
		if !found {
			t.Errorf("no link %s among %q", want, links)
		}
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, "ui-compare.png", shot)

	// Another row: the first one that is not the divergent one.
	other := 0
	if st.DivIndex == 0 {
		other = 1
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf("#pair-%d .col-mark", other)))); err != nil {
		t.Fatal(err)
	}
	st2 := evalJS[compareState](t, ctx, compareStateJS)
	p := rep.Pairs[other]
	if st2.Selected != other || st2.ChIndex != other || st2.ChA != p.StepA || st2.ChB != p.StepB || st2.Channels == st.Channels {
		t.Errorf("after clicking row %d: selected %d, channels of row %d (a %d, b %d); want a %d, b %d and other channels",
			other, st2.Selected, st2.ChIndex, st2.ChA, st2.ChB, p.StepA, p.StepB)
	}

	// j and k move the selection (and the focus) down and up.
	press := func(key string) compareState {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.KeyEvent(key)); err != nil {
			t.Fatal(err)
		}
		return evalJS[compareState](t, ctx, compareStateJS)
	}
	if s := press("j"); s.Selected != other+1 || s.ChIndex != other+1 || s.Focused != other+1 {
		t.Errorf("j: selected %d, channels %d, focus %d; want %d", s.Selected, s.ChIndex, s.Focused, other+1)
	}
	if s := press("k"); s.Selected != other || s.ChIndex != other {
		t.Errorf("k: selected %d, channels %d; want %d", s.Selected, s.ChIndex, other)
	}
	// Enter selects the focused row.
	target := min(other+3, len(rep.Pairs)-1)
	evalJS[bool](t, ctx, fmt.Sprintf(`document.getElementById('pair-%d').focus(), true`, target))
	if s := press("\r"); s.Selected != target || s.ChIndex != target {
		t.Errorf("Enter on row %d: selected %d, channels %d", target, s.Selected, s.ChIndex)
	}
	// The explanation jumps back to the divergent row.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#explanation"))); err != nil {
		t.Fatal(err)
	}
	if s := evalJS[compareState](t, ctx, compareStateJS); s.Selected != s.DivIndex || !s.InView || s.Focused != s.DivIndex {
		t.Errorf("after clicking the explanation: selected %d, focus %d, in view %v; want the divergent row %d", s.Selected, s.Focused, s.InView, s.DivIndex)
	}
	console.check(t, "selecting rows")

	// Narrow: the columns stack, nothing overflows, the divergence is in view.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(420, 800)); err != nil {
		t.Fatal(err)
	}
	openPage(t, ctx, page)
	if s := evalJS[compareState](t, ctx, compareStateJS); s.Overflow || !s.InView || !s.ColsStacked || s.Divergent != 1 {
		t.Errorf("at 420×800: overflow %v, divergent row in view %v, stacked %v, divergent %d", s.Overflow, s.InView, s.ColsStacked, s.Divergent)
	}
	shot, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, "ui-compare-narrow.png", shot)
	console.check(t, "narrow")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}

	// An unknown recording: the server's message and next step, and the form.
	unknown := store.NewRecordingID(time.Now())
	var env struct {
		Error struct{ Code, Message, Next string }
	}
	r = do(t, "GET", srv.Base+"/v1/diff?a="+pass+"&b="+unknown, nil)
	if r.status != 404 || json.Unmarshal(r.body, &env) != nil || env.Error.Next == "" {
		t.Fatalf("diff with an unknown id: %d %s", r.status, r.body)
	}
	for _, bad := range []string{unknown, "not-an-id"} {
		openPage(t, ctx, srv.Base+"/compare?a="+pass+"&b="+bad)
		s := evalJS[compareState](t, ctx, compareStateJS)
		for _, want := range []string{env.Error.Code, env.Error.Message, env.Error.Next} {
			if !strings.Contains(s.Error, want) {
				t.Errorf("b=%s: the error %q does not contain %q", bad, s.Error, want)
			}
		}
		if !s.ErrorShown || !s.FormShown || s.Rows != 0 {
			t.Errorf("b=%s: error shown %v, form shown %v, %d rows", bad, s.ErrorShown, s.FormShown, s.Rows)
		}
		if v := evalJS[string](t, ctx, `document.getElementById('pick-b').value`); v != bad {
			t.Errorf("b=%s: the form's b is %q", bad, v)
		}
		console.check(t, "b="+bad)
	}

	// No ids: the form, which leads back to the comparison.
	openPage(t, ctx, srv.Base+"/compare")
	if s := evalJS[compareState](t, ctx, compareStateJS); !s.FormShown || s.ErrorShown {
		t.Errorf("/compare: form shown %v, error shown %v", s.FormShown, s.ErrorShown)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#pick-a"), pass),
		chromedp.SendKeys(chromedp.CSS("#pick-b"), fail),
		chromedp.Click(chromedp.CSS("#pick button")),
	); err != nil {
		t.Fatal(err)
	}
	// The poll does not survive the navigation: ask until the new page answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.search.includes('b=`+fail+`') && document.body.dataset.ready === "1" && !!document.querySelector('.divergent')`))
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the form did not lead to the comparison: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	console.check(t, "the form")
}
