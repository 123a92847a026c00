package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials are the keys an S3 store signs requests with. The command
// line reads them (CredentialsFromEnv) and passes them in; library code
// never reads the environment. They never reach a log, an error message
// or the store's String: every way of printing them redacts.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// CredentialsFromEnv reads the standard AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN through getenv (os.Getenv in
// the command).
func CredentialsFromEnv(getenv func(string) string) Credentials {
	return Credentials{
		AccessKeyID:     getenv("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken:    getenv("AWS_SESSION_TOKEN"),
	}
}

func (c Credentials) String() string {
	set := func(s string) string {
		if s == "" {
			return "unset"
		}
		return "set"
	}
	return "credentials(access key " + set(c.AccessKeyID) + ", secret " + set(c.SecretAccessKey) +
		", session token " + set(c.SessionToken) + ")"
}

// GoString keeps %#v from printing the fields.
func (c Credentials) GoString() string { return c.String() }

// LogValue keeps slog from printing the fields.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// S3Config says where an S3 store is and how patiently to reach it.
type S3Config struct {
	// Endpoint is host:port of the S3 server (default s3.amazonaws.com).
	Endpoint string
	// Bucket holds the objects, under Prefix (no leading or trailing "/").
	Bucket string
	Prefix string
	Region string
	// Insecure speaks plain HTTP (a server on loopback).
	Insecure    bool
	Credentials Credentials
	// DialTimeout bounds connecting (default 3s); ResponseTimeout bounds
	// the wait for a reply's headers (default 30s); MaxRetries is the
	// attempts per request, the first included (default 3, 1: no retry).
	// Together they bound how long a call takes to answer ErrUnavailable
	// when the server is down.
	DialTimeout     time.Duration
	ResponseTimeout time.Duration
	MaxRetries      int
	// PartSize is the multipart upload's part size (default and minimum
	// 16 MiB); larger objects, and objects of unknown size, go up in parts.
	PartSize uint64
	// Dial, when set, opens the connections to the server instead of a
	// net.Dialer bounded by DialTimeout (a test counts them with it).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

const minPartSize = 16 << 20

// ParseS3URL reads s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R&insecure=1
// (also retries=N and timeout=DURATION, the ResponseTimeout). Credentials
// never go in the URL, which is logged: one with a user part is refused.
func ParseS3URL(raw string) (S3Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input, which might hold a secret.
		return S3Config{}, errors.New("objstore: the S3 URL does not parse")
	}
	if u.Scheme != "s3" {
		return S3Config{}, fmt.Errorf("objstore: %q is not an s3:// URL", u.Scheme+"://…")
	}
	if u.User != nil {
		return S3Config{}, errors.New("objstore: the S3 URL holds credentials; pass them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead")
	}
	if u.Host == "" {
		return S3Config{}, errors.New("objstore: the S3 URL names no bucket (s3://BUCKET/PREFIX)")
	}
	cfg := S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	for name, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "endpoint":
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "insecure":
			cfg.Insecure, err = strconv.ParseBool(v)
		case "retries":
			cfg.MaxRetries, err = strconv.Atoi(v)
			if err == nil && cfg.MaxRetries < 1 {
				err = errors.New("want 1 or more")
			}
		case "timeout":
			cfg.ResponseTimeout, err = time.ParseDuration(v)
		default:
			return S3Config{}, fmt.Errorf("objstore: unknown S3 URL parameter %q (known: endpoint, region, insecure, retries, timeout)", name)
		}
		if err != nil {
			return S3Config{}, fmt.Errorf("objstore: S3 URL parameter %s=%q: %v", name, v, err)
		}
	}
	return cfg, nil
}

