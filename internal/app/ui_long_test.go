package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/ingest"
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
	var o ingest.OpenReply
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

// BenchmarkUIPlayerInteractive opens the player on recordings of 20,
// 1,000 and 10,000 steps and reports the time to interactive (the
// flightrec-ready mark, from navigation start) and the longest main-thread
// task until the page settles, beside the goals: at 10,000 steps ready
// within 300 ms and within 1.3× of 20 steps, no task over 50 ms.
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
	tti := map[int]float64{}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			var readies, tasks []float64
			for b.Loop() {
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
				readies, tasks = append(readies, m[0]), append(tasks, m[1])
			}
			tti[n] = median(readies)
			b.ReportMetric(tti[n], "ms-to-ready")
			b.ReportMetric(median(tasks), "ms-longest-task")
			b.ReportMetric(0, "ns/op")
		})
	}
	if tti[20] > 0 && tti[10000] > 0 {
		b.Logf("ready at 10,000 steps: %.0f ms (goal ≤ 300 ms); %.2f× of 20 steps (goal ≤ 1.3×); longest task goal ≤ 50 ms",
			tti[10000], tti[10000]/tti[20])
	}
}
