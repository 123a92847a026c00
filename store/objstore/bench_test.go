package objstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/objstore"
)

// BenchmarkObjstore measures PUT and GET of objects of the pack size
// (4 MiB) and of a small blob (64 KiB): on versitygw through the S3 store,
// on versitygw raw (plain net/http with presigned URLs: the server's own
// rate, no SDK in the way), and on local files. Later ingest figures are
// given as a ratio to the raw rate. Each PUT writes a new key, as
// content-addressed writes do; each GET reads one stored object again.
//
//	go test -run '^$' -bench Objstore -benchtime 2s ./store/objstore/
func BenchmarkObjstore(b *testing.B) {
	srv := testenv.S3(b)
	s3 := s3Store(b, srv, nil)
	local, err := objstore.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	raw := &rawS3{srv: srv, signer: srv.Client(), prefix: "raw-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"}
	for _, size := range []int{4 << 20, 64 << 10} {
		data := make([]byte, size)
		rand.Read(data)
		name := fmt.Sprintf("%dKiB", size>>10)
		for _, st := range []struct {
			name string
			put  func(key string) error
			get  func(key string) error
		}{
			{"s3", storePut(s3, data), storeGet(s3)},
			{"raw", func(key string) error { return raw.put(key, data) }, raw.get},
			{"local", storePut(local, data), storeGet(local)},
		} {
			b.Run(name+"/put/"+st.name, func(b *testing.B) { benchOps(b, size, 1, st.put, "put") })
			b.Run(name+"/put4/"+st.name, func(b *testing.B) { benchOps(b, size, 4, st.put, "put") })
			if err := st.put("get-me-" + name); err != nil {
				b.Fatal(err)
			}
			get := func(string) error { return st.get("get-me-" + name) }
			b.Run(name+"/get/"+st.name, func(b *testing.B) { benchOps(b, size, 1, get, "get") })
			b.Run(name+"/get4/"+st.name, func(b *testing.B) { benchOps(b, size, 4, get, "get") })
		}
	}
}

var benchKey atomic.Int64

// benchOps runs op b.N times from the given number of goroutines and
// reports bytes per second and operations per second.
func benchOps(b *testing.B, size, workers int, op func(key string) error, what string) {
	b.SetBytes(int64(size))
	var next atomic.Int64
	errs := make(chan error, workers)
	b.ResetTimer()
	start := time.Now()
	for range workers {
		go func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(fmt.Sprintf("%s/%d", what, benchKey.Add(1))); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

func storePut(s objstore.Store, data []byte) func(string) error {
	return func(key string) error {
		_, err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{})
		return err
	}
}

func storeGet(s objstore.Store) func(string) error {
	return func(key string) error {
		rc, _, err := s.Get(context.Background(), key)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	}
}

// rawS3 talks to versitygw with net/http alone; minio-go only signs the
// URLs (a local HMAC, no request).
type rawS3 struct {
	srv    *testenv.S3Server
	signer *minio.Client
	prefix string
	http   http.Client
}

func (r *rawS3) do(req *http.Request, want int) error {
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s: HTTP %d", req.Method, resp.StatusCode)
	}
	return nil
}

func (r *rawS3) put(key string, data []byte) error {
	u, err := r.signer.PresignedPutObject(context.Background(), r.srv.Bucket, r.prefix+key, time.Hour)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPut, u.String(), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(data))
	return r.do(req, http.StatusOK)
}

func (r *rawS3) get(key string) error {
	u, err := r.signer.PresignedGetObject(context.Background(), r.srv.Bucket, r.prefix+key, time.Hour, nil)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	return r.do(req, http.StatusOK)
}
