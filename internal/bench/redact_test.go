package bench

import (
	"context"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/redact"
)

// BenchmarkRedactSmallEvents is the redaction share of the small-event
// ingest figure: the same event mix (smallEvents), the default policy's
// plan, a server key (so the known-value hashes are live), per event what
// ingest adds when redaction is on for a batch read by DecodeBatch (whose
// UTF-8 scan runs either way): Redact. Compare its ns/op with the end-to-end cost per
// event (1e9 / the unredacted events/s of flightrec bench).
func BenchmarkRedactSmallEvents(b *testing.B) {
	ctx := context.Background()
	pol, err := policy.Load(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := pol.Plan(ctx, policy.Input{Recording: policy.RecordingInput{Project: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	r, err := redact.New(plan, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	envs, _ := smallEvents(400, 1)
	ds := make([]*event.Decoded, len(envs))
	for i, e := range envs {
		if ds[i], err = event.Decode(e, event.DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
	changed := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := ds[i%len(ds)]
		i++
		res, err := r.Redact(d)
		if err != nil {
			b.Fatal(err)
		}
		if res.Changed() {
			changed++
		}
	}
	// The mix is clean: a change here would mean the figure measures
	// something else than the common, nothing-to-mask path.
	if changed > 0 {
		b.Fatalf("%d of the mix's events were changed by redaction", changed)
	}
}
