package store

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestLockDir: a second LockDir on a held directory fails at once when a
// server holds it and names the holder; a command's lock is waited for.
// flock locks belong to open file descriptions, so two opens in one
// process conflict just as two processes do.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	srv, err := LockDir(dir, LockOptions{Holder: LockHolder{Command: "serve", Addr: "127.0.0.1:9"}})
	if err != nil {
		t.Fatal(err)
	}
	// A Wait far past the test's timeout: had the server's lock been
	// waited for, the test would not return (no timing assertion).
	_, err = LockDir(dir, LockOptions{Holder: LockHolder{Command: "token create"}, Wait: 24 * time.Hour})
	var le *LockedError
	if !errors.As(err, &le) || le.Holder.PID != os.Getpid() || le.Holder.Addr != "127.0.0.1:9" {
		t.Fatalf("second lock: %v (holder %+v), want LockedError naming pid %d and the address", err, le, os.Getpid())
	}
	if h, held := ReadLockHolder(dir); !held || h.Command != "serve" {
		t.Errorf("ReadLockHolder: %+v %v", h, held)
	}
	srv.Close()
	if _, held := ReadLockHolder(dir); held {
		t.Errorf("lock still held after Close")
	}

	cmd, err := LockDir(dir, LockOptions{Holder: LockHolder{Command: "token create"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(200 * time.Millisecond); cmd.Close() }()
	next, err := LockDir(dir, LockOptions{Holder: LockHolder{Command: "token create"}, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("waiting for a command's lock: %v", err)
	}
	next.Close()
}

// TestLockDirAcrossProcesses: flock(1) in another process holds the lock.
func TestLockDirAcrossProcesses(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		// util-linux is essential on Debian; store's tests cannot import
		// testenv (it imports store), so CI's rule is spelled here.
		if os.Getenv("CI") != "" {
			t.Fatal("flock(1) not installed (apt-get install util-linux)")
		}
		t.Skip("flock(1) not installed")
	}
	dir := t.TempDir()
	l, err := LockDir(dir, LockOptions{Holder: LockHolder{Command: "serve"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("flock", "-n", dir+"/"+LockFileName, "true").CombinedOutput()
	if err == nil {
		t.Fatalf("another process took the held lock: %s", out)
	}
	l.Close()
	if out, err := exec.Command("flock", "-n", dir+"/"+LockFileName, "true").CombinedOutput(); err != nil {
		t.Fatalf("another process could not take the released lock: %v %s", err, out)
	}
}
