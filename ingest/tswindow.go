package ingest

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/wire"
)

// tsRange is the earliest and latest ts a recording's stored events carry
// (zero while it has none).
type tsRange struct{ min, max int64 }

func (r tsRange) with(ts int64) tsRange {
	if r.min == 0 || ts < r.min {
		r.min = ts
	}
	if ts > r.max {
		r.max = ts
	}
	return r
}

// checkTimes refuses a batch whose events would take the recording's ts
// range past lim.MaxRecordingSpan, or lie more than lim.MaxClockSkew past
// now. Every ts playback works over (a video's length, its frame count)
// is bounded by these, so a wild ts is refused here rather than costing a
// reader unbounded work later. Imported recordings keep their original
// times: the span is measured between the recording's own events, and only
// the future is measured against the clock. It returns the range with the
// batch added.
func checkTimes(have tsRange, batch []*event.Decoded, lim Limits, now time.Time) (tsRange, error) {
	latest := int64(math.MaxInt64)
	if lim.MaxClockSkew > 0 {
		latest = now.Add(lim.MaxClockSkew).UnixNano()
	}
	span := int64(lim.MaxRecordingSpan)
	r := have
	for _, d := range batch {
		next := r.with(d.TS)
		if d.TS > latest || (span > 0 && next.max-next.min > span) {
			return have, tsOutOfRange(d.Seq, r, latest, span, lim)
		}
		r = next
	}
	return r, nil
}

func tsOutOfRange(seq uint64, r tsRange, latest, span int64, lim Limits) error {
	lo, hi := int64(1), latest
	if span > 0 && r.min != 0 {
		lo = max(lo, r.max-span)
		hi = min(hi, r.min+span)
	}
	e := wire.New(http.StatusBadRequest, "TS_OUT_OF_RANGE",
		fmt.Sprintf("send ts as unix nanoseconds from %d to %d (check the executor's clock; a run longer than --max-recording-span %s goes into several recordings); nothing of this batch was stored",
			lo, hi, lim.MaxRecordingSpan),
		"seq %d: ts outside the allowed window [%d, %d]: a recording's events span at most %s and lie at most %s past the server's clock",
		seq, lo, hi, lim.MaxRecordingSpan, lim.MaxClockSkew)
	return e.With("seq", seq).With("min_ts", lo).With("max_ts", hi)
}
