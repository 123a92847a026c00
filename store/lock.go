package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/flightrec/flightrec/store/layout"
)

// LockFileName is the data directory's lock file: DIR/LOCK. Whoever holds
// an exclusive flock(2) on it owns the directory for writing; the file's
// content names the holder (LockHolder as JSON) so that a refused command
// can say who to stop. The lock, not the content, is the truth: a crashed
// holder's lock is gone with its process, and its stale content is
// overwritten by the next holder.
const LockFileName = layout.LockName

// LockHolder says who holds a data directory's lock.
type LockHolder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`        // "serve", "token create", …
	Addr    string    `json:"addr,omitempty"` // a server's listen address
	Since   time.Time `json:"since"`
}

// Server reports whether the holder is a long-running server, which a
// waiting command would wait for in vain.
func (h LockHolder) Server() bool { return h.Command == "serve" || h.Command == "demo" }

func (h LockHolder) String() string {
	s := fmt.Sprintf("flightrec %s (pid %d", h.Command, h.PID)
	if h.Addr != "" {
		s += ", listening on " + h.Addr
	}
	return s + ")"
}

// LockedError is returned by LockDir when another process holds the lock
// and waiting did not (or could not) get it.
type LockedError struct {
	Dir    string
	Holder LockHolder // zero when the holder could not be read
}

func (e *LockedError) Error() string {
	who := "another process"
	if e.Holder.PID != 0 {
		who = e.Holder.String()
	}
	return fmt.Sprintf("data directory %s is locked by %s", e.Dir, who)
}

// LockOptions configure LockDir.
type LockOptions struct {
	// Holder describes this process; PID and Since are filled in.
	Holder LockHolder
	// Wait is how long to wait while a short command holds the lock.
	// A server's lock is never waited for: LockDir returns at once.
	Wait time.Duration
}

// DirLock is a held data-directory lock. Close releases it.
type DirLock struct {
	f *os.File
}

// LockDir takes the exclusive lock on dir (creating dir and the lock file
// if needed). A lock held by a server fails at once with *LockedError; one
// held by a short command is waited for up to opt.Wait, then fails the
// same way.
func LockDir(dir string, opt LockOptions) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	path := layout.Of(dir).Lock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	deadline := time.Now().Add(opt.Wait)
	delay := 5 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("store: lock %s: %w", path, err)
		}
		holder, _ := readHolder(f)
		if holder.Server() || !time.Now().Before(deadline) {
			f.Close()
			return nil, &LockedError{Dir: dir, Holder: holder}
		}
		time.Sleep(delay)
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
	h := opt.Holder
	h.PID = os.Getpid()
	h.Since = time.Now().UTC()
	b, _ := json.Marshal(h)
	// Truncate then write: a reader that catches the file empty retries.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(b, '\n'), 0)
	}
	return &DirLock{f: f}, nil
}

// ReadLockHolder returns who holds dir's lock, and false when nobody does.
func ReadLockHolder(dir string) (LockHolder, bool) {
	f, err := os.Open(layout.Of(dir).Lock())
	if err != nil {
		return LockHolder{}, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return LockHolder{}, false
	}
	h, _ := readHolder(f)
	return h, true
}

// readHolder reads the lock file's content, retrying briefly while a new
// holder is between truncating and writing it.
func readHolder(f *os.File) (LockHolder, error) {
	var h LockHolder
	var err error
	for i := 0; i < 5; i++ {
		var b []byte
		b, err = io.ReadAll(io.NewSectionReader(f, 0, 4096))
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			if err = json.Unmarshal(b, &h); err == nil {
				return h, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return h, err
}

// Close releases the lock. The file stays: removing it would let two
// processes lock two different inodes of one name.
func (l *DirLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

// SetAddr records the holder's listen address once it is known (with
// port 0 the kernel picks it at listen), so that a refused writer is told
// which server to send its command to.
func (l *DirLock) SetAddr(addr string) error {
	h, err := readHolder(l.f)
	if err != nil {
		return fmt.Errorf("store: lock: %w", err)
	}
	h.Addr = addr
	b, _ := json.Marshal(h)
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("store: lock: %w", err)
	}
	_, err = l.f.WriteAt(append(b, '\n'), 0)
	return err
}
