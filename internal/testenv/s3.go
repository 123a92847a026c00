package testenv

import (
	"context"
	"go/build"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/flightrec/flightrec/store/objstore"
)

const versitygwHelp = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 (about 2 minutes; .ci/run does it), " +
	"or set $VERSITYGW to its path"

// VersityGWPath returns the versitygw binary to run: $VERSITYGW, else
// versitygw on $PATH, else the one `go install` put in $GOPATH/bin.
func VersityGWPath() (path string, ok bool) {
	if p := os.Getenv("VERSITYGW"); p != "" {
		_, err := exec.LookPath(p)
		return p, err == nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, true
	}
	for _, dir := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, true
		}
	}
	return "versitygw", false
}

// S3Server is a private versitygw (an S3 server on its posix backend) that
// a test starts, stops and starts again.
type S3Server struct {
	// Endpoint is host:port on loopback; the server speaks plain HTTP.
	Endpoint string
	// AccessKey and SecretKey are the server's root credentials (random).
	AccessKey, SecretKey string
	// Bucket exists when S3 returns.
	Bucket string
	Region string

	t    testing.TB
	path string
	dir  string // the posix backend's root: one directory per bucket

	mu sync.Mutex
	d  *daemon // nil while stopped
}

// S3 starts a private versitygw on a free loopback port, serving a
// temporary directory, creates a bucket on it and stops it when the test
// ends. Without versitygw the test is skipped on a developer's machine
// and fails in CI (CI set).
func S3(t testing.TB) *S3Server {
	t.Helper()
	path, ok := VersityGWPath()
	if !ok {
		Missing(t, "versitygw not found ("+path+"): "+versitygwHelp)
	}
	s := &S3Server{
		Endpoint:  "127.0.0.1:" + strconv.Itoa(freePort(t)),
		AccessKey: "test" + chRandomHex(8),
		SecretKey: chRandomHex(20),
		Bucket:    "flightrec-test",
		Region:    "us-east-1",
		t:         t,
		path:      path,
		dir:       t.TempDir(),
	}
	// Registered after t.TempDir, so it runs first: the server is gone
	// before its directory is removed.
	t.Cleanup(s.Stop)
	s.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Client().MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("versitygw: create bucket %s: %v\n%s", s.Bucket, err, logTail(s.logPath()))
	}
	return s
}

// URL is the s3:// URL of prefix in the bucket (objstore.ParseS3URL's form).
func (s *S3Server) URL(prefix string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "region": {s.Region}, "insecure": {"1"}}
	return "s3://" + s.Bucket + "/" + strings.Trim(prefix, "/") + "?" + q.Encode()
}

// Client is a minio-go client of the server, with its root credentials.
func (s *S3Server) Client() *minio.Client {
	c, err := minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// Start starts the server (again, on the same port and directory, after
// Stop) and waits until it answers S3 requests.
func (s *S3Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d != nil {
		return
	}
	// Credentials go in the environment (versitygw reads ROOT_ACCESS_KEY
	// and ROOT_SECRET_KEY), not argv, where ps would show them.
	cmd := exec.Command(s.path, "--port", s.Endpoint, "posix", s.dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	d, err := startDaemon(cmd, s.logPath())
	if err != nil {
		s.t.Fatalf("start versitygw: %v", err)
	}
	s.d = d
	if err := s.wait(30*time.Second, d.exited()); err != nil {
		s.stopLocked()
		s.t.Fatalf("versitygw did not start: %v\n%s", err, logTail(s.logPath()))
	}
}

// logPath is beside the served directory, not in it (it would be a bucket).
func (s *S3Server) logPath() string { return s.dir + ".log" }

// wait polls until the server answers a signed request (ListBuckets).
func (s *S3Server) wait(timeout time.Duration, exited <-chan error) error {
	client := s.Client()
	return waitUntil(timeout, 25*time.Millisecond, exited, s.Endpoint, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := client.ListBuckets(ctx)
		return err
	})
}

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after 30s).
// Its objects stay on disk for Start.
func (s *S3Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *S3Server) stopLocked() {
	if s.d == nil {
		return
	}
	s.d.stop(30 * time.Second)
	s.d = nil
}

// Store is an objstore.S3 on prefix of the server's bucket, signed with
// its root credentials, retrying each request twice at most (so that an
// outage is answered quickly).
func (s *S3Server) Store(t testing.TB, prefix string) *objstore.S3 {
	t.Helper()
	cfg, err := objstore.ParseS3URL(s.URL(prefix))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = s.Credentials()
	cfg.MaxRetries = 2
	st, err := objstore.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Credentials are the server's root credentials.
func (s *S3Server) Credentials() objstore.Credentials {
	return objstore.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
}
