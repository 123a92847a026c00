package devcluster_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/devcluster"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testgen"
	chindex "github.com/flightrec/flightrec/store/clickhouse"
	"github.com/flightrec/flightrec/wire"
)

// buildFlightrec builds the flightrec binary the nodes run.
func buildFlightrec(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flightrec")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/flightrec").CombinedOutput()
	if err != nil {
		t.Fatalf("go build flightrec: %v\n%s", err, out)
	}
	return bin
}

// nodeCluster is a 2×2 cluster with one flightrec node on it (the
// failures here are ClickHouse's and ZooKeeper's, not a node's).
func nodeCluster(t *testing.T) *devcluster.Cluster {
	t.Helper()
	return testenv.Cluster(t, devcluster.Config{Shards: 2, Replicas: 2, Nodes: 1, Flightrec: buildFlightrec(t),
		NodeArgs: []string{"--insecure-anonymous"}, Schema: chindex.ClusterDDL})
}

// sent is what one executor streamed: its recording and the events the
// node acknowledged, by step.
type sent struct {
	id     string
	acked  uint64
	events []event.Envelope
}

// ingest runs executors that each stream recordings through the node in
// small batches, and calls fault (while ingest goes on) once 1500 events
// are acknowledged. Each executor stops after a recording it began once
// fault had returned, so ingest after the fault is part of every run.
// Every append, open and finish must succeed: clients retry what the node
// answers 503 or drops, as the recorder does, and a refusal is a failed
// acknowledgement.
func ingest(t *testing.T, c *devcluster.Cluster, fault func()) []sent {
	t.Helper()
	const executors, steps, perStep, threshold = 4, 20, 30, 1500
	var acked atomic.Int64
	faulted, over := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var out []sent
	var wg sync.WaitGroup
	errs := make(chan error, executors)
	ctx := t.Context()
	for e := range executors {
		wg.Go(func() {
			cl := client.New(c.Nodes[0].URL)
			cl.RetryFor = 5 * time.Minute
			// Bounded by time, not by a count of recordings: how many
			// fit in the fault depends on how fast the node is (100 each
			// once did not outlast a 10 s ZooKeeper outage).
			deadline := time.Now().Add(5 * time.Minute)
			for r := 0; ; r++ {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("%d recordings in 5 minutes and the fault never ended", r)
					return
				}
				after := isClosed(over)
				evs := testgen.Recording(testgen.Options{Seed: uint64(1000*e + r + 1), Steps: steps, EventsPerStep: perStep})
				rep, err := cl.Open(ctx, wire.OpenRequest{Project: "cluster", Flow: fmt.Sprintf("e%d", e)})
				if err != nil {
					errs <- fmt.Errorf("open: %w", err)
					return
				}
				lines, err := client.ParseLines(testgen.NDJSON(evs))
				if err != nil {
					errs <- err
					return
				}
				var prev uint64
				got, err := cl.Send(ctx, rep.ID, lines, 40, 1<<20, func(a uint64) {
					if acked.Add(int64(a-prev)) >= threshold {
						once.Do(func() { close(faulted) })
					}
					prev = a
				})
				if err != nil {
					errs <- fmt.Errorf("append to %s: %w", rep.ID, err)
					return
				}
				if _, err := cl.Finish(ctx, rep.ID, "pass"); err != nil {
					errs <- fmt.Errorf("finish %s: %w", rep.ID, err)
					return
				}
				mu.Lock()
				out = append(out, sent{id: rep.ID, acked: got, events: evs})
				mu.Unlock()
				if after {
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-faulted:
		fault()
		close(over)
	case <-done:
		t.Error("ingest ended before the fault")
	}
	<-done
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return out
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// converged waits until the index holds, for every recording, exactly the
// events its executor had acknowledged: the same number per step, each
// seq once (read through the Distributed table, as the node reads).
func converged(t *testing.T, c *devcluster.Cluster, recs []sent) {
	t.Helper()
	cn, err := clickhouse.Open(&clickhouse.Options{Addr: addrs(c), ReadTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := sameCounts(t.Context(), cn, recs)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index did not converge to what was acknowledged: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func sameCounts(ctx context.Context, cn clickhouse.Conn, recs []sent) error {
	for _, r := range recs {
		want := map[int64]uint64{}
		for _, e := range r.events {
			if e.Seq <= r.acked {
				want[int64(e.Step)]++
			}
		}
		if uint64(len(r.events)) != r.acked {
			return fmt.Errorf("%s: acknowledged through %d of %d", r.id, r.acked, len(r.events))
		}
		rows, err := cn.Query(ctx, `SELECT step, uniqExact(seq), count() FROM
			(SELECT step, seq FROM flightrec.events WHERE recording = ? LIMIT 1 BY seq) GROUP BY step`, r.id)
		if err != nil {
			return err
		}
		got := map[int64]uint64{}
		for rows.Next() {
			var step int64
			var uniq, n uint64
			if err := rows.Scan(&step, &uniq, &n); err != nil {
				rows.Close()
				return err
			}
			got[step] = uniq
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("%s: %d steps indexed, want %d", r.id, len(got), len(want))
		}
		for s, n := range want {
			if got[s] != n {
				return fmt.Errorf("%s step %d: %d events indexed, want %d", r.id, s, got[s], n)
			}
		}
	}
	return nil
}

func addrs(c *devcluster.Cluster) []string {
	var out []string
	for _, r := range c.ClickHouse {
		out = append(out, r.Addr())
	}
	return out
}

// TestClusterReplicaLoss: the first ClickHouse replica of shard 1 (the
// one the node connects to first, and reads from first) is killed
// mid-ingest and started again. No acknowledgement fails, and the index
// converges to what was acknowledged, per recording and step.
func TestClusterReplicaLoss(t *testing.T) {
	c := nodeCluster(t)
	recs := ingest(t, c, func() {
		c.KillReplica(0)
		t.Log("killed clickhouse s1r1 mid-ingest")
		time.Sleep(5 * time.Second) // ingest goes on without it for a while
		if err := c.StartReplica(0); err != nil {
			t.Fatal(err)
		}
		t.Log("started clickhouse s1r1 again")
	})
	converged(t, c, recs)
}

// TestClusterZooKeeperLoss: ZooKeeper is stopped for 10 s mid-ingest.
// Inserts fail meanwhile (the Replicated tables are read-only), yet no
// append is refused and nothing acknowledged is missing from the index
// once ZooKeeper is back; ingest goes on after it returns.
func TestClusterZooKeeperLoss(t *testing.T) {
	c := nodeCluster(t)
	recs := ingest(t, c, func() {
		c.StopZooKeeper()
		t.Log("stopped zookeeper mid-ingest")
		// The outage is real: an insert into the index's tables fails.
		cn, err := clickhouse.Open(&clickhouse.Options{Addr: addrs(c), Settings: clickhouse.Settings{"insert_distributed_sync": 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		if err := tryInsert(t.Context(), cn, "zk-probe"); err == nil {
			t.Error("an insert succeeded without ZooKeeper: the outage did not happen")
		}
		time.Sleep(10 * time.Second)
		if err := c.StartZooKeeper(); err != nil {
			t.Fatal(err)
		}
		t.Log("started zookeeper again")
	})
	converged(t, c, recs)
}
