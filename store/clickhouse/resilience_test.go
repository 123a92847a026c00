package clickhouse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// TestClickHouseOutage runs a server on the ClickHouse index while
// clickhouse-server is down (the server must start all the same), then
// stops it (SIGTERM) again while a recording is ingested over loopback:
// mid-stream, and around the finish. Every acknowledgement must succeed,
// and once ClickHouse is back the index must equal the log: the same
// events, counted per step and per kind.
func TestClickHouseOutage(t *testing.T) {
	dsn, stopCH, startCH := testenv.StartClickHouse(t)
	stopCH() // down before the server starts: nothing is created yet
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Store.Index = dsn
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer func() {
		srv.Close()
		a.Close()
	}()

	evs := testgen.Recording(testgen.Options{Seed: 55, Steps: 150, EventsPerStep: 9, FrameBytes: 1500})
	id := openRecording(t, srv.URL)
	const per = 25
	var batches [][]event.Envelope
	for from := 0; from < len(evs); from += per {
		batches = append(batches, evs[from:min(from+per, len(evs))])
	}
	down := true
	for i, b := range batches {
		switch i {
		case len(batches) / 6:
			startCH()
			down = false
		case len(batches) / 3:
			stopCH() // the projector is inserting the batches just acknowledged
			down = true
		case 2 * len(batches) / 3:
			if lag := a.Proj.Lag(); lag == 0 {
				t.Error("nothing waits for the index after acknowledging batches with ClickHouse down")
			}
			startCH()
			down = false
		}
		if got := appendEvents(t, srv.URL, id, b); got.AckedThrough != b[len(b)-1].Seq {
			t.Fatalf("batch %d (ClickHouse down: %v): acked through %d, want %d", i, down, got.AckedThrough, b[len(b)-1].Seq)
		}
	}
	// A second outage around the finish: the recording's final row waits
	// in the projector too.
	stopCH()
	if r := post(t, srv.URL+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish with ClickHouse down: %d %s", r.status, r.body)
	}
	startCH()

	n := uint64(len(evs))
	deadline := time.Now().Add(90 * time.Second)
	for {
		rec, err := a.Index.Recording(t.Context(), id)
		if err == nil && rec.IndexedTo == n && rec.State == store.StateFinished && rec.Events == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index did not catch up: %+v, %v (lag %d)", rec, err, a.Proj.Lag())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if failed := indexErrors(t, a); failed == 0 {
		t.Error("no index write failed: ClickHouse was not down while the projector wrote")
	} else {
		t.Logf("%.0f index writes failed and were retried", failed)
	}
	compareWithLog(t, a.Store, a.Index, id, n)
}

// indexErrors reads the server's count of failed index writes.
func indexErrors(t *testing.T, a *app.App) float64 {
	t.Helper()
	mfs, err := a.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "flightrec_index_errors_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no flightrec_index_errors_total metric")
	return 0
}

