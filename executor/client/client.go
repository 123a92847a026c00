// Package client is the executor's side of the write API: it opens a
// recording, appends NDJSON batches and finishes it. Its Send survives
// server restarts, resuming from what the server acknowledged. It speaks
// only the wire contract (wire and event), so any executor can use it
// without compiling the server.
package client

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flightrec/flightrec/wire"
)

// Client speaks the write API. Its Send survives server restarts: it
// retries with backoff and resumes from the server's acked_through.
type Client struct {
	Base string // e.g. http://127.0.0.1:8480
	HTTP *http.Client
	// Token, when set, is sent as a bearer token.
	Token string
	// RetryFor bounds how long one request keeps being retried.
	RetryFor time.Duration
	// Gzip compresses append bodies.
	Gzip bool
	// OnRetry, when set, hears about each retry (for progress output).
	OnRetry func(err error, wait time.Duration)
	// OnGap, when set, hears the expected seq of each SEQ_GAP reply before
	// Send rewinds to it. A server that lost acknowledged events would show
	// here with an expected seq at or below an earlier acked_through.
	OnGap func(expected uint64)
	// FollowOwner sends a recording's appends and finish straight to the
	// node that owns it, as a cluster's replies name it (wire.OwnerHeader),
	// instead of through Base, where a load balancer may pick a node that
	// would proxy them there. Any failure there (no answer, a refusal to
	// retry) sends that request at once through Base instead, and that
	// node is not used directly again for ownerAvoid: Base always works,
	// and Send resumes from what was acknowledged.
	FollowOwner bool
	// OwnerTimeout bounds one request sent straight to an owner (a paused
	// node accepts and never answers; through Base the cluster itself
	// answers 503 after a lease's life). Zero: HTTP's own timeout only.
	OwnerTimeout time.Duration

	mu     sync.Mutex
	owners map[string]string    // recording id → its owner's base URL
	avoid  map[string]time.Time // owner URL → not used directly before then
}

// ownerAvoid is how long a node that failed a direct request is not sent
// any directly (its recordings' writes go through Base meanwhile).
const ownerAvoid = time.Minute

// New returns a client for the server at base.
func New(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 2 * time.Minute},
		RetryFor: 2 * time.Minute, FollowOwner: true, OwnerTimeout: 15 * time.Second}
}

// owner is where recording id's writes go directly ("": through Base).
func (c *Client) owner(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.owners[id]
	if o != "" && time.Now().Before(c.avoid[o]) {
		return ""
	}
	return o
}

// learn remembers the owner a reply about recording id named.
func (c *Client) learn(id string, h http.Header) {
	o := strings.TrimRight(h.Get(wire.OwnerHeader), "/")
	if !c.FollowOwner || o == "" {
		return
	}
	if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners == nil {
		c.owners, c.avoid = map[string]string{}, map[string]time.Time{}
	}
	c.owners[id] = o
}

// ownerFailed stops using owner directly for a while, for any recording.
func (c *Client) ownerFailed(id, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.owners, id)
	c.avoid[owner] = time.Now().Add(ownerAvoid)
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.owners, id)
}

// write sends a write for recording id once: to its owner when known and,
// when that fails in a way another node might not (no answer, a
// retryable refusal), at once through Base. Writes are idempotent (an
// append's seqs, a finish's verdict), so a request that reached the owner
// but whose reply was lost is harmless to send again.
func (c *Client) write(ctx context.Context, id, path, ctype string, body []byte, gz bool, want int, out any) error {
	if o := c.owner(id); o != "" {
		octx, cancel := ctx, context.CancelFunc(func() {})
		if c.OwnerTimeout > 0 {
			octx, cancel = context.WithTimeout(ctx, c.OwnerTimeout)
		}
		h, err := c.do(octx, o, path, ctype, body, gz, want, out)
		cancel()
		var ae *wire.Error
		if err == nil || (errors.As(err, &ae) && !ae.Retryable()) || ctx.Err() != nil {
			c.learn(id, h)
			return err
		}
		c.ownerFailed(id, o)
	}
	h, err := c.do(ctx, c.Base, path, ctype, body, gz, want, out)
	c.learn(id, h)
	return err
}

// Open opens a recording.
func (c *Client) Open(ctx context.Context, req wire.OpenRequest) (wire.OpenReply, error) {
	body, _ := json.Marshal(req)
	var rep wire.OpenReply
	err := c.retry(ctx, func() error {
		h, err := c.do(ctx, c.Base, wire.RouteRecordings, "application/json", body, false, http.StatusCreated, &rep)
		if err == nil {
			c.learn(rep.ID, h)
		}
		return err
	})
	return rep, err
}

