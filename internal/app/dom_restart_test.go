package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/layout"
)

// domRecording is a page that grows a list over steps steps, perStep
// mutations each: enough events for several checkpoints.
func domRecording(steps, perStep int) []event.Envelope {
	const t0 = int64(1764483600000000000)
	snap := `{"type":2,"timestamp":1764483600000,"data":{"initialOffset":{"top":0,"left":0},"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":"html","attributes":{},"childNodes":[{"type":2,"id":3,"tagName":"body","attributes":{},"childNodes":[{"type":2,"id":4,"tagName":"ul","attributes":{"id":"list"},"childNodes":[]}]}]}]}}}`
	out := []event.Envelope{{Seq: 1, TS: t0, Step: 1, Kind: event.KindDOM, Data: []byte(snap)}}
	id := int64(100)
	for s := 1; s <= steps; s++ {
		for i := 0; i < perStep; i++ {
			id += 2
			m := fmt.Sprintf(`{"type":3,"timestamp":%d,"data":{"source":0,"texts":[],"attributes":[],"removes":[],"adds":[{"parentId":4,"nextId":null,"node":{"type":2,"id":%d,"tagName":"li","attributes":{"class":"s%d"},"childNodes":[]}},{"parentId":%d,"nextId":null,"node":{"type":3,"id":%d,"textContent":"item %d of step %d"}}]}}`,
				1764483600000+int64(len(out)), id, s, id, id+1, i, s)
			out = append(out, event.Envelope{Seq: uint64(len(out) + 1), TS: t0 + int64(len(out)), Step: s, Kind: event.KindDOM, Data: []byte(m)})
		}
	}
	return out
}

// TestDOMCheckpointsSurviveRestart: a finished recording's DOM checkpoint
// set is built once and kept; after a restart the first DOM request reads
// the kept set (flightrec_dom_sets_loaded_total) instead of building it
// (flightrec_dom_sets_built_total), and renders the same bytes. A kept set
// a flipped bit damaged, or of another format version, is rebuilt, not
// read.
func TestDOMCheckpointsSurviveRestart(t *testing.T) {
	data := t.TempDir()
	_, base, stop := serveWith(t, data, "")
	id := openRec(t, base)
	evs := domRecording(6, 150) // 901 dom events: several checkpoints
	for i := 0; i < len(evs); i += 200 {
		acked(t, appendBatch(t, base, id, evs[i:min(i+200, len(evs))]))
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, id, uint64(len(evs)))
	pages := func(base string) map[string]string {
		out := map[string]string{}
		for _, q := range []string{"1/dom", "2/dom?at=before", "3/dom", "4/dom?at=before", "6/dom"} {
			r := do(t, "GET", base+"/v1/recordings/"+id+"/steps/"+q, nil)
			if r.status != 200 || !strings.Contains(string(r.body), "item 0 of step 1") {
				t.Fatalf("%s: %d %.200s", q, r.status, r.body)
			}
			out[q] = string(r.body)
		}
		return out
	}
	metric := func(base, name string) string {
		for _, l := range strings.Split(string(do(t, "GET", base+"/metrics", nil).body), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				return v
			}
		}
		t.Fatalf("no metric %s", name)
		return ""
	}
	before := pages(base)
	if r := do(t, "GET", base+"/v1/recordings/"+id+"/steps/7/dom", nil); r.status != 404 || r.errCode(t) != "STEP_NOT_FOUND" {
		t.Fatalf("a step the recording does not have: %d %s", r.status, r.body)
	}
	if b, l := metric(base, "flightrec_dom_sets_built_total"), metric(base, "flightrec_dom_sets_loaded_total"); b != "1" || l != "0" {
		t.Fatalf("first run: built %s loaded %s, want 1 and 0", b, l)
	}
	stop()

	_, base, stop = serveWith(t, data, "")
	after := pages(base)
	if b, l := metric(base, "flightrec_dom_sets_built_total"), metric(base, "flightrec_dom_sets_loaded_total"); b != "0" || l != "1" {
		t.Fatalf("after a restart: built %s loaded %s, want the kept set read (0 and 1)", b, l)
	}
	for q, want := range before {
		if after[q] != want {
			t.Fatalf("%s renders differently from the kept set:\n%.300s\nvs\n%.300s", q, after[q], want)
		}
	}
	stop()

	// A bit flipped in the kept set's last checkpoint (what the last
	// step's view restores) is found at that view: the set is rebuilt,
	// the page is the same, and the rebuilt set replaces the damaged one.
	st, err := store.OpenStore(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := st.Derived(id, "dom-checkpoints")
	if err != nil || !ok {
		t.Fatalf("no kept set: %v", err)
	}
	blobPath := filepath.Join(st.Blobs.(*blobs.FSBlobs).Dir(), layout.ShardOf(c.String()), c.String())
	st.Close()
	raw, err := os.ReadFile(blobPath)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-20] ^= 0x10
	if err := os.WriteFile(blobPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, base, stop = serveWith(t, data, "")
	for q, want := range pages(base) {
		if before[q] != want {
			t.Fatalf("%s renders differently from the set a flipped bit damaged", q)
		}
	}
	if b := metric(base, "flightrec_dom_sets_built_total"); b != "1" {
		t.Fatalf("a damaged set: built %s, want it rebuilt", b)
	}
	stop()
	if raw, err := os.ReadFile(blobPath); err != nil || blobs.Sum(raw) != c {
		t.Fatalf("the damaged set was not replaced by the rebuilt one (%v)", err)
	}

	// A set kept under another format version is rebuilt, and replaced.
	st, err = store.OpenStore(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutDerived(id, "dom-checkpoints", []byte("FRCP\x63rest of a future format")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, base, stop = serveWith(t, data, "")
	rebuilt := pages(base)
	if b, l := metric(base, "flightrec_dom_sets_built_total"), metric(base, "flightrec_dom_sets_loaded_total"); b != "1" || l != "0" {
		t.Fatalf("a set of another format: built %s loaded %s, want it rebuilt (1 and 0)", b, l)
	}
	for q, want := range before {
		if rebuilt[q] != want {
			t.Fatalf("%s renders differently after a rebuild", q)
		}
	}
	stop()
	_, base, stop = serveWith(t, data, "")
	defer stop()
	pages(base)
	if l := metric(base, "flightrec_dom_sets_loaded_total"); l != "1" {
		t.Fatalf("the rebuilt set was not kept in place of the old one: loaded %s", l)
	}
}
