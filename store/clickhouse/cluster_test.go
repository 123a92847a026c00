package clickhouse

import (
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/flightrec/flightrec/internal/devcluster"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

// startCluster starts a 2×2 cluster with ZooKeeper for the test.
func startCluster(t *testing.T) *devcluster.Cluster {
	t.Helper()
	return testenv.Cluster(t, devcluster.Config{Shards: 2, Replicas: 2, Schema: ClusterDDL})
}

// openOnCluster opens the index on a fresh database of the cluster (its
// cluster schema applied, as an operator would).
func openOnCluster(t *testing.T, c *devcluster.Cluster, params string) *DB {
	t.Helper()
	dsn, err := c.CreateDatabase(t.Context(), "flightrec_"+devcluster.RandomHex(6))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(t.Context(), dsn+params)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestClusterConformance: the conformance suite, unchanged, against the
// index on a 2×2 cluster (Distributed over Replicated tables).
func TestClusterConformance(t *testing.T) {
	c := startCluster(t)
	indextest.Run(t, func(t *testing.T) store.Index { return openOnCluster(t, c, "") })
}

// TestClusterDeleteReplicaDown: with one replica of each shard down,
// DeleteRecordings deletes through the live replicas and returns (an ALTER
// … ON CLUSTER would wait for the dead ones until the DDL timeout and then
// fail); the replicas that were down delete the same rows when they
// return, and the recording kept keeps its events everywhere.
func TestClusterDeleteReplicaDown(t *testing.T) {
	c := startCluster(t)
	db := openOnCluster(t, c, "")
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	ids := []string{"gone-a", "gone-b", "gone-c", "gone-d", "kept"}
	for _, id := range ids {
		if err := db.IndexEvents(ctx, id, rows(id, 1, 50), 50); err != nil {
			t.Fatal(err)
		}
	}
	// Every replica has the rows before one of each shard goes down.
	waitReplicasHold(t, c, db.database, 5*50)
	// The first replica of shard 1 (where reads and writes go first) and
	// the second of shard 2.
	c.KillReplica(0)
	c.KillReplica(3)
	if err := db.DeleteRecordings(ctx, ids[:4]); err != nil {
		t.Fatalf("delete with a replica of each shard down: %v", err)
	}
	evs, err := db.Events(ctx, store.EventQuery{Recording: "gone-a", Limit: 100})
	if err != nil || len(evs) != 0 {
		t.Fatalf("after the delete, gone-a has %d events (%v)", len(evs), err)
	}
	for _, i := range []int{0, 3} {
		if err := c.StartReplica(i); err != nil {
			t.Fatal(err)
		}
	}
	waitReplicasHold(t, c, db.database, 50)
}

// waitReplicasHold waits until every replica of each shard holds the
// same events in its local table and the shards hold want between them.
func waitReplicasHold(t *testing.T, c *devcluster.Cluster, database string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := replicasHold(t, c, database, want)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func replicasHold(t *testing.T, c *devcluster.Cluster, database string, want uint64) error {
	perShard := map[int]uint64{}
	for _, r := range c.ClickHouse {
		n, err := localCount(t, r.Addr(), database)
		if err != nil {
			return err
		}
		if have, ok := perShard[r.Shard]; ok && have != n {
			return fmt.Errorf("shard %d: replica %d holds %d events, replica 1 %d", r.Shard, r.Replica, n, have)
		}
		perShard[r.Shard] = n
	}
	var total uint64
	for _, n := range perShard {
		total += n
	}
	if total != want {
		return fmt.Errorf("the shards hold %d events, want %d", total, want)
	}
	return nil
}

func localCount(t *testing.T, addr, database string) (uint64, error) {
	cn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		return 0, err
	}
	defer cn.Close()
	var n uint64
	err = cn.QueryRow(t.Context(), "SELECT count() FROM "+database+".events_local FINAL").Scan(&n)
	return n, err
}
