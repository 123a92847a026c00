package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/wire"
)

func TestParseLines(t *testing.T) {
	lines, err := client.ParseLines([]byte("{\"seq\":1}\n\n  {\"seq\":2,\"kind\":\"meta\"}  \n{\"seq\":3}"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || lines[0].Seq != 1 || lines[2].Seq != 3 || string(lines[1].JSON) != `{"seq":2,"kind":"meta"}` {
		t.Fatalf("lines %+v", lines)
	}
	for _, c := range []struct{ in, want string }{
		{"{\"seq\":1}\n{\"seq\":3}", "line 2: seq 3 does not follow 1"},
		// The input may hold secrets: the message names the field, not the value.
		{"{\"seq\":1}\n{\"seq\":\"hunter2-secret\"}", `line 2: field "seq": expected uint64, got JSON string`},
		{"{\"seq\":1, hunter2-secret", "line 1: invalid JSON at byte"},
	} {
		_, err := client.ParseLines([]byte(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseLines(%q): %v, want %q…", c.in, err, c.want)
		}
	}
}

// TestSendFromTheServersWord: Send continues after what the server
// acknowledged, and a server expecting a seq the input does not hold is
// an error that names it (after OnGap heard it).
func TestSendFromTheServersWord(t *testing.T) {
	srv := appserver.Start(t)
	ctx := context.Background()
	c := client.New(srv.Base + "/")
	c.Gzip = true
	rep, lines := openWithLines(t, c, 7)
	n := uint64(len(lines))
	var progress []uint64
	acked, err := c.Send(ctx, rep.ID, lines, 4, 1<<20, func(a uint64) { progress = append(progress, a) })
	if err != nil || acked != n {
		t.Fatalf("Send: acked %d, %v; want %d", acked, err, n)
	}
	if len(progress) != int(n+3)/4 || progress[0] != 4 {
		t.Errorf("progress %v: want one report per batch of 4, the first at 4", progress)
	}
	// Sending it all again (a resumed upload) is acknowledged, stored once.
	if acked, err := c.Send(ctx, rep.ID, lines, 100, 1<<20, nil); err != nil || acked != n {
		t.Fatalf("Send again: acked %d, %v; want %d", acked, err, n)
	}
	var heard uint64
	c.OnGap = func(exp uint64) { heard = exp }
	past, err := client.ParseLines([]byte(strings.Replace(string(lines[n-1].JSON), fmt.Sprintf(`"seq":%d,`, n), fmt.Sprintf(`"seq":%d,`, n+5), 1)))
	if err != nil || len(past) != 1 || past[0].Seq != n+5 {
		t.Fatalf("renumbering the last line: %+v, %v", past, err)
	}
	_, err = c.Send(ctx, rep.ID, past, 10, 1<<20, nil)
	var ae *wire.Error
	if !errors.As(err, &ae) || ae.Code != "SEQ_GAP" || heard != n+1 || !strings.Contains(err.Error(), "does not hold") {
		t.Fatalf("Send past a gap: %v (OnGap heard %d); want SEQ_GAP expecting %d", err, heard, n+1)
	}
	fin, err := c.Finish(ctx, rep.ID, "pass")
	if err != nil || fin.Root == "" || fin.AckedThrough != n {
		t.Fatalf("Finish: %+v, %v", fin, err)
	}
}

// TestFollowOwnerFallsBack: a reply naming an owner (wire.OwnerHeader)
// that then fails a write sends that write at once through the base URL,
// and the failed owner is not tried again for the next ones; every event
// is acknowledged. The owner here always answers 503 (a node that keeps
// refusing is a fault a real cluster does not hold still for).
func TestFollowOwnerFallsBack(t *testing.T) {
	srv := appserver.Start(t)
	var ownerHits atomic.Int64
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ownerHits.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":"OWNER_MOVING","message":"moving","next":"retry"}}`))
	}))
	defer owner.Close()
	target, _ := url.Parse(srv.Base)
	front := httputil.NewSingleHostReverseProxy(target)
	front.ModifyResponse = func(resp *http.Response) error {
		resp.Header.Set(wire.OwnerHeader, owner.URL)
		return nil
	}
	base := httptest.NewServer(front)
	defer base.Close()
	ctx := context.Background()
	c := client.New(base.URL)
	rep, lines := openWithLines(t, c, 9)
	if acked, err := c.Send(ctx, rep.ID, lines, 2, 1<<20, nil); err != nil || acked != uint64(len(lines)) {
		t.Fatalf("Send: acked %d, %v; want %d", acked, err, len(lines))
	}
	if fin, err := c.Finish(ctx, rep.ID, "pass"); err != nil || fin.AckedThrough != uint64(len(lines)) {
		t.Fatalf("Finish: %+v, %v", fin, err)
	}
	if n := ownerHits.Load(); n != 1 {
		t.Errorf("the failing owner got %d requests, want 1 (then avoided)", n)
	}
}

// openWithLines opens a recording through c and makes a small one's lines.
func openWithLines(t *testing.T, c *client.Client, seed uint64) (wire.OpenReply, []client.Line) {
	t.Helper()
	rep, err := c.Open(context.Background(), wire.OpenRequest{Project: "client"})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := client.ParseLines(testgen.NDJSON(testgen.Recording(testgen.Options{Seed: seed, Steps: 4, EventsPerStep: 3})))
	if err != nil {
		t.Fatal(err)
	}
	return rep, lines
}
