package sqlite

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// TestVerifyIndexAgainstTheLog: verify compares the index's event count of
// each recording with the records the log holds up to the index's
// indexed-through seq. An index that lags is fine; one whose cursor says
// through seq N while rows are missing below N is a problem naming reindex.
func TestVerifyIndexAgainstTheLog(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenStore(t.TempDir(), store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := openTemp(t)
	defer db.Close()
	meta := store.RecordingMeta{ID: store.NewRecordingID(time.Unix(1764483600, 0)), Project: "p"}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := st.OpenLog(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	var recs []store.Record
	for seq := uint64(1); seq <= 30; seq++ {
		recs = append(recs, store.Record{Seq: seq, TS: int64(seq), Kind: event.KindConsole, Data: json.RawMessage(`{}`)})
	}
	locs, err := lg.Append(recs)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]store.EventRow, len(recs))
	for i := range recs {
		rows[i] = store.RowOf(meta.ID, &recs[i], locs[i])
	}
	if err := db.PutRecording(ctx, store.RecordingRow{RecordingMeta: meta, State: store.StateOpen}); err != nil {
		t.Fatal(err)
	}
	check := func(want string) {
		t.Helper()
		rep := &store.VerifyReport{}
		if err := st.VerifyIndex(ctx, db, rep); err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && len(rep.Problems) != 0:
			t.Fatalf("problems: %+v", rep.Problems)
		case want != "" && (len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, want)):
			t.Fatalf("problems: %+v, want one saying %q", rep.Problems, want)
		}
	}
	// Lagging (through seq 20 of 30) is by design.
	if err := db.IndexEvents(ctx, meta.ID, rows[:20], 20); err != nil {
		t.Fatal(err)
	}
	check("")
	// Through seq 30 with seqs 21–25 never indexed: events lost for good.
	if err := db.IndexEvents(ctx, meta.ID, rows[25:], 30); err != nil {
		t.Fatal(err)
	}
	check("the index counts 25 events through seq 30, the store holds 30; next: flightrec reindex")
}
