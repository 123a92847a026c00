package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// TestRecordingBlobEndToEnd sends two recordings through ingest and reads
// their blobs back through GET /v1/recordings/{id}/blobs/{cid}: each
// recording serves its frames, its root and its segments, Range included,
// and refuses the other's, although /v1/blobs has them all.
func TestRecordingBlobEndToEnd(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	type rec struct {
		id, root string
		frames   map[string][]byte // CID → bytes sent
		segs     []string
	}
	var recs []rec
	for seed := uint64(1); seed <= 2; seed++ {
		evs := testgen.Recording(testgen.Options{Seed: seed, Steps: 4, EventsPerStep: 3, FrameBytes: 5000})
		r := rec{id: openRec(t, base), frames: map[string][]byte{}}
		acked(t, appendBatch(t, base, r.id, evs))
		fin := do(t, "POST", base+"/v1/recordings/"+r.id+"/finish", []byte(`{"verdict":"pass"}`))
		var f wire.FinishReply
		fin.decode(t, &f)
		r.root = f.Root
		waitIndexed(t, base, r.id, uint64(len(evs)))
		for _, e := range evs {
			if e.Kind == event.KindFrame {
				_, img := stored(t, e)
				r.frames[store.SumString(img)] = img
			}
		}
		var man store.Manifest
		if err := json.Unmarshal(do(t, "GET", base+"/v1/blobs/"+r.root, nil).body, &man); err != nil {
			t.Fatal(err)
		}
		for _, s := range man.Segments {
			r.segs = append(r.segs, s.CID)
		}
		if len(r.frames) == 0 || len(r.segs) == 0 {
			t.Fatalf("fixture: %d frames, %d segments", len(r.frames), len(r.segs))
		}
		recs = append(recs, r)
	}
	for c := range recs[0].frames {
		if _, ok := recs[1].frames[c]; ok {
			t.Fatalf("fixture: both recordings hold frame %s", c)
		}
	}
	url := func(id, cid string) string { return base + "/v1/recordings/" + id + "/blobs/" + cid }

	for i, r := range recs {
		other := recs[1-i]
		for c, img := range r.frames {
			if got := do(t, "GET", url(r.id, c), nil); got.status != 200 || !bytes.Equal(got.body, img) ||
				got.header.Get("X-Content-Type-Options") != "nosniff" || got.header.Get("ETag") != `"`+c+`"` {
				t.Errorf("frame %s through %s: %d %v", c, r.id, got.status, got.header)
			}
			rg := do(t, "GET", url(r.id, c), nil, "Range", "bytes=100-199")
			if rg.status != 206 || !bytes.Equal(rg.body, img[100:200]) ||
				rg.header.Get("Content-Range") != fmt.Sprintf("bytes 100-199/%d", len(img)) {
				t.Errorf("range of frame %s through %s: %d %v", c, r.id, rg.status, rg.header)
			}
			if got := do(t, "GET", base+"/v1/blobs/"+c, nil); got.status != 200 {
				t.Fatalf("fixture: /v1/blobs/%s: %d", c, got.status)
			}
			if got := do(t, "GET", url(other.id, c), nil); got.status != 404 || got.errCode(t) != "RECORDING_NOT_FOUND" {
				t.Errorf("frame of %s through %s: %d %s; want 404 RECORDING_NOT_FOUND", r.id, other.id, got.status, got.body)
			}
		}
		for _, c := range append([]string{r.root}, r.segs...) {
			if got := do(t, "GET", url(r.id, c), nil); got.status != 200 || !bytes.Equal(got.body, do(t, "GET", base+"/v1/blobs/"+c, nil).body) {
				t.Errorf("%s through %s: %d", c, r.id, got.status)
			}
			if got := do(t, "GET", url(other.id, c), nil); got.status != 404 || got.errCode(t) != "RECORDING_NOT_FOUND" {
				t.Errorf("%s of %s through %s: %d %s; want 404 RECORDING_NOT_FOUND", c, r.id, other.id, got.status, got.body)
			}
		}
	}
	for c := range recs[0].frames {
		if got := do(t, "GET", url("0000000000000000000000000z", c), nil); got.status != 404 || got.errCode(t) != "RECORDING_NOT_FOUND" {
			t.Errorf("through an unknown recording: %d %s", got.status, got.body)
		}
		break
	}
}
