package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// daemon is a server process a test starts and stops (ClickHouse,
// versitygw): in its own process group, its output appended to a log file.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

// startDaemon starts cmd with its stdout and stderr appended to logPath.
func startDaemon(cmd *exec.Cmd, logPath string) (*daemon, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own copy
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// exited reports the exit status once the process has exited.
func (d *daemon) exited() <-chan error {
	ch := make(chan error, 1)
	go func() {
		<-d.done
		ch <- d.err
	}()
	return ch
}

// stop sends SIGTERM, as an operator would, and waits for the process to
// exit (SIGKILL after grace).
func (d *daemon) stop(grace time.Duration) {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// logTail is the end of a log file, for a failure message.
func logTail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return "--- " + path + "\n" + string(data) + "\n"
}

// waitUntil polls ready every interval until it succeeds, or exited reports
// that the server stopped, or timeout passes (where names the server in
// the error).
func waitUntil(timeout, interval time.Duration, exited <-chan error, where string, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("the server exited: %v", err)
		default:
		}
		if last = ready(); last == nil {
			return nil
		}
		time.Sleep(interval)
	}
	return fmt.Errorf("no answer on %s after %s: %v", where, timeout, last)
}
