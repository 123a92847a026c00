package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Local is a Store in a directory of plain files: the object "a/b/c" is
// the file DIR/a/b/c. A Put writes a temporary file in DIR/.objstore.tmp,
// syncs it, and moves it into place (rename, or link for CreateOnly, which
// fails when the name is taken), then syncs the directory: a Put that
// returned survives a crash, and readers never see a part.
//
// The ETag is the SHA-256 of the content. Conditional puts, and every
// change of a name, happen under an exclusive flock(2) of
// DIR/.objstore.lock (and a mutex inside the process), so processes
// sharing the directory on one machine race safely.
type Local struct {
	dir  string
	tmp  string
	mu   sync.Mutex // serialises renames in this process; lock serialises processes
	lock *os.File

	etagMu sync.Mutex
	etags  map[fileID]string // ETags of files already hashed, by file identity
}

// fileID identifies one version of a file: a Put always makes a new
// inode, and the change time tells a reused inode apart.
type fileID struct {
	dev, ino   uint64
	size       int64
	ctimeNanos int64
}

const maxETagCache = 4096

// NewLocal opens (creating it if needed) a Local store in dir.
func NewLocal(dir string) (*Local, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, reserved+".tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, &Error{Op: "open", Kind: classifyFS(err), Err: err}
	}
	lock, err := os.OpenFile(filepath.Join(dir, reserved+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, &Error{Op: "open", Kind: classifyFS(err), Err: err}
	}
	removeStaleTemps(tmp, time.Now().Add(-staleTemp))
	return &Local{dir: dir, tmp: tmp, lock: lock, etags: map[fileID]string{}}, nil
}

// staleTemp is the age past which a temporary file is a crashed put's
// leftover, not another process's put in progress.
const staleTemp = time.Hour

// removeStaleTemps removes the temporary files of puts that a crash cut
// short (never acknowledged), leaving younger ones: another process
// sharing the directory may be writing them.
func removeStaleTemps(tmp string, before time.Time) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), "put-") && info.ModTime().Before(before) {
			os.Remove(filepath.Join(tmp, e.Name()))
		}
	}
}

// Close releases the lock file.
func (l *Local) Close() error { return l.lock.Close() }

func (l *Local) String() string { return "file://" + l.dir }

func (l *Local) path(key string) string { return filepath.Join(l.dir, filepath.FromSlash(key)) }

// locked runs fn holding the store's write lock.
func (l *Local) locked(fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		err := unix.Flock(int(l.lock.Fd()), unix.LOCK_EX)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
	defer unix.Flock(int(l.lock.Fd()), unix.LOCK_UN)
	return fn()
}

func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (Info, error) {
	fail := func(err error) (Info, error) {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
			err = &Error{Op: "put", Key: key, Kind: ErrInvalidKey, Err: errors.New("a file cannot also be a directory: another key extends this one, or this one extends another")}
		}
		return Info{}, wrapFS("put", key, err)
	}
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(l.tmp, "put-*")
	if err != nil {
		return fail(err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed or linked and removed
	h := sha256.New()
	n, err := copyN(io.MultiWriter(f, h), r, size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	etag := hex.EncodeToString(h.Sum(nil))
	final := l.path(key)
	var st fs.FileInfo
	err = l.locked(func() error {
		if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
			return err
		}
		switch {
		case opts.CreateOnly:
			// link fails with EEXIST when the name is taken: the check and
			// the write are one step, even between processes.
			if err := os.Link(tmp, final); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return &Error{Op: "put", Key: key, Kind: ErrExists}
				}
				return err
			}
			if err := os.Remove(tmp); err != nil {
				return err
			}
		case opts.IfMatch != "":
			cur, err := l.etag(final)
			if errors.Is(err, fs.ErrNotExist) || (err == nil && cur != opts.IfMatch) {
				return &Error{Op: "put", Key: key, Kind: ErrPrecondition}
			}
			if err != nil {
				return err
			}
			fallthrough
		default:
			if err := os.Rename(tmp, final); err != nil {
				return err
			}
		}
		// Still under the lock, the name is ours: remember its ETag by the
		// file's identity after the rename or link (which change its ctime).
		var err error
		st, err = os.Stat(final)
		return err
	})
	if err != nil {
		return fail(err)
	}
	if id, ok := idOf(st); ok {
		l.rememberETag(id, etag)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return fail(err)
	}
	return Info{Key: key, Size: n, ETag: etag, ModTime: st.ModTime()}, nil
}

// copyN copies size bytes (size -1: all of r) and insists on the count.
func copyN(w io.Writer, r io.Reader, size int64) (int64, error) {
	if size < 0 {
		return io.Copy(w, r)
	}
	n, err := io.CopyN(w, r, size)
	if err == io.EOF {
		err = fmt.Errorf("short body: %d of %d bytes", n, size)
	}
	return n, err
}

