package devcluster_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/flightrec/flightrec/internal/devcluster"
	"github.com/flightrec/flightrec/internal/testenv"
	chindex "github.com/flightrec/flightrec/store/clickhouse"
)

// TestClusterStart: the 2×2 cluster comes up with its schema and two
// nodes behind the proxy; a row written through the Distributed table on
// one server is read through another; a killed replica comes back with
// what it missed; ZooKeeper stopped and started again serves again; the
// proxy passes a killed node over, and a node killed, paused and resumed,
// or restarted answers again.
func TestClusterStart(t *testing.T) {
	bin := buildFlightrec(t)
	began := time.Now()
	c := testenv.Cluster(t, devcluster.Config{Schema: chindex.ClusterDDL, Nodes: 2, Flightrec: bin,
		NodeArgs: []string{"--insecure-anonymous"}})
	t.Logf("cluster up in %s; RSS %s", time.Since(began).Round(time.Millisecond), rss(c.Pids()))
	if len(c.ClickHouse) != 4 {
		t.Fatalf("%d servers, want 4", len(c.ClickHouse))
	}
	ctx := t.Context()
	first, other := conn(t, c.ClickHouse[0]), conn(t, c.ClickHouse[3])
	// Cursors: recording and seq, sharded by recording.
	insertCursors(t, first, 0, 20)
	// Read-after-write holds through the server written to: with
	// load_balancing = in_order (the profile's) it reads the replicas its
	// insert wrote. Another server reads its own replica first, which
	// fetches the rows a moment later.
	if n := count(t, first, "flightrec.cursors"); n != 20 {
		t.Errorf("read through the server written to: %d rows, want 20", n)
	}
	eventually(t, func() error {
		if n := count(t, other, "flightrec.cursors"); n != 20 {
			return fmt.Errorf("read through another server: %d rows, want 20", n)
		}
		return nil
	})
	// Both shards hold some: the Distributed table shards by recording.
	for _, r := range []*devcluster.Replica{c.ClickHouse[0], c.ClickHouse[2]} {
		if n := count(t, conn(t, r), "flightrec.cursors_local"); n == 0 || n == 20 {
			t.Errorf("shard %d holds %d of 20 rows: want some, not all", r.Shard, n)
		}
	}

	// A replica killed misses inserts and fetches them when it returns.
	c.KillReplica(1)
	insertCursors(t, first, 20, 40)
	want := count(t, first, "flightrec.cursors_local")
	if err := c.StartReplica(1); err != nil {
		t.Fatal(err)
	}
	back := conn(t, c.ClickHouse[1])
	eventually(t, func() error {
		if n := count(t, back, "flightrec.cursors_local"); n != want {
			return fmt.Errorf("restarted replica holds %d rows, its peer %d", n, want)
		}
		return nil
	})

	// The proxy spreads requests over the nodes and passes a dead one over.
	get := func(url string) error {
		resp, err := http.Get(url + "/v1/recordings")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
	for range 4 {
		if err := get(c.URL); err != nil {
			t.Fatal(err)
		}
	}
	c.Nodes[0].Kill()
	for range 4 {
		if err := get(c.URL); err != nil {
			t.Errorf("through the proxy with node 0 killed: %v", err)
		}
	}
	if err := get(c.Nodes[0].URL); err == nil {
		t.Error("node 0 answers after Kill")
	}
	if err := c.Nodes[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := get(c.Nodes[0].URL); err != nil {
		t.Errorf("node 0 after Restart: %v", err)
	}
	if err := c.Nodes[1].Pause(); err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Timeout: 2 * time.Second}
	if resp, err := cl.Get(c.Nodes[1].URL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a paused node answered: %s", resp.Status)
	}
	if err := c.Nodes[1].Resume(); err != nil {
		t.Fatal(err)
	}
	if err := get(c.Nodes[1].URL); err != nil {
		t.Errorf("node 1 after Resume: %v", err)
	}

	// Without ZooKeeper inserts fail (read-only tables); after it returns
	// they succeed again.
	c.StopZooKeeper()
	if err := tryInsert(ctx, first, "zk1"); err == nil {
		t.Error("an insert succeeded without ZooKeeper")
	}
	if err := c.StartZooKeeper(); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		return tryInsert(ctx, first, "zk2")
	})
}

func conn(t *testing.T, r *devcluster.Replica) clickhouse.Conn {
	t.Helper()
	cn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{r.Addr()}, Settings: clickhouse.Settings{"insert_distributed_sync": 1}, ReadTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cn.Close() })
	return cn
}

// insertCursors inserts cursors rec<from>… through the Distributed table.
// (A batch, not INSERT … VALUES through Exec: 18.16 waits for a data
// block after such a query and clickhouse-go sends none.)
func insertCursors(t *testing.T, cn clickhouse.Conn, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := tryInsert(t.Context(), cn, fmt.Sprint("rec", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func tryInsert(ctx context.Context, cn clickhouse.Conn, rec string) error {
	b, err := cn.PrepareBatch(ctx, "INSERT INTO flightrec.cursors (recording, through)")
	if err != nil {
		return err
	}
	if err := b.Append(rec, uint64(1)); err != nil {
		return err
	}
	return b.Send()
}

func count(t *testing.T, cn clickhouse.Conn, table string) uint64 {
	t.Helper()
	var n uint64
	if err := cn.QueryRow(t.Context(), "SELECT count() FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually retries f for up to two minutes (a test asserts behaviour,
// not time).
func eventually(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rss sums the resident memory of pids, from /proc, with each process's
// share ("zookeeper 80 MB, …").
func rss(pids map[string]int) string {
	var parts []string
	total := 0
	for name, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.Atoi(f[1])
				total += kb
				parts = append(parts, fmt.Sprintf("%s %d MB", name, kb/1024))
			}
		}
	}
	return fmt.Sprintf("%d MB in all (%s)", total/1024, strings.Join(parts, ", "))
}
