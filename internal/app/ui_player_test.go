package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/wire"
)

// uiTab is one Chromium tab driving the web player, counting what must
// not happen: console errors, uncaught exceptions, dialogs (each
// dismissed), and keeping the execution contexts it saw, so a test can
// look into every frame.
type uiTab struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	errors   []string
	dialogs  []string
	contexts map[runtime.ExecutionContextID]string // id → origin
}

func newUITab(t *testing.T, width, height int64) *uiTab {
	t.Helper()
	ctx := testenv.Chromium(t)
	tab := &uiTab{t: t, ctx: ctx, contexts: map[runtime.ExecutionContextID]string{}}
	dialogs := make(chan struct{}, 64)
	err := chromedp.Listen(ctx, func(ev any) {
		tab.mu.Lock()
		defer tab.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					if a.Value != nil {
						parts = append(parts, string(a.Value))
					} else {
						parts = append(parts, a.Description)
					}
				}
				tab.errors = append(tab.errors, "console."+string(e.Type)+": "+strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			tab.errors = append(tab.errors, "exception: "+msg)
		case *runtime.EventExecutionContextCreated:
			tab.contexts[e.Context.ID] = e.Context.Origin
		case *runtime.EventExecutionContextsCleared:
			clear(tab.contexts)
		case *page.EventJavascriptDialogOpening:
			tab.dialogs = append(tab.dialogs, string(e.Type)+": "+e.Message)
			select {
			case dialogs <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-dialogs:
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}
		}
	}()
	tab.viewport(width, height)
	return tab
}

func (p *uiTab) viewport(w, h int64) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(w, h)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *uiTab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// uiEval evaluates js in the page (awaiting a promise) and decodes it.
func uiEval[T any](p *uiTab, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluating %.200s: %v", js, err)
	}
	return v
}

// waitFor polls js until it is a non-empty string, within d.
func (p *uiTab) waitFor(what, js string, d time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		cancel()
		if err == nil && v != "" {
			return v
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("waiting %s for %s: %q %v", d, what, v, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// open loads a page and waits until it says it is ready.
func (p *uiTab) open(url string) {
	p.t.Helper()
	p.do("open "+url, chromedp.Navigate(url))
	state := p.waitFor("the page to be ready", `(document.body && document.body.dataset.ready) || ""`, 30*time.Second)
	if state != "1" {
		p.t.Fatalf("%s: ready=%q, error box: %q", url, state,
			uiEval[string](p, `(document.getElementById("error") || {}).textContent || ""`))
	}
}

// selected is the step the player has selected, -1 if none.
func (p *uiTab) selected() int {
	p.t.Helper()
	return uiEval[int](p, `(() => { const b = document.querySelector("#steps button.selected");
		return b ? Number(b.dataset.step) : -1; })()`)
}

// click scrolls the element sel names into view and clicks its centre
// with the mouse, as a user would.
func (p *uiTab) click(sel string) {
	p.t.Helper()
	pt := uiEval[[]float64](p, fmt.Sprintf(`(() => {
		const e = document.querySelector(%q);
		if (!e) return [];
		e.scrollIntoView({block: "center", inline: "nearest"});
		const r = e.getBoundingClientRect();
		return [r.left + Math.min(r.width / 2, 40), r.top + r.height / 2];
	})()`, sel))
	if len(pt) != 2 {
		p.t.Fatalf("click: no element %s", sel)
	}
	p.do("click "+sel, chromedp.MouseClickXY(pt[0], pt[1]))
}

func (p *uiTab) press(key string) {
	p.t.Helper()
	p.do("press "+key, chromedp.KeyEvent(key))
}

func (p *uiTab) noErrors(where string) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errors {
		p.t.Errorf("%s: %s", where, e)
	}
	p.errors = nil
}

func (p *uiTab) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	writeArtifact(p.t, name, png)
}

// document is the whole DOM, through frames (pierce), as CDP sees it.
func (p *uiTab) document() *cdp.Node {
	p.t.Helper()
	depth := int64(-1)
	pierce := true
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, dom.GetDocument, dom.GetDocumentParams{Depth: &depth, Pierce: &pierce})
	if err != nil {
		p.t.Fatalf("DOM.getDocument: %v", err)
	}
	return res.Root
}

func cdpAttr(n *cdp.Node, name string) (string, bool) {
	for i := 0; i+1 < len(n.Attributes); i += 2 {
		if n.Attributes[i] == name {
			return n.Attributes[i+1], true
		}
	}
	return "", false
}

// cdpFind returns the first element under n (depth first, into frames'
// documents) that match says yes to.
func cdpFind(n *cdp.Node, match func(*cdp.Node) bool) *cdp.Node {
	if n == nil {
		return nil
	}
	if n.NodeType == 1 && match(n) {
		return n
	}
	for _, c := range n.Children {
		if f := cdpFind(c, match); f != nil {
			return f
		}
	}
	for _, c := range n.ShadowRoots {
		if f := cdpFind(c, match); f != nil {
			return f
		}
	}
	return cdpFind(n.ContentDocument, match)
}

func byID(tag, id string) func(*cdp.Node) bool {
	return func(n *cdp.Node) bool {
		v, _ := cdpAttr(n, "id")
		return strings.EqualFold(n.LocalName, tag) && v == id
	}
}

