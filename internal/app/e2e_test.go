package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// server starts the whole app on a loopback listener over a temp dir.
func server(t *testing.T, lim ingest.Limits) (*app.App, string) {
	t.Helper()
	return serverLog(t, lim, slog.New(slog.DiscardHandler))
}

// serverLog is server logging to log.
func serverLog(t *testing.T, lim ingest.Limits, log *slog.Logger) (*app.App, string) {
	t.Helper()
	var cfg app.Config
	cfg.Ingest.Limits = lim
	return startAppLog(t, cfg, log)
}

// startApp starts the app of cfg on a loopback listener, over a temp dir
// unless cfg names one, and closes both when the test ends.
func startApp(t testing.TB, cfg app.Config) (*app.App, string) {
	t.Helper()
	return startAppLog(t, cfg, slog.New(slog.DiscardHandler))
}

// startAppLog is startApp logging to log.
func startAppLog(t testing.TB, cfg app.Config, log *slog.Logger) (*app.App, string) {
	t.Helper()
	if cfg.Store.Data == "" {
		cfg.Store.Data = t.TempDir()
	}
	a, err := app.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Close() })
	return a, srv.URL
}

type reply struct {
	status int
	body   []byte
	header http.Header
}

func (r reply) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// errCode returns the envelope's code, failing if the body is not one.
func (r reply) errCode(t *testing.T) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Message, Next string } `json:"error"`
	}
	r.decode(t, &env)
	if env.Error.Code == "" || env.Error.Message == "" || env.Error.Next == "" {
		t.Fatalf("not an error envelope with code, message and next: %s", r.body)
	}
	return env.Error.Code
}

func do(t testing.TB, method, url string, body []byte, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, b, resp.Header}
}

func appendBatch(t testing.TB, base, id string, evs []event.Envelope, hdr ...string) reply {
	t.Helper()
	return do(t, "POST", base+"/v1/recordings/"+id+"/events", testgen.NDJSON(evs), hdr...)
}

func acked(t *testing.T, r reply) wire.AppendReply {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("append: %d %s", r.status, r.body)
	}
	var a wire.AppendReply
	r.decode(t, &a)
	return a
}

