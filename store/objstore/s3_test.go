package objstore_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/store/objstore/objstoretest"
)

// s3Store opens a store on srv under a fresh prefix, parsing the URL the
// way serve will.
func s3Store(t testing.TB, srv *testenv.S3Server, tune func(*objstore.S3Config)) *objstore.S3 {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	cfg, err := objstore.ParseS3URL(srv.URL("t-" + hex.EncodeToString(b)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = objstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	if tune != nil {
		tune(&cfg)
	}
	s, err := objstore.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestS3Conformance(t *testing.T) {
	srv := testenv.S3(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return s3Store(t, srv, nil) })
}
