package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/objstore"
)

// patient is a short, bounded patience: two attempts, a second to connect,
// two to answer.
func patient(cfg *objstore.S3Config) {
	cfg.MaxRetries = 2
	cfg.DialTimeout = time.Second
	cfg.ResponseTimeout = 2 * time.Second
}

// everyCall runs each kind of call once and returns what each answered.
func everyCall(s objstore.Store, etag string) map[string]error {
	ctx := context.Background() // no deadline: only the store's own bounds end a call
	errs := map[string]error{}
	body := []byte("during")
	_, errs["put"] = s.Put(ctx, "during", bytes.NewReader(body), int64(len(body)), objstore.PutOptions{})
	_, errs["put create-only"] = s.Put(ctx, "during-new", bytes.NewReader(body), int64(len(body)), objstore.PutOptions{CreateOnly: true})
	_, errs["put if-match"] = s.Put(ctx, "before", bytes.NewReader(body), int64(len(body)), objstore.PutOptions{IfMatch: etag})
	_, errs["put multipart"] = s.Put(ctx, "during-big", bytes.NewReader(make([]byte, 17<<20)), 17<<20, objstore.PutOptions{})
	if rc, _, err := s.Get(ctx, "before"); err == nil {
		rc.Close()
	} else {
		errs["get"] = err
	}
	if rc, err := s.GetRange(ctx, "before", 1, 2); err == nil {
		rc.Close()
	} else {
		errs["range"] = err
	}
	_, errs["stat"] = s.Stat(ctx, "before")
	for _, err := range s.List(ctx, "") {
		if err != nil {
			errs["list"] = err
			break
		}
	}
	errs["delete"] = s.Delete(ctx, "during")
	errs["delete many"] = s.DeleteMany(ctx, []string{"during", "during-never"})
	return errs
}

// TestS3Outage: with versitygw stopped, every call answers ErrUnavailable
// within the store's own bounds (the calls carry no deadline), acknowledges
// nothing, and says nothing secret; after a restart on the same port and
// directory, calls succeed and the objects stored before are intact.
func TestS3Outage(t *testing.T) {
	srv := testenv.S3(t)
	s := s3Store(t, srv, patient)
	ctx := context.Background()
	before, err := s.Put(ctx, "before", strings.NewReader("stored before"), 13, objstore.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	start := time.Now()
	for call, err := range everyCall(s, before.ETag) {
		if !errors.Is(err, objstore.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", call, err)
			continue
		}
		for _, kind := range []error{objstore.ErrNotExist, objstore.ErrExists, objstore.ErrPrecondition} {
			if errors.Is(err, kind) {
				t.Errorf("%s with the server down is also %v", call, kind)
			}
		}
		if strings.Contains(err.Error(), srv.SecretKey) || strings.Contains(err.Error(), "X-Amz-Signature") {
			t.Errorf("%s: the error shows a secret: %v", call, err)
		}
	}
	t.Logf("every call answered unavailable; all of them took %s", time.Since(start))

	srv.Start()
	for call, err := range everyCall(s, before.ETag) {
		if err != nil {
			t.Errorf("%s after the restart: %v", call, err)
		}
	}
	// The if-match put above replaced "before"; "during-new" was created
	// now, not by a false acknowledgement during the outage.
	got, _, err := objstore.ReadAll(ctx, s, "before")
	if err != nil || string(got) != "during" {
		t.Fatalf("after the restart, before holds %q (%v)", got, err)
	}
}

// TestS3Unresponsive: a server that accepts connections and never answers
// (a hung process, a black-holed route) costs ResponseTimeout per attempt,
// then ErrUnavailable.
func TestS3Unresponsive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }() // read, never reply
		}
	}()
	s, err := objstore.NewS3(objstore.S3Config{
		Endpoint: l.Addr().String(), Bucket: "bucket", Region: "us-east-1", Insecure: true,
		Credentials:     objstore.Credentials{AccessKeyID: "k", SecretAccessKey: "s3cr3t-value"},
		MaxRetries:      1,
		DialTimeout:     time.Second,
		ResponseTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(context.Background(), "x")
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("stat of a silent server: %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "s3cr3t-value") {
		t.Fatalf("the error shows the secret: %v", err)
	}
	_, err = s.Put(context.Background(), "x", strings.NewReader("x"), 1, objstore.PutOptions{CreateOnly: true})
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("put to a silent server: %v, want ErrUnavailable", err)
	}
}

// lossyProxy forwards requests to an S3 server; drop says whether to
// swallow a request's reply (after the server has acted on it) by closing
// the connection, as a network that fails at the wrong moment does.
func lossyProxy(t *testing.T, target string, drop func(*http.Request) bool) string {
	t.Helper()
	tr := &http.Transport{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.RequestURI = "http", target, ""
		out.Host = r.Host // the signature covers the host the client named
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if drop(r) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(tr.CloseIdleConnections)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestS3ConditionalPutSentOnce: when the reply to a conditional put is
// lost after the server stored it, the put answers ErrUnavailable (the
// outcome is unknown), not the ErrExists or ErrPrecondition that a retry
// would have met, and Update does not apply its change twice. Plain puts
// are retried: the retry stores the same bytes again.
func TestS3ConditionalPutSentOnce(t *testing.T) {
	srv := testenv.S3(t)
	var armed atomic.Bool // drop the next PUT's reply
	endpoint := lossyProxy(t, srv.Endpoint, func(r *http.Request) bool {
		return r.Method == http.MethodPut && armed.CompareAndSwap(true, false)
	})
	s := s3Store(t, srv, func(cfg *objstore.S3Config) { cfg.Endpoint = endpoint })
	ctx := context.Background()

	armed.Store(true)
	_, err := s.Put(ctx, "token", strings.NewReader("v1"), 2, objstore.PutOptions{CreateOnly: true})
	if !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrExists) {
		t.Fatalf("create-only put whose reply was lost: %v, want ErrUnavailable", err)
	}
	if got, _, err := objstore.ReadAll(ctx, s, "token"); err != nil || string(got) != "v1" {
		t.Fatalf("the server did store it: %q, %v", got, err)
	}

	// Update: the lost reply surfaces; the change is applied once.
	armed.Store(true)
	_, err = objstore.Update(ctx, s, "token", func(old []byte, _ bool) ([]byte, error) { return append(old, '+'), nil })
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("update whose reply was lost: %v, want ErrUnavailable", err)
	}
	if got, _, _ := objstore.ReadAll(ctx, s, "token"); string(got) != "v1+" {
		t.Fatalf("after one update the object is %q, want v1+", got)
	}

	// An unconditional put is retried and succeeds.
	armed.Store(true)
	if _, err := s.Put(ctx, "plain", strings.NewReader("same"), 4, objstore.PutOptions{}); err != nil {
		t.Fatalf("plain put whose first reply was lost: %v", err)
	}
	if armed.Load() {
		t.Fatal("the proxy dropped no reply")
	}
}
