package app_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

func consoleAt(seq uint64, ts int64) event.Envelope {
	return event.Envelope{Seq: seq, TS: ts, Step: 1, Kind: event.KindConsole,
		Data: json.RawMessage(`{"level":"log","text":"x"}`)}
}

// TestTimestampWindow: an event past the server's clock by more than the
// skew, or one that would stretch a recording past its span, is refused
// with 400 TS_OUT_OF_RANGE naming the window, and nothing of its batch is
// stored; a recording whose events are a week old (an import) is taken,
// since only the future is measured against the clock.
func TestTimestampWindow(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.MaxRecordingSpan, lim.MaxClockSkew = time.Hour, time.Minute
	_, base := server(t, lim)
	now := time.Now().UnixNano()
	id := openRec(t, base)
	acked(t, appendBatch(t, base, id, []event.Envelope{consoleAt(1, now)}))

	refused := func(name string, evs []event.Envelope) {
		t.Helper()
		r := appendBatch(t, base, id, evs)
		if r.status != 400 || r.errCode(t) != "TS_OUT_OF_RANGE" {
			t.Fatalf("%s: %d %s; want 400 TS_OUT_OF_RANGE", name, r.status, r.body)
		}
		var env struct {
			Error struct {
				Details struct {
					MinTS int64  `json:"min_ts"`
					MaxTS int64  `json:"max_ts"`
					Seq   uint64 `json:"seq"`
				} `json:"details"`
			} `json:"error"`
		}
		r.decode(t, &env)
		d := env.Error.Details
		if d.MinTS <= 0 || d.MaxTS < now || d.MaxTS > now+int64(2*time.Hour) || d.MinTS > now || d.Seq != evs[len(evs)-1].Seq {
			t.Fatalf("%s: window %+v does not hold the stored event at %d, or names the wrong seq", name, d, now)
		}
	}
	refused("ts 2^63-1", []event.Envelope{consoleAt(2, math.MaxInt64)})
	refused("an hour ahead", []event.Envelope{consoleAt(2, now+1), consoleAt(3, time.Now().Add(time.Hour).UnixNano())})
	refused("two hours back", []event.Envelope{consoleAt(2, now-int64(2*time.Hour))})
	// Nothing of the refused batches was stored: seq 2 is still next, and
	// the recording goes on within its window.
	if a := acked(t, appendBatch(t, base, id, []event.Envelope{consoleAt(2, now-int64(30*time.Minute)), consoleAt(3, now+int64(30*time.Second))})); a.AckedThrough != 3 || a.Stored != 2 {
		t.Fatalf("append within the window: %+v", a)
	}

	// A week-old recording (what an import sends) is taken; its span is
	// still bounded.
	old := time.Now().Add(-7 * 24 * time.Hour).UnixNano()
	imp := openRec(t, base)
	var evs []event.Envelope
	for i := range 10 {
		evs = append(evs, consoleAt(uint64(i+1), old+int64(i)*int64(time.Minute)))
	}
	acked(t, appendBatch(t, base, imp, evs))
	r := appendBatch(t, base, imp, []event.Envelope{consoleAt(11, old+int64(2*time.Hour))})
	if r.status != 400 || r.errCode(t) != "TS_OUT_OF_RANGE" {
		t.Fatalf("an old recording past its span: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		id   string
		want uint64
	}{{id, 3}, {imp, 10}} {
		if r := do(t, "POST", base+"/v1/recordings/"+c.id+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 200 {
			t.Fatalf("finish: %d %s", r.status, r.body)
		}
		var page struct{ Events []json.RawMessage }
		waitIndexed(t, base, c.id, c.want)
		do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/events", base, c.id), nil).decode(t, &page)
		if uint64(len(page.Events)) != c.want {
			t.Errorf("%s holds %d events; want %d", c.id, len(page.Events), c.want)
		}
	}
}

// envelope decodes an error reply's code and next.
func envelope(t *testing.T, r reply) (code, next string) {
	t.Helper()
	var env struct{ Error struct{ Code, Next string } }
	r.decode(t, &env)
	return env.Error.Code, env.Error.Next
}

// recordingRow reads a recording's row once the index shows it finished.
func finishedRow(t *testing.T, base, id string) store.RecordingRow {
	t.Helper()
	var row store.RecordingRow
	deadline := time.Now().Add(time.Minute)
	for {
		do(t, "GET", base+"/v1/recordings/"+id, nil).decode(t, &row)
		if row.State == store.StateFinished && row.IndexedTo == uint64(row.Events) {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not show finished: %+v", id, row)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAbort: POST …/abort seals an open recording with the verdict
// aborted, keeping every acknowledged event; an append or a finish after
// it is 409 RECORDING_ABORTED with a next; a retried abort returns the
// same root; the list filters by the new verdict.
func TestAbort(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	id := openRec(t, base)
	now := time.Now().UnixNano()
	acked(t, appendBatch(t, base, id, []event.Envelope{consoleAt(1, now), consoleAt(2, now+1), consoleAt(3, now+2)}))
	r := do(t, "POST", base+"/v1/recordings/"+id+"/abort", nil)
	var fin wire.FinishReply
	if r.status != 200 {
		t.Fatalf("abort: %d %s", r.status, r.body)
	}
	r.decode(t, &fin)
	if fin.AckedThrough != 3 || fin.Root == "" {
		t.Fatalf("abort: %+v", fin)
	}
	for name, r := range map[string]reply{
		"append": appendBatch(t, base, id, []event.Envelope{consoleAt(4, now+3)}),
		"finish": do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`)),
	} {
		if code, next := envelope(t, r); r.status != 409 || code != "RECORDING_ABORTED" || !strings.Contains(next, "new recording") {
			t.Errorf("%s after abort: %d %s; want 409 RECORDING_ABORTED", name, r.status, r.body)
		}
	}
	var again wire.FinishReply
	do(t, "POST", base+"/v1/recordings/"+id+"/abort", nil).decode(t, &again)
	if again != fin {
		t.Errorf("a retried abort: %+v; want %+v", again, fin)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"aborted"}`)); r.status != 400 {
		t.Errorf("finish with the server's verdict: %d %s; want 400", r.status, r.body)
	}
	// A row made from the store's seal while the index lags says
	// finished with nothing indexed: wait for the index to hold what the
	// abort acknowledged.
	row := finishedRow(t, base, id)
	for deadline := time.Now().Add(time.Minute); row.IndexedTo < fin.AckedThrough && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		row = finishedRow(t, base, id)
	}
	if row.Verdict != "aborted" || row.Events != 3 || row.Root != fin.Root {
		t.Fatalf("aborted recording's row: %+v", row)
	}
	// The row above may come from the store's seal while the index's row
	// still lags; the list reads the index alone, so it is polled (a
	// guard, not a timing).
	var list struct{ Recordings []store.RecordingRow }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list.Recordings = nil
		do(t, "GET", base+"/v1/recordings?verdict=aborted", nil).decode(t, &list)
		if len(list.Recordings) != 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(list.Recordings) != 1 || list.Recordings[0].ID != id {
		t.Errorf("?verdict=aborted lists %+v", list.Recordings)
	}
	// A finished recording is not aborted after the fact.
	done := openRec(t, base)
	acked(t, appendBatch(t, base, done, []event.Envelope{consoleAt(1, now)}))
	do(t, "POST", base+"/v1/recordings/"+done+"/finish", []byte(`{"verdict":"pass"}`))
	if r := do(t, "POST", base+"/v1/recordings/"+done+"/abort", nil); r.status != 409 {
		t.Errorf("abort of a finished recording: %d %s; want 409", r.status, r.body)
	} else if code, _ := envelope(t, r); code != "RECORDING_FINISHED" {
		t.Errorf("abort of a finished recording: %s", r.body)
	}
}

// TestIdleExpiry: an open recording nothing is appended to for
// --open-idle-timeout is aborted, its acknowledged events kept, and its
// executor's next append is 409 RECORDING_ABORTED. Idleness is measured
// from the recording's last write on disk, so a restart does not reset it.
func TestIdleExpiry(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.OpenIdleTimeout = 300 * time.Millisecond
	_, base := server(t, lim)
	id := openRec(t, base)
	now := time.Now().UnixNano()
	acked(t, appendBatch(t, base, id, []event.Envelope{consoleAt(1, now), consoleAt(2, now+1)}))
	row := finishedRow(t, base, id)
	if row.Verdict != "aborted" || row.Events != 2 {
		t.Fatalf("idle recording: %+v; want aborted with 2 events", row)
	}
	r := appendBatch(t, base, id, []event.Envelope{consoleAt(3, time.Now().UnixNano())})
	if code, next := envelope(t, r); r.status != 409 || code != "RECORDING_ABORTED" || next == "" {
		t.Fatalf("append after idle expiry: %d %s", r.status, r.body)
	}

	// Across a restart: a recording last written two hours ago (its files'
	// times set back) is aborted by a server whose timeout is an hour,
	// though that server has just started.
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	old := openRec(t, srv.URL)
	fresh := openRec(t, srv.URL)
	for _, id := range []string{old, fresh} {
		acked(t, appendBatch(t, srv.URL, id, []event.Envelope{consoleAt(1, now)}))
	}
	srv.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	back := time.Now().Add(-2 * time.Hour)
	err = filepath.WalkDir(filepath.Join(cfg.Store.Data, "recordings", old), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, back, back)
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Ingest.OpenIdleTimeout = time.Hour
	a, err = app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Close() })
	if row := finishedRow(t, srv.URL, old); row.Verdict != "aborted" || row.Events != 1 {
		t.Fatalf("a recording idle two hours before the restart: %+v", row)
	}
	acked(t, appendBatch(t, srv.URL, fresh, []event.Envelope{consoleAt(2, now+1)}))
}

// TestOpenLimitPerProject: a project at its limit of open recordings is
// refused with 429 (details.scope project, a next), another project still
// opens, and aborting one frees a slot.
func TestOpenLimitPerProject(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.MaxOpenPerProject = 2
	_, base := server(t, lim)
	open := func(project string) reply {
		return do(t, "POST", base+"/v1/recordings", []byte(`{"project":"`+project+`"}`))
	}
	var ids []string
	for range 2 {
		r := open("alpha")
		var o wire.OpenReply
		r.decode(t, &o)
		ids = append(ids, o.ID)
	}
	r := open("alpha")
	var env struct {
		Error struct {
			Code, Next string
			Details    struct{ Scope string }
		}
	}
	r.decode(t, &env)
	if r.status != 429 || env.Error.Code != "TOO_MANY_OPEN_RECORDINGS" || env.Error.Details.Scope != "project" ||
		!strings.Contains(env.Error.Next, "abort") || r.header.Get("Retry-After") == "" {
		t.Fatalf("third open in alpha: %d %s %v", r.status, r.body, r.header)
	}
	if r := open("beta"); r.status != 201 {
		t.Fatalf("open in beta beside a full alpha: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+ids[0]+"/abort", nil); r.status != 200 {
		t.Fatalf("abort: %d %s", r.status, r.body)
	}
	if r := open("alpha"); r.status != 201 {
		t.Fatalf("open in alpha after an abort: %d %s", r.status, r.body)
	}
}
