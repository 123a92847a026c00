package devcluster

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a server process started and stopped by a test or by
// scripts/cluster (ClickHouse, ZooKeeper, versitygw, a flightrec node): in
// its own process group, its output appended to a log file.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

// StartProcess starts cmd with its stdout and stderr appended to logPath.
func StartProcess(cmd *exec.Cmd, logPath string) (*Process, error) {
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
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports the exit status once the process has exited.
func (p *Process) Exited() <-chan error {
	ch := make(chan error, 1)
	go func() {
		<-p.done
		ch <- p.err
	}()
	return ch
}

// Stop sends SIGTERM, as an operator would, and waits for the process to
// exit (SIGKILL after grace). A stopped (SIGSTOP) process is continued
// first, or it would never see the SIGTERM.
func (p *Process) Stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill sends SIGKILL to the process's group (a crash, not a shutdown: the
// JVM's or a shell's children go with it) and waits for it to exit.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stopProcess stops *p (SIGTERM, SIGKILL after grace) if it runs and
// marks it stopped (nil); grace 0 kills it at once.
func stopProcess(p **Process, grace time.Duration) {
	if *p == nil {
		return
	}
	if grace == 0 {
		(*p).Kill()
	} else {
		(*p).Stop(grace)
	}
	*p = nil
}

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume it).
func (p *Process) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// waitStopped waits until every thread of the process is in the stopped
// state (T in /proc/PID/task/TID/stat), after a SIGSTOP.
func (p *Process) waitStopped(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	for {
		running := ""
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("devcluster: pid %d: %w", p.Pid(), err)
		}
		for _, t := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
			if err != nil {
				continue // the thread exited
			}
			// The state follows the command name, which is in
			// parentheses and may hold spaces.
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 || i+2 >= len(stat) {
				continue
			}
			if st := stat[i+2]; st != 'T' && st != 't' {
				running = t.Name() + " " + string(st)
				break
			}
		}
		if running == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("devcluster: pid %d not stopped %v after SIGSTOP (thread %s)", p.Pid(), limit, running)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// LogTail is the end of a log file, for a failure message.
func LogTail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return "--- " + path + "\n" + string(data) + "\n"
}

// WaitUntil polls ready every interval until it succeeds, or exited
// reports that the server stopped, or timeout passes (where names the
// server in the error).
func WaitUntil(timeout, interval time.Duration, exited <-chan error, where string, ready func() error) error {
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

// FreePorts returns n distinct TCP ports on loopback that were free a
// moment ago (all listeners are held until every port is chosen, so no
// two are the same).
//
// They are drawn at random from below the kernel's ephemeral range
// (ip_local_port_range), not from it: a server is started on its port a
// while after the port is chosen (a ClickHouse server takes a second to
// bind), and in between every outgoing connection on the machine, and
// every listener on port 0, takes its local port from the ephemeral
// range. In CI, where test packages start clusters side by side, a
// server once found its port taken that way ("Address already in use").
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := 10000, ephemeralStart()
	ports := make([]int, 0, n)
	for len(ports) < n {
		var l net.Listener
		var err error
		for try := 0; try < 64 && hi > lo; try++ {
			if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo))); err == nil {
				break
			}
		}
		if l == nil { // the range is crowded (or empty): let the kernel choose
			if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return nil, err
			}
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (32768, Linux's default, when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil || first <= 1024 {
		return 32768
	}
	return first
}

// FreePort returns one free loopback port (see FreePorts).
func FreePort() (int, error) {
	p, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// errStopped is what a control on a stopped component answers.
var errStopped = errors.New("devcluster: not running")
