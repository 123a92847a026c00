package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
)

// stream numbers the events of one recording and sends them to the
// server in batches as they come. Browser listeners, the screencast and
// the step runner all emit concurrently: the mutex orders them, so seq
// order is emission order.
type stream struct {
	client *client.Client
	id     string
	limits event.Limits

	mu      sync.Mutex
	seq     uint64
	step    int
	pending []client.Line
	bytes   int
	counts  map[event.Kind]int
	err     error // the first send error; emits after it are dropped
	kick    chan struct{}
	done    chan struct{}
	acked   uint64
	closed  bool
}

// batch bounds: a batch is sent when it is this full or flushEvery passed.
const (
	batchEvents = 500
	batchBytes  = 4 << 20
	flushEvery  = 250 * time.Millisecond
)

func newStream(c *client.Client, id string) *stream {
	s := &stream{client: c, id: id, limits: event.DefaultLimits, counts: map[event.Kind]int{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.sender()
	return s
}

// setStep makes later events belong to step n.
func (s *stream) setStep(n int) {
	s.mu.Lock()
	s.step = n
	s.mu.Unlock()
}

// currentStep is the step events go to now.
func (s *stream) currentStep() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// emit adds an event at the current step.
func (s *stream) emit(kind event.Kind, ts time.Time, data any) {
	s.emitAt(kind, ts, -1, data)
}

// emitAt adds an event at step (the current step when step < 0). It
// checks the event as the server will, so a bad event is a recorder bug
// reported once, not a refused batch that stops the recording.
func (s *stream) emitAt(kind event.Kind, ts time.Time, step int, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		s.fail(fmt.Errorf("encoding a %s event: %w", kind, err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil {
		return
	}
	if step < 0 {
		step = s.step
	}
	env := event.Envelope{Seq: s.seq + 1, TS: ts.UnixNano(), Step: step, Kind: kind, Data: raw}
	if _, err := event.Decode(env, s.limits); err != nil {
		s.err = fmt.Errorf("recorder made an invalid %s event: %w", kind, err)
		return
	}
	line, err := json.Marshal(env)
	if err != nil {
		s.err = err
		return
	}
	if len(line)+1 > s.limits.MaxEventBytes {
		// A page can produce a body or snapshot over the limit: leave
		// that one event out rather than stop the recording.
		return
	}
	s.seq++
	s.pending = append(s.pending, client.Line{Seq: env.Seq, JSON: line})
	s.bytes += len(line)
	s.counts[kind]++
	if len(s.pending) >= batchEvents || s.bytes >= batchBytes {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *stream) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// sender sends what is pending every flushEvery, or sooner when a batch
// fills, until close.
func (s *stream) sender() {
	defer close(s.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-s.kick:
		}
		s.mu.Lock()
		lines := s.pending
		closed := s.closed
		s.mu.Unlock()
		if len(lines) > 0 {
			acked, err := s.client.Send(context.Background(), s.id, lines, batchEvents, batchBytes, nil)
			s.mu.Lock()
			if err != nil && s.err == nil {
				s.err = fmt.Errorf("sending events to the server: %w", err)
			}
			s.acked = max(s.acked, acked)
			k := 0
			for k < len(s.pending) && s.pending[k].Seq <= s.acked {
				s.bytes -= len(s.pending[k].JSON)
				k++
			}
			s.pending = s.pending[k:]
			if s.err != nil {
				s.pending = nil
			}
			s.mu.Unlock()
		}
		if closed {
			s.mu.Lock()
			empty := len(s.pending) == 0 || s.err != nil
			s.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// close sends everything still pending and stops the sender. It returns
// the first error, if any event could not be made or sent.
func (s *stream) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// stats returns how many events of each kind were made, and the total.
func (s *stream) stats() (map[event.Kind]int, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[event.Kind]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out, s.seq
}