// compareWithLog checks that the index holds exactly the log: per step,
// the count of each kind, the seq range and the time range; and every
// event, once.
func compareWithLog(t *testing.T, st *store.Store, idx store.Index, id string, n uint64) {
	t.Helper()
	type stepTotals struct {
		counts      map[event.Kind]int64
		first, last uint64
		start, end  int64
	}
	want := map[int]*stepTotals{}
	kinds := map[event.Kind]int64{}
	var seqs []uint64
	if _, err := st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		s := want[r.Step]
		if s == nil {
			s = &stepTotals{counts: map[event.Kind]int64{}, first: r.Seq, start: r.TS, end: r.TS}
			want[r.Step] = s
		}
		s.counts[r.Kind]++
		s.last = r.Seq
		s.start, s.end = min(s.start, r.TS), max(s.end, r.TS)
		kinds[r.Kind]++
		seqs = append(seqs, r.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if uint64(len(seqs)) != n {
		t.Fatalf("the log holds %d events, want %d", len(seqs), n)
	}
	tl, err := idx.Timeline(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl) != len(want) {
		t.Errorf("timeline has %d steps, the log %d", len(tl), len(want))
	}
	gotKinds := map[event.Kind]int64{}
	for _, s := range tl {
		w := want[s.Step]
		if w == nil {
			t.Errorf("step %d is in the index, not in the log", s.Step)
			continue
		}
		var total int64
		for _, c := range w.counts {
			total += c
		}
		if !maps.Equal(s.Counts, w.counts) || s.Events != total || s.FirstSeq != w.first || s.LastSeq != w.last ||
			s.StartTS != w.start || s.EndTS != w.end {
			t.Errorf("step %d: index %+v, log %+v (%d events)", s.Step, s, *w, total)
		}
		for k, c := range s.Counts {
			gotKinds[k] += c
		}
	}
	if !maps.Equal(gotKinds, kinds) {
		t.Errorf("events per kind: index %v, log %v", gotKinds, kinds)
	}
	var got []uint64
	for q := (store.EventQuery{Recording: id, Limit: 500}); ; {
		page, err := idx.Events(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			got = append(got, e.Seq)
		}
		if len(page) < q.Limit {
			break
		}
		q.AfterSeq = page[len(page)-1].Seq
	}
	if fmt.Sprint(got) != fmt.Sprint(seqs) {
		t.Errorf("the index lists %d events, the log %d (or in another order)", len(got), len(seqs))
	}
	t.Logf("index equals the log: %d events, %d steps, kinds %v", n, len(tl), kinds)
}

// TestReindex rebuilds a ClickHouse index from the logs and manifests of a
// data directory that a server on the embedded index wrote, the way
// `flightrec reindex --index clickhouse://…` does (StoreConfig.Open, then
// Store.Reindex), and checks that both backends then answer the same
// queries alike and that the index equals the log.
func TestReindex(t *testing.T) {
	dsn := testenv.ClickHouse(t)
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	recs := map[string][]event.Envelope{}
	for i, o := range []testgen.Options{
		{Seed: 1, Steps: 40, EventsPerStep: 7, FrameBytes: 800},
		{Seed: 2, Steps: 12, EventsPerStep: 3},
	} {
		evs := testgen.Recording(o)
		id := openRecording(t, srv.URL)
		for from := 0; from < len(evs); from += 100 {
			appendEvents(t, srv.URL, id, evs[from:min(from+100, len(evs))])
		}
		if i == 0 {
			if r := post(t, srv.URL+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 200 {
				t.Fatalf("finish: %d %s", r.status, r.body)
			}
		}
		recs[id] = evs
	}
	srv.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	sc := cfg.Store
	sc.Index = dsn
	st, idx, err := sc.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer idx.Close()
	if err := st.Reindex(t.Context(), idx, nil); err != nil {
		t.Fatal(err)
	}
	embedded, err := app.OpenIndex("", cfg.Store.Data)
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close()
	for id, evs := range recs {
		compareWithLog(t, st, idx, id, uint64(len(evs)))
		if got, want := render(t, idx, id), render(t, embedded, id); got != want {
			t.Errorf("%s: ClickHouse answers\n%s\nSQLite answers\n%s", id, got, want)
		}
	}
	got, err := idx.Recordings(t.Context(), store.RecordingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := embedded.Recordings(t.Context(), store.RecordingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("Recordings: ClickHouse %s\nSQLite %s", g, w)
	}
}

// render is what an index says of a recording, as JSON.
func render(t *testing.T, idx store.Index, id string) string {
	t.Helper()
	rec, err := idx.Recording(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := idx.Timeline(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := idx.Events(t.Context(), store.EventQuery{Recording: id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := idx.Search(t.Context(), store.SearchQuery{Recordings: []string{id}, Text: "error", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, rec) + "\n" + mustJSON(t, tl) + "\n" + mustJSON(t, evs) + "\n" + mustJSON(t, hits)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type reply struct {
	status int
	body   []byte
}

func post(t *testing.T, url string, body []byte) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, b}
}

func openRecording(t *testing.T, base string) string {
	t.Helper()
	r := post(t, base+"/v1/recordings", []byte(`{"project":"shop","flow":"checkout"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	var o wire.OpenReply
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func appendEvents(t *testing.T, base, id string, evs []event.Envelope) wire.AppendReply {
	t.Helper()
	r := post(t, base+"/v1/recordings/"+id+"/events", testgen.NDJSON(evs))
	if r.status != http.StatusOK {
		t.Fatalf("append: %d %s", r.status, r.body)
	}
	var a wire.AppendReply
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}
