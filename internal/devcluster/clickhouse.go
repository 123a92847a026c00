package devcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ClickHouseConfig is what WriteClickHouseConfig puts in one server's
// config.xml and users.xml.
type ClickHouseConfig struct {
	Dir                string // data, temporary files and logs, all under it
	TCPPort, HTTPPort  int
	InterserverPort    int // with Cluster: replicas fetch parts from each other on it
	Cluster            *ClusterTopology
	Shard, Replica     int // this server's place in Cluster (from 1)
	ZooKeeperEndpoints []string
}

// ClusterTopology is the remote_servers entry every server of a cluster
// shares: TCPPorts[shard][replica], all on 127.0.0.1.
type ClusterTopology struct {
	Name     string
	TCPPorts [][]int
}

// ddlQueue is the ZooKeeper directory of the cluster's distributed DDL
// queue.
const ddlQueue = "/clickhouse/task_queue/ddl"

// WriteClickHouseConfig writes config.xml and users.xml for a server that
// listens on 127.0.0.1 only and keeps everything under c.Dir: data,
// temporary files and logs. The default user has no password and is
// allowed from loopback only.
//
// With c.Cluster, the server is one replica of a cluster: ZooKeeper, the
// {shard} and {replica} macros, remote_servers with internal_replication
// (the Replicated tables copy rows within a shard, the Distributed table
// writes one replica), interserver HTTP on 127.0.0.1 (else a replica
// registers under the machine's host name), the distributed DDL queue
// (without it every ON CLUSTER statement fails with "DDL background thread
// is not initialized"), and in the default profile the two settings
// ClickHouse 18.16 cannot take from clickhouse-go (which sends only
// numeric and boolean settings to so old a server): distributed_product_mode
// = local (a recording's events and metadata share a shard; without it
// listing fails with Code 288, double-distributed IN) and load_balancing =
// in_order (reads go to the first live replica, which the synchronous
// insert wrote: with the default, random, a read right after an insert
// missed the row 72 times in 300).
func WriteClickHouseConfig(c ClickHouseConfig) error {
	var cluster, profile string
	if c.Cluster != nil {
		var zk, shards strings.Builder
		for _, ep := range c.ZooKeeperEndpoints {
			host, port, _ := strings.Cut(ep, ":")
			fmt.Fprintf(&zk, "<node><host>%s</host><port>%s</port></node>", host, port)
		}
		for _, replicas := range c.Cluster.TCPPorts {
			shards.WriteString("<shard><internal_replication>true</internal_replication>")
			for _, p := range replicas {
				fmt.Fprintf(&shards, "<replica><host>127.0.0.1</host><port>%d</port></replica>", p)
			}
			shards.WriteString("</shard>")
		}
		cluster = fmt.Sprintf(`
    <zookeeper>%[1]s<session_timeout_ms>10000</session_timeout_ms></zookeeper>
    <macros><shard>%[2]d</shard><replica>r%[3]d</replica></macros>
    <remote_servers><%[4]s>%[5]s</%[4]s></remote_servers>
    <interserver_http_port>%[6]d</interserver_http_port>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <distributed_ddl><path>%[7]s</path></distributed_ddl>`,
			zk.String(), c.Shard, c.Replica, c.Cluster.Name, shards.String(), c.InterserverPort, ddlQueue)
		profile = "<distributed_product_mode>local</distributed_product_mode><load_balancing>in_order</load_balancing>"
	}
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>%[1]s/log/server.log</log>
        <errorlog>%[1]s/log/error.log</errorlog>
        <size>10M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>%[4]s
</yandex>
`, c.Dir, c.TCPPort, c.HTTPPort, cluster)
	users := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <profiles><default>%s</default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default></default></quotas>
</yandex>
`, profile)
	for _, d := range []string{"log", "data", "tmp"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "config.xml"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, "users.xml"), []byte(users), 0o644)
}

// WaitClickHouse waits until the server on 127.0.0.1:port answers a query,
// or exited reports that it stopped, or timeout passes.
func WaitClickHouse(port int, timeout time.Duration, exited <-chan error) error {
	return waitQuery(port, timeout, exited, func(ctx context.Context, conn clickhouse.Conn) error { return conn.Ping(ctx) })
}

