package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/wire"
)

// longRecording ingests a finished recording of n steps, one small
// receipt each (and a request and a console line on some), whose step
// failed fails, and returns its id. It takes a testing.TB so benchmarks
// can build one too.
func longRecording(tb testing.TB, base string, n, failed int) string {
	tb.Helper()
	post := func(path string, body []byte) []byte {
		tb.Helper()
		resp, err := http.Post(base+path, "application/json", bytes.NewReader(body))
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		if resp.StatusCode/100 != 2 {
			tb.Fatalf("POST %s: %d %s", path, resp.StatusCode, buf.Bytes())
		}
		return buf.Bytes()
	}
	var o wire.OpenReply
	json.Unmarshal(post("/v1/recordings", []byte(`{"project":"shop","flow":"long-checkout"}`)), &o)
	ts := time.Now().Add(-time.Hour).UnixNano()
	var evs []event.Envelope
	add := func(step int, kind event.Kind, data string) {
		evs = append(evs, event.Envelope{Seq: uint64(len(evs) + 1), TS: ts + int64(len(evs))*int64(time.Millisecond),
			Step: step, Kind: kind, Data: json.RawMessage(data)})
	}
	for s := 1; s <= n; s++ {
		if s%50 == 0 || s == failed {
			status := 200
			if s == failed {
				status = 500
			}
			add(s, event.KindHAR, fmt.Sprintf(`{"startedDateTime":"2026-11-30T10:00:00.000Z","time":2,"request":{"method":"POST","url":"https://shop.example/api/step/%d","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0},"response":{"status":%d,"statusText":"","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{"size":2,"mimeType":"application/json","text":"{}"},"redirectURL":"","headersSize":-1,"bodySize":2}}`, s, status))
			add(s, event.KindConsole, fmt.Sprintf(`{"level":"error","text":"step %d logged this"}`, s))
		}
		outcome := "done"
		errPart := ""
		if s == failed {
			outcome = "failed"
			errPart = `,"error":{"code":"ELEMENT_NOT_FOUND","message":"no button named Pay"}`
		}
		add(s, event.KindReceipt, fmt.Sprintf(`{"step":%d,"action":{"verb":"click","target":{"role":"button","name":"Item %d"}},"outcome":%q%s}`, s, s, outcome, errPart))
	}
	for i := 0; i < len(evs); i += 5000 {
		post("/v1/recordings/"+o.ID+"/events", testgen.NDJSON(evs[i:min(i+5000, len(evs))]))
	}
	post("/v1/recordings/"+o.ID+"/finish", []byte(`{"verdict":"fail"}`))
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/v1/recordings/" + o.ID)
		if err != nil {
			tb.Fatal(err)
		}
		var row struct {
			IndexedTo uint64 `json:"indexed_through"`
			State     string `json:"state"`
		}
		json.NewDecoder(resp.Body).Decode(&row)
		resp.Body.Close()
		if row.IndexedTo >= uint64(len(evs)) && row.State == "finished" {
			return o.ID
		}
		if time.Now().After(deadline) {
			tb.Fatalf("recording %s not indexed: %+v", o.ID, row)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// longTasks records every main-thread task over 50 ms from the start of
// each document, for the benchmark to read.
const longTasks = `window.__longtasks = [];
try { new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__longtasks.push(e.duration); })
  .observe({ type: "longtask", buffered: true }); } catch (e) {}`

// stepChange presses j and resolves to the milliseconds until the next
// step's receipt is in the page, at the frame after it arrives.
const stepChange = `new Promise((resolve) => {
  const next = Number(document.body.dataset.step) + 1, t0 = performance.now();
  document.dispatchEvent(new KeyboardEvent("keydown", { key: "j", bubbles: true }));
  const check = () => document.body.dataset.step === String(next) &&
    document.getElementById("receipt").textContent.includes("Item " + next) ? resolve(performance.now() - t0) : requestAnimationFrame(check);
  check();
})`

// BenchmarkUIPlayerInteractive opens the player on recordings of 20,
// 1,000 and 10,000 steps and reports the time to interactive (the
// flightrec-ready mark, from navigation start; the median, and the first
// open apart) and the longest main-thread task until the page settles
// (the median), and the time a step change takes (j, until the next
// step's receipt shows; the median of five per open), beside the goals:
// at 10,000 steps ready within 300 ms and within 1.3× of 20 steps, no
// task over 50 ms, a step change within 50 ms. A round (-benchtime Nx:
// N rounds) opens each size once, in turn, so the ratios compare opens
// made under the same load.
func BenchmarkUIPlayerInteractive(b *testing.B) {
	testenv.RequireChromium(b)
	srv := appserver.Start(b)
	ctx := testenv.Chromium(b)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: longTasks}); err != nil {
		b.Fatal(err)
	}
	sizes := []int{20, 1000, 10000}
	ids := map[int]string{}
	for _, n := range sizes {
		ids[n] = longRecording(b, srv.Base, n, n*7/10)
	}
	median := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	type figs struct{ ready, task, change float64 }
	var readies, tasks, changes [3][]float64
	first := map[int]float64{}
	// Each round opens the three in turn, so that the ratios compare opens
	// made under the same load (the machine is shared).
	for b.Loop() {
		for k, n := range sizes {
			if err := chromedp.Do(ctx, chromedp.Navigate(srv.Base+"/r/"+ids[n])); err != nil {
				b.Fatal(err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body && document.body.dataset.ready === "1"`,
				chromedp.WithPollingTimeout(60*time.Second))); err != nil {
				b.Fatal(err)
			}
			time.Sleep(400 * time.Millisecond) // what loads after ready, for the longest task
			m, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[performance.getEntriesByName("flightrec-ready")[0].startTime,
				Math.max(0, ...(window.__longtasks || []))]`))
			if err != nil || len(m) != 2 {
				b.Fatal(err)
			}
			if _, ok := first[n]; !ok {
				// The first open reads the timeline from the index; later
				// ones find it cached (playback/timelinecache.go).
				first[n] = m[0]
			}
			readies[k], tasks[k] = append(readies[k], m[0]), append(tasks[k], m[1])
			// A step change: j, until the next step's receipt is in the
			// page (the frame after it), five times.
			for range 5 {
				d, err := chromedp.Run(ctx, chromedp.Evaluate[float64](stepChange, chromedp.EvalAwaitPromise))
				if err != nil {
					b.Fatal(err)
				}
				changes[k] = append(changes[k], d)
			}
		}
	}
	got := map[int]figs{}
	for k, n := range sizes {
		got[n] = figs{median(readies[k]), median(tasks[k]), median(changes[k])}
		b.ReportMetric(first[n], fmt.Sprintf("ms-first-open-%d", n))
		b.ReportMetric(got[n].ready, fmt.Sprintf("ms-to-ready-%d", n))
		b.ReportMetric(got[n].task, fmt.Sprintf("ms-longest-task-%d", n))
		b.ReportMetric(got[n].change, fmt.Sprintf("ms-step-change-%d", n))
	}
	b.ReportMetric(0, "ns/op")
	for _, n := range sizes {
		b.Logf("  %6d steps: ready %7.1f ms (%.2f× of 20 steps), longest task %6.1f ms (0: none over 50 ms), step change %6.1f ms",
			n, got[n].ready, got[n].ready/got[20].ready, got[n].task, got[n].change)
	}
	big := got[10000]
	b.Logf("issue 19's goals at 10,000 steps, figure ÷ goal (≤ 1 meets it):")
	for _, g := range []struct {
		what      string
		fig, goal float64
		unit      string
	}{
		{"time to interactive", big.ready, 300, "ms"},
		{"time to interactive ÷ 20 steps'", big.ready / got[20].ready, 1.3, "×"},
		{"longest main-thread task", big.task, 50, "ms"},
		{"step change", big.change, 50, "ms"},
	} {
		verdict := "meets"
		if g.fig > g.goal {
			verdict = "MISSES"
		}
		b.Logf("  %-34s %8.2f %-2s goal ≤ %g %-2s %5.2f  %s", g.what, g.fig, g.unit, g.goal, g.unit, g.fig/g.goal, verdict)
	}
}

