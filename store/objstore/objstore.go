// Package objstore is the small object-store interface that flightrec's
// blobs and shared state are written through, in the spirit of Grafana
// Tempo's backend RawReader/RawWriter: whole objects put and read by key,
// byte ranges, listing by prefix, and the two conditional writes that
// shared state needs (create-only, and replace-if-unchanged on the ETag).
//
// Two implementations run the same conformance suite (objstoretest): Local,
// a directory of plain files, and S3, any S3-compatible server through
// minio-go. Errors are classified so that callers can tell a missing
// object (ErrNotExist), a lost race (ErrExists, ErrPrecondition) and a
// store that cannot be reached right now (ErrUnavailable: retry later,
// and never acknowledge what was not stored).
package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"time"
	"unicode/utf8"
)

// Store is an object store: a flat namespace of keys, each naming an
// immutable byte string that a Put replaces as a whole.
//
// Every method is safe for concurrent use, from one process or several
// sharing the same store.
type Store interface {
	// Put stores size bytes read from r under key (size -1: read r to its
	// end). Readers see the old object or the new one, never a part.
	// opts makes the write conditional: CreateOnly answers ErrExists when
	// the key exists; IfMatch answers ErrPrecondition unless the key's
	// current ETag is IfMatch (a missing key fails too: it changed).
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (Info, error)
	// Get opens the object for reading. The caller closes the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// GetRange opens length bytes of the object from offset (length -1:
	// to its end). A range reaching past the end is cut at the end; one
	// starting at the end is empty; one starting beyond it answers
	// ErrRange.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Stat reports the object's size and ETag.
	Stat(ctx context.Context, key string) (Info, error)
	// List yields every object whose key starts with prefix, in key
	// order (bytewise), fetching pages as the loop goes. Info.ETag may be
	// empty in a listing (Stat has it). An error ends the sequence.
	List(ctx context.Context, prefix string) iter.Seq2[Info, error]
	// Delete removes the object. Deleting a missing key succeeds: a retried
	// delete is not an error.
	Delete(ctx context.Context, key string) error
	// DeleteMany removes the objects of keys, as Delete each, in as few
	// requests as the store allows (S3: one per 1,000 keys). Every key is
	// checked before any is removed; on a failure some of the others may
	// be gone, and the call may be repeated.
	DeleteMany(ctx context.Context, keys []string) error
	// String names the store for logs and errors: never a credential.
	String() string
}

// PutOptions makes a Put conditional. The zero value writes unconditionally.
type PutOptions struct {
	// CreateOnly writes only when the key does not exist yet
	// (If-None-Match: *). Exactly one of concurrent creators wins; the
	// others get ErrExists.
	CreateOnly bool
	// IfMatch writes only when the key's current ETag is this one
	// (If-Match), for read-modify-write of shared state: read with Get or
	// Stat, change, Put with IfMatch, and on ErrPrecondition read again.
	IfMatch string
	// A conditional put that fails with ErrUnavailable may or may not have
	// been stored (its reply can be lost after the write): read the key to
	// learn which. Stores never retry one themselves, since the retry of a
	// put that did succeed would report a lost race.
}

// Info describes one stored object.
type Info struct {
	Key  string
	Size int64
	// ETag changes whenever the object's bytes do. It is opaque: compare
	// it, pass it to PutOptions.IfMatch, never parse it.
	ETag    string
	ModTime time.Time
}

// The kinds of failure a caller acts on. Test with errors.Is; every error
// a Store returns is an *Error carrying one of these, or none when the
// failure is none of them (a refused credential, a malformed request).
var (
	// ErrNotExist: no object has the key.
	ErrNotExist = errors.New("object does not exist")
	// ErrExists: a CreateOnly put found the key taken.
	ErrExists = errors.New("object already exists")
	// ErrPrecondition: an IfMatch put found the object changed or gone.
	ErrPrecondition = errors.New("object changed (precondition failed)")
	// ErrRange: a range starts beyond the object's end.
	ErrRange = errors.New("range starts beyond the object's end")
	// ErrInvalidKey: the key breaks the rules of CheckKey.
	ErrInvalidKey = errors.New("invalid object key")
	// ErrUnavailable: the store could not be reached or failed on its side
	// (a network error, a timeout, an HTTP 5xx, a full disk). Retry later;
	// nothing may be acknowledged on the strength of the failed call.
	ErrUnavailable = errors.New("object store unavailable")
)