// URL is the config's s3:// URL, without credentials.
func (c S3Config) URL() string {
	u := url.URL{Scheme: "s3", Host: c.Bucket}
	if c.Prefix != "" {
		u.Path = "/" + c.Prefix
	}
	q := url.Values{}
	if c.Endpoint != "" {
		q.Set("endpoint", c.Endpoint)
	}
	if c.Region != "" {
		q.Set("region", c.Region)
	}
	if c.Insecure {
		q.Set("insecure", "1")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// S3 is a Store in an S3 bucket (any S3-compatible server), through
// minio-go. The object "k" is BUCKET/PREFIX/k. Conditional puts are the
// server's: If-None-Match: * and If-Match on PutObject and on completing a
// multipart upload.
type S3 struct {
	cfg    S3Config
	client *minio.Client
	// once sends a conditional write exactly once. Retried after a lost
	// reply, a create-only or if-match put that succeeded would come back
	// as ErrExists or ErrPrecondition, and read-modify-write would apply
	// its change twice; unretried, it fails as ErrUnavailable, which says
	// the outcome is unknown.
	once   *minio.Client
	prefix string // "" or "PREFIX/"
}

// NewS3 makes an S3 store. It sends nothing; Check asks the server.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: no S3 bucket")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "s3.amazonaws.com"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if cfg.ResponseTimeout <= 0 {
		cfg.ResponseTimeout = 30 * time.Second
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 3
	}
	if cfg.PartSize < minPartSize {
		cfg.PartSize = minPartSize
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	tr, err := minio.DefaultTransport(!cfg.Insecure)
	if err != nil {
		return nil, err
	}
	tr.DialContext = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	if cfg.Dial != nil {
		tr.DialContext = cfg.Dial
	}
	tr.ResponseHeaderTimeout = cfg.ResponseTimeout
	// A connection finished with is kept for the next request only while
	// fewer than this many to the server are idle: minio-go's 16 made a
	// node with more requests in flight (its ingest, collection and blob
	// writes) close and re-dial the rest.
	tr.MaxIdleConnsPerHost = maxIdlePerHost
	cr := cfg.Credentials
	newClient := func(retries int) (*minio.Client, error) {
		return minio.New(cfg.Endpoint, &minio.Options{
			Creds:      credentials.NewStaticV4(cr.AccessKeyID, cr.SecretAccessKey, cr.SessionToken),
			Secure:     !cfg.Insecure,
			Region:     cfg.Region,
			Transport:  tr,
			MaxRetries: retries,
			// A named endpoint (not AWS) serves buckets by path.
			BucketLookup: lookupFor(cfg.Endpoint),
		})
	}
	client, err := newClient(cfg.MaxRetries)
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 endpoint %q: %w", cfg.Endpoint, err)
	}
	once, err := newClient(1)
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 endpoint %q: %w", cfg.Endpoint, err)
	}
	s := &S3{cfg: cfg, client: client, once: once}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	return s, nil
}

func lookupFor(endpoint string) minio.BucketLookupType {
	if strings.HasSuffix(strings.Split(endpoint, ":")[0], "amazonaws.com") {
		return minio.BucketLookupAuto
	}
	return minio.BucketLookupPath
}

func (s *S3) String() string { return s.cfg.URL() }

// Check asks the server whether the bucket exists and the credentials
// work, for a clear refusal at start rather than at the first write.
func (s *S3) Check(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return s.wrap(ctx, "check", "", err, condNone)
	}
	if !ok {
		return &Error{Op: "check", Kind: ErrNotExist, Err: fmt.Errorf("bucket %q does not exist on %s", s.cfg.Bucket, s.cfg.Endpoint)}
	}
	return nil
}

func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	// The payload is sent unsigned (UNSIGNED-PAYLOAD, as minio-go does over
	// TLS anyway) and without Content-MD5: on versitygw, 4 MiB PUTs ran at
	// about half the raw rate with minio-go's chunk-signed payload (its
	// way over plain HTTP), and at a third with Content-MD5, against the
	// raw rate without either (on a busy machine: roughly). Integrity on the way comes from TLS in
	// production and from the blob layer's content addresses, checked on
	// read.
	po := minio.PutObjectOptions{PartSize: s.cfg.PartSize, ContentType: "application/octet-stream", DisableContentSha256: true}
	cond := condNone
	switch {
	case opts.CreateOnly:
		po.SetMatchETagExcept("*")
		cond = condCreate
	case opts.IfMatch != "":
		po.SetMatchETag(opts.IfMatch)
		cond = condMatch
	}
	// The body is read a part at a time: a body that fits one part goes up
	// in one PutObject (from memory, so minio-go can retry it), a larger
	// one as a multipart upload driven here, because minio-go's own drops
	// the conditional headers when it completes the upload, and the
	// condition must hold at completion.
	part, eof, err := readPart(r, size, int64(s.cfg.PartSize))
	if err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	if eof {
		up, err := s.coreFor(cond).PutObject(ctx, s.cfg.Bucket, s.prefix+key, bytes.NewReader(part), int64(len(part)), "", "", po)
		if err != nil {
			return Info{}, s.wrap(ctx, "put", key, err, cond)
		}
		return Info{Key: key, Size: int64(len(part)), ETag: strings.Trim(up.ETag, `"`), ModTime: up.LastModified}, nil
	}
	return s.putMultipart(ctx, key, r, size, part, po, cond)
}

func (s *S3) core() minio.Core { return minio.Core{Client: s.client} }

// coreFor is the client for a put: conditional ones are sent once.
func (s *S3) coreFor(cond condition) minio.Core {
	if cond != condNone {
		return minio.Core{Client: s.once}
	}
	return s.core()
}

