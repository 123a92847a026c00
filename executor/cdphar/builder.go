package cdphar

import (
	"context"
	"encoding/json"

	"github.com/chromedp/cdproto/network"
)

// Builder makes HAR entries from Network events recorded earlier, such as
// a DevTools protocol log, with no browser: the same pairing and building
// as a Recorder's, fed by hand. Add the events in the order the browser
// sent them, then call Entries.
//
// A log holds no response bodies (they are fetched with a command, not
// sent as events), so entries carry none, with a comment saying so;
// request bodies are kept when the log's requestWillBeSent has them.
//
// A Builder is not safe for concurrent use.
type Builder struct {
	r     *Recorder
	n     int   // Add calls so far
	start []int // for each hop of r.hops, the Add call that started it
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	r := newRecorder(context.Background(), Options{})
	r.offline = "body not in the DevTools log"
	return &Builder{r: r}
}

// Add feeds one event: a pointer to a cdproto network event
// (*network.EventRequestWillBeSent, …ExtraInfo, *network.EventResponseReceived,
// …ExtraInfo, *network.EventLoadingFinished, *network.EventLoadingFailed).
// It reports whether the event is one of those; others are ignored.
func (b *Builder) Add(ev any) bool {
	i := b.n
	b.n++
	switch ev.(type) {
	case *network.EventRequestWillBeSent, *network.EventRequestWillBeSentExtraInfo,
		*network.EventResponseReceived, *network.EventResponseReceivedExtraInfo,
		*network.EventLoadingFinished, *network.EventLoadingFailed:
	default:
		return false
	}
	before := len(b.r.hops)
	b.r.handle(ev)
	for range len(b.r.hops) - before {
		b.start = append(b.start, i)
	}
	return true
}

// Built is one HAR entry a Builder made, with what ties it to the log.
type Built struct {
	// JSON is the HAR 1.2 entry (the payload of a har event).
	JSON json.RawMessage
	// Index is the Add call (0-based, counting every call) that started
	// the request: its requestWillBeSent.
	Index     int
	RequestID string
	LoaderID  string // the document load it belongs to ("" for a worker's)
	FrameID   string
	// WallTime is when the request started, in seconds since the epoch
	// (0 when the log does not say).
	WallTime float64
	// Ended is false for a request the log ended before: its entry has
	// response._error "not finished when the log ended".
	Ended bool
}

// Entries returns one entry per request hop (a redirect chain's hops each
// get one), in the order the requests started. Requests the log ended
// before are included, marked as such.
func (b *Builder) Entries() []Built {
	r := b.r
	r.mu.Lock()
	defer r.mu.Unlock()
	extras := map[*hop]extraInfo{}
	for _, rq := range r.reqs {
		rq.assignExtra(extras)
	}
	out := make([]Built, 0, len(r.hops))
	for i, h := range r.hops {
		ended := h.ended
		e := build(h, extras[h])
		if !ended {
			e.Response.Error = "not finished when the log ended"
		}
		raw, err := json.Marshal(e)
		if err != nil {
			continue // cannot happen: only strings, numbers and bools
		}
		out = append(out, Built{JSON: raw, Index: b.start[i], RequestID: string(h.sent.RequestID),
			LoaderID: string(h.sent.LoaderID), FrameID: string(h.sent.FrameID),
			WallTime: h.sent.WallTime.Float64(), Ended: ended})
	}
	return out
}
