package devcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// VersityGW is a private versitygw (an S3 server on its posix backend,
// plain HTTP on loopback) that is started, stopped and started again on
// the same port and directory.
type VersityGW struct {
	// Endpoint is host:port on loopback.
	Endpoint string
	// AccessKey and SecretKey are the server's root credentials.
	AccessKey, SecretKey string
	Bucket, Region       string

	path string // the versitygw binary
	dir  string // the posix backend's root: one directory per bucket

	mu sync.Mutex
	p  *Process // nil while stopped
}

// NewVersityGW describes a server on a free port with random root
// credentials, serving dir through the binary at path; Start starts it.
func NewVersityGW(path, dir, bucket string) (*VersityGW, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &VersityGW{
		Endpoint:  fmt.Sprintf("127.0.0.1:%d", port),
		AccessKey: "dev" + RandomHex(8),
		SecretKey: RandomHex(20),
		Bucket:    bucket,
		Region:    "us-east-1",
		path:      path,
		dir:       dir,
	}, nil
}

// RandomHex is n random bytes in hex (names and credentials of private
// servers).
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// URL is the s3:// URL of prefix in the bucket (objstore.ParseS3URL's form).
func (s *VersityGW) URL(prefix string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "region": {s.Region}, "insecure": {"1"}}
	return "s3://" + s.Bucket + "/" + strings.Trim(prefix, "/") + "?" + q.Encode()
}

// Client is a minio-go client of the server, with its root credentials.
func (s *VersityGW) Client() (*minio.Client, error) {
	return minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
	})
}

// LogPath is beside the served directory, not in it (it would be a bucket).
func (s *VersityGW) LogPath() string { return strings.TrimRight(s.dir, "/") + ".log" }

// Start starts the server (again, after Stop) and waits until it answers
// S3 requests.
func (s *VersityGW) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		return nil
	}
	// Credentials go in the environment (versitygw reads ROOT_ACCESS_KEY
	// and ROOT_SECRET_KEY), not argv, where ps would show them. They are
	// all of it: the server needs nothing else, and none of ours leaks in.
	// --keep-alive: without it versitygw answers every request with
	// "Connection: close", and each client request dials anew (a dial per
	// request cost each flightrec node 5–11% of its CPU).
	cmd := exec.Command(s.path, "--port", s.Endpoint, "--keep-alive", "posix", s.dir)
	cmd.Env = []string{"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey}
	p, err := StartProcess(cmd, s.LogPath())
	if err != nil {
		return fmt.Errorf("start versitygw: %w", err)
	}
	s.p = p
	client, err := s.Client()
	if err == nil {
		err = WaitUntil(30*time.Second, 25*time.Millisecond, p.Exited(), s.Endpoint, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := client.ListBuckets(ctx)
			return err
		})
	}
	if err != nil {
		s.stopLocked()
		return fmt.Errorf("versitygw did not start: %v\n%s", err, LogTail(s.LogPath()))
	}
	return nil
}

// MakeBucket creates the bucket unless it exists (a directory started
// again).
func (s *VersityGW) MakeBucket(ctx context.Context) error {
	client, err := s.Client()
	if err != nil {
		return err
	}
	if ok, err := client.BucketExists(ctx, s.Bucket); err == nil && ok {
		return nil
	}
	if err := client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		return fmt.Errorf("versitygw: create bucket %s: %v\n%s", s.Bucket, err, LogTail(s.LogPath()))
	}
	return nil
}

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after 30s).
// Its objects stay on disk for Start.
func (s *VersityGW) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *VersityGW) stopLocked() { stopProcess(&s.p, 30*time.Second) }

// Pid is the server's process id (0 while stopped).
func (s *VersityGW) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return s.p.Pid()
}
