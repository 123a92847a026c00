package devcluster

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Node is one flightrec server of the cluster. Its local directory (Dir)
// holds what a node keeps on its own disk; everything shared is in S3 and
// the ClickHouse cluster.
type Node struct {
	// Index is the node's place in Cluster.Nodes, from 0.
	Index int
	// Addr is host:port on loopback; URL is http://Addr.
	Addr, URL string
	// Dir is the node's --data directory.
	Dir string

	argv []string
	env  []string

	mu sync.Mutex
	p  *Process // nil while killed
}

func (n *Node) logPath() string { return n.Dir + ".log" }

// LogTail is the end of the node's log, for a failure message.
func (n *Node) LogTail() string { return LogTail(n.logPath()) }

// Pid is the node's process id (0 while killed).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.p == nil {
		return 0
	}
	return n.p.Pid()
}

// Process is the running process (nil while killed), for its rusage.
func (n *Node) Process() *os.Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.p == nil {
		return nil
	}
	return n.p.cmd.Process
}

// Restart starts the node (again, after Kill; stopping it first if it
// runs) on the same address and directory, and waits until it answers
// /healthz.
func (n *Node) Restart() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	stopProcess(&n.p, 30*time.Second)
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(n.argv[0], n.argv[1:]...)
	cmd.Env = n.env
	p, err := StartProcess(cmd, n.logPath())
	if err != nil {
		return fmt.Errorf("start flightrec node %d: %w", n.Index, err)
	}
	n.p = p
	client := &http.Client{Timeout: 2 * time.Second}
	err = WaitUntil(120*time.Second, 50*time.Millisecond, p.Exited(), n.Addr, func() error {
		resp, err := client.Get(n.URL + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		n.p.Kill()
		n.p = nil
		return fmt.Errorf("flightrec node %d did not start: %v\n%s", n.Index, err, n.LogTail())
	}
	return nil
}

// Kill sends SIGKILL: the node dies as in a crash, nothing flushed.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	stopProcess(&n.p, 0)
}

// Stop shuts the node down as an operator would (SIGTERM).
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	stopProcess(&n.p, 30*time.Second)
}

// Pause stops the process (SIGSTOP) without killing it: its connections
// stay open and nothing answers, as when a machine freezes. It returns
// once every thread of the process is stopped: kill(2) returns when the
// signal is queued, before the threads have stopped.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.mu.Lock()
	p := n.p
	n.mu.Unlock()
	if p == nil {
		return errStopped
	}
	return p.waitStopped(30 * time.Second)
}

// Resume continues a paused process (SIGCONT).
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.p == nil {
		return errStopped
	}
	return n.p.Signal(sig)
}

// Running reports whether the node's process is up (paused counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p != nil
}

// proxy is the small round-robin HTTP proxy in front of the nodes: each
// request goes to the next node, whatever the request. A node that
// refuses the connection (killed) is passed over for the next one, so a
// dead node costs a client nothing but the requests it had in flight.
type proxy struct {
	nodes []*Node
	next  atomic.Uint64
	rp    []*httputil.ReverseProxy
	srv   *http.Server
}

func newProxy(nodes []*Node) *proxy {
	p := &proxy{nodes: nodes}
	for _, n := range nodes {
		u, _ := url.Parse(n.URL)
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.FlushInterval = -1 // streams (live views) pass through as written
		p.rp = append(p.rp, rp)
	}
	return p
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := int(p.next.Add(1))
	for i := range p.nodes {
		k := (start + i) % len(p.nodes)
		if p.nodes[k].Running() || i == len(p.nodes)-1 {
			p.rp[k].ServeHTTP(w, r)
			return
		}
	}
}

// nodeArgv is the serve command line of node i.
func nodeArgv(cfg Config, addr, dir, dsn, blobs, keys string) []string {
	argv := []string{cfg.Flightrec, "serve",
		"--addr", addr,
		"--data", dir,
		"--index", dsn,
		"--blobs", blobs,
		"--attestation-key", filepath.Join(keys, "attestation.key"),
		"--pseudonym-key", filepath.Join(keys, "redact-pseudonym.key"),
	}
	return append(argv, cfg.NodeArgs...)
}

func nodeAddr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
