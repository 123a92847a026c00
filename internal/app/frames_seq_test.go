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
// its own recording showed before it, and reads back as its bytes; also
// after the other recording wrote more frames than the packs search
// among (ingest names the recording's last frame: store.PutBlobsAfter).
func TestFramesOfInterleavedRecordings(t *testing.T) {
	a, base := serverLog(t, ingest.DefaultLimits, slog.New(slog.DiscardHandler))
	const rounds, between = 3, 70 // a chain of at most 4 deltas: round 3's frame has room
	pages := [][][]byte{blobstest.Frames(t, rounds+1, 320, 200, false, 41), blobstest.Frames(t, rounds+between, 320, 200, false, 42)}
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
	send := func(r, k int) {
		data, _ := json.Marshal(event.Frame{Mime: "image/jpeg", Image: pages[r][k], Width: 320, Height: 200})
		ev := event.Envelope{Seq: uint64(k + 1), TS: now + int64(k), Step: 1, Kind: event.KindFrame, Data: data}
		if got := acked(t, appendBatch(t, base, ids[r], []event.Envelope{ev})); got.AckedThrough != uint64(k+1) {
			t.Fatalf("append: %+v", got)
		}
	}
	for k := range rounds {
		for r := range ids {
			send(r, k)
		}
	}
	for k := rounds; k < rounds+between; k++ {
		send(1, k)
	}
	send(0, rounds)
	fb := a.Store.Blobs.(*blobs.FSBlobs)
	sum := func(b []byte) cid.Cid { c, _ := store.ParseCID(store.SumString(b)); return c }
	own := func(r int, c cid.Cid, before int) bool {
		for k := range before {
			if sum(pages[r][k]) == c {
				return true
			}
		}
		return false
	}
	for r := range pages {
		for k := 1; k < len(pages[r]); k++ {
			c := sum(pages[r][k])
			got, ok := fb.DeltaBase(c)
			if !ok || !fb.IsJPEGDelta(c) {
				t.Fatalf("recording %d, frame %d: not a JPEG delta", r, k)
			}
			if !own(r, got, k) {
				t.Fatalf("recording %d, frame %d: kept against %s, not a frame its recording showed before", r, k, got)
			}
			if rd := blobstest.Read(t, fb.Open, c); string(rd) != string(pages[r][k]) {
				t.Fatalf("recording %d, frame %d reads back other bytes", r, k)
			}
		}
	}
	// The frame after the other recording's many: only the sequence
	// names its base.
	if got, _ := fb.DeltaBase(sum(pages[0][rounds])); got != sum(pages[0][rounds-1]) {
		t.Fatalf("recording 0's last frame is kept against %s, want its frame before", got)
	}
}