// readPart reads the next part of a body: max bytes, or what is left of
// size (-1: unknown). eof says the body ends with this part. A body
// shorter than size is an error.
func readPart(r io.Reader, size, max int64) (part []byte, eof bool, err error) {
	n := max
	if size >= 0 && size < max {
		n = size
	}
	buf := make([]byte, n)
	m, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if size >= 0 {
			return nil, false, fmt.Errorf("short body: %d of %d bytes", m, n)
		}
		return buf[:m], true, nil
	case err != nil:
		return nil, false, err
	}
	return buf, size >= 0 && size <= max, nil
}

func (s *S3) putMultipart(ctx context.Context, key string, r io.Reader, size int64, first []byte, po minio.PutObjectOptions, cond condition) (Info, error) {
	core := s.core()
	object := s.prefix + key
	id, err := core.NewMultipartUpload(ctx, s.cfg.Bucket, object, minio.PutObjectOptions{ContentType: po.ContentType})
	if err != nil {
		return Info{}, s.wrap(ctx, "put", key, err, condNone)
	}
	completed := false
	defer func() {
		if !completed {
			// Free the parts; bounded, and even when ctx has ended.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = core.AbortMultipartUpload(actx, s.cfg.Bucket, object, id)
			cancel()
		}
	}()
	var parts []minio.CompletePart
	var total int64
	part := first
	for {
		p, err := core.PutObjectPart(ctx, s.cfg.Bucket, object, id, len(parts)+1, bytes.NewReader(part), int64(len(part)),
			minio.PutObjectPartOptions{DisableContentSha256: true})
		if err != nil {
			return Info{}, s.wrap(ctx, "put", key, err, condNone)
		}
		parts = append(parts, minio.CompletePart{PartNumber: p.PartNumber, ETag: p.ETag})
		total += int64(len(part))
		left := int64(-1)
		if size >= 0 {
			left = size - total
			if left == 0 {
				break
			}
		}
		var eof bool
		part, eof, err = readPart(r, left, int64(s.cfg.PartSize))
		if err != nil {
			return Info{}, &Error{Op: "put", Key: key, Err: err}
		}
		if eof && len(part) == 0 {
			break // an unknown size that ended on a part boundary
		}
	}
	up, err := s.coreFor(cond).CompleteMultipartUpload(ctx, s.cfg.Bucket, object, id, parts, po)
	if err != nil {
		return Info{}, s.wrap(ctx, "put", key, err, cond)
	}
	completed = true
	return Info{Key: key, Size: total, ETag: strings.Trim(up.ETag, `"`), ModTime: up.LastModified}, nil
}

func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, err
	}
	body, oi, _, err := s.core().GetObject(ctx, s.cfg.Bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, s.wrap(ctx, "get", key, err, condNone)
	}
	return &s3Body{rc: body, key: key}, s.info(key, oi), nil
}

func (s *S3) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if offset < 0 || length < -1 {
		return nil, &Error{Op: "get", Key: key, Err: fmt.Errorf("bad range %d+%d", offset, length)}
	}
	if length == 0 {
		return s.emptyAt(ctx, key, offset)
	}
	var gopts minio.GetObjectOptions
	switch {
	case length > 0:
		_ = gopts.SetRange(offset, offset+length-1)
	case offset > 0:
		_ = gopts.SetRange(offset, 0) // bytes=offset-
	}
	body, _, _, err := s.core().GetObject(ctx, s.cfg.Bucket, s.prefix+key, gopts)
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusRequestedRangeNotSatisfiable {
			// S3 refuses a range starting at the end; the interface gives
			// an empty one there, the same as Local.
			return s.emptyAt(ctx, key, offset)
		}
		return nil, s.wrap(ctx, "get", key, err, condNone)
	}
	return &s3Body{rc: body, key: key}, nil
}

// emptyAt answers an empty range at offset: empty at or before the end,
// ErrRange beyond it.
func (s *S3) emptyAt(ctx context.Context, key string, offset int64) (io.ReadCloser, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if offset > info.Size {
		return nil, &Error{Op: "get", Key: key, Kind: ErrRange, Err: fmt.Errorf("offset %d, size %d", offset, info.Size)}
	}
	return io.NopCloser(strings.NewReader("")), nil
}

func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.cfg.Bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.wrap(ctx, "stat", key, err, condNone)
	}
	return s.info(key, oi), nil
}

func (s *S3) info(key string, oi minio.ObjectInfo) Info {
	return Info{Key: key, Size: oi.Size, ETag: strings.Trim(oi.ETag, `"`), ModTime: oi.LastModified}
}

// List pages through ListObjectsV2 (1000 keys a page) as the loop asks.
func (s *S3) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // stops minio's lister when the loop ends early
		for oi := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
			if oi.Err != nil {
				yield(Info{}, s.wrap(ctx, "list", prefix, oi.Err, condNone))
				return
			}
			if !yield(s.info(strings.TrimPrefix(oi.Key, s.prefix), oi), nil) {
				return
			}
		}
	}
}

