package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/objstore"
)

// BenchmarkS3Ingest prints, in one run: frame ingest into the S3 blob
// store (a batch of 32 frames of 40 KiB: one pack object per batch),
// versitygw's own PUT and GET throughput for objects of that pack's size
// (through the same S3 client), their ratio, and small-event ingest
// through the HTTP API with S3 blobs beside the same on local disk.
//
//	go test -run '^$' -bench S3Ingest -benchtime 1x ./internal/app/
func BenchmarkS3Ingest(b *testing.B) {
	srv := testenv.S3(b)
	keys := deployKeys(b)
	obj := srv.Store(b, "bench-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	ctx := context.Background()
	bs, err := objblobs.Open(ctx, obj)
	if err != nil {
		b.Fatal(err)
	}
	const frames, frameBytes, rounds = 32, 40 << 10, 30
	batches := make([][][]byte, rounds)
	for i := range batches {
		batches[i] = make([][]byte, frames)
		for j := range batches[i] {
			batches[i][j] = make([]byte, frameBytes)
			rand.Read(batches[i][j])
		}
	}
	packBytes := int64(0)
	for _, f := range batches[0] {
		packBytes += int64(len(f))
	}
	pack := make([]byte, packBytes)
	rand.Read(pack)

	for range b.N {
		// Frame ingest as a batch does it in shared mode: the hold record
		// naming the frames (Store.HoldBlobs), then PutMany of fresh
		// frames, one pack PUT.
		start := time.Now()
		for _, batch := range batches {
			cids := make([]cid.Cid, len(batch))
			for i, f := range batch {
				cids[i] = blobs.Sum(f)
			}
			if err := bs.HoldFor("bench", "batch", cids); err != nil {
				b.Fatal(err)
			}
			if _, err := bs.PutMany(batch); err != nil {
				b.Fatal(err)
			}
			for _, f := range batch {
				f[0]++ // fresh bytes for the next run
			}
		}
		frameRate := float64(rounds*packBytes) / time.Since(start).Seconds()

		// The server's PUT and GET at that size.
		start = time.Now()
		for i := range rounds {
			key := fmt.Sprintf("raw/%d-%d", time.Now().UnixNano(), i)
			if _, err := obj.Put(ctx, key, bytes.NewReader(pack), packBytes, objstore.PutOptions{CreateOnly: true}); err != nil {
				b.Fatal(err)
			}
		}
		putRate := float64(rounds*packBytes) / time.Since(start).Seconds()
		start = time.Now()
		for range rounds {
			data, _, err := objstore.ReadAll(ctx, obj, "raw/"+firstKey(b, obj))
			if err != nil || int64(len(data)) != packBytes {
				b.Fatal(err)
			}
		}
		getRate := float64(rounds*packBytes) / time.Since(start).Seconds()

		// Small events through the HTTP API: S3 blobs, then local disk.
		// Alternated, best of two each: the machine is shared and the
		// first server started pays for warming up.
		var s3Events, localEvents float64
		for range 2 {
			localEvents = max(localEvents, smallEventRate(b, func(*app.Config) {}))
			s3Events = max(s3Events, smallEventRate(b, func(c *app.Config) {
				sh := sharedConfig(srv, "bench-small-"+strconv.FormatInt(time.Now().UnixNano(), 36), keys)
				c.Store, c.Store.Keys = sh.Store, sh.Store.Keys
			}))
		}

		const mib = 1 << 20
		fmt.Printf("pack size %d KiB: frame ingest %.1f MiB/s, versitygw PUT %.1f MiB/s, GET %.1f MiB/s: frame ingest / PUT = %.2f\n",
			packBytes>>10, frameRate/mib, putRate/mib, getRate/mib, frameRate/putRate)
		fmt.Printf("small events: %.0f/s with S3 blobs, %.0f/s on local disk: ratio %.2f\n",
			s3Events, localEvents, s3Events/localEvents)
		b.ReportMetric(frameRate/putRate, "frame/put")
		b.ReportMetric(s3Events/localEvents, "small-s3/local")
	}
}

// firstKey is the name (after raw/) of one raw object.
func firstKey(b *testing.B, obj objstore.Store) string {
	for info, err := range obj.List(context.Background(), "raw/") {
		if err != nil {
			b.Fatal(err)
		}
		return info.Key[len("raw/"):]
	}
	b.Fatal("no raw object")
	return ""
}

// smallEventRate ingests 2000 small events (no blobs) in batches of 100
// through a fresh server configured by set and returns events per second.
func smallEventRate(b *testing.B, set func(*app.Config)) float64 {
	var cfg app.Config
	cfg.Ingest.Limits = ingest.DefaultLimits
	set(&cfg)
	_, base := startApp(b, cfg)
	evs := testgen.Recording(testgen.Options{Seed: 3, Steps: 100, EventsPerStep: 20})
	var small []event.Envelope
	for _, e := range evs {
		if e.Kind != event.KindFrame {
			small = append(small, e)
		}
	}
	for i := range small {
		small[i].Seq = uint64(i + 1)
	}
	id := openRec(b, base)
	start := time.Now()
	for from := 0; from < len(small); from += 100 {
		to := min(from+100, len(small))
		r := appendBatch(b, base, id, small[from:to])
		if r.status != 200 {
			b.Fatalf("append: %d %s", r.status, r.body)
		}
	}
	return float64(len(small)) / time.Since(start).Seconds()
}