// Error is what a Store returns: the operation, the key, the kind of
// failure (one of the Err* values above, or nil) and the cause. Its
// message never holds a credential or a signed URL.
type Error struct {
	Op   string // put, get, stat, list, delete
	Key  string
	Kind error
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("objstore: ")
	b.WriteString(e.Op)
	if e.Key != "" {
		b.WriteString(" ")
		b.WriteString(e.Key)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is find both the kind and the cause.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// MaxKeyLen is the longest key, in bytes: S3's limit, less room for a
// bucket prefix.
const MaxKeyLen = 900

// reserved starts the names a Local store keeps for itself beside the
// objects (its temporary files and lock); no key's first segment may
// start with it, on any store, so that keys mean the same everywhere.
const reserved = ".objstore"

// CheckKey says whether key is a valid key, the same on every store:
// slash-separated segments, each 1..255 bytes, none "." or "..", of valid
// UTF-8 without control characters, at most MaxKeyLen bytes, and the first
// segment not starting with ".objstore".
//
// One rule CheckKey cannot see: no key may be a directory of another ("a"
// and "a/b"). Amazon S3 allows it, but a Local store and a posix-backed S3
// server (versitygw) keep keys as files, and a file is no directory; the
// write fails. Content-addressed layouts never do it.
func CheckKey(key string) error {
	bad := func(why string) error {
		return &Error{Op: "check", Key: key, Kind: ErrInvalidKey, Err: errors.New(why)}
	}
	if key == "" {
		return bad("empty")
	}
	if len(key) > MaxKeyLen {
		return bad("longer than the limit")
	}
	if !utf8.ValidString(key) {
		return bad("not UTF-8")
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return bad("control character")
		}
	}
	if strings.HasPrefix(key, reserved) {
		return bad("names starting with " + reserved + " are reserved")
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return bad("empty segment (leading, trailing or doubled slash)")
		case seg == "." || seg == "..":
			return bad("dot segment")
		case len(seg) > 255:
			return bad("segment longer than 255 bytes")
		}
	}
	return nil
}

// ReadAll reads a whole object: a convenience over Get for small objects
// (shared state).
func ReadAll(ctx context.Context, s Store, key string) ([]byte, Info, error) {
	rc, info, err := s.Get(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, Info{}, err
	}
	return data, info, nil
}

// Update applies change to the object at key by read-modify-write with
// conditional puts, retrying on a lost race until ctx ends. change gets
// the current bytes (nil, exists false: no object yet) and returns the
// new bytes. Two nodes updating the same key never lose each other's
// change.
func Update(ctx context.Context, s Store, key string, change func(old []byte, exists bool) ([]byte, error)) (Info, error) {
	for {
		old, info, err := ReadAll(ctx, s, key)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotExist) {
			return Info{}, err
		}
		data, err := change(old, exists)
		if err != nil {
			return Info{}, err
		}
		opts := PutOptions{CreateOnly: !exists}
		if exists {
			opts.IfMatch = info.ETag
		}
		info, err = s.Put(ctx, key, bytes.NewReader(data), int64(len(data)), opts)
		if err == nil {
			return info, nil
		}
		if !errors.Is(err, ErrPrecondition) && !errors.Is(err, ErrExists) {
			return Info{}, err
		}
		if ctx.Err() != nil {
			return Info{}, ctx.Err()
		}
	}
}

// deleteManyMax is the most keys S3's multi-object delete takes at once.
const deleteManyMax = 1000

// checkKeys checks every key of a DeleteMany before any is removed.
func checkKeys(keys []string) error {
	for _, key := range keys {
		if err := CheckKey(key); err != nil {
			return err
		}
	}
	return nil
}

// DeleteUnder removes every object listed under prefix but those keep
// names (nil: none kept), in DeleteMany requests of up to 1,000 keys
// made as the listing goes. A missing object is no failure.
func DeleteUnder(ctx context.Context, s Store, prefix string, keep func(key string) bool) error {
	var keys []string
	for info, err := range s.List(ctx, prefix) {
		if err != nil {
			return err
		}
		if keep != nil && keep(info.Key) {
			continue
		}
		if keys = append(keys, info.Key); len(keys) == deleteManyMax {
			if err := s.DeleteMany(ctx, keys); err != nil {
				return err
			}
			keys = keys[:0]
		}
	}
	return s.DeleteMany(ctx, keys)
}