func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		return s.wrap(ctx, "delete", key, err, condNone)
	}
	return nil
}

// DeleteMany removes keys with S3's multi-object delete (POST ?delete),
// 1,000 keys a request: collecting a sealed recording's batches or a
// removed recording's objects costs one request, not one per object. A
// key already gone is no failure, as for Delete.
func (s *S3) DeleteMany(ctx context.Context, keys []string) error {
	if err := checkKeys(keys); err != nil {
		return err
	}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), deleteManyMax)]
		keys = keys[len(chunk):]
		objs := make(chan minio.ObjectInfo, len(chunk))
		for _, key := range chunk {
			objs <- minio.ObjectInfo{Key: s.prefix + key}
		}
		close(objs)
		var first error
		for res := range s.client.RemoveObjectsWithResult(ctx, s.cfg.Bucket, objs, minio.RemoveObjectsOptions{}) {
			if res.Err == nil || first != nil {
				continue
			}
			err := s.wrap(ctx, "delete", strings.TrimPrefix(res.ObjectName, s.prefix), res.Err, condNone)
			if errors.Is(err, ErrNotExist) {
				continue
			}
			first = err
		}
		if first != nil {
			return first
		}
	}
	return nil
}

type condition int

const (
	condNone condition = iota
	condCreate
	condMatch
)

// wrap classifies a minio-go error. The cause kept is the server's code and
// message, or the network error without its URL: the message never holds
// a signed URL or a credential.
func (s *S3) wrap(ctx context.Context, op, key string, err error, cond condition) error {
	e := &Error{Op: op, Key: key}
	resp := minio.ToErrorResponse(err)
	switch {
	case ctx.Err() != nil:
		// The caller gave up (or its deadline passed): say so, not "down".
		e.Err = ctx.Err()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			e.Kind = ErrUnavailable
		}
		return e
	case resp.Code != "" || resp.StatusCode != 0:
		e.Err = fmt.Errorf("%s (HTTP %d): %s", resp.Code, resp.StatusCode, resp.Message)
	default:
		e.Err = withoutURL(err)
	}
	switch {
	case cond != condNone && (resp.StatusCode == http.StatusPreconditionFailed || resp.StatusCode == http.StatusConflict ||
		resp.Code == "PreconditionFailed" || resp.Code == "ConditionalRequestConflict"):
		// 409: AWS's answer to two conditional writes racing.
		e.Kind = ErrPrecondition
		if cond == condCreate {
			e.Kind = ErrExists
		}
	case cond == condMatch && (resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchKey"):
		// If-Match on a key that is gone: it changed.
		e.Kind = ErrPrecondition
	case resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchKey" || resp.Code == "NotFound":
		e.Kind = ErrNotExist
		if resp.Code == "NoSuchBucket" {
			e.Kind = nil // a configuration fault, not a missing object
		}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
		resp.Code == "SlowDown" || resp.Code == "RequestTimeout":
		e.Kind = ErrUnavailable
	case resp.Code == "" && resp.StatusCode == 0 && transient(err):
		e.Kind = ErrUnavailable
	}
	return e
}

// transient says whether a non-S3 error is the network's: a refused or
// dropped connection, a timeout, a truncated reply.
func transient(err error) bool {
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "is offline")
}

// withoutURL drops a *url.Error's URL (its query may be signed) and keeps
// the method and the cause.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// s3Body classifies an error met while reading a body: a connection lost
// mid-object is ErrUnavailable, like one lost before it.
type s3Body struct {
	rc  io.ReadCloser
	key string
}

func (b *s3Body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		err = &Error{Op: "get", Key: b.key, Kind: ErrUnavailable, Err: withoutURL(err)}
	}
	return n, err
}

// Close reads what is left of a short remainder first: net/http keeps a
// connection for the next request only once its body was read to the end,
// and re-dialing costs more than reading a few kilobytes. A longer
// remainder is left, and its connection closed; so is a server that stops
// sending, after drainTime (closing the body ends the read), so that
// Close never waits on it.
func (b *s3Body) Close() error {
	stop := time.AfterFunc(drainTime, func() { _ = b.rc.Close() })
	_, _ = io.CopyN(io.Discard, b.rc, drainLimit)
	stop.Stop()
	return b.rc.Close()
}

const (
	// maxIdlePerHost is how many idle connections to the server the
	// client keeps (see NewS3).
	maxIdlePerHost = 64
	// drainLimit and drainTime bound what a Close reads to keep its
	// connection.
	drainLimit = 64 << 10
	drainTime  = time.Second
)

var _ Store = (*S3)(nil)
