// Package devcluster starts and stops a whole flightrec cluster on
// loopback, on free ports, with all its state under one directory:
// ZooKeeper, ClickHouse servers as shards × replicas, versitygw (S3) and
// optionally flightrec nodes behind a small round-robin HTTP proxy. Tests
// use it through testenv.Cluster; scripts/cluster through cmd/devcluster.
// It reads no environment: every path arrives in Config.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Config says what to start and with which programs.
type Config struct {
	// Dir holds all state: each server's data, config and log.
	Dir string
	// Shards and Replicas shape the ClickHouse cluster (default 2 × 2).
	Shards, Replicas int
	// Nodes is how many flightrec servers to start (0: none, no proxy).
	Nodes int
	// Flightrec is the flightrec binary the nodes run.
	Flightrec string
	// NodeArgs are added to every node's serve command line.
	NodeArgs []string
	// NodeEnv is the nodes' environment (the S3 credentials are added).
	NodeEnv []string
	// Log receives one line per step, with its time (nil: discarded).
	Log io.Writer

	// ClickHouseServer is the server's argv (clickhouse-server, or
	// clickhouse server).
	ClickHouseServer []string
	// Java runs ZooKeeper from ZooKeeperClasspath (Debian:
	// /usr/share/java/zookeeper.jar, plus slf4j-simple.jar for a log).
	Java               string
	ZooKeeperClasspath []string
	// VersityGW is the versitygw binary.
	VersityGW string

	// Cluster and Database name the ClickHouse cluster and the index's
	// database (default fr and flightrec).
	Cluster, Database string
	// Schema is the index's cluster DDL for a database
	// (store/clickhouse.ClusterDDL, passed in: that package's tests use
	// this one). Nil: Start creates no schema.
	Schema func(cluster, database string) (string, error)
}

// Cluster is a running cluster.
type Cluster struct {
	// ZooKeeper is its host:port.
	ZooKeeper string
	// ClickHouse lists the servers, shard by shard.
	ClickHouse []*Replica
	// DSN is the index's --index for Database, naming every server (the
	// driver connects to the first that answers).
	DSN string
	// S3 is the object store the nodes' --blobs names (under prefix
	// flightrec).
	S3 *VersityGW
	// Blobs is the nodes' --blobs URL.
	Blobs string
	// Keys is the directory of the deployment's key files.
	Keys string
	// Nodes are the flightrec servers; URL is the proxy in front of them.
	Nodes []*Node
	URL   string

	cfg   Config
	zk    *zooKeeper
	proxy *http.Server
	mu    sync.Mutex
}

