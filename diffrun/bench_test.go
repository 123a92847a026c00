package diffrun

import (
	"fmt"
	"strings"
	"testing"
)

// benchRun is a synthetic run of n steps with every channel: six requests
// a step (ids, UUIDs, cache busters; an asset, a document every tenth
// step), console messages with addresses and ids, an interactive snapshot
// of 60-odd lines (about 2 KB) that changes every step, a check every
// fifth step, a frame per step. seed varies everything dynamic; edits
// insert retries and drop steps in b.
func benchRun(id string, n, seed int, edits bool) *Run {
	r := &Run{ID: id, Flow: "bench", State: "finished", Verdict: "pass", Origin: fmt.Sprintf("http://127.0.0.1:%d", 40000+seed)}
	base := r.Origin
	ref := seed * 100000
	for i := 1; i <= n; i++ {
		page := (i / 10) % 20
		s := Step{N: len(r.Steps) + 1, Verb: []string{"click", "fill", "wait", "press"}[i%4],
			Target: fmt.Sprintf(`button "Action %d"`, i%37), Path: fmt.Sprintf("/section/%d/page", page),
			Outcome: "done", StartTS: int64(i) * 1e9, EndTS: int64(i)*1e9 + 3e8 + int64(seed)*1e6,
			FrameCID: fmt.Sprintf("bafkrei%d-%d", seed, i)}
		for k := 0; k < 6; k++ {
			u := fmt.Sprintf("%s/api/items/%d/detail?_=%d&view=full", base, 1000*seed+i*7+k, 1767225600000+seed*31+i)
			switch k {
			case 1:
				u = fmt.Sprintf("%s/api/cart/%08x-4b1c-4d2e-9f3a-%012x/lines", base, seed*977+i, i*131+k)
			case 2:
				u = fmt.Sprintf("%s/static/app.%08x.js?v=%d", base, 0x3c1a9f20+seed, seed)
			case 3:
				u = fmt.Sprintf("https://cdn.example/img/%d.png?cb=%d", i%50, seed*i)
			}
			typ := []string{"XHR", "Fetch", "Script", "Image", "XHR", "Fetch"}[k]
			if k == 5 && i%10 == 0 {
				typ, u = "Document", fmt.Sprintf("%s/section/%d/page", base, page)
			}
			s.Requests = append(s.Requests, Request{Method: "GET", URL: u, Template: Template(u), Status: 200, Type: typ})
		}
		c := ConsoleLine{Level: "warn", Text: fmt.Sprintf("[perf] render of view %d took %dms at 0x%x", i%13, 1200+seed+i, 0x7ffe0000+seed*i)}
		c.Normalized = NormalizeText(c.Text)
		s.Console = append(s.Console, c)
		if i%7 == 0 {
			c := ConsoleLine{Level: "error", Text: fmt.Sprintf("Failed to load resource: %s/api/items/%d/detail", base, seed*1000+i)}
			c.Normalized = NormalizeText(c.Text)
			s.Console = append(s.Console, c)
		}
		if i%5 == 0 {
			s.Checks = []Check{{Type: "ui", Target: "page text", Passed: true}}
		}
		var b strings.Builder
		b.WriteString("banner\n link \"Home\" @e" + fmt.Sprint(ref+1) + "\n navigation\n")
		for k := 0; k < 8; k++ {
			fmt.Fprintf(&b, "  link \"Section %d\" @e%d\n", k, ref+10+k)
		}
		fmt.Fprintf(&b, "main\n heading \"Page %d\" level=1\n form\n", page)
		for k := 0; k < 40; k++ {
			switch k % 4 {
			case 0:
				fmt.Fprintf(&b, "  textbox \"Field %d\" value=\"entry %d\" @e%d\n", k, i/3, ref+100+k)
			case 1:
				fmt.Fprintf(&b, "  checkbox \"Option %d\" checked @e%d\n", k, ref+100+k)
			case 2:
				fmt.Fprintf(&b, "  button \"Action %d\" @e%d\n", k, ref+100+k)
			default:
				fmt.Fprintf(&b, "  link \"Item %d details\" @e%d\n", 1000+k, ref+100+k)
			}
		}
		fmt.Fprintf(&b, " status \"Saved %d\"\ncontentinfo\n link \"Privacy\" @e%d", i, ref+2)
		s.Interactive = b.String()
		ref++
		r.Steps = append(r.Steps, s)
		if edits && i%400 == 200 {
			// A retry: the same action failed first.
			retry := r.Steps[len(r.Steps)-1]
			retry.Outcome, retry.ErrorCode = "failed", "NOT_ACTIONABLE"
			r.Steps = append(r.Steps[:len(r.Steps)-1], retry, r.Steps[len(r.Steps)-1])
		}
		if edits && i%400 == 300 {
			r.Steps = r.Steps[:len(r.Steps)-1] // a skipped step
		}
	}
	for k := range r.Steps {
		r.Steps[k].N = k + 1
	}
	if edits {
		// The divergence: a request of step 1900 answers 500.
		q := &r.Steps[len(r.Steps)-100].Requests[0]
		q.Status, q.ErrorCode = 500, "INTERNAL"
	}
	return r
}

func BenchmarkDiff2000(b *testing.B) {
	x := benchRun("a", 2000, 1, false)
	y := benchRun("b", 2000, 2, true)
	var bytes int
	for _, s := range x.Steps {
		bytes += len(s.Interactive)
	}
	rep := Diff(x, y, Options{})
	if rep.FirstDivergence == nil || len(rep.Pairs) < 2000 {
		b.Fatalf("benchmark runs: %d pairs, divergence %+v", len(rep.Pairs), rep.FirstDivergence)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Diff(x, y, Options{})
	}
	b.ReportMetric(float64(bytes)/float64(len(x.Steps)), "snapshot-bytes/step")
}
