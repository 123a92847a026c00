package indextest

import (
	"fmt"
	"math/rand/v2"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// baseTS is the clock the fixtures start from (unix ns).
const baseTS int64 = 1764483600000000000

// Vocabulary the generated summaries draw from. Some console texts come in
// pairs that differ only where a LIKE wildcard or escape would be, so a
// backend that lets the query's '%', '_' or '\' act as a pattern matches
// the wrong member of the pair.
var (
	verbs    = []string{"click", "fill", "press", "navigate", "select"}
	names    = []string{"Apply", "Pay now", "Email", "Search", "Next"}
	codes    = []string{"STALE_REF", "NOT_ACTIONABLE", "TIMEOUT", "NAVIGATION_FAILED"}
	apiPaths = []string{"cart", "orders", "gift", "session", "search"}
	statuses = []int{200, 200, 201, 304, 404, 500}
	levels   = []string{"log", "info", "warn", "error"}
	messages = []string{
		"Uncaught TypeError: x is undefined",
		"uncaught typeerror in pay()",
		"Failed to load resource: 404",
		"progress 100% done",
		"progress 100 done",
		"field_name is required",
		"fieldXname is required",
		`saved to C:\tmp\report`,
		"saved to C:/tmp/report",
	}
)

// genEvents returns n events of rec with seqs 1..n spread over steps steps
// (0..steps-1, non-decreasing with seq), deterministic in seed. Timestamps
// jitter, so a step's first event need not be its earliest; kinds are
// uniform over event.Kinds, so some steps have no receipt and some several;
// locators walk segments of 40 records.
func genEvents(rec string, n, steps int, seed uint64) []store.EventRow {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rows := make([]store.EventRow, n)
	var off int64
	for i := range rows {
		seg := 1 + i/40
		if i%40 == 0 {
			off = 0
		}
		length := 60 + rng.IntN(600)
		r := store.EventRow{
			Recording: rec,
			Seq:       uint64(i + 1),
			Step:      i * steps / n,
			TS:        baseTS + int64(i)*1_000_000 + rng.Int64N(3_000_000),
			Kind:      event.Kinds[rng.IntN(len(event.Kinds))],
			Size:      int64(length),
			Loc:       store.Locator{Segment: seg, Offset: off, Length: length},
		}
		off += int64(length)
		summarize(&r, rng)
		rows[i] = r
	}
	return rows
}

// summarize fills r's summary (and blob) the way ingest would for its kind.
func summarize(r *store.EventRow, rng *rand.Rand) {
	pick := func(ss []string) string { return ss[rng.IntN(len(ss))] }
	switch r.Kind {
	case event.KindReceipt:
		r.Action = pick(verbs)
		r.Text = fmt.Sprintf("button %q", pick(names))
		switch x := rng.IntN(10); {
		case x < 6:
			r.Outcome = event.OutcomeDone
		case x < 9:
			r.Outcome = event.OutcomeFailed
			r.ErrorCode = pick(codes)
			r.Text += ": covered by dialog"
		default:
			r.Outcome = event.OutcomeUnknown
			r.ErrorCode = "OUTCOME_UNKNOWN"
		}
	case event.KindHAR:
		r.URL = fmt.Sprintf("https://shop.example/api/%s/%d", pick(apiPaths), rng.IntN(1000))
		r.Method = []string{"GET", "POST"}[rng.IntN(2)]
		r.Status = statuses[rng.IntN(len(statuses))]
	case event.KindConsole:
		r.Level = pick(levels)
		r.Text = pick(messages)
		r.URL = "https://shop.example/static/app.js"
	case event.KindSnapshot:
		r.URL = "https://pv-4718.preview.example"
	case event.KindCheck:
		r.Action = "check:state"
		r.Text = "GET /api/orders?last=1"
		r.Outcome = []string{"passed", "failed"}[rng.IntN(2)]
	case event.KindFrame, event.KindScreenshot, event.KindVideo, event.KindDownload:
		r.CID = fmt.Sprintf("bafkrei%052x", rng.Uint64())
		r.Size += 20_000 + rng.Int64N(40_000)
	}
}

// receipt turns r into a receipt with a summary unique to it, so that which
// receipt a timeline reports is visible.
func receipt(r *store.EventRow, tag string) {
	r.Kind = event.KindReceipt
	r.CID, r.URL, r.Method, r.Status, r.Level = "", "", "", 0, ""
	r.Action = "click"
	r.Text = fmt.Sprintf("button %q", tag)
	r.Outcome = event.OutcomeFailed
	r.ErrorCode = "CODE_" + tag
}

// genRecordings returns n recordings with ids prefix-00..prefix-(n-1) whose
// creation times are shuffled relative to their ids, with ties (two and
// three recordings created at the same nanosecond) so that paging must
// order by id as well.
func genRecordings(prefix string, n int, seed uint64) []store.RecordingRow {
	rng := rand.New(rand.NewPCG(seed, 0x7ec))
	projects := []string{"alpha", "beta", "gamma"}
	flows := []string{"checkout", "login", "search"}
	recs := make([]store.RecordingRow, n)
	perm := rng.Perm(n)
	for i := range recs {
		r := store.RecordingRow{RecordingMeta: store.RecordingMeta{
			ID:        fmt.Sprintf("%s-%02d", prefix, i),
			Project:   projects[rng.IntN(len(projects))],
			Flow:      flows[rng.IntN(len(flows))],
			Labels:    map[string]string{"n": fmt.Sprint(i)},
			Executor:  "agent",
			CreatedAt: baseTS + int64(perm[i])*1_000_000_000,
		}}
		if rng.IntN(4) == 0 {
			r.State = store.StateOpen
		} else {
			r.State = store.StateFinished
			r.Verdict = store.Verdicts[rng.IntN(len(store.Verdicts))]
			r.FinishedAt = r.CreatedAt + 60_000_000_000
			r.Root = fmt.Sprintf("bafkrei%052x", rng.Uint64())
			if r.Verdict == "fail" {
				r.FailureSignature = []string{"POST /api/checkout 500 GIFT_CARD_STATE", "TimeoutError: waiting for #pay"}[rng.IntN(2)]
			}
		}
		recs[i] = r
	}
	if n >= 8 {
		recs[3].CreatedAt = recs[6].CreatedAt
		recs[1].CreatedAt = recs[4].CreatedAt
		recs[7].CreatedAt = recs[4].CreatedAt
	}
	return recs
}