// Start starts everything cfg asks for and returns once all of it
// answers: ZooKeeper, the ClickHouse servers and versitygw at once, then
// the cluster schema, then the nodes and the proxy. On failure whatever
// started is stopped.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if cfg.Shards == 0 {
		cfg.Shards = 2
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 2
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "fr"
	}
	if cfg.Database == "" {
		cfg.Database = "flightrec"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Dir == "" {
		return nil, errors.New("devcluster: Config.Dir is empty")
	}
	if cfg.Nodes > 0 && cfg.Flightrec == "" {
		return nil, errors.New("devcluster: Config.Nodes needs Config.Flightrec, the binary to run")
	}
	c = &Cluster{cfg: cfg}
	started := c // c is nil once a return with an error has run
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	began := time.Now()
	n := cfg.Shards * cfg.Replicas
	ports, err := FreePorts(1 + 3*n)
	if err != nil {
		return nil, err
	}
	c.zk = &zooKeeper{java: cfg.Java, classpath: cfg.ZooKeeperClasspath, dir: filepath.Join(cfg.Dir, "zookeeper"), port: ports[0]}
	c.ZooKeeper = c.zk.endpoint()
	if err := c.zk.writeConfig(); err != nil {
		return nil, err
	}
	topo := &ClusterTopology{Name: cfg.Cluster}
	for s := range cfg.Shards {
		var tcp []int
		for r := range cfg.Replicas {
			tcp = append(tcp, ports[1+3*(s*cfg.Replicas+r)])
		}
		topo.TCPPorts = append(topo.TCPPorts, tcp)
	}
	var hosts []string
	for s := range cfg.Shards {
		for r := range cfg.Replicas {
			k := 1 + 3*(s*cfg.Replicas+r)
			rep := &Replica{Shard: s + 1, Replica: r + 1, TCPPort: ports[k], HTTPPort: ports[k+1], InterserverPort: ports[k+2],
				Dir: filepath.Join(cfg.Dir, fmt.Sprintf("clickhouse-s%dr%d", s+1, r+1)), argv: cfg.ClickHouseServer}
			err := WriteClickHouseConfig(ClickHouseConfig{Dir: rep.Dir, TCPPort: rep.TCPPort, HTTPPort: rep.HTTPPort,
				InterserverPort: rep.InterserverPort, Cluster: topo, Shard: rep.Shard, Replica: rep.Replica,
				ZooKeeperEndpoints: []string{c.ZooKeeper}})
			if err != nil {
				return nil, err
			}
			c.ClickHouse = append(c.ClickHouse, rep)
			hosts = append(hosts, rep.Addr())
		}
	}
	c.DSN = fmt.Sprintf("clickhouse://%s/%s?cluster=%s", strings.Join(hosts, ","), cfg.Database, cfg.Cluster)
	c.S3, err = NewVersityGW(cfg.VersityGW, filepath.Join(cfg.Dir, "s3"), "flightrec")
	if err != nil {
		return nil, err
	}
	c.Blobs = c.S3.URL("flightrec")

	// ZooKeeper first: a ClickHouse server starts without it, but its
	// Replicated tables are read-only until it answers.
	if err := c.zk.start(); err != nil {
		return nil, err
	}
	c.logf("zookeeper %s ready after %s", c.ZooKeeper, since(began))
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i, rep := range c.ClickHouse {
		wg.Go(func() { errs[i] = rep.Start() })
	}
	wg.Go(func() {
		if errs[n] = c.S3.Start(); errs[n] == nil {
			errs[n] = c.S3.MakeBucket(ctx)
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.logf("%d clickhouse servers and versitygw %s ready after %s", n, c.S3.Endpoint, since(began))
	if cfg.Schema != nil {
		if _, err := c.CreateDatabase(ctx, cfg.Database); err != nil {
			return nil, err
		}
		c.logf("schema %s on cluster %s after %s", cfg.Database, cfg.Cluster, since(began))
	}
	if cfg.Nodes > 0 {
		if err := c.startNodes(ctx); err != nil {
			return nil, err
		}
		c.logf("%d flightrec nodes and the proxy %s ready after %s", cfg.Nodes, c.URL, since(began))
	}
	return c, nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.cfg.Log, "devcluster: "+format+"\n", args...)
}

// CreateDatabase applies the cluster schema (`flightrec clickhouse ddl
// --cluster`) for database through the first server and returns the
// index's DSN for it. It re-applies harmlessly.
func (c *Cluster) CreateDatabase(ctx context.Context, database string) (string, error) {
	if c.cfg.Schema == nil {
		return "", errors.New("devcluster: Config.Schema is nil")
	}
	ddl, err := c.cfg.Schema(c.cfg.Cluster, database)
	if err != nil {
		return "", err
	}
	// ClickHouse 18.16 can crash (SIGSEGV in zkutil::ZooKeeper::createImpl)
	// on an ON CLUSTER statement that arrives before its DDL worker has a
	// ZooKeeper session. Replica.Start waits for the session (3 fresh
	// clusters in 40 crashed under load before it, 0 in 80 after); should
	// a server die all the same, it is started again and the schema,
	// which re-applies harmlessly, applied again.
	for attempt := 1; ; attempt++ {
		err = c.applyDDL(ctx, ddl)
		if err == nil {
			return c.DatabaseDSN(database), nil
		}
		restarted, rerr := c.restartCrashed()
		if rerr != nil || !restarted || attempt == 3 {
			return "", errors.Join(err, rerr)
		}
		c.logf("a server crashed applying the schema; restarted it (%v)", err)
	}
}

func (c *Cluster) applyDDL(ctx context.Context, ddl string) error {
	conn, err := c.conn()
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, stmt := range Statements(ddl) {
		if err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("devcluster: cluster schema: %w\n%s", err, stmt)
		}
	}
	return nil
}

// restartCrashed starts again every server whose process exited without
// being asked to (waiting a few seconds for one that is still writing its
// crash report), and reports whether there was one.
func (c *Cluster) restartCrashed() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	restarted := false
	grace := time.After(10 * time.Second)
	for _, r := range c.ClickHouse {
		if r.p == nil {
			continue
		}
		if !restarted {
			select {
			case <-r.p.done:
			case <-grace:
			}
		}
		select {
		case <-r.p.done:
			r.p = nil
			restarted = true
			if err := r.Start(); err != nil {
				return restarted, err
			}
		default:
		}
	}
	return restarted, nil
}

// DatabaseDSN is DSN with database in place of Config.Database.
func (c *Cluster) DatabaseDSN(database string) string {
	return strings.Replace(c.DSN, "/"+c.cfg.Database+"?", "/"+database+"?", 1)
}

