package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/objstore"
)

// TestS3ReusesConnections: the requests a node sends (conditional puts,
// refused ones, stats of missing keys, whole and ranged reads, lists,
// deletes), from as many goroutines as a busy node runs, reuse the
// client's connections: a dial per request would cost a node 5–11% of
// its CPU.
func TestS3ReusesConnections(t *testing.T) {
	srv := testenv.S3(t)
	var dials atomic.Int64
	d := &net.Dialer{}
	s := s3Store(t, srv, func(c *objstore.S3Config) {
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		}
	})
	ctx := t.Context()
	const workers, perWorker = 24, 10
	body := bytes.Repeat([]byte("x"), 4096)
	// getThen gets an object and reads it with read before closing it.
	getThen := func(read func(io.Reader) error) func(w, i int) error {
		return func(w, i int) error {
			rc, _, err := s.Get(ctx, key(w, i))
			if err != nil {
				return err
			}
			defer rc.Close()
			return read(rc)
		}
	}
	ops := []struct {
		name string
		do   func(w, i int) error
	}{
		{"put create-only", func(w, i int) error {
			_, err := s.Put(ctx, key(w, i), bytes.NewReader(body), int64(len(body)), objstore.PutOptions{CreateOnly: true})
			return err
		}},
		{"put create-only, refused", func(w, i int) error {
			_, err := s.Put(ctx, key(w, i), bytes.NewReader(body), int64(len(body)), objstore.PutOptions{CreateOnly: true})
			if errors.Is(err, objstore.ErrExists) {
				return nil
			}
			return fmt.Errorf("want ErrExists, got %v", err)
		}},
		{"stat missing", func(w, i int) error {
			if _, err := s.Stat(ctx, key(w, i)+"-missing"); !errors.Is(err, objstore.ErrNotExist) {
				return fmt.Errorf("want ErrNotExist, got %v", err)
			}
			return nil
		}},
		{"get, read to the end", getThen(func(r io.Reader) error {
			_, err := io.Copy(io.Discard, r)
			return err
		})},
		{"get range, read its length", func(w, i int) error {
			rc, err := s.GetRange(ctx, key(w, i), 100, 1000)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.ReadFull(rc, make([]byte, 1000))
			return err
		}},
		{"get, closed half read", getThen(func(r io.Reader) error {
			_, err := io.ReadFull(r, make([]byte, 10))
			return err
		})},
		{"list", func(w, i int) error {
			for _, err := range s.List(ctx, fmt.Sprintf("reuse/%d/", w)) {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"delete", func(w, i int) error { return s.Delete(ctx, key(w, i)) }},
	}
	for _, op := range ops {
		before := dials.Load()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					if err := op.do(w, i); err != nil {
						errs <- fmt.Errorf("%s: %w", op.name, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		n := dials.Load() - before
		t.Logf("%-28s %4d dials for %d requests (%d per 1,000)", op.name, n, workers*perWorker, n*1000/(workers*perWorker))
		// The first phase opens a connection per goroutine (and a few
		// more, as a request may dial while another's connection comes
		// free); the others reuse them: a dial per request, or per
		// goroutine, is a connection thrown away after its request.
		if limit := int64(workers / 4); (op.name == ops[0].name && n > 2*workers) || (op.name != ops[0].name && n > limit) {
			t.Errorf("%s: %d dials for %d requests from %d goroutines: connections are not reused", op.name, n, workers*perWorker, workers)
		}
	}
}

func key(w, i int) string { return fmt.Sprintf("reuse/%d/%d", w, i) }

// TestS3CloseStalledBody: Close reads a short remainder to keep its
// connection, but a server that stops sending mid-body does not hold it:
// Close returns, and the connection is dropped.
func TestS3CloseStalledBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Header().Set("ETag", `"e"`)
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("0123456789"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	}))
	defer srv.Close()
	s, err := objstore.NewS3(objstore.S3Config{
		Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "bucket", Region: "us-east-1", Insecure: true,
		Credentials: objstore.Credentials{AccessKeyID: "k", SecretAccessKey: "s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Get(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- rc.Close() }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close waits on a server that stopped sending")
	}
}
