package testenv

import (
	"context"
	"go/build"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/flightrec/flightrec/internal/devcluster"
	"github.com/flightrec/flightrec/store/objstore"
)

// VersityGWPath returns the versitygw binary to run: $VERSITYGW, else
// versitygw on $PATH, else the one `go install` put in $GOPATH/bin.
func VersityGWPath() (path string, ok bool) {
	return devcluster.VersityGWPath(os.Getenv, build.Default.GOPATH)
}

// S3Server is a private versitygw (an S3 server on its posix backend) that
// a test starts, stops and starts again. Its Endpoint (host:port on
// loopback, plain HTTP), root AccessKey and SecretKey (random), Bucket
// and Region are devcluster.VersityGW's.
type S3Server struct {
	*devcluster.VersityGW
	t testing.TB
}

// S3 starts a private versitygw on a free loopback port, serving a
// temporary directory, creates a bucket on it and stops it when the test
// ends. Without versitygw the test is skipped on a developer's machine
// and fails in CI (CI set).
func S3(t testing.TB) *S3Server {
	t.Helper()
	path, ok := VersityGWPath()
	if !ok {
		Missing(t, "versitygw not found ("+path+"): "+devcluster.VersityGWHelp)
	}
	gw, err := devcluster.NewVersityGW(path, t.TempDir(), "flightrec-test")
	if err != nil {
		t.Fatal(err)
	}
	s := &S3Server{VersityGW: gw, t: t}
	// Registered after t.TempDir, so it runs first: the server is gone
	// before its directory is removed.
	t.Cleanup(s.Stop)
	s.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := gw.MakeBucket(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// Client is a minio-go client of the server, with its root credentials.
func (s *S3Server) Client() *minio.Client {
	c, err := s.VersityGW.Client()
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// Start starts the server (again, on the same port and directory, after
// Stop) and waits until it answers S3 requests.
func (s *S3Server) Start() {
	s.t.Helper()
	if err := s.VersityGW.Start(); err != nil {
		s.t.Fatal(err)
	}
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