// TestUIPlayerLong drives the player over a recording of 10,000 steps:
// it opens at the failing step with its panes filled, j and k move, a deep
// link to step 9,000 works, scrolling reaches the last step, and the page
// holds only the step rows in view, never one per step.
func TestUIPlayerLong(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	const n, failed = 10000, 7000
	id := longRecording(t, srv.Base, n, failed)

	// The compact timeline is the whole timeline in a fraction of the
	// bytes, and names the failing step.
	full := do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps", nil)
	compact := do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps?form=compact", nil)
	var ct wire.CompactTimeline
	compact.decode(t, &ct)
	if len(ct.Step) != n || len(ct.Target) != n || ct.Step[n-1] != n || len(ct.Failed) != 1 || ct.Failed[0] != failed ||
		ct.Outcome[failed-1] != "failed" || ct.ErrorCode[failed-1] != "ELEMENT_NOT_FOUND" {
		t.Fatalf("compact timeline: %d steps, failed %v", len(ct.Step), ct.Failed)
	}
	t.Logf("timeline of %d steps: %d bytes full, %d compact", n, len(full.body), len(compact.body))
	if len(compact.body)*2 > len(full.body) {
		t.Errorf("the compact timeline is %d bytes, the full one %d: want under half", len(compact.body), len(full.body))
	}
	if r := do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps?form=tiny", nil); r.status != 400 || r.errCode(t) != "BAD_PARAMETER" {
		t.Errorf("form=tiny: %d %s", r.status, r.body)
	}
	// Pages of it: by offset; around a step; by default around the first
	// failing step. Each says where it sits and names the failures of the
	// whole timeline.
	for _, c := range []struct {
		query       string
		offset, len int
	}{
		{"offset=9900&limit=500", 9900, 100},
		{"offset=0&limit=300", 0, 300},
		// Step s is at position s-1.
		{"around=9000&limit=300", 9000 - 1 - 150, 300},
		{"around=9999&limit=300", n - 300, 300},
		{"limit=300", failed - 1 - 150, 300},
		{"around=123456&limit=300", failed - 1 - 150, 300},
	} {
		var p wire.CompactTimeline
		do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps?form=compact&"+c.query, nil).decode(t, &p)
		if p.Offset != c.offset || len(p.Step) != c.len || len(p.Target) != c.len || p.Total != n ||
			p.Step[0] != ct.Step[c.offset] || p.Target[c.len-1] != ct.Target[c.offset+c.len-1] ||
			len(p.Failed) != 1 || p.Failed[0] != failed {
			t.Errorf("page %s: offset %d, %d steps of %d, failed %v", c.query, p.Offset, len(p.Step), p.Total, p.Failed)
		}
	}
	for _, q := range []string{"limit=0", "offset=-1", "around=x", "offset=5&around=5", "limit=10001"} {
		if r := do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps?form=compact&"+q, nil); r.status != 400 || r.errCode(t) != "BAD_PARAMETER" {
			t.Errorf("page %s: %d %s", q, r.status, r.body)
		}
	}
	if r := do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps?limit=5", nil); r.status != 400 || r.errCode(t) != "BAD_PARAMETER" {
		t.Errorf("a page of the full form: %d %s", r.status, r.body)
	}

	tab := newUITab(t, 1280, 800)
	stepRows := func() int { return uiEval[int](tab, `document.querySelectorAll("#steps button.step").length`) }
	panes := func(step int) {
		t.Helper()
		tab.waitFor(fmt.Sprintf("step %d's receipt", step), fmt.Sprintf(
			`document.body.dataset.step === "%d" && document.getElementById("receipt").textContent.includes("Item %d") ? "ok" : ""`, step, step), 15*time.Second)
	}
	inView := func(step int) bool {
		return uiEval[bool](tab, fmt.Sprintf(`(() => { const b = document.querySelector('#steps button[data-step="%d"]');
			if (!b) return false; const p = document.getElementById("steps-pane").getBoundingClientRect(), r = b.getBoundingClientRect();
			return r.top >= p.top && r.bottom <= p.bottom; })()`, step))
	}

	tab.open(srv.Base + "/r/" + id)
	if got := tab.selected(); got != failed {
		t.Fatalf("opened at step %d, want the failing step %d; the list: %s", got, failed, uiEval[string](tab, `(() => {
			const p = document.getElementById("steps-pane"), b = document.querySelectorAll("#steps button.step");
			return JSON.stringify({top: p.scrollTop, sh: p.scrollHeight, ch: p.clientHeight, rows: b.length, cur: document.body.dataset.step,
				first: b[0] && b[0].dataset.step, last: b.length && b[b.length-1].dataset.step}); })()`))
	}
	panes(failed)
	if !inView(failed) {
		t.Error("the failing step's row is not in view in the step list")
	}
	if !strings.Contains(uiEval[string](tab, `document.getElementById("receipt").textContent`), "ELEMENT_NOT_FOUND") {
		t.Error("the receipt does not show the failure's code")
	}
	tab.waitFor("the failing request", `document.querySelector('#network tr.net-row[data-status="500"]') ? "ok" : ""`, 15*time.Second)
	tab.waitFor("the step's console line", fmt.Sprintf(`document.getElementById("console").textContent.includes("step %d logged this") ? "ok" : ""`, failed), 15*time.Second)
	if r := stepRows(); r >= 200 || r < 5 {
		t.Errorf("%d step rows in the page for %d steps: want those in view, under 200", r, n)
	}

	// j and k move the selection, the URL and the panes.
	tab.press("j")
	panes(failed + 1)
	tab.press("k")
	tab.press("k")
	panes(failed - 1)
	if s := uiEval[string](tab, `location.search`); s != fmt.Sprintf("?step=%d", failed-1) {
		t.Errorf("after j, k, k: location.search %q", s)
	}
	if !inView(failed - 1) {
		t.Error("the selected step's row is not in view after k")
	}

	// A deep link to step 9,000.
	tab.open(srv.Base + "/r/" + id + "?step=9000")
	if got := tab.selected(); got != 9000 {
		t.Fatalf("the deep link to step 9000 selected %d", got)
	}
	panes(9000)
	if !inView(9000) {
		t.Error("step 9000's row is not in view")
	}
	if r := stepRows(); r >= 200 {
		t.Errorf("%d step rows in the page at step 9000", r)
	}

	// Scrolling the list to its end reaches the last step, which a click
	// selects; the page still holds a few rows. The end may still be
	// placeholders when the scroll lands (the timeline's pages arrive after
	// flightrec-ready): their rows must take their place without moving
	// the view.
	uiEval[bool](tab, `(() => { const p = document.getElementById("steps-pane"); p.scrollTop = p.scrollHeight; return true; })()`)

	defer func() {
		if t.Failed() {
			t.Logf("the list: %s", uiEval[string](tab, `(() => {
			const p = document.getElementById("steps-pane"), b = document.querySelectorAll("#steps li");
			return JSON.stringify({top: p.scrollTop, sh: p.scrollHeight, ch: p.clientHeight, rows: b.length, err: document.getElementById("error").textContent,
				first: b[0] && b[0].outerHTML, last: b.length && b[b.length-2].outerHTML}); })()`))
		}
	}()
	tab.waitFor("the last step's row", fmt.Sprintf(`document.querySelector('#steps button[data-step="%d"]') ? "ok" : ""`, n), 15*time.Second)
	tab.click(fmt.Sprintf(`#steps button[data-step="%d"]`, n))
	if got := tab.selected(); got != n {
		t.Fatalf("clicking the last step's row selected %d", got)
	}
	panes(n)
	if r := stepRows(); r >= 200 {
		t.Errorf("%d step rows in the page after scrolling to the end", r)
	}
	// Once every page is in, the media timeline spans every step, in a
	// bounded number of segments.
	tab.waitFor("the timeline to the last step", fmt.Sprintf(`(() => { const s = document.querySelectorAll("#timeline .seg-step");
		return s.length && s.length <= 400 && s[0].dataset.step === "1" && s[s.length-1].dataset.last === "%d" ? "ok" : ""; })()`, n), 15*time.Second)
	// and marks the segment holding the selected step, and only it.
	for _, step := range []int{n, 5000} {
		if step != n {
			tab.open(srv.Base + "/r/" + id + fmt.Sprintf("?step=%d", step))
			panes(step)
			tab.press("j")
			step++
			panes(step)
		}
		if got := uiEval[string](tab, fmt.Sprintf(`(() => { const c = document.querySelectorAll("#timeline .seg-step.current");
			return c.length === 1 && Number(c[0].dataset.step) <= %d && %d <= Number(c[0].dataset.last) ? "ok" : c.length + " marked"; })()`, step, step)); got != "ok" {
			t.Errorf("the timeline at step %d: %s", step, got)
		}
	}
	tab.noErrors("long recording")
}