// inFrames runs fn in a context attached to each out-of-process iframe
// of the tab whose URL contains urlPart (Chromium isolates sandboxed
// frames in their own process, out of reach of the page's DOM tree).
func (p *uiTab) inFrames(urlPart string, fn func(ctx context.Context, info *target.Info)) int {
	p.t.Helper()
	infos, err := chromedp.Targets(p.ctx)
	if err != nil {
		p.t.Fatalf("targets: %v", err)
	}
	n := 0
	for _, info := range infos {
		if info.Type != "iframe" || !strings.Contains(info.URL, urlPart) {
			continue
		}
		fctx, cancel := chromedp.NewContext(p.ctx, chromedp.WithTargetID(info.TargetID), chromedp.WithDetachOnCancel())
		tctx, tcancel := context.WithTimeout(fctx, 20*time.Second)
		if err := chromedp.Do(fctx); err == nil {
			fn(tctx, info)
			n++
		}
		tcancel()
		cancel()
	}
	return n
}

// frameDocument is the document of the frame of ctx, whole.
func frameDocument(ctx context.Context) (*cdp.Node, error) {
	depth := int64(-1)
	pierce := true
	res, err := chromedp.Call(ctx, dom.GetDocument, dom.GetDocumentParams{Depth: &depth, Pierce: &pierce})
	if err != nil {
		return nil, err
	}
	return res.Root, nil
}

