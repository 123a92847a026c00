package indextest

import (
	"maps"
	"reflect"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// sameEvents fails t unless got equals want row for row, every field,
// locators included.
func sameEvents(t *testing.T, what string, got, want []store.EventRow) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: row %d differs\n got %+v\nwant %+v", what, i, got[i], want[i])
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	}
}

// sameSteps fails t unless the timelines are equal. A kind absent from
// Counts and a kind counted zero mean the same.
func sameSteps(t *testing.T, what string, got, want []store.StepRow) {
	t.Helper()
	nonzero := func(m map[event.Kind]int64) map[event.Kind]int64 {
		out := map[event.Kind]int64{}
		for k, n := range m {
			if n != 0 {
				out[k] = n
			}
		}
		return out
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		g.Counts, w.Counts = nil, nil
		if !reflect.DeepEqual(g, w) || !maps.Equal(nonzero(got[i].Counts), nonzero(want[i].Counts)) {
			t.Errorf("%s: step entry %d differs\n got %+v\nwant %+v", what, i, got[i], want[i])
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d steps, want %d", what, len(got), len(want))
	}
}

// sameMeta reports whether two recordings' metadata, state and root are
// equal. A nil map and an empty one are the same set of labels.
func sameMeta(a, b store.RecordingRow) bool {
	am, bm := a.RecordingMeta, b.RecordingMeta
	if !maps.Equal(am.Labels, bm.Labels) || !maps.Equal(am.Versions, bm.Versions) {
		return false
	}
	am.Labels, am.Versions, bm.Labels, bm.Versions = nil, nil, nil, nil
	return reflect.DeepEqual(am, bm) && a.State == b.State && a.Root == b.Root
}

// sameRecordings compares two lists of recordings by metadata, in order.
func sameRecordings(t *testing.T, what string, got, want []store.RecordingRow) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if !sameMeta(got[i], want[i]) {
			t.Errorf("%s: recording %d is %s, want %s (got %+v, want %+v)",
				what, i, got[i].ID, want[i].ID, got[i], want[i])
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d recordings %v, want %d %v", what, len(got), ids(got), len(want), ids(want))
	}
}

func ids(recs []store.RecordingRow) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}