// DropDatabase drops database on every server of the cluster.
func (c *Cluster) DropDatabase(ctx context.Context, database string) error {
	conn, err := c.conn()
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s ON CLUSTER %s", database, c.cfg.Cluster))
}

// conn connects to the live servers, first one first.
func (c *Cluster) conn() (clickhouse.Conn, error) {
	var addrs []string
	for _, r := range c.ClickHouse {
		addrs = append(addrs, r.Addr())
	}
	return clickhouseConn(addrs)
}

// Statements splits --multiquery text into statements, dropping comments.
func Statements(sql string) []string {
	var lines []string
	for _, l := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	var out []string
	for _, s := range strings.Split(strings.Join(lines, "\n"), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// startNodes writes the deployment's keys and starts the nodes, then the
// proxy.
func (c *Cluster) startNodes(ctx context.Context) error {
	c.Keys = filepath.Join(c.cfg.Dir, "keys")
	if _, err := os.Stat(filepath.Join(c.Keys, "attestation.key")); err != nil {
		out, err := exec.CommandContext(ctx, c.cfg.Flightrec, "keys", "generate", c.Keys).CombinedOutput()
		if err != nil {
			return fmt.Errorf("flightrec keys generate: %v\n%s", err, out)
		}
	}
	ports, err := FreePorts(c.cfg.Nodes + 1)
	if err != nil {
		return err
	}
	env := append(append([]string(nil), c.cfg.NodeEnv...),
		"AWS_ACCESS_KEY_ID="+c.S3.AccessKey, "AWS_SECRET_ACCESS_KEY="+c.S3.SecretKey)
	for i := range c.cfg.Nodes {
		addr := nodeAddr(ports[i])
		dir := filepath.Join(c.cfg.Dir, "node"+strconv.Itoa(i))
		c.Nodes = append(c.Nodes, &Node{Index: i, Addr: addr, URL: "http://" + addr, Dir: dir,
			argv: nodeArgv(c.cfg, addr, dir, c.DSN, c.Blobs, c.Keys), env: env})
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.Restart() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l, err := net.Listen("tcp", nodeAddr(ports[c.cfg.Nodes]))
	if err != nil {
		return err
	}
	c.URL = "http://" + l.Addr().String()
	c.proxy = &http.Server{Handler: newProxy(c.Nodes), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.proxy.Serve(l) }()
	return nil
}

// KillReplica kills ClickHouse server i (SIGKILL: a crash).
func (c *Cluster) KillReplica(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ClickHouse[i].Kill()
}

// StartReplica starts ClickHouse server i again, on its ports and data.
func (c *Cluster) StartReplica(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ClickHouse[i].Start()
}

// StopZooKeeper kills ZooKeeper (its data stays for StartZooKeeper).
func (c *Cluster) StopZooKeeper() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.zk.kill()
}

// StartZooKeeper starts ZooKeeper again on its port and data.
func (c *Cluster) StartZooKeeper() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.zk.start()
}

// Pids are the process ids of everything running, by name (zookeeper,
// clickhouse-s1r1, …, versitygw, node0, …), for a figure of their RSS.
func (c *Cluster) Pids() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	if c.zk != nil && c.zk.p != nil {
		m["zookeeper"] = c.zk.p.Pid()
	}
	for _, r := range c.ClickHouse {
		if r.p != nil {
			m[fmt.Sprintf("clickhouse-s%dr%d", r.Shard, r.Replica)] = r.p.Pid()
		}
	}
	if c.S3 != nil {
		if pid := c.S3.Pid(); pid != 0 {
			m["versitygw"] = pid
		}
	}
	for _, n := range c.Nodes {
		if pid := n.Pid(); pid != 0 {
			m["node"+strconv.Itoa(n.Index)] = pid
		}
	}
	return m
}

// Stop stops everything: the proxy and nodes, then the servers. The
// state stays under Dir.
func (c *Cluster) Stop() {
	if c.proxy != nil {
		_ = c.proxy.Close()
	}
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.ClickHouse {
		wg.Go(r.Stop)
	}
	if c.S3 != nil {
		wg.Go(c.S3.Stop)
	}
	wg.Wait()
	if c.zk != nil {
		c.zk.stop()
	}
}

// clickhouseConn opens a connection to the first of addrs that answers,
// on the server's default database.
func clickhouseConn(addrs []string) (clickhouse.Conn, error) {
	return clickhouse.Open(&clickhouse.Options{Addr: addrs, DialTimeout: 2 * time.Second,
		Settings: clickhouse.Settings{"distributed_ddl_task_timeout": 60}})
}
