package indextest

import (
	"fmt"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// Bench runs the index benchmarks, the same data and the same queries on
// every backend, so their figures compare side by side:
//
//   - IndexEvents/batch=N: IndexEvents of N-row batches (the projector
//     sends up to 5,000) onto a growing recording, in rows/s;
//   - Timeline: the timeline of a 10,000-step recording (100,000 events)
//     among 1,000 recordings (200,000 events in all);
//   - Search/…: searches across all 1,000 recordings.
//
// open must return an empty index; Bench closes it.
func Bench(b *testing.B, open func(b *testing.B) store.Index) {
	for _, batch := range []int{1000, 5000, 50_000} {
		b.Run(fmt.Sprintf("IndexEvents/batch=%d", batch), func(b *testing.B) {
			idx := open(b)
			defer idx.Close()
			benchIndexEvents(b, idx, batch)
		})
	}

	idx := open(b)
	defer idx.Close()
	const big = "big"
	fillBench(b, idx, big)
	b.Run("Timeline/10000-steps-among-1000-recordings", func(b *testing.B) {
		for b.Loop() {
			steps, err := idx.Timeline(b.Context(), big)
			if err != nil {
				b.Fatal(err)
			}
			if len(steps) != 10_000 {
				b.Fatalf("%d steps, want 10000", len(steps))
			}
		}
	})
	for _, c := range []struct {
		name string
		q    store.SearchQuery
		want int
	}{
		// A rare URL: a scan of all rows that finds a few.
		{"URL-rare", store.SearchQuery{URL: "/orders/77777/", Limit: 100}, 1},
		// Case-folded text found in every row: the first page of many.
		{"Text-common", store.SearchQuery{Text: "cannot read PROPERTIES", Limit: 100}, 100},
		// A project's failed requests.
		{"Project-status", store.SearchQuery{Project: "p3", Status: 500, Limit: 100}, 100},
	} {
		b.Run("Search/"+c.name, func(b *testing.B) {
			for b.Loop() {
				rows, err := idx.Search(b.Context(), c.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(rows) != c.want {
					b.Fatalf("%d rows, want %d", len(rows), c.want)
				}
			}
		})
	}
}

func benchIndexEvents(b *testing.B, idx store.Index, batch int) {
	ctx := b.Context()
	// The rows are made once; each batch renumbers them (only seq, step
	// and locator change), so the figure is IndexEvents', not fmt's.
	rows := make([]store.EventRow, batch)
	for i := range rows {
		rows[i] = BenchRow("bench", uint64(i+1), 0)
	}
	next := uint64(1)
	for b.Loop() {
		for i := range rows {
			seq := next + uint64(i)
			rows[i].Seq, rows[i].Step = seq, int(seq/100)
			rows[i].Loc.Segment, rows[i].Loc.Offset = 1+int(seq/10000), int64(seq%10000)*400
		}
		next += uint64(batch)
		if err := idx.IndexEvents(ctx, "bench", rows, next-1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "rows/s")
}

// fillBench indexes 999 recordings of 100 events (10 steps each) and one,
// big, of 10,000 steps of 10 events, in 5,000-row batches.
func fillBench(b *testing.B, idx store.Index, big string) {
	ctx := b.Context()
	index := func(id string, project string, n, perStep int) {
		if err := idx.PutRecording(ctx, store.RecordingRow{RecordingMeta: store.RecordingMeta{
			ID: id, Project: project, CreatedAt: baseTS}, State: store.StateFinished}); err != nil {
			b.Fatal(err)
		}
		rows := make([]store.EventRow, 0, 5000)
		for seq := uint64(1); seq <= uint64(n); seq++ {
			rows = append(rows, BenchRow(id, seq, int(seq-1)/perStep))
			if len(rows) == cap(rows) || seq == uint64(n) {
				if err := idx.IndexEvents(ctx, id, rows, seq); err != nil {
					b.Fatal(err)
				}
				rows = rows[:0]
			}
		}
	}
	// 999 small recordings share batches' worth of work poorly one by one,
	// but that is what the projector does too.
	for i := range 999 {
		index(fmt.Sprintf("small-%03d", i), fmt.Sprintf("p%d", i%10), 100, 10)
	}
	index(big, "p0", 100_000, 10)
}

// BenchRow is an event with a summary of about 300 bytes, like a HAR entry
// or console message of a real recording: every fifth a HAR entry, one in
// fifty a receipt.
func BenchRow(rec string, seq uint64, step int) store.EventRow {
	kinds := []event.Kind{event.KindHAR, event.KindConsole, event.KindDOM, event.KindFrame, event.KindSnapshot}
	k := kinds[seq%uint64(len(kinds))]
	if seq%50 == 0 {
		k = event.KindReceipt
	}
	r := store.EventRow{
		Recording: rec, Seq: seq, Step: step, Kind: k,
		TS:   baseTS + int64(seq)*1_000_000,
		Size: 400,
		Loc:  store.Locator{Segment: 1 + int(seq/10000), Offset: int64(seq%10000) * 400, Length: 400},
		Summary: event.Summary{
			URL:    fmt.Sprintf("https://pv-4718.preview.example/api/orders/%d/items?page=%d&sort=created_at", seq, seq%7),
			Method: "GET", Status: 200, Level: "info",
			Text: fmt.Sprintf("Uncaught TypeError: Cannot read properties of undefined (reading 'total') at pay (https://pv-4718.preview.example/static/app.%d.js:10:4) while rendering the checkout summary for order %d", seq%13, seq),
		},
	}
	if seq%10 == 3 {
		r.Status = 500
	}
	if k == event.KindFrame {
		r.CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	}
	if k == event.KindReceipt {
		r.Action, r.Outcome = "click", event.OutcomeDone
	}
	return r
}

// BenchRows is n BenchRows of recording rec from seq from, 100 to a step.
func BenchRows(rec string, from uint64, n int) []store.EventRow {
	rows := make([]store.EventRow, n)
	for i := range rows {
		seq := from + uint64(i)
		rows[i] = BenchRow(rec, seq, int(seq/100))
	}
	return rows
}
