package app_test

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
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
