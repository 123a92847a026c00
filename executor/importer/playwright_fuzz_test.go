package importer_test

import (
	"errors"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/importer"
)

// FuzzPlaywright feeds arbitrary trace.trace and trace.network text,
// zipped with the synthetic trace's files (its bodies, and its frame both
// where format 8 and where formats 9 and 10 keep it), to the importer.
// Seeds: the synthetic trace in formats 8, 9 and 10 and version 5 and 3
// lines. Whatever the text, the import is an *InputError and no events, or
// events that pass importer.Check, starting with the meta, each step's
// receipt before its other events.
func FuzzPlaywright(f *testing.F) {
	var blobs []member
	for _, version := range []int{8, 9, 10} {
		files := unzip(f, pwSyntheticAt(f, version))
		f.Add(files["trace.trace"], files["trace.network"])
		for name, b := range files {
			if name != "trace.trace" && name != "trace.network" {
				blobs = append(blobs, member{name, b})
			}
		}
	}
	f.Add(ndjson(
		obj{"version": 5, "type": "context-options", "browserName": "firefox", "wallTime": 1, "options": obj{}},
		obj{"type": "action", "callId": "call@1", "startTime": 500, "endTime": 600, "apiName": "page.goto", "class": "Frame", "method": "goto",
			"params": obj{"url": "http://a.test/"}, "wallTime": pwWall, "beforeSnapshot": "before@call@1"},
	), []byte(nil))
	f.Add(ndjson(
		obj{"version": 3, "type": "context-options", "browserName": "webkit", "wallTime": pwWall, "options": obj{}},
		obj{"type": "action", "metadata": obj{"id": "call@9", "type": "Frame", "method": "fill", "params": obj{"selector": "#q", "value": "kettle"},
			"startTime": 10, "endTime": 20, "snapshots": []any{obj{"title": "before", "snapshotName": "before@call@9"}}, "error": "not visible"}},
	), []byte(nil))
	f.Fuzz(func(t *testing.T, trace, network []byte) {
		data := zipOf(t, append([]member{{"trace.trace", trace}, {"trace.network", network}}, blobs...)...)
		evs, err := importPW(data)
		if err != nil {
			var ie *importer.InputError
			if !errors.As(err, &ie) || evs != nil {
				t.Fatalf("%v (%d events), want an InputError and no events", err, len(evs))
			}
			return
		}
		if err := importer.Check(evs); err != nil {
			t.Fatal(err)
		}
		if evs[0].Kind != event.KindMeta || evs[0].Step != 0 {
			t.Fatalf("first event: %s in step %d", evs[0].Kind, evs[0].Step)
		}
		receipted := map[int]bool{}
		for _, e := range evs {
			if e.Kind == event.KindReceipt {
				receipted[e.Step] = true
			} else if e.Step > 0 && !receipted[e.Step] {
				t.Fatalf("a %s event in step %d before its receipt", e.Kind, e.Step)
			}
		}
	})
}