func openRec(t testing.TB, base string) string {
	t.Helper()
	r := do(t, "POST", base+"/v1/recordings", []byte(`{"project":"shop","flow":"checkout","labels":{"ci":"yes"}}`))
	if r.status != 201 {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	var o wire.OpenReply
	r.decode(t, &o)
	return o.ID
}

func TestEndToEnd(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.MaxBatchBytes = 1 << 20
	lim.MaxEventBytes = 300 << 10
	_, base := server(t, lim)

	evs := testgen.Recording(testgen.Options{Seed: 7, Steps: 40, EventsPerStep: 12, FrameBytes: 20_000})
	id := openRec(t, base)
	N := uint64(len(evs))
	at := func(from, to uint64) []event.Envelope { return evs[from-1 : to] } // seqs from..to

	// A first batch, then the same batch again (a client's retry).
	if a := acked(t, appendBatch(t, base, id, at(1, 50))); a.AckedThrough != 50 || a.Stored != 50 {
		t.Fatalf("first batch: %+v", a)
	}
	if a := acked(t, appendBatch(t, base, id, at(1, 50))); a.AckedThrough != 50 || a.Stored != 0 || a.Duplicates != 50 {
		t.Fatalf("retried batch: %+v", a)
	}
	// An overlap: part old, part new; only the new part is stored.
	if a := acked(t, appendBatch(t, base, id, at(41, 120))); a.AckedThrough != 120 || a.Stored != 70 || a.Duplicates != 10 {
		t.Fatalf("overlapping batch: %+v", a)
	}
	// A gap is refused and names the next expected seq.
	r := appendBatch(t, base, id, at(130, 140))
	if r.status != 409 || r.errCode(t) != "SEQ_GAP" || !strings.Contains(string(r.body), `"expected_seq":121`) {
		t.Fatalf("gap: %d %s", r.status, r.body)
	}
	// A malformed third line: 400 naming line 3, nothing of the batch stored.
	bad := bytes.Split(testgen.NDJSON(at(121, 130)), []byte("\n"))
	bad[2] = []byte(`{"seq":123,"ts":1,"step":1,"kind":"console","data":{"level":"error","text":`)
	r = do(t, "POST", base+"/v1/recordings/"+id+"/events", bytes.Join(bad, []byte("\n")))
	if r.status != 400 || r.errCode(t) != "MALFORMED_EVENT" || !strings.Contains(string(r.body), "line 3") {
		t.Fatalf("malformed: %d %s", r.status, r.body)
	}
	// A line that is valid JSON but an invalid event (unknown kind).
	bad = bytes.Split(testgen.NDJSON(at(121, 130)), []byte("\n"))
	bad[4] = bytes.Replace(bad[4], []byte(`"kind":"`), []byte(`"kind":"x`), 1)
	r = do(t, "POST", base+"/v1/recordings/"+id+"/events", bytes.Join(bad, []byte("\n")))
	if r.status != 400 || !strings.Contains(string(r.body), "line 5") {
		t.Fatalf("invalid event: %d %s", r.status, r.body)
	}
	// An oversized event and an oversized batch: 413.
	huge := event.Envelope{Seq: 121, TS: 1, Step: 1, Kind: event.KindConsole,
		Data: json.RawMessage(`{"level":"log","text":"` + strings.Repeat("x", 400<<10) + `"}`)}
	if r := appendBatch(t, base, id, []event.Envelope{huge}); r.status != 413 || r.errCode(t) != "EVENT_TOO_LARGE" {
		t.Fatalf("oversized event: %d %s", r.status, r.body)
	}
	var big []byte
	for len(big) <= 1<<20 {
		big = append(big, testgen.NDJSON(at(121, 121))...)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/events", big); r.status != 413 || r.errCode(t) != "BATCH_TOO_LARGE" {
		t.Fatalf("oversized batch: %d %s", r.status, r.body)
	}
	// None of the refused batches moved the sequence: 121 is still next.
	// gzip, then zstd, then plain for the rest.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(testgen.NDJSON(at(121, 200)))
	zw.Close()
	if a := acked(t, do(t, "POST", base+"/v1/recordings/"+id+"/events", gz.Bytes(), "Content-Encoding", "gzip")); a.AckedThrough != 200 {
		t.Fatalf("gzip batch: %+v", a)
	}
	enc, _ := zstd.NewWriter(nil)
	zs := enc.EncodeAll(testgen.NDJSON(at(201, 260)), nil)
	if a := acked(t, do(t, "POST", base+"/v1/recordings/"+id+"/events", zs, "Content-Encoding", "zstd")); a.AckedThrough != 260 {
		t.Fatalf("zstd batch: %+v", a)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/events", []byte("garbage"), "Content-Encoding", "gzip"); r.status != 400 {
		t.Fatalf("bad gzip: %d %s", r.status, r.body)
	}
	for from := uint64(261); from <= N; from += 97 {
		to := min(from+96, N)
		if a := acked(t, appendBatch(t, base, id, at(from, to))); a.AckedThrough != to {
			t.Fatalf("batch %d-%d: %+v", from, to, a)
		}
	}
	// Unknown recordings, bad ids.
	if r := appendBatch(t, base, "0000000000000000000000000z", at(1, 1)); r.status != 404 || r.errCode(t) != "RECORDING_NOT_FOUND" {
		t.Fatalf("unknown recording: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", base+"/v1/recordings/..%2f..%2fetc", nil); r.status != 404 {
		t.Fatalf("traversal id: %d %s", r.status, r.body)
	}

	// Finish, twice (a retry), then appends are refused.
	r = do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`))
	var fin wire.FinishReply
	r.decode(t, &fin)
	if r.status != 200 || !strings.HasPrefix(fin.Root, "bafkrei") || fin.AckedThrough != N {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	var fin2 wire.FinishReply
	do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)).decode(t, &fin2)
	if fin2.Root != fin.Root {
		t.Fatalf("retried finish gave root %s, want %s", fin2.Root, fin.Root)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 409 {
		t.Fatalf("finish with another verdict: %d %s", r.status, r.body)
	}
	if r := appendBatch(t, base, id, at(N, N)); r.status != 409 || r.errCode(t) != "RECORDING_FINISHED" {
		t.Fatalf("append after finish: %d %s", r.status, r.body)
	}

	rec := waitIndexed(t, base, id, N)
	if rec.State != store.StateFinished || rec.Root != fin.Root || rec.Verdict != "fail" || rec.Events != int64(N) ||
		rec.Project != "shop" || rec.Flow != "checkout" || rec.Labels["ci"] != "yes" {
		t.Fatalf("recording row: %+v", rec)
	}
	checkReads(t, base, id, evs)

	// The manifest is a blob whose bytes hash to the root.
	checkBlob(t, base, fin.Root, nil)
	var man store.Manifest
	if err := json.Unmarshal(do(t, "GET", base+"/v1/blobs/"+fin.Root, nil).body, &man); err != nil {
		t.Fatal(err)
	}
	if man.Events != int64(N) || man.LastSeq != N || man.Recording.Verdict != "fail" {
		t.Fatalf("manifest: events %d last %d verdict %q", man.Events, man.LastSeq, man.Recording.Verdict)
	}
	for _, s := range man.Segments {
		checkBlob(t, base, s.CID, nil)
	}
	// A listing filter.
	var list playback.RecordingList
	do(t, "GET", base+"/v1/recordings?project=shop&verdict=fail", nil).decode(t, &list)
	if len(list.Recordings) != 1 || list.Recordings[0].ID != id {
		t.Fatalf("list: %+v", list)
	}
	do(t, "GET", base+"/v1/recordings?project=other", nil).decode(t, &list)
	if len(list.Recordings) != 0 {
		t.Fatalf("list of another project: %+v", list)
	}
}

func waitIndexed(t *testing.T, base, id string, n uint64) store.RecordingRow {
	t.Helper()
	// A guard against a projector that never catches up, not a speed
	// check: 10,000 events under -race on a shared machine take a minute.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var rec store.RecordingRow
		do(t, "GET", base+"/v1/recordings/"+id, nil).decode(t, &rec)
		if rec.IndexedTo >= n && rec.State == store.StateFinished {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("index did not catch up: %+v", rec)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkBlob fetches a blob and checks that sha256 of its bytes is the
// digest in its CID, and, if want is given, that the bytes are want.
func checkBlob(t *testing.T, base, cid string, want []byte) {
	t.Helper()
	r := do(t, "GET", base+"/v1/blobs/"+cid, nil)
	if r.status != 200 {
		t.Fatalf("blob %s: %d %s", cid, r.status, r.body)
	}
	c, err := store.ParseCID(cid)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := store.Digest(c)
	if got := sha256.Sum256(r.body); !bytes.Equal(got[:], d) {
		t.Fatalf("blob %s does not hash to its CID", cid)
	}
	if want != nil && !bytes.Equal(r.body, want) {
		t.Fatalf("blob %s: bytes differ from what was sent", cid)
	}
}

// stored is what the service should serve for a sent event: the same
// envelope, with a binary payload replaced by its CID.
func stored(t *testing.T, e event.Envelope) (event.Envelope, []byte) {
	t.Helper()
	if e.Kind != event.KindFrame {
		return e, nil
	}
	var m map[string]any
	json.Unmarshal(e.Data, &m)
	img, _ := base64.StdEncoding.DecodeString(m["image"].(string))
	delete(m, "image")
	m["image_cid"] = store.SumString(img)
	e.Data, _ = json.Marshal(m)
	return e, img
}

func sameEvent(t *testing.T, got, want event.Envelope) {
	t.Helper()
	var g, w any
	json.Unmarshal(got.Data, &g)
	json.Unmarshal(want.Data, &w)
	if got.Seq != want.Seq || got.TS != want.TS || got.Step != want.Step || got.Kind != want.Kind || !reflect.DeepEqual(g, w) {
		t.Fatalf("event differs:\n got  %d %d %d %s %s\n want %d %d %d %s %s",
			got.Seq, got.TS, got.Step, got.Kind, got.Data, want.Seq, want.TS, want.Step, want.Kind, want.Data)
	}
}

// checkReads compares the timeline, every step view and the paged events
// with what was sent.
func checkReads(t *testing.T, base, id string, evs []event.Envelope) {
	t.Helper()
	byStep := map[int][]event.Envelope{}
	for _, e := range evs {
		byStep[e.Step] = append(byStep[e.Step], e)
	}
	var tl wire.Timeline
	do(t, "GET", base+"/v1/recordings/"+id+"/steps", nil).decode(t, &tl)
	if len(tl.Steps) != len(byStep) {
		t.Fatalf("timeline has %d steps, sent %d", len(tl.Steps), len(byStep))
	}
	for _, st := range tl.Steps {
		sent := byStep[st.Step]
		counts := map[event.Kind]int64{}
		var receipt event.Receipt
		for _, e := range sent {
			counts[e.Kind]++
			if e.Kind == event.KindReceipt {
				json.Unmarshal(e.Data, &receipt)
			}
		}
		for k, n := range st.Counts {
			if n == 0 {
				delete(st.Counts, k)
			}
		}
		if !reflect.DeepEqual(st.Counts, counts) || st.Events != int64(len(sent)) ||
			st.StartTS != sent[0].TS || st.EndTS != sent[len(sent)-1].TS ||
			st.FirstSeq != sent[0].Seq || st.LastSeq != sent[len(sent)-1].Seq {
			t.Fatalf("timeline step %d: %+v, sent counts %v", st.Step, st, counts)
		}
		if st.Step > 0 && (st.Action != receipt.Action.Verb || st.Outcome != receipt.Outcome) {
			t.Fatalf("timeline step %d receipt summary: %+v want %s/%s", st.Step, st, receipt.Action.Verb, receipt.Outcome)
		}

		var view wire.StepView
		do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/steps/%d", base, id, st.Step), nil).decode(t, &view)
		if len(view.Events) != len(sent) {
			t.Fatalf("step %d view has %d events, sent %d", st.Step, len(view.Events), len(sent))
		}
		for i := range sent {
			want, img := stored(t, sent[i])
			sameEvent(t, view.Events[i], want)
			if img != nil {
				var f event.Frame
				json.Unmarshal(view.Events[i].Data, &f)
				checkBlob(t, base, f.ImageCID, img)
			}
		}
	}
	if r := do(t, "GET", base+"/v1/recordings/"+id+"/steps/9999", nil); r.status != 404 || r.errCode(t) != "STEP_NOT_FOUND" {
		t.Fatalf("missing step: %d %s", r.status, r.body)
	}

	// Paged events: every event once, in seq order.
	var got []event.Envelope
	after := uint64(0)
	for {
		var page wire.EventPage
		do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/events?limit=37&after_seq=%d", base, id, after), nil).decode(t, &page)
		got = append(got, page.Events...)
		if page.NextAfterSeq == 0 {
			break
		}
		after = page.NextAfterSeq
	}
	if len(got) != len(evs) {
		t.Fatalf("paged %d events, sent %d", len(got), len(evs))
	}
	for i := range evs {
		want, _ := stored(t, evs[i])
		sameEvent(t, got[i], want)
	}
	// Filters by kind and step.
	var page wire.EventPage
	do(t, "GET", base+"/v1/recordings/"+id+"/events?kind=receipt&limit=10000", nil).decode(t, &page)
	if len(page.Events) != len(byStep)-1 {
		t.Fatalf("receipts: %d, want %d", len(page.Events), len(byStep)-1)
	}
	frames3 := 0
	for _, e := range byStep[3] {
		if e.Kind == event.KindFrame {
			frames3++
		}
	}
	do(t, "GET", base+"/v1/recordings/"+id+"/events?step=3&kind=frame", nil).decode(t, &page)
	if len(page.Events) != frames3 {
		t.Fatalf("frames of step 3: %d, sent %d", len(page.Events), frames3)
	}
	for _, e := range page.Events {
		if e.Step != 3 || e.Kind != event.KindFrame {
			t.Fatalf("frame filter returned %d/%s", e.Step, e.Kind)
		}
	}
	if r := do(t, "GET", base+"/v1/recordings/"+id+"/events?kind=nope", nil); r.status != 400 {
		t.Fatalf("bad kind: %d", r.status)
	}
}

func TestBlobRefusesForeignCIDs(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	for _, c := range []string{
		"..%2f..%2fetc%2fpasswd",
		"bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", // dag-pb codec
		"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",              // CIDv0
		"bafkreiabcd",
	} {
		if r := do(t, "GET", base+"/v1/blobs/"+c, nil); r.status != 400 || r.errCode(t) != "BAD_CID" {
			t.Errorf("%s: %d %s", c, r.status, r.body)
		}
	}
	if r := do(t, "GET", base+"/v1/blobs/"+store.SumString([]byte("never stored")), nil); r.status != 404 {
		t.Errorf("absent blob: %d", r.status)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := do(t, "GET", base+p, nil); r.status != 200 {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
	}
	id := openRec(t, base)
	acked(t, appendBatch(t, base, id, testgen.Recording(testgen.Options{Seed: 1, Steps: 2, EventsPerStep: 3})))
	appendBatch(t, base, id, testgen.Recording(testgen.Options{Seed: 1, Steps: 1, EventsPerStep: 1})[:1]) // duplicate
	do(t, "POST", base+"/v1/recordings/"+id+"/events", []byte("{"))                                       // malformed
	m := string(do(t, "GET", base+"/metrics", nil).body)
	for _, want := range []string{
		"flightrec_ingest_events_total 9", "flightrec_ingest_batches_total 2", "flightrec_ingest_duplicate_events_total 1",
		`flightrec_errors_total{code="MALFORMED_EVENT"} 1`, "flightrec_ingest_ack_seconds_bucket", "flightrec_index_lag_events",
		"flightrec_open_recordings 1",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestConcurrentRecordings(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	const n = 6
	errs := make(chan error, n)
	ids := make([]string, n)
	recs := make([][]event.Envelope, n)
	for i := range ids {
		ids[i] = openRec(t, base)
		recs[i] = testgen.Recording(testgen.Options{Seed: uint64(100 + i), Steps: 15, EventsPerStep: 6, FrameBytes: 3000})
	}
	for i := range ids {
		go func(i int) {
			c := client.New(base)
			lines, err := client.ParseLines(testgen.NDJSON(recs[i]))
			if err == nil {
				_, err = c.Send(context.Background(), ids[i], lines, 17, 1<<20, nil)
			}
			if err == nil {
				_, err = c.Finish(context.Background(), ids[i], "pass")
			}
			errs <- err
		}(i)
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		waitIndexed(t, base, id, uint64(len(recs[i])))
		checkReads(t, base, id, recs[i])
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
