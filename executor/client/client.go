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
	"sort"
	"strings"
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
}

// New returns a client for the server at base.
func New(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 2 * time.Minute},
		RetryFor: 2 * time.Minute}
}

// Open opens a recording.
func (c *Client) Open(ctx context.Context, req wire.OpenRequest) (wire.OpenReply, error) {
	body, _ := json.Marshal(req)
	var rep wire.OpenReply
	err := c.retry(ctx, func() error {
		return c.do(ctx, wire.RouteRecordings, "application/json", body, false, http.StatusCreated, &rep)
	})
	return rep, err
}

// Finish finishes a recording.
func (c *Client) Finish(ctx context.Context, id, verdict string) (wire.FinishReply, error) {
	body, _ := json.Marshal(wire.FinishRequest{Verdict: verdict})
	var rep wire.FinishReply
	err := c.retry(ctx, func() error {
		return c.do(ctx, wire.Path(wire.RouteFinish, id), "application/json", body, false, http.StatusOK, &rep)
	})
	return rep, err
}

// Append sends one NDJSON batch once, without retrying.
func (c *Client) Append(ctx context.Context, id string, ndjson []byte) (wire.AppendReply, error) {
	var rep wire.AppendReply
	err := c.do(ctx, wire.Path(wire.RouteEvents, id), "application/x-ndjson", ndjson, c.Gzip, http.StatusOK, &rep)
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

func (c *Client) do(ctx context.Context, path, ctype string, body []byte, gz bool, want int, out any) error {
	var rd io.Reader = bytes.NewReader(body)
	if gz {
		var zb bytes.Buffer
		w := gzip.NewWriter(&zb)
		_, _ = w.Write(body)
		_ = w.Close()
		rd = &zb
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+path, rd)
	if err != nil {
		return err
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
		return err // a connection error: retryable
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		e := wire.Decode(resp.StatusCode, b)
		if ra := resp.Header.Get("Retry-After"); ra != "" && e.RetryAfter == 0 {
			fmt.Sscanf(ra, "%d", &e.RetryAfter)
		}
		return e
	}
	return json.Unmarshal(b, out)
}
