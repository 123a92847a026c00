package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/objstore"
)

func TestParseS3URL(t *testing.T) {
	cfg, err := objstore.ParseS3URL("s3://my-bucket/some/prefix/?endpoint=127.0.0.1:9000&region=eu-west-1&insecure=1&retries=4&timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	want := objstore.S3Config{Endpoint: "127.0.0.1:9000", Bucket: "my-bucket", Prefix: "some/prefix", Region: "eu-west-1",
		Insecure: true, MaxRetries: 4, ResponseTimeout: 5 * time.Second}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("parsed %+v, want %+v", cfg, want)
	}
	if back, _ := objstore.ParseS3URL(cfg.URL()); back.Bucket != cfg.Bucket || back.Prefix != cfg.Prefix || back.Endpoint != cfg.Endpoint || !back.Insecure {
		t.Fatalf("URL %s parsed back as %+v", cfg.URL(), back)
	}
	if cfg, err := objstore.ParseS3URL("s3://b"); err != nil || cfg.Bucket != "b" || cfg.Prefix != "" || cfg.Insecure {
		t.Fatalf("s3://b: %+v, %v", cfg, err)
	}
	for _, bad := range []string{
		"s3://AKIAEXAMPLE:hunter2secret@bucket/p", // credentials belong in AWS_*, not in a logged URL
		"s3:///prefix", "http://bucket/p", "s3://b/p?endpont=x", "s3://b?insecure=maybe", "s3://b?retries=0",
		"s3://b?timeout=soon", "s3://b/%zz",
	} {
		_, err := objstore.ParseS3URL(bad)
		if err == nil {
			t.Errorf("%q parsed", bad)
			continue
		}
		if strings.Contains(err.Error(), "hunter2secret") {
			t.Errorf("the error for a URL with credentials repeats the secret: %v", err)
		}
	}
}

func TestCredentialsFromEnvAndRedaction(t *testing.T) {
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY": "wJalrSECRET", "AWS_SESSION_TOKEN": "tokSESSION"}
	cr := objstore.CredentialsFromEnv(func(k string) string { return env[k] })
	if cr.AccessKeyID != "AKIAEXAMPLEKEY" || cr.SecretAccessKey != "wJalrSECRET" || cr.SessionToken != "tokSESSION" {
		t.Fatalf("read %+v", cr) // %+v is redacted, so this message is safe too
	}
	cfg := objstore.S3Config{Bucket: "b", Endpoint: "127.0.0.1:1", Insecure: true, Credentials: cr}
	s, err := objstore.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("opened", "credentials", cr, "config", cfg)
	for _, shown := range []string{
		fmt.Sprint(cr), fmt.Sprintf("%+v", cr), fmt.Sprintf("%#v", cr), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg),
		s.String(), cfg.URL(), logged.String(),
	} {
		for _, secret := range []string{"AKIAEXAMPLEKEY", "wJalrSECRET", "tokSESSION"} {
			if strings.Contains(shown, secret) {
				t.Fatalf("%q shows a credential", shown)
			}
		}
	}
	if !strings.Contains(fmt.Sprint(cr), "secret set") {
		t.Fatalf("the redacted form does not say the secret is set: %s", cr)
	}
}

// TestS3WrongCredentials: a refused signature is neither "not found" nor
// "unavailable" (retrying cannot help), and the error shows no secret.
func TestS3WrongCredentials(t *testing.T) {
	srv := testenv.S3(t)
	cfg, err := objstore.ParseS3URL(srv.URL("p"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = objstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: "wrong-secret-value"}
	s, err := objstore.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(context.Background(), "k", strings.NewReader("x"), 1, objstore.PutOptions{})
	if err == nil {
		t.Fatal("a put with a wrong secret was accepted")
	}
	for _, kind := range []error{objstore.ErrNotExist, objstore.ErrUnavailable, objstore.ErrExists, objstore.ErrPrecondition} {
		if errors.Is(err, kind) {
			t.Fatalf("a refused signature is %v: %v", kind, err)
		}
	}
	if strings.Contains(err.Error(), "wrong-secret-value") || strings.Contains(err.Error(), srv.SecretKey) {
		t.Fatalf("the error shows a secret: %v", err)
	}
	if err := s.Check(context.Background()); err == nil {
		t.Fatal("Check passed with a wrong secret")
	}
	good := s3Store(t, srv, nil)
	if err := good.Check(context.Background()); err != nil {
		t.Fatalf("Check with the right credentials: %v", err)
	}
	cfg.Bucket, cfg.Credentials.SecretAccessKey = "no-such-bucket", srv.SecretKey
	missing, _ := objstore.NewS3(cfg)
	if err := missing.Check(context.Background()); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("Check of a missing bucket: %v", err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, target := range []string{dir, "file://" + dir} {
		s, err := objstore.Open(target, objstore.Credentials{})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if _, ok := s.(*objstore.Local); !ok || s.String() != "file://"+dir {
			t.Fatalf("%s opened %T %s", target, s, s)
		}
		s.(*objstore.Local).Close()
	}
	s, err := objstore.Open("s3://bucket/p?endpoint=127.0.0.1:9&insecure=1", objstore.Credentials{SecretAccessKey: "shh-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*objstore.S3); !ok || s.String() != "s3://bucket/p?endpoint=127.0.0.1%3A9&insecure=1" {
		t.Fatalf("opened %T %s", s, s)
	}
	for _, bad := range []string{"", "gs://bucket", "s3://"} {
		if _, err := objstore.Open(bad, objstore.Credentials{}); err == nil {
			t.Errorf("%q opened", bad)
		}
	}
}
