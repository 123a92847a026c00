package app_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/wire"
)

// TestFramesOfInterleavedRecordings: two recordings stream frames of their
// own pages at once, so the blob packed before each frame is the other
// recording's. A frame is still kept as a JPEG delta against the frame
// its own recording showed before it (ingest passes it: store.PutBlobsAfter),
// and reads back as its bytes.
func TestFramesOfInterleavedRecordings(t *testing.T) {
	a, base := serverLog(t, ingest.DefaultLimits, slog.New(slog.DiscardHandler))
	pages := [][][]byte{blobstest.Frames(t, 5, 320, 200, false, 41), blobstest.Frames(t, 5, 320, 200, false, 42)}
	var ids []string
	for range pages {
		r := do(t, "POST", base+"/v1/recordings", []byte(`{"project":"p","flow":"interleaved"}`))
		if r.status != http.StatusCreated {
			t.Fatalf("open: %d %s", r.status, r.body)
		}
		var open wire.OpenReply
		r.decode(t, &open)
		ids = append(ids, open.ID)
	}
	now := time.Now().UnixNano()
	for k := range 5 {
		for r, id := range ids {
			data, _ := json.Marshal(event.Frame{Mime: "image/jpeg", Image: pages[r][k], Width: 320, Height: 200})
			ev := event.Envelope{Seq: uint64(k + 1), TS: now + int64(k), Step: 1, Kind: event.KindFrame, Data: data}
			if got := acked(t, appendBatch(t, base, id, []event.Envelope{ev})); got.AckedThrough != uint64(k+1) {
				t.Fatalf("append: %+v", got)
			}
		}
	}
	fb := a.Store.Blobs.(*blobs.FSBlobs)
	sum := func(b []byte) cid.Cid { c, _ := store.ParseCID(store.SumString(b)); return c }
	for r := range pages {
		for k := 1; k < 5; k++ {
			c := sum(pages[r][k])
			got, ok := fb.DeltaBase(c)
			if !ok || !fb.IsJPEGDelta(c) {
				t.Fatalf("recording %d, frame %d: not a JPEG delta", r, k)
			}
			if want := sum(pages[r][k-1]); got != want {
				t.Fatalf("recording %d, frame %d: kept against %s, want its recording's frame before, %s", r, k, got, want)
			}
			if rd := blobstest.Read(t, fb.Open, c); string(rd) != string(pages[r][k]) {
				t.Fatalf("recording %d, frame %d reads back other bytes", r, k)
			}
		}
	}
}