func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(l.path(key))
	if err != nil {
		return nil, Info{}, wrapFS("get", key, err)
	}
	info, err := l.statFile(key, f)
	if err != nil {
		f.Close()
		return nil, Info{}, wrapFS("get", key, err)
	}
	return f, info, nil
}

func (l *Local) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if offset < 0 || length < -1 {
		return nil, &Error{Op: "get", Key: key, Err: fmt.Errorf("bad range %d+%d", offset, length)}
	}
	f, err := os.Open(l.path(key))
	if err != nil {
		return nil, wrapFS("get", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, wrapFS("get", key, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, &Error{Op: "get", Key: key, Kind: ErrNotExist}
	}
	if offset > st.Size() {
		f.Close()
		return nil, &Error{Op: "get", Key: key, Kind: ErrRange, Err: fmt.Errorf("offset %d, size %d", offset, st.Size())}
	}
	n := st.Size() - offset
	if length >= 0 && length < n {
		n = length
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, offset, n), f}, nil
}

func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	f, err := os.Open(l.path(key))
	if err != nil {
		return Info{}, wrapFS("stat", key, err)
	}
	defer f.Close()
	info, err := l.statFile(key, f)
	if err != nil {
		return Info{}, wrapFS("stat", key, err)
	}
	return info, nil
}

// statFile describes an open file, hashing it unless its ETag is cached.
// Hashing the open file (not the name) gives the ETag of the very version
// being read.
func (l *Local) statFile(key string, f *os.File) (Info, error) {
	st, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	if st.IsDir() {
		return Info{}, fs.ErrNotExist
	}
	etag, err := l.etagOf(f, st)
	if err != nil {
		return Info{}, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Info{}, err
	}
	return Info{Key: key, Size: st.Size(), ETag: etag, ModTime: st.ModTime()}, nil
}

// etag returns the ETag of the file at path.
func (l *Local) etag(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fs.ErrNotExist
	}
	return l.etagOf(f, st)
}

func (l *Local) etagOf(f *os.File, st fs.FileInfo) (string, error) {
	id, ok := idOf(st)
	if ok {
		l.etagMu.Lock()
		etag, hit := l.etags[id]
		l.etagMu.Unlock()
		if hit {
			return etag, nil
		}
	}
	var h hash.Hash = sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size())); err != nil {
		return "", err
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if ok {
		l.rememberETag(id, etag)
	}
	return etag, nil
}

func (l *Local) rememberETag(id fileID, etag string) {
	l.etagMu.Lock()
	defer l.etagMu.Unlock()
	if len(l.etags) >= maxETagCache {
		clear(l.etags)
	}
	l.etags[id] = etag
}

func idOf(st fs.FileInfo) (fileID, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{
		dev: uint64(sys.Dev), ino: sys.Ino, size: st.Size(),
		ctimeNanos: sys.Ctim.Sec*1e9 + sys.Ctim.Nsec,
	}, true
}

// List walks the directory holding prefix's last whole segment, collects
// the matching keys and yields them sorted: a directory walk's order is
// not key order ("a-b" sorts before "a/b").
func (l *Local) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		base := ""
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			base = prefix[:i]
		}
		root := filepath.Join(l.dir, filepath.FromSlash(base))
		var found []Info
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // gone meanwhile, or no such prefix
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			rel, err := filepath.Rel(l.dir, path)
			if err != nil {
				return err
			}
			key := filepath.ToSlash(rel)
			if strings.HasPrefix(key, reserved) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				// Descend only where keys with the prefix can be.
				if path != root && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
				return nil
			}
			st, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			found = append(found, Info{Key: key, Size: st.Size(), ModTime: st.ModTime()})
			return nil
		})
		if err != nil {
			yield(Info{}, wrapFS("list", prefix, err))
			return
		}
		slices.SortFunc(found, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
		for _, info := range found {
			if !yield(info, nil) {
				return
			}
		}
	}
}

// DeleteMany removes each key as Delete does: a directory has no cheaper
// way.
func (l *Local) DeleteMany(ctx context.Context, keys []string) error {
	if err := checkKeys(keys); err != nil {
		return err
	}
	for _, key := range keys {
		if err := l.Delete(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

func (l *Local) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	path := l.path(key)
	err := l.locked(func() error {
		if err := os.Remove(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		// Remove directories left empty, so that their names can become
		// keys again; a Put makes them anew under the same lock.
		for dir := filepath.Dir(path); dir != l.dir && strings.HasPrefix(dir, l.dir); dir = filepath.Dir(dir) {
			if os.Remove(dir) != nil {
				break
			}
		}
		return nil
	})
	if err != nil {
		return wrapFS("delete", key, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed as empty
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// wrapFS classifies a file-system error, keeping an *Error as it is.
func wrapFS(op, key string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Key: key, Kind: classifyFS(err), Err: err}
}

func classifyFS(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return ErrNotExist
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EIO),
		errors.Is(err, syscall.EROFS):
		// The disk, not the request, is at fault: try again later.
		return ErrUnavailable
	}
	return nil
}

var _ Store = (*Local)(nil)
