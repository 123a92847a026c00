package sqlite

import (
	"fmt"
	"testing"

	"github.com/flightrec/flightrec/store"
)

// TestExpired is store/clickhouse's TestExpired on SQLite: the same
// recordings, the same answers.
func TestExpired(t *testing.T) {
	db := openTemp(t)
	defer db.Close()
	ctx := t.Context()
	put := func(id, state string, created int64) {
		t.Helper()
		r := store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: id, CreatedAt: created}, State: state}
		if err := db.PutRecording(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	put("old-1", store.StateFinished, 10)
	put("old-2", store.StateFinished, 20)
	put("old-open", store.StateOpen, 5)
	put("new", store.StateFinished, 100)
	put("reopened", store.StateFinished, 1)
	put("reopened", store.StateOpen, 1) // the newest row decides
	for _, c := range []struct {
		before int64
		limit  int
		want   string
	}{
		{50, 0, "[old-1 old-2]"},
		{50, 1, "[old-1]"},
		{11, 10, "[old-1]"},
		{1000, 0, "[old-1 old-2 new]"},
		{1, 0, "[]"},
	} {
		got, err := db.Expired(ctx, c.before, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("Expired(%d, %d) = %v, want %s", c.before, c.limit, got, c.want)
		}
	}
}
