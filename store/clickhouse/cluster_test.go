package clickhouse

import (
	"testing"

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