// waitQuery waits until ask succeeds on a connection to the server on
// 127.0.0.1:port (2 s each try), or exited reports that it stopped, or
// timeout passes.
func waitQuery(port int, timeout time.Duration, exited <-chan error, ask func(context.Context, clickhouse.Conn) error) error {
	opts := &clickhouse.Options{Addr: []string{"127.0.0.1:" + strconv.Itoa(port)}, DialTimeout: time.Second}
	return WaitUntil(timeout, 50*time.Millisecond, exited, "port "+strconv.Itoa(port), func() error {
		conn, err := clickhouse.Open(opts)
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return ask(ctx, conn)
	})
}

// Replica is one ClickHouse server of the cluster.
type Replica struct {
	Shard, Replica  int // from 1
	TCPPort         int
	HTTPPort        int
	InterserverPort int
	Dir             string

	argv []string
	p    *Process // nil while stopped
}

// Addr is the server's native-protocol address, 127.0.0.1:port.
func (r *Replica) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.TCPPort) }

// Running reports whether the server is up (started and not killed).
func (r *Replica) Running() bool { return r.p != nil }

// Pid is the server's process id (0 while stopped).
func (r *Replica) Pid() int {
	if r.p == nil {
		return 0
	}
	return r.p.Pid()
}

func (r *Replica) logPath() string { return filepath.Join(r.Dir, "stdout.log") }

// LogTail is the end of the server's logs, for a failure message.
func (r *Replica) LogTail() string {
	return LogTail(r.logPath()) + LogTail(filepath.Join(r.Dir, "log/error.log"))
}

// NewClickHouse describes a single server (no cluster) with its config
// and data under dir, on free ports, run by argv; Start starts it.
func NewClickHouse(argv []string, dir string) (*Replica, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	r := &Replica{TCPPort: ports[0], HTTPPort: ports[1], Dir: dir, argv: argv}
	return r, WriteClickHouseConfig(ClickHouseConfig{Dir: dir, TCPPort: r.TCPPort, HTTPPort: r.HTTPPort})
}

// Start starts the server (again, on its ports and data) and waits until
// it answers a query.
func (r *Replica) Start() error {
	if r.p != nil {
		return nil
	}
	cmd := exec.Command(r.argv[0], append(r.argv[1:], "--config-file="+filepath.Join(r.Dir, "config.xml"))...)
	cmd.Dir = r.Dir
	p, err := StartProcess(cmd, r.logPath())
	if err != nil {
		return fmt.Errorf("start clickhouse-server: %w", err)
	}
	r.p = p
	if err := WaitClickHouse(r.TCPPort, 60*time.Second, p.Exited()); err != nil {
		r.Stop()
		return fmt.Errorf("clickhouse-server (shard %d replica %d) did not start: %v\n%s", r.Shard, r.Replica, err, r.LogTail())
	}
	if r.Shard > 0 {
		if err := waitDDLQueue(r.TCPPort, 60*time.Second, p.Exited()); err != nil {
			r.Stop()
			return fmt.Errorf("clickhouse-server (shard %d replica %d) did not reach ZooKeeper: %v\n%s", r.Shard, r.Replica, err, r.LogTail())
		}
	}
	return nil
}

// waitDDLQueue waits until the server on 127.0.0.1:port reads the
// distributed DDL queue in ZooKeeper. ClickHouse 18.16 answers queries
// before its DDL worker has its ZooKeeper session, and a server with no
// Replicated table yet (none opened one while loading) that receives an ON
// CLUSTER statement in that window dies with SIGSEGV in
// zkutil::ZooKeeper::createImpl. Reading system.zookeeper makes the
// server's shared session (the one the worker takes) and waits for it;
// the queue's directory exists once a worker has started.
func waitDDLQueue(port int, timeout time.Duration, exited <-chan error) error {
	return waitQuery(port, timeout, exited, func(ctx context.Context, conn clickhouse.Conn) error {
		var n uint64
		return conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '"+ddlQueue+"'").Scan(&n)
	})
}

// Stop sends SIGTERM, as an operator would, and waits for the server to
// exit (SIGKILL after 60s).
func (r *Replica) Stop() { stopProcess(&r.p, 60*time.Second) }

// Kill sends SIGKILL: the server dies as in a crash.
func (r *Replica) Kill() { stopProcess(&r.p, 0) }
