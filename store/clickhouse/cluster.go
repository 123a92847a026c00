package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Statements that change a cluster's local tables (ALTER … DELETE,
// TRUNCATE, OPTIMIZE) go to one live replica of each shard, without ON
// CLUSTER: the Replicated tables put them in the shard's log in
// ZooKeeper, and a replica that is down applies them when it returns. ON
// CLUSTER would wait for every server: with a replica down ALTER … ON
// CLUSTER blocks until distributed_ddl_task_timeout (180 s) and then
// fails, though the live replicas have deleted; and OPTIMIZE … ON CLUSTER
// … FINAL fails on 18.16 ("Unknown log entry type: 0").

// shardConns holds a connection per server of the cluster, by address.
type shardConns struct {
	mu    sync.Mutex
	conns map[string]driver.Conn
}

// replicaAddr is one server of the cluster, as system.clusters lists it.
type replicaAddr struct {
	shard, replica uint32
	addr           string
}

// liveReplicas returns, for each shard of the cluster, a connection to
// its first replica that answers (in replica order, so mutations and
// their wait go where load_balancing = in_order reads). A shard with no
// live replica is an error.
func (db *DB) liveReplicas(ctx context.Context) ([]driver.Conn, error) {
	shards, err := db.liveShards(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]driver.Conn, len(shards))
	for i, s := range shards {
		out[i] = s.first
	}
	return out, nil
}

// liveShard is a shard's first replica that answers, and the addresses
// of the replicas after it (not asked yet: most callers need only the
// first, and a ping to a dead server may take the dial timeout).
type liveShard struct {
	first driver.Conn
	rest  []string
}

// liveShards returns each shard of the cluster's first live replica
// (liveReplicas) and the replicas after it. A shard with no live replica
// is an error.
func (db *DB) liveShards(ctx context.Context) ([]liveShard, error) {
	rows, err := db.conn.Query(ctx, `SELECT shard_num, replica_num, host_address, port FROM system.clusters
		WHERE cluster = ? ORDER BY shard_num, replica_num`, db.cluster)
	if err != nil {
		return nil, fmt.Errorf("list the cluster's servers: %w", err)
	}
	defer rows.Close()
	var all []replicaAddr
	for rows.Next() {
		var r replicaAddr
		var host string
		var port uint16
		if err := rows.Scan(&r.shard, &r.replica, &host, &port); err != nil {
			return nil, fmt.Errorf("list the cluster's servers: %w", err)
		}
		r.addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the cluster's servers: %w", err)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("cluster %s is not in system.clusters: add it to <remote_servers> on every server", db.cluster)
	}
	var out []liveShard
	for i := 0; i < len(all); {
		shard := all[i].shard
		var live liveShard
		var errs []error
		for ; i < len(all) && all[i].shard == shard; i++ {
			if live.first != nil {
				live.rest = append(live.rest, all[i].addr)
				continue
			}
			c, err := db.replicaConn(ctx, all[i].addr)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", all[i].addr, err))
				continue
			}
			live.first = c
		}
		if live.first == nil {
			return nil, fmt.Errorf("no replica of shard %d answers: %w", shard, errors.Join(errs...))
		}
		out = append(out, live)
	}
	return out, nil
}

// replicaConn is the connection to one server (made once, then kept), if
// it answers a ping.
func (db *DB) replicaConn(ctx context.Context, addr string) (driver.Conn, error) {
	db.shards.mu.Lock()
	c := db.shards.conns[addr]
	if c == nil {
		opts := *db.opts
		opts.Addr = []string{addr}
		var err error
		if c, err = clickhouse.Open(&opts); err != nil {
			db.shards.mu.Unlock()
			return nil, err
		}
		if db.shards.conns == nil {
			db.shards.conns = map[string]driver.Conn{}
		}
		db.shards.conns[addr] = c
	}
	db.shards.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, db.opts.DialTimeout+pingGrace)
	defer cancel()
	if err := c.Ping(pctx); err != nil {
		return nil, err
	}
	return c, nil
}

// pingGrace is how long a ping may take beyond the dial.
const pingGrace = 2 * time.Second

// onShards runs stmt on the local tables through one live replica of each
// shard (or on the server itself when not on a cluster).
func (db *DB) onShards(ctx context.Context, stmt func(table string) string, tables ...string) error {
	conns := []driver.Conn{db.conn}
	if db.cluster != "" {
		var err error
		if conns, err = db.liveReplicas(ctx); err != nil {
			return err
		}
	}
	for _, c := range conns {
		for _, t := range tables {
			if err := c.Exec(ctx, stmt(db.localTable(t))); err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
		}
	}
	return nil
}

// closeShards closes the per-server connections.
func (db *DB) closeShards() {
	db.shards.mu.Lock()
	defer db.shards.mu.Unlock()
	for _, c := range db.shards.conns {
		_ = c.Close()
	}
	db.shards.conns = nil
}