// domFrame waits for the player's DOM iframe to hold the page of step n
// (at) with a node has accepts, and returns the frame's document and the
// page coordinates of its content's top left corner. It reads the frame
// through CDP: the frame is sandboxed with an opaque origin, so the page
// itself cannot.
func (p *uiTab) domFrame(n int, at string, has func(*cdp.Node) bool) (doc *cdp.Node, x0, y0 float64) {
	p.t.Helper()
	want := fmt.Sprintf("/steps/%d/dom?at=%s", n, at)
	deadline := time.Now().Add(20 * time.Second)
	for {
		root := p.document()
		frame := cdpFind(root, byID("iframe", "dom-frame"))
		if frame == nil {
			p.t.Fatal("no #dom-frame")
		}
		src, _ := cdpAttr(frame, "src")
		if sb, ok := cdpAttr(frame, "sandbox"); !ok || sb != "" {
			p.t.Fatalf("#dom-frame sandbox=%q (present %v): want an empty sandbox attribute", sb, ok)
		}
		doc = nil
		if strings.Contains(src, want) {
			if frame.ContentDocument != nil {
				doc = frame.ContentDocument // the frame shares the page's process
			} else {
				p.inFrames(want, func(ctx context.Context, _ *target.Info) {
					if d, err := frameDocument(ctx); err == nil && cdpFind(d, has) != nil {
						doc = d
					}
				})
			}
		}
		if doc != nil && cdpFind(doc, has) != nil {
			ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
			box, err := chromedp.Call(ctx, dom.GetBoxModel, dom.GetBoxModelParams{NodeID: frame.NodeID})
			cancel()
			switch {
			case err == nil:
				return doc, box.Model.Content[0], box.Model.Content[1]
			case time.Now().After(deadline):
				p.t.Fatalf("the DOM frame's box: %v", err)
			}
			// The page replaced the frame's node between reading the
			// document and asking for its box (the player re-rendered):
			// read the document again.
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the DOM frame did not show step %d %s: src %q", n, at, src)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUIPlayerDemo is the player's acceptance test on the demo's failing
// checkout, recorded in Chromium: the Pay step's network, DOM, console
// and video agree; keys and the URL follow the selection; a deep link
// selects its step; neither page logs an error; screenshots; time to
// interactive.
func TestUIPlayerDemo(t *testing.T) {
	srv, ids := demoRuns(t, "checkout-with-gift-card-fails")
	id := ids[0]
	var tl wire.Timeline
	do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps", nil).decode(t, &tl)
	var row struct {
		FirstTS int64 `json:"first_ts"`
	}
	do(t, "GET", srv.Base+"/v1/recordings/"+id, nil).decode(t, &row)
	pay, payIdx := -1, -1
	for i, s := range tl.Steps {
		if s.Action == "click" && strings.Contains(s.Target, "Pay") {
			pay, payIdx = s.Step, i
		}
	}
	if pay < 1 || payIdx < 1 {
		t.Fatalf("no Pay step after the first in %+v", tl.Steps)
	}
	// The console error the storefront logged at the Pay step.
	var payView wire.StepView
	do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/steps/%d", srv.Base, id, pay), nil).decode(t, &payView)
	wantLog := ""
	for _, e := range payView.Events {
		var c event.Console
		if e.Kind == event.KindConsole && json.Unmarshal(e.Data, &c) == nil && strings.Contains(c.Text, "checkout failed") {
			wantLog = c.Text
		}
	}
	if wantLog == "" {
		t.Fatalf("the Pay step has no \"checkout failed\" console event")
	}
	// The step whose network holds the cart socket that got the count 1.
	wsStep := -1
	for _, st := range tl.Steps {
		var v wire.StepView
		do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/steps/%d", srv.Base, id, st.Step), nil).decode(t, &v)
		for _, e := range v.Events {
			var h event.HAR
			if e.Kind == event.KindHAR && json.Unmarshal(e.Data, &h) == nil && strings.HasSuffix(h.Request.URL, "/ws/cart") {
				for _, m := range h.WebSocketMessages {
					if m.Data == `{"count":1,"type":"cart"}` && wsStep < 0 {
						wsStep = st.Step
					}
				}
			}
		}
	}
	if wsStep < 0 {
		t.Fatal("no step has the cart socket's entry with the count 1")
	}

	tab := newUITab(t, 1280, 800)

	t.Run("list", func(t *testing.T) {
		tab.t = t
		tab.open(srv.Base + "/")
		got := uiEval[map[string]any](tab, `(() => {
			const r = document.querySelector('#recordings tr[data-id]');
			return {rows: document.querySelectorAll('#recordings tr[data-id]').length,
				text: r ? r.textContent : "", verdict: r ? r.dataset.verdict : ""};
		})()`)
		if got["rows"].(float64) != 1 || got["verdict"] != "fail" || !strings.Contains(got["text"].(string), "checkout-with-gift-card-fails") {
			t.Errorf("list: %v", got)
		}
		// Retention arrives per row.
		tab.waitFor("the retention cell", `(() => { const c = document.querySelector('#recordings .retention-cell');
			return c && !c.textContent.includes("…") ? c.textContent : ""; })()`, 10*time.Second)
		// Filters go to the URL and the API.
		uiEval[bool](tab, `(document.querySelector('#filters select[name="verdict"]').value = "pass", true)`)
		tab.click(`#filters button[type="submit"]`)
		tab.waitFor("the filtered list", `location.search.includes("verdict=pass") &&
			document.querySelectorAll('#recordings tr[data-id]').length === 0 && !document.getElementById("empty").hidden ? "ok" : ""`, 10*time.Second)
		tab.open(srv.Base + "/?verdict=fail&q=GIFT_CARD_STATE")
		if v := uiEval[string](tab, `document.querySelector('#filters select[name="verdict"]').value`); v != "fail" {
			t.Errorf("verdict filter from the URL: %q", v)
		}
		// The recording matches through its failure signature (a hit of the
		// recording, no step) and its console error (a hit of a step).
		hit := tab.waitFor("search hits", `(() => { const a = document.querySelector('#search-results .hit-group .hit a[href*="?step="]');
			return a ? a.getAttribute("href") : ""; })()`, 10*time.Second)
		if !strings.HasPrefix(hit, "/r/"+id+"?step=") {
			t.Errorf("search hit links to %q", hit)
		}
		tab.screenshot("ui-list.png")
		tab.noErrors("list page")
	})

	// Before anything builds the video: without ffmpeg the server answers
	// 501, and the player shows the step's frames with the server's word.
	t.Run("frames without ffmpeg", func(t *testing.T) {
		tab.t = t
		t.Setenv("PATH", t.TempDir()) // the server's ffmpeg is "ffmpeg" on $PATH
		tab.open(fmt.Sprintf("%s/r/%s?step=%d", srv.Base, id, pay))
		tab.waitFor("the frames", `document.body.dataset.video === "frames" ? "ok" : ""`, 20*time.Second)
		note := uiEval[string](tab, `document.getElementById("frames-note").textContent`)
		if !strings.Contains(note, "FFMPEG_MISSING") || !strings.Contains(note, "apt-get install ffmpeg") {
			t.Errorf("frames note %q: want the server's code and next step", note)
		}
		src := tab.waitFor("a frame", `(() => { const i = document.getElementById("frame-img");
			return i.complete && i.naturalWidth > 0 && !i.hidden ? i.getAttribute("src") : ""; })()`, 10*time.Second)
		if !strings.Contains(src, "/v1/recordings/"+id+"/blobs/") {
			t.Errorf("frame image from %q", src)
		}
		if v := uiEval[bool](tab, `document.getElementById("video").hidden`); !v {
			t.Error("the failed video is still shown")
		}
		tab.noErrors("player page without video")
	})

	t.Run("player", func(t *testing.T) {
		tab.t = t
		tab.open(srv.Base + "/r/" + id)
		if title := uiEval[string](tab, `document.getElementById("rec-title").textContent`); strings.Contains(title, "null") ||
			strings.Contains(title, "undefined") || !strings.Contains(title, "checkout-with-gift-card-fails") {
			t.Errorf("title %q", title)
		}
		// Without ?step= the player opens at the failed step.
		if got := tab.selected(); got != pay {
			t.Errorf("opened at step %d, want the failed step %d", got, pay)
		}
		tab.click(`#steps [data-step="1"]`)
		if got := tab.selected(); got != 1 {
			t.Errorf("selected step %d after clicking step 1", got)
		}
		tab.click(fmt.Sprintf(`#steps [data-step="%d"]`, pay))
		if got := tab.selected(); got != pay {
			t.Fatalf("selected step %d after clicking step %d", got, pay)
		}
		if s := uiEval[string](tab, `location.search`); s != fmt.Sprintf("?step=%d", pay) {
			t.Errorf("location.search %q", s)
		}
		if !uiEval[bool](tab, fmt.Sprintf(`document.querySelector('#steps [data-step="%d"]').classList.contains("failed")`, pay)) {
			t.Error("the failed Pay step is not marked failed")
		}

		// Network: POST /api/checkout answered 500.
		net := tab.waitFor("the network panel", `(() => {
			const r = document.querySelector('#network tr[data-status="500"]');
			return r ? r.textContent : ""; })()`, 10*time.Second)
		if !strings.Contains(net, "POST") || !strings.Contains(net, "/api/checkout") {
			t.Errorf("network row with 500: %q", net)
		}
		tab.click(`#network tr[data-status="500"]`)
		detail := uiEval[string](tab, `document.getElementById("network-detail").hidden ? "" : document.getElementById("network-detail").textContent`)
		if !strings.Contains(detail, "Request headers") || !strings.Contains(detail, "GIFT_CARD_STATE") {
			t.Errorf("request details: %.500q", detail)
		}

		// Network: the cart badge's WebSocket shows its messages (the
		// count the server pushed when the kettle went into the cart).
		if wsStep > 0 {
			tab.click(fmt.Sprintf(`#steps [data-step="%d"]`, wsStep))
			idx := tab.waitFor("the socket's row", `(() => {
				const r = Array.from(document.querySelectorAll('#network tr[data-index]')).find((r) => r.textContent.includes("/ws/cart"));
				return r ? r.dataset.index : ""; })()`, 10*time.Second)
			tab.click(fmt.Sprintf(`#network tr[data-index="%s"]`, idx))
			detail := uiEval[string](tab, `document.getElementById("network-detail").hidden ? "" : document.getElementById("network-detail").textContent`)
			if !strings.Contains(detail, "WebSocket messages") || !strings.Contains(detail, `{"count":1,"type":"cart"}`) || !strings.Contains(detail, "received") {
				t.Errorf("the socket's details: %.800q", detail)
			}
			tab.click(fmt.Sprintf(`#steps [data-step="%d"]`, pay))
		}

		// Console: the storefront's error, with its source-mapped stack.
		logs := uiEval[string](tab, `Array.from(document.querySelectorAll('#console .entry[data-level="error"]')).map(e => e.textContent).join("\n")`)
		if !strings.Contains(logs, wantLog) || !strings.Contains(logs, "src/app.js") {
			t.Errorf("console panel %q: want %q with its mapped stack", logs, wantLog)
		}

		// Receipt: failed, APP_ERROR, with the server's next step.
		receipt := uiEval[string](tab, `document.getElementById("receipt").textContent`)
		if !strings.Contains(receipt, "APP_ERROR") || !strings.Contains(receipt, "failed") {
			t.Errorf("receipt: %q", receipt)
		}

		// DOM: the checkout form, the card number masked.
		doc, _, _ := tab.domFrame(pay, "after", byID("form", "checkout-form"))
		form := cdpFind(doc, byID("form", "checkout-form"))
		card := cdpFind(form, byID("input", "card-number"))
		if card == nil {
			t.Fatal("no input#card-number in the DOM frame's checkout form")
		}
		if v, _ := cdpAttr(card, "value"); strings.ContainsAny(v, "0123456789") {
			t.Errorf("card number value %q in the DOM frame: want it masked", v)
		}
		// Before the step, too.
		tab.click(`#dom-at [data-at="before"]`)
		tab.domFrame(pay, "before", byID("form", "checkout-form"))
		tab.click(`#dom-at [data-at="after"]`)

		// Video: the time sits in the Pay step's chapter.
		s := tl.Steps[payIdx]
		start, end := float64(s.StartTS-row.FirstTS)/1e9, float64(s.EndTS-row.FirstTS)/1e9
		vt := uiEval[float64](tab, `new Promise((resolve, reject) => {
			const v = document.getElementById("video");
			const t0 = Date.now();
			(function poll() {
				if (v.readyState >= 1 && !v.seeking && v.dataset.step === "`+fmt.Sprint(pay)+`") return resolve(v.currentTime);
				if (document.body.dataset.video === "frames") return reject(new Error("no video: " + document.getElementById("frames-note").textContent));
				if (Date.now() - t0 > 150000) return reject(new Error("video not ready"));
				setTimeout(poll, 50);
			})();
		})`)
		if vt < start || vt > end || math.IsNaN(vt) {
			t.Errorf("video at %.3fs, Pay step's chapter [%.3f, %.3f]", vt, start, end)
		}

		// Keys: k goes back a step, j forward; the URL follows.
		prev, next := tl.Steps[payIdx-1].Step, pay
		tab.press("k")
		tab.waitFor("k", fmt.Sprintf(`location.search === "?step=%d" ? "ok" : ""`, prev), 5*time.Second)
		if got := tab.selected(); got != prev {
			t.Errorf("after k: step %d, want %d", got, prev)
		}
		tab.press("j")
		tab.waitFor("j", fmt.Sprintf(`location.search === "?step=%d" ? "ok" : ""`, next), 5*time.Second)
		if got := tab.selected(); got != next {
			t.Errorf("after j: step %d, want %d", got, next)
		}
		// Arrow keys do the same.
		tab.press(kb.ArrowUp)
		tab.waitFor("ArrowUp", fmt.Sprintf(`location.search === "?step=%d" ? "ok" : ""`, prev), 5*time.Second)
		tab.press(kb.ArrowDown)
		tab.waitFor("ArrowDown", fmt.Sprintf(`location.search === "?step=%d" ? "ok" : ""`, next), 5*time.Second)

		// Playing the video moves the selection along.
		last := tl.Steps[len(tl.Steps)-1]
		lastStart := float64(last.StartTS-row.FirstTS) / 1e9
		uiEval[bool](tab, fmt.Sprintf(`(() => { const v = document.getElementById("video"); v.muted = true;
			v.currentTime = %f; v.play().catch(() => {}); return true; })()`, lastStart+0.01))
		tab.waitFor("the selection to follow the video", fmt.Sprintf(
			`document.querySelector("#steps button.selected") && document.querySelector("#steps button.selected").dataset.step === "%d" ? "ok" : ""`,
			last.Step), 15*time.Second)
		uiEval[bool](tab, `(document.getElementById("video").pause(), true)`)

		// Reports and evidence.
		reports := uiEval[string](tab, `document.getElementById("reports-h").parentElement.textContent`)
		for _, want := range []string{"Redaction", "Retention", "failing", "HAR", "Bundle", "Attestation", "WebM"} {
			if !strings.Contains(reports, want) {
				t.Errorf("reports panel lacks %q: %.400q", want, reports)
			}
		}
		links := uiEval[[]string](tab, `Array.from(document.querySelectorAll("#downloads a")).map(a => a.getAttribute("href"))`)
		for _, want := range []string{"/har", "/video.webm", "/bundle", "/attestation"} {
			found := false
			for _, l := range links {
				found = found || strings.HasSuffix(l, want)
			}
			if !found {
				t.Errorf("no download link for %s in %v", want, links)
			}
		}

		// Back on the Pay step for the picture.
		tab.click(fmt.Sprintf(`#steps [data-step="%d"]`, pay))
		tab.domFrame(pay, "after", byID("form", "checkout-form"))
		tab.screenshot("ui-player.png")
		tab.noErrors("player page")
	})

	t.Run("deep link", func(t *testing.T) {
		tab.t = t
		tab.open(srv.Base + "/r/" + id + "?step=3")
		if got := tab.selected(); got != 3 {
			t.Errorf("?step=3 selected step %d", got)
		}
		tab.domFrame(3, "after", func(n *cdp.Node) bool { return strings.EqualFold(n.LocalName, "body") })
		tab.noErrors("player page, deep link")
	})

	t.Run("unknown recording", func(t *testing.T) {
		tab.t = t
		tab.do("open", chromedp.Navigate(srv.Base+"/r/"+strings.Repeat("0", len(id))))
		if state := tab.waitFor("the page to give up", `(document.body && document.body.dataset.ready) || ""`, 20*time.Second); state != "error" {
			t.Errorf("ready=%q for an unknown recording", state)
		}
		msg := uiEval[string](tab, `document.getElementById("error").hidden ? "" : document.getElementById("error").textContent`)
		if !strings.Contains(msg, "RECORDING_NOT_FOUND") || !strings.Contains(msg, "next:") {
			t.Errorf("error box %q: want the server's code and next step", msg)
		}
		tab.noErrors("player page, unknown recording")
	})

	t.Run("narrow", func(t *testing.T) {
		tab.t = t
		tab.viewport(420, 800)
		tab.open(fmt.Sprintf("%s/r/%s?step=%d", srv.Base, id, pay))
		cols := uiEval[string](tab, `getComputedStyle(document.getElementById("player")).display`)
		if cols != "block" {
			t.Errorf("narrow window: the player is display %q, want one column (block)", cols)
		}
		tab.domFrame(pay, "after", byID("form", "checkout-form"))
		tab.screenshot("ui-player-narrow.png")
		tab.noErrors("player page, narrow")
		tab.viewport(1280, 800)
	})

	t.Run("time to interactive", func(t *testing.T) {
		tab.t = t
		var ms []float64
		for range 3 {
			tab.open(srv.Base + "/r/" + id)
			ms = append(ms, uiEval[float64](tab, `performance.getEntriesByName("flightrec-ready")[0].startTime`))
		}
		sort.Float64s(ms)
		t.Logf("player time to interactive: median %.0f ms of %v", ms[1], ms)
		tab.noErrors("player page, reloads")
	})

	tab.mu.Lock()
	defer tab.mu.Unlock()
	if len(tab.dialogs) > 0 {
		t.Errorf("dialogs opened: %v", tab.dialogs)
	}
}

// hostileDOM is a full snapshot whose page tries every way to run script.
const hostileDOM = `{"type":2,"data":{"node":{"type":0,"id":1,"childNodes":[
 {"type":1,"id":2,"name":"html","publicId":"","systemId":""},
 {"type":2,"id":3,"tagName":"html","attributes":{},"childNodes":[
  {"type":2,"id":4,"tagName":"head","attributes":{},"childNodes":[
   {"type":2,"id":5,"tagName":"script","attributes":{},"childNodes":[{"type":3,"id":6,"textContent":"window.__pwned=1;document.documentElement.dataset.pwned=1;alert('head')"}]},
   {"type":2,"id":7,"tagName":"meta","attributes":{"http-equiv":"refresh","content":"0;url=javascript:window.__pwned=1"},"childNodes":[]}]},
  {"type":2,"id":8,"tagName":"body","attributes":{"onload":"window.__pwned=1;alert('onload')"},"childNodes":[
   {"type":2,"id":9,"tagName":"h1","attributes":{"id":"hostile"},"childNodes":[{"type":3,"id":10,"textContent":"Hostile page"}]},
   {"type":2,"id":11,"tagName":"script","attributes":{},"childNodes":[{"type":3,"id":12,"textContent":"window.__pwned=1;document.documentElement.dataset.pwned=1;alert('body')"}]},
   {"type":2,"id":13,"tagName":"img","attributes":{"src":"x","onerror":"window.__pwned=1;document.documentElement.dataset.pwned=1;alert('img')"},"childNodes":[]},
   {"type":2,"id":14,"tagName":"a","attributes":{"id":"evil-link","href":"javascript:window.__pwned=1;document.documentElement.dataset.pwned=1;alert('link')","style":"display:block;width:600px;height:120px;font-size:40px;background:#fee"},"childNodes":[{"type":3,"id":15,"textContent":"click me"}]},
   {"type":2,"id":16,"tagName":"iframe","attributes":{"id":"evil-frame","srcdoc":"<script>parent.__pwned=1;window.__pwned=1;alert('srcdoc')</script>"},"childNodes":[]},
   {"type":2,"id":17,"tagName":"div","attributes":{"id":"evil-div","onclick":"window.__pwned=1;alert('div')","onmouseover":"window.__pwned=1","style":"width:600px;height:120px;background:#eef"},"childNodes":[{"type":3,"id":18,"textContent":"hover and click"}]},
   {"type":2,"id":19,"tagName":"form","attributes":{"action":"javascript:window.__pwned=1"},"childNodes":[
    {"type":2,"id":20,"tagName":"button","attributes":{"id":"evil-submit","formaction":"javascript:window.__pwned=1"},"childNodes":[{"type":3,"id":21,"textContent":"submit"}]}]},
   {"type":2,"id":22,"tagName":"svg","isSVG":true,"attributes":{"onload":"window.__pwned=1"},"childNodes":[
    {"type":2,"id":23,"tagName":"script","isSVG":true,"attributes":{},"childNodes":[{"type":3,"id":24,"textContent":"window.__pwned=1"}]}]}]}]}]},
 "initialOffset":{"left":0,"top":0}},"timestamp":%d}`

// hostileRecording ingests, by hand, a recording whose every channel
// carries markup and script: the DOM (above), console text, a HAR URL and
// headers, a receipt's target. It returns its id.
func hostileRecording(t *testing.T, base string) string {
	t.Helper()
	id := openRec(t, base)
	ts := time.Now().Add(-time.Minute).UnixNano()
	ms := ts / 1e6
	evil := `<img src=x onerror="window.__pwned=1;alert('text')"><script>window.__pwned=1</script>`
	mk := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	evs := []event.Envelope{
		{Step: 1, Kind: event.KindDOM, Data: json.RawMessage(fmt.Sprintf(`{"type":4,"data":{"href":"http://evil.test/","width":1280,"height":800},"timestamp":%d}`, ms))},
		{Step: 1, Kind: event.KindDOM, Data: json.RawMessage(fmt.Sprintf(hostileDOM, ms+1))},
		{Step: 1, Kind: event.KindConsole, Data: mk(event.Console{Level: "error", Text: evil, URL: "javascript:window.__pwned=1",
			Stack: []event.StackFrame{{Function: evil, URL: "javascript:alert(1)", Line: 1}}})},
		{Step: 1, Kind: event.KindHAR, Data: mk(map[string]any{"startedDateTime": "2026-11-30T10:00:00.000Z", "time": 3.5,
			"request": map[string]any{"method": "GET", "url": "http://evil.test/\"><script>window.__pwned=1</script>", "httpVersion": "HTTP/1.1",
				"cookies": []any{}, "headers": []any{map[string]string{"name": "X-Evil", "value": evil}}, "queryString": []any{}, "headersSize": -1, "bodySize": 0},
			"response": map[string]any{"status": 500, "statusText": evil, "httpVersion": "HTTP/1.1", "cookies": []any{},
				"headers": []any{map[string]string{"name": "Content-Type", "value": "text/html"}},
				"content": map[string]any{"size": len(evil), "mimeType": "text/html", "text": evil}, "redirectURL": "", "headersSize": -1, "bodySize": len(evil)}})},
		{Step: 1, Kind: event.KindSnapshot, Data: mk(event.Snapshot{View: "interactive", When: "after", Text: evil})},
		{Step: 1, Kind: event.KindCheck, Data: mk(map[string]any{"type": "ui", "target": evil, "expect": evil, "actual": evil, "passed": false})},
		{Step: 1, Kind: event.KindReceipt, Data: mk(map[string]any{"step": 1, "action": map[string]any{"verb": "click",
			"target": map[string]string{"name": evil}}, "outcome": "failed",
			"error": map[string]string{"code": "APP_ERROR", "message": evil, "next": evil}})},
		{Step: 2, Kind: event.KindReceipt, Data: mk(map[string]any{"step": 2, "action": map[string]any{"verb": "wait"}, "outcome": "done"})},
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
		evs[i].TS = ts + int64(i)*int64(time.Millisecond)
	}
	acked(t, appendBatch(t, base, id, evs))
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, id, uint64(len(evs)))
	return id
}

// hugeRecording ingests a recording whose step 2 logged one 5 MB console
// message and whose step 3 made 10,000 requests. It returns its id.
func hugeRecording(t *testing.T, base string) string {
	t.Helper()
	id := openRec(t, base)
	ts := time.Now().Add(-time.Minute).UnixNano()
	var evs []event.Envelope
	add := func(step int, kind event.Kind, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, event.Envelope{Seq: uint64(len(evs) + 1), TS: ts + int64(len(evs))*int64(time.Microsecond), Step: step, Kind: kind, Data: b})
	}
	receipt := func(step int, verb string) {
		add(step, event.KindReceipt, map[string]any{"step": step, "action": map[string]any{"verb": verb}, "outcome": "done"})
	}
	receipt(1, "goto")
	big := strings.Repeat("a very long console message ", 5<<20/28)
	add(2, event.KindConsole, event.Console{Level: "error", Text: "HUGE:" + big})
	add(2, event.KindConsole, event.Console{Level: "log", Text: "a short one"})
	receipt(2, "click")
	for i := range 10_000 {
		status := 200
		if i%1000 == 999 {
			status = 503
		}
		add(3, event.KindHAR, map[string]any{"startedDateTime": "2026-11-30T10:00:00.000Z", "time": 1.5,
			"request": map[string]any{"method": "GET", "url": fmt.Sprintf("https://app.example/api/item/%d", i), "httpVersion": "HTTP/1.1",
				"cookies": []any{}, "headers": []any{}, "queryString": []any{}, "headersSize": -1, "bodySize": 0},
			"response": map[string]any{"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": []any{}, "headers": []any{},
				"content": map[string]any{"size": 2, "mimeType": "application/json", "text": "{}"}, "redirectURL": "", "headersSize": -1, "bodySize": 2}})
	}
	receipt(3, "scroll")
	receipt(4, "wait")
	for i := 0; i < len(evs); i += 2500 {
		acked(t, appendBatch(t, base, id, evs[i:min(i+2500, len(evs))]))
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, id, uint64(len(evs)))
	return id
}

// pwnedAnywhere evaluates, in every execution context the tab has seen
// (the page, its frames, their isolated worlds), whether a hostile
// payload ran: window.__pwned set, or the document marked.
func (p *uiTab) pwnedAnywhere() (bad []string, iframes int) {
	p.t.Helper()
	p.mu.Lock()
	ids := make([]runtime.ExecutionContextID, 0, len(p.contexts))
	for id := range p.contexts {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	checked := 0
	for _, cid := range ids {
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		byValue := true
		res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{
			Expression:    `[typeof window.__pwned, document.documentElement ? (document.documentElement.dataset.pwned || "") : "", location.href]`,
			ContextID:     cid,
			ReturnByValue: &byValue,
		})
		cancel()
		if err != nil || res.Result == nil {
			continue // a context gone with its document
		}
		checked++
		var v []string
		if err := json.Unmarshal(res.Result.Value, &v); err != nil || len(v) != 3 {
			bad = append(bad, fmt.Sprintf("context %d: %s", cid, res.Result.Value))
			continue
		}
		if v[0] != "undefined" || v[1] != "" {
			bad = append(bad, fmt.Sprintf("context %d (%s): __pwned %s, marked %q", cid, v[2], v[0], v[1]))
		}
	}
	// And in every frame of the tree, through an isolated world: a DOM
	// marker any payload would set is visible from every world.
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		p.t.Fatalf("Page.getFrameTree: %v", err)
	}
	var tree0 []*page.FrameTree
	var walk func(*page.FrameTree)
	walk = func(f *page.FrameTree) {
		tree0 = append(tree0, f)
		for _, c := range f.ChildFrames {
			walk(c)
		}
	}
	walk(tree.FrameTree)
	frames := len(tree0)
	for _, f := range tree0 {
		w, err := chromedp.Call(ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: f.Frame.ID, WorldName: "flightrec-test"})
		if err != nil {
			continue
		}
		byValue := true
		res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{
			Expression:    `document.documentElement ? (document.documentElement.dataset.pwned || "") : ""`,
			ContextID:     w.ExecutionContextID,
			ReturnByValue: &byValue,
		})
		if err != nil || res.Result == nil {
			continue
		}
		checked++
		if s := string(res.Result.Value); s != `""` {
			bad = append(bad, fmt.Sprintf("frame %s (%s): marked %s", f.Frame.ID, f.Frame.URL, s))
		}
	}
	// Frames in their own processes (the sandboxed DOM frame): their main
	// world, and an isolated world for the DOM marker.
	iframes = p.inFrames("", func(ctx context.Context, info *target.Info) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[typeof window.__pwned, document.documentElement ? (document.documentElement.dataset.pwned || "") : "", location.href]`))
		if err == nil && len(v) == 3 {
			checked++
			if v[0] != "undefined" || v[1] != "" {
				bad = append(bad, fmt.Sprintf("iframe %s: __pwned %s, marked %q", v[2], v[0], v[1]))
			}
		} else {
			p.t.Logf("iframe %s: main world: %v", info.URL, err)
		}
		w, err := chromedp.Call(ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: cdp.FrameID(info.TargetID), WorldName: "flightrec-test"})
		if err != nil {
			p.t.Logf("iframe %s: isolated world: %v", info.URL, err)
			return
		}
		byValue := true
		res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{
			Expression:    `document.documentElement ? (document.documentElement.dataset.pwned || "") + "|" + document.querySelectorAll("script").length : "none"`,
			ContextID:     w.ExecutionContextID,
			ReturnByValue: &byValue,
		})
		if err != nil || res.Result == nil {
			return
		}
		checked++
		if s := string(res.Result.Value); s != `"|0"` {
			bad = append(bad, fmt.Sprintf("iframe %s: marker|scripts %s", info.URL, s))
		}
	})
	if checked < 2 {
		p.t.Errorf("checked only %d contexts", checked)
	}
	p.t.Logf("checked %d execution contexts: %d frames in the page's process, %d in their own", checked, frames, iframes)
	return bad, iframes
}

// TestUIPlayerHostile opens recordings made to break the player: a page
// that tries every way to run script (none runs, in any frame, and no
// dialog opens), a 5 MB console message and 10,000 requests in one step
// (the player stays responsive and keeps the DOM small).
func TestUIPlayerHostile(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	hostile := hostileRecording(t, srv.Base)
	huge := hugeRecording(t, srv.Base)
	tab := newUITab(t, 1280, 800)

	t.Run("script", func(t *testing.T) {
		tab.t = t
		tab.open(srv.Base + "/r/" + hostile + "?step=1")
		doc, x0, y0 := tab.domFrame(1, "after", byID("a", "evil-link"))
		if s := cdpFind(doc, func(n *cdp.Node) bool { return strings.EqualFold(n.LocalName, "script") }); s != nil {
			t.Error("a script element reached the DOM frame")
		}
		// Click the link, the div and the button inside the frame, where
		// the user would: the centres of their boxes, in page coordinates.
		ids := []string{"evil-link", "evil-div", "evil-submit"}
		var points [][2]float64
		boxes := func(ctx context.Context, d *cdp.Node, dx, dy float64) {
			for _, id := range ids {
				n := cdpFind(d, func(n *cdp.Node) bool { v, _ := cdpAttr(n, "id"); return v == id })
				if n == nil {
					continue // left out by the rendering
				}
				box, err := chromedp.Call(ctx, dom.GetBoxModel, dom.GetBoxModelParams{NodeID: n.NodeID})
				if err != nil || len(box.Model.Content) < 8 {
					continue
				}
				q := box.Model.Content
				points = append(points, [2]float64{dx + (q[0]+q[4])/2, dy + (q[1]+q[5])/2})
			}
		}
		if tab.inFrames("/steps/1/dom?at=after", func(ctx context.Context, _ *target.Info) {
			if d, err := frameDocument(ctx); err == nil {
				boxes(ctx, d, x0, y0)
			}
		}) == 0 {
			boxes(tab.ctx, tab.document(), 0, 0) // an in-process frame: page coordinates already
		}
		if len(points) == 0 {
			t.Fatal("nothing to click in the DOM frame")
		}
		for _, pt := range points {
			tab.do("click in the DOM frame", chromedp.MouseClickXY(pt[0], pt[1]))
		}
		// Click into the frame's area as a user would, then wait a moment
		// for anything deferred.
		tab.click("#dom-frame")
		time.Sleep(500 * time.Millisecond)
		bad, iframes := tab.pwnedAnywhere()
		if len(bad) > 0 {
			t.Errorf("a hostile payload ran: %v", bad)
		}
		inProcess := uiEval[bool](tab, `(() => { try { return !!document.getElementById("dom-frame").contentDocument; } catch (e) { return false; } })()`)
		if inProcess {
			t.Error("the page can reach into the DOM frame's document: want an opaque origin")
		}
		if iframes == 0 && cdpFind(tab.document(), byID("a", "evil-link")) == nil {
			t.Error("the DOM frame was checked neither in its own process nor in the page's")
		}
		// The detector detects: a marker set on purpose is found.
		uiEval[bool](tab, `(document.documentElement.dataset.pwned = "control", true)`)
		if control, _ := tab.pwnedAnywhere(); len(control) == 0 {
			t.Error("pwnedAnywhere did not see a marker set on purpose")
		}
		uiEval[bool](tab, `(delete document.documentElement.dataset.pwned, true)`)
		if v := uiEval[string](tab, `typeof window.__pwned`); v != "undefined" {
			t.Errorf("window.__pwned in the player: %s", v)
		}
		// Markup in every panel is text.
		for _, sel := range []string{"#console", "#network", "#receipt", "#checks", "#steps"} {
			if n := uiEval[int](tab, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel+" img, "+sel+" script")); n != 0 {
				t.Errorf("%s holds %d img/script elements", sel, n)
			}
		}
		tab.click(`#network tr[data-status="500"]`)
		if n := uiEval[int](tab, `document.querySelectorAll("#network-detail img, #network-detail script").length`); n != 0 {
			t.Errorf("the request details hold %d img/script elements", n)
		}
		tab.noErrors("hostile recording")
		tab.mu.Lock()
		if len(tab.dialogs) > 0 {
			t.Errorf("dialogs opened: %v", tab.dialogs)
		}
		tab.mu.Unlock()
	})

	t.Run("huge", func(t *testing.T) {
		tab.t = t
		tab.open(srv.Base + "/r/" + huge + "?step=2")
		// The 5 MB message is shown truncated.
		tab.waitFor("the console panel", `document.querySelector('#console .entry[data-level="error"]') ? "ok" : ""`, 15*time.Second)
		size := uiEval[int](tab, `document.getElementById("console").textContent.length`)
		if size > 20_000 {
			t.Errorf("the console panel holds %d characters of text: want the long message truncated", size)
		}
		if !uiEval[bool](tab, `document.getElementById("console").textContent.includes("HUGE:")`) {
			t.Error("the long message's start is not shown")
		}
		tab.click(`#console .entry[data-level="error"] .show-all`)
		// The whole text is there on demand, a chunk at a time.
		n := uiEval[int](tab, `document.querySelector('#console pre.full').textContent.length`)
		if n < 10_000 || n > 200_000 {
			t.Errorf("show all: %d characters in the page at once, want one chunk", n)
		}
		if uiEval[bool](tab, `!document.querySelector('#console a.save[href^="blob:"]')`) {
			t.Error("no link to save the whole message")
		}
		tab.click("#console .show-more")
		if m := uiEval[int](tab, `document.querySelector('#console pre.full').textContent.length`); m <= n {
			t.Errorf("show more: %d characters, had %d", m, n)
		}
		// 10,000 requests in step 3: select it, a bounded table, keys work.
		start := time.Now()
		tab.press("j")
		tab.waitFor("step 3's network", `document.querySelectorAll("#network tbody tr.net-row").length > 0 &&
			location.search === "?step=3" ? "ok" : ""`, 15*time.Second)
		t.Logf("selecting the step of 10,000 requests took %v", time.Since(start))
		rows := uiEval[int](tab, `document.querySelectorAll("#network tbody tr.net-row").length`)
		if rows > 200 || rows < 5 {
			t.Errorf("%d network rows rendered of 10,000: want those in view and a screenful either side", rows)
		}
		if !strings.Contains(uiEval[string](tab, `document.getElementById("network-count").textContent`), "10000") {
			t.Error("the network count does not say 10000")
		}
		// Scrolled to its end, the table shows the last requests, and
		// still only a few rows.
		uiEval[bool](tab, `(() => { const w = document.querySelector("#network .net-wrap"); w.scrollTop = w.scrollHeight; return true; })()`)
		tab.waitFor("the last request", `document.querySelector('#network tr.net-row[data-index="9999"]') ? "ok" : ""`, 15*time.Second)
		if n := uiEval[int](tab, `document.querySelectorAll("#network tbody tr.net-row").length`); n > 200 {
			t.Errorf("after scrolling to the end: %d rows in the page", n)
		}
		tab.click(`#network tr.net-row[data-status="503"]`)
		if !strings.Contains(uiEval[string](tab, `document.getElementById("network-detail").textContent`), "503") {
			t.Error("a request's detail does not open from a scrolled-to row")
		}
		start = time.Now()
		tab.press("j")
		tab.waitFor("step 4", `location.search === "?step=4" && document.querySelector('#steps button.selected[data-step="4"]') ? "ok" : ""`, 15*time.Second)
		tab.press("k")
		tab.waitFor("back to step 3", `location.search === "?step=3" && document.querySelectorAll("#network tbody tr.net-row").length > 0 ? "ok" : ""`, 15*time.Second)
		t.Logf("two key presses around the 10,000-request step took %v", time.Since(start))
		tab.noErrors("huge recording")
	})
}
