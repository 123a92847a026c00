package app_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/testgen"
)

// TestRebuildWhileServing: POST /v1/index/rebuild, called again and again
// while another recording is appended to, leaves a finished recording's
// index exactly as it was (failure signature included) and indexes every
// acknowledged event of the live one; the lag is 0 only once it is true.
func TestRebuildWhileServing(t *testing.T) {
	a, base := server(t, ingest.DefaultLimits)
	ctx := context.Background()
	done := testgen.Recording(testgen.Options{Seed: 31, Steps: 20, EventsPerStep: 6, FrameBytes: 1000})
	id1 := openRec(t, base)
	acked(t, appendBatch(t, base, id1, done))
	do(t, "POST", base+"/v1/recordings/"+id1+"/finish", []byte(`{"verdict":"fail"}`))
	waitIndexed(t, base, id1, uint64(len(done)))
	if err := a.Proj.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshotIndex(t, a.Index, id1)

	live := testgen.Recording(testgen.Options{Seed: 32, Steps: 60, EventsPerStep: 5, FrameBytes: 500})
	id2 := openRec(t, base)
	sent := make(chan error, 1)
	go func() {
		for from := 0; from < len(live); from += 15 {
			body := testgen.NDJSON(live[from:min(from+15, len(live))])
			resp, err := http.Post(base+"/v1/recordings/"+id2+"/events", "application/x-ndjson", bytes.NewReader(body))
			if err != nil {
				sent <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				sent <- fmt.Errorf("append from %d: %d", from, resp.StatusCode)
				return
			}
		}
		sent <- nil
	}()
	rebuilds := 0
	for sending := true; sending || rebuilds < 2; rebuilds++ {
		select {
		case err := <-sent:
			if err != nil {
				t.Fatal(err)
			}
			sending = false
		default:
		}
		if r := do(t, "POST", base+"/v1/index/rebuild", nil); r.status != http.StatusOK {
			t.Fatalf("rebuild: %d %s", r.status, r.body)
		}
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id2+"/finish", []byte(`{"verdict":"pass"}`)); r.status != http.StatusOK {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, id2, uint64(len(live)))
	if err := a.Proj.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if after := snapshotIndex(t, a.Index, id1); after != before {
		t.Fatalf("%d rebuilds changed a finished recording's index:\n%s\n%s", rebuilds, before, after)
	}
	rec, err := a.Index.Recording(ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Events != int64(len(live)) {
		t.Fatalf("after %d rebuilds during appends the index holds %d of %d events", rebuilds, rec.Events, len(live))
	}
	checkReads(t, base, id2, live)
	if lag := a.Proj.Lag(); lag != 0 {
		t.Fatalf("lag %d with every event indexed", lag)
	}
}