// Finish finishes a recording.
func (c *Client) Finish(ctx context.Context, id, verdict string) (wire.FinishReply, error) {
	body, _ := json.Marshal(wire.FinishRequest{Verdict: verdict})
	var rep wire.FinishReply
	err := c.retry(ctx, func() error {
		return c.write(ctx, id, wire.Path(wire.RouteFinish, id), "application/json", body, false, http.StatusOK, &rep)
	})
	if err == nil {
		c.forget(id)
	}
	return rep, err
}

// Append sends one NDJSON batch once, without retrying.
func (c *Client) Append(ctx context.Context, id string, ndjson []byte) (wire.AppendReply, error) {
	var rep wire.AppendReply
	err := c.write(ctx, id, wire.Path(wire.RouteEvents, id), "application/x-ndjson", ndjson, c.Gzip, http.StatusOK, &rep)
	return rep, err
}

// Line is one NDJSON event line and its seq.
type Line struct {
	Seq  uint64
	JSON []byte
}

// ParseLines splits an NDJSON file into lines and reads each one's seq
// (the server validates the rest).
func ParseLines(data []byte) ([]Line, error) {
	var out []Line
	n := 0
	for len(data) > 0 {
		n++
		var raw []byte
		raw, data, _ = bytes.Cut(data, []byte{'\n'})
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		var h struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("line %d: %s", n, wire.DescribeJSON(err))
		}
		if k := len(out); k > 0 && h.Seq != out[k-1].Seq+1 {
			return nil, fmt.Errorf("line %d: seq %d does not follow %d", n, h.Seq, out[k-1].Seq)
		}
		out = append(out, Line{Seq: h.Seq, JSON: raw})
	}
	return out, nil
}

// Send appends lines to recording id in batches of at most batchEvents
// events and batchBytes bytes, retrying failed batches and resuming from
// whatever the server says it has acknowledged. It returns the highest
// acknowledged seq.
func (c *Client) Send(ctx context.Context, id string, lines []Line, batchEvents, batchBytes int, progress func(acked uint64)) (uint64, error) {
	var acked uint64
	i := 0
	var buf bytes.Buffer
	for i < len(lines) {
		buf.Reset()
		j := i
		for j < len(lines) && j-i < batchEvents && (j == i || buf.Len()+len(lines[j].JSON) < batchBytes) {
			buf.Write(lines[j].JSON)
			buf.WriteByte('\n')
			j++
		}
		var rep wire.AppendReply
		err := c.retry(ctx, func() error {
			var err error
			rep, err = c.Append(ctx, id, buf.Bytes())
			return err
		})
		var ae *wire.Error
		if errors.As(err, &ae) && ae.Code == "SEQ_GAP" {
			// The server has less than we thought (or we resumed a
			// recording): continue from what it expects.
			exp, ok := ae.Extra["expected_seq"].(float64)
			if !ok {
				return acked, err
			}
			if c.OnGap != nil {
				c.OnGap(uint64(exp))
			}
			k := sort.Search(len(lines), func(k int) bool { return lines[k].Seq >= uint64(exp) })
			if k == len(lines) || lines[k].Seq != uint64(exp) {
				return acked, fmt.Errorf("the server expects seq %d, which this input does not hold: %w", uint64(exp), err)
			}
			i = k
			continue
		}
		if err != nil {
			return acked, err
		}
		acked = rep.AckedThrough
		// Continue after what the server acknowledged, which after a
		// restart may be more or less than this batch.
		i = sort.Search(len(lines), func(k int) bool { return lines[k].Seq > acked })
		if progress != nil {
			progress(acked)
		}
	}
	return acked, nil
}

// retry runs f until it succeeds, fails with a non-retryable error, or
// RetryFor passes. Connection errors and 429/503 are retried.
func (c *Client) retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(c.RetryFor)
	wait := 50 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		var ae *wire.Error
		if errors.As(err, &ae) && !ae.Retryable() {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s: %w", c.RetryFor, err)
		}
		d := wait + time.Duration(rand.Int64N(int64(wait)/2+1))
		if ae != nil && ae.RetryAfter > 0 {
			d = time.Duration(ae.RetryAfter) * time.Second
		}
		if c.OnRetry != nil {
			c.OnRetry(err, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		if wait < 2*time.Second {
			wait *= 2
		}
	}
}

// do sends one request to base and returns the reply's header (nil when
// there was no reply).
func (c *Client) do(ctx context.Context, base, path, ctype string, body []byte, gz bool, want int, out any) (http.Header, error) {
	var rd io.Reader = bytes.NewReader(body)
	if gz {
		var zb bytes.Buffer
		w := gzip.NewWriter(&zb)
		_, _ = w.Write(body)
		_ = w.Close()
		rd = &zb
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctype)
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err // a connection error: retryable
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		e := wire.Decode(resp.StatusCode, b)
		if ra := resp.Header.Get("Retry-After"); ra != "" && e.RetryAfter == 0 {
			fmt.Sscanf(ra, "%d", &e.RetryAfter)
		}
		return resp.Header, e
	}
	return resp.Header, json.Unmarshal(b, out)
}
