package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ChromiumCDP starts a headless Chromium that another client drives over
// its DevTools port (what record --attach attaches to), with its own
// profile and one blank page, and returns the endpoint (http://127.0.0.1:PORT)
// and the process. It is killed on t.Cleanup. Skipped or failed as
// RequireChromium says without a browser.
func ChromiumCDP(t testing.TB) (endpoint string, proc *os.Process) {
	t.Helper()
	path := RequireChromium(t)
	// Not t.TempDir: the browser's helper processes outlive its main
	// process for a moment, writing into the profile, so the directory
	// is removed once they are gone (below).
	dir, err := os.MkdirTemp("", "flightrec-cdp-*")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-quic", "--hide-scrollbars", "--mute-audio", "--window-size=1280,800",
		"--remote-debugging-port=0", "--user-data-dir="+dir, "about:blank")
	// A process group of its own: the cleanup kills the helpers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("starting %s: %v", path, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		for deadline := time.Now().Add(30 * time.Second); os.RemoveAll(dir) != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The browser writes its port here once it listens.
	for deadline := time.Now().Add(60 * time.Second); ; {
		b, err := os.ReadFile(filepath.Join(dir, "DevToolsActivePort"))
		if port, _, ok := strings.Cut(string(b), "\n"); err == nil && ok && port != "" {
			return "http://127.0.0.1:" + port, cmd.Process
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before it listened", path)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s wrote no DevToolsActivePort within 60s", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
