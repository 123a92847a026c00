package diffrun

import (
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
)

// TestSocketMessages: two runs whose cart socket said the same things
// (with other ids and times) do not differ; one more message in b is a
// material network difference naming it, and one fewer is too.
func TestSocketMessages(t *testing.T) {
	type sockStep struct {
		q    Request
		msgs []string
	}
	sock := func(port string, msgs ...event.WebSocketMessage) sockStep {
		q := Request{Method: "GET", URL: "ws://127.0.0.1:" + port + "/ws/cart", Status: 101, Type: "websocket"}
		q.Template = Template(q.URL)
		var keys []timedMessage
		for i, m := range msgs {
			keys = append(keys, timedMessage{ts: int64(2e9 + i), key: q.Template + ": " + messageKey(m)})
		}
		// A message before the first step is in none.
		keys = append(keys, timedMessage{ts: 1, key: "early"})
		s := []Step{{StartTS: 1e9}}
		placeMessages(s, keys)
		return sockStep{q, s[0].Sockets}
	}
	hello := func(id string) event.WebSocketMessage {
		return event.WebSocketMessage{Type: "send", Opcode: 1, Data: `{"type":"hello","trace":"` + id + `"}`}
	}
	count := event.WebSocketMessage{Type: "receive", Opcode: 1, Data: `{"count":1,"type":"cart"}`}
	promo := event.WebSocketMessage{Type: "receive", Opcode: 1, Data: `{"type":"promo"}`}
	run := func(id string, ss sockStep) *Run {
		q := ss.q
		s := sp("click", `link "Checkout"`, "/checkout")
		s.Requests, s.Sockets = []Request{q}, ss.msgs
		r := numbered(id, "checkout", s)
		r.Origin = "http://127.0.0.1:" + strings.Split(strings.TrimPrefix(q.URL, "ws://127.0.0.1:"), "/")[0]
		return r
	}
	a := run("a", sock("41001", hello("6f1c2d3e-4b1c-4d2e-9f3a-5e6f7a8b9c0d"), count))
	same := run("b", sock("41002", hello("7a8b9c0d-4b1c-4d2e-9f3a-1a2b3c4d5e6f"), count))
	if rep := Diff(a, same, Options{}); rep.FirstDivergence != nil {
		t.Fatalf("the same messages differ: %+v", rep.FirstDivergence)
	}
	more := run("b", sock("41002", hello("7a8b9c0d-4b1c-4d2e-9f3a-1a2b3c4d5e6f"), count, promo))
	rep := Diff(a, more, Options{})
	if rep.FirstDivergence == nil || rep.FirstDivergence.Channel != ChannelNetwork ||
		!strings.Contains(rep.FirstDivergence.Explanation, `new message ws://127.0.0.1:{port}/ws/cart: receive 1 {"type":"promo"}`) {
		t.Fatalf("an extra message: %+v", rep.FirstDivergence)
	}
	if len(more.Steps[0].Sockets) != 3 {
		t.Fatalf("placed messages %q", more.Steps[0].Sockets)
	}
	fewer := Diff(more, a, Options{})
	if fewer.FirstDivergence == nil || !strings.Contains(fewer.FirstDivergence.Explanation, "missing message ws://127.0.0.1:{port}/ws/cart: receive 1") {
		t.Fatalf("a missing message: %+v", fewer.FirstDivergence)
	}
}
