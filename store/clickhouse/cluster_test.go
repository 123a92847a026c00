package clickhouse

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
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
	t.Run("older schema", func(t *testing.T) { testClusterOlderColumns(t, c) })
}

// testClusterOlderColumns: a cluster whose steps tables predate n_download
// (made by an older `clickhouse ddl`) is refused at Open with the
// statements that add the column, and those statements, run as given,
// followed by the schema applied again, make it open.
func testClusterOlderColumns(t *testing.T, c *devcluster.Cluster) {
	ctx := t.Context()
	database := "flightrec_" + devcluster.RandomHex(6)
	dsn, err := c.CreateDatabase(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The older schema: the column absent from both tables.
	for _, stmt := range []string{
		fmt.Sprintf("ALTER TABLE %s.steps_local ON CLUSTER %s DROP COLUMN n_download", database, db.cluster),
		fmt.Sprintf("DROP TABLE %s.steps ON CLUSTER %s", database, db.cluster),
		fmt.Sprintf("CREATE TABLE %s.steps ON CLUSTER %s AS %s.steps_local ENGINE = Distributed(%s, %s, steps_local, %s)",
			database, db.cluster, database, db.cluster, database, stepsTable.shardKey),
	} {
		if err := db.conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	_, err = Open(ctx, dsn)
	if err == nil {
		t.Fatal("an index without steps.n_download opened")
	}
	_, fix, ok := strings.Cut(err.Error(), "run: ")
	fix, _, ok2 := strings.Cut(fix, "; then apply the schema again")
	if !ok || !ok2 || !strings.Contains(fix, "ADD COLUMN n_download UInt64") {
		t.Fatalf("the refusal names no fix: %v", err)
	}
	for _, stmt := range strings.Split(fix, "; ") {
		if err := db.conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := c.CreateDatabase(ctx, database); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("after the named fix: %v", err)
	}
	defer again.Close()
	if err := again.IndexEvents(ctx, "after-fix", rows("after-fix", 1, 3), 3); err != nil {
		t.Fatal(err)
	}
}

// TestClusterDeleteReplicaDown: with one replica of each shard down,
// DeleteRecordings deletes through the live replicas and returns (an ALTER
// … ON CLUSTER would wait for the dead ones until the DDL timeout and then
// fail); the replicas that were down delete the same rows when they
// return, and the recording kept keeps its events everywhere.
//
// One recording ("lone") is written, on purpose, only to the replica that
// then dies: its peer fetches nothing until then (SYSTEM STOP FETCHES),
// so afterwards the peer's fetch fails ("No active replica has part") and
// its mutations would wait for the dead replica. DeleteRecordings returns
// all the same (an error would be its mutation timeout), no read through
// the cluster sees the deleted recordings, and once the replicas return
// their rows are gone from every replica.
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
	// Every replica has these rows before one of each shard goes down.
	waitReplicasHold(t, c, db.database, 5*50)

	// lone lives on shard 1, whose writes go to its first replica (0,
	// in_order) while replica 1 fetches nothing.
	lone := idOnShard(t, c, 0, "lone")
	peer := c.ClickHouse[1].Addr()
	execAt(t, peer, "SYSTEM STOP FETCHES")
	if err := db.IndexEvents(ctx, lone, rows(lone, 1, 50), 50); err != nil {
		t.Fatal(err)
	}
	// The first replica of shard 1 (where reads and writes go first) and
	// the second of shard 2.
	c.KillReplica(0)
	c.KillReplica(3)
	execAt(t, peer, "SYSTEM START FETCHES")
	// The case itself: the peer tried to fetch lone's events and could
	// not, as only the dead replica has them.
	waitFor(t, "the peer's failed fetch of lone's part", func() error {
		n, err := countAt(t, peer, `SELECT count() FROM system.replication_queue WHERE database = ?
			AND table = 'events_local' AND type = 'GET_PART' AND num_tries > 0`, db.database)
		if err == nil && n == 0 {
			err = errors.New("no GET_PART tried")
		}
		return err
	})

	doomed := append(ids[:4:4], lone)
	if err := db.DeleteRecordings(ctx, doomed); err != nil {
		dumpMutations(t, c, db.database, 1, 2)
		t.Fatalf("delete with a replica of each shard down: %v", err)
	}
	// It returned while the peer's mutations still wait for lone's parts
	// (logged: the mutations and the queue they wait on).
	dumpMutations(t, c, db.database, 1)
	if n, err := countAt(t, peer, "SELECT count() FROM system.mutations WHERE database = ? AND is_done = 0", db.database); err != nil || n == 0 {
		t.Fatalf("the peer has %d mutations not done (%v): the test did not strand a part", n, err)
	}
	for _, id := range doomed {
		if n := visible(t, db, id); n != 0 {
			t.Fatalf("after the delete, a read through the cluster sees %d rows of %s", n, id)
		}
	}

	// While the replicas return, reads through the cluster watch for
	// lone's rows: the returning replica holds its unmutated parts until
	// it applies the mutation (its window, logged).
	watch := watchRows(t, db, lone)
	for _, i := range []int{0, 3} {
		if err := c.StartReplica(i); err != nil {
			t.Fatal(err)
		}
	}
	waitReplicasHold(t, c, db.database, 50)
	for _, id := range doomed {
		for _, r := range c.ClickHouse {
			if n, err := countAt(t, r.Addr(), "SELECT count() FROM "+db.database+".events_local WHERE recording = ?", id); err != nil || n != 0 {
				t.Errorf("replica %d of shard %d holds %d events of %s after it returned (%v)", r.Replica, r.Shard, n, id, err)
			}
		}
	}
	watch(t)
}

// idOnShard returns an id starting with prefix whose rows the Distributed
// tables send to shard index (0 is the first): cityHash64 modulo the
// shards, each of weight 1.
func idOnShard(t *testing.T, c *devcluster.Cluster, index uint64, prefix string) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		n, err := countAt(t, c.ClickHouse[0].Addr(), "SELECT toUInt64(cityHash64(?) % 2)", id)
		if err != nil {
			t.Fatal(err)
		}
		if n == index {
			return id
		}
	}
}

// visible counts a recording's rows in every table, read through the
// Distributed tables as the index reads.
func visible(t *testing.T, db *DB, id string) uint64 {
	var total uint64
	for _, m := range mutable {
		total += count(t, db, fmt.Sprintf("SELECT count() FROM %s.%s WHERE %s = ?", db.database, m.table, m.column), id)
	}
	return total
}

// watchRows reads id's rows through the cluster until the returned
// function is called, which logs what the reads saw: how many reads
// found rows and over how long.
func watchRows(t *testing.T, db *DB, id string) func(*testing.T) {
	stop := make(chan struct{})
	done := make(chan string)
	go func() {
		start := time.Now()
		var reads, seen, failed int
		var first, last time.Duration
		for {
			select {
			case <-stop:
				done <- fmt.Sprintf("%d reads of %s through the cluster while its replicas returned: %d saw rows (first at %v, last at %v), %d failed",
					reads, id, seen, first, last, failed)
				return
			default:
			}
			var n uint64
			err := db.conn.QueryRow(t.Context(), "SELECT count() FROM "+db.database+".events WHERE recording = ?", id).Scan(&n)
			reads++
			switch {
			case err != nil:
				failed++
			case n > 0:
				if seen == 0 {
					first = time.Since(start)
				}
				seen++
				last = time.Since(start)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func(t *testing.T) {
		close(stop)
		t.Log(<-done)
	}
}

// execAt runs a statement on the one server at addr.
func execAt(t *testing.T, addr, stmt string) {
	cn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	if err := cn.Exec(t.Context(), stmt); err != nil {
		t.Fatalf("%s on %s: %v", stmt, addr, err)
	}
}

// waitFor retries check until it succeeds, failing the test after a
// generous deadline.
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReplicasHold waits until every replica of each shard holds the
// same events in its local table, the shards hold want between them, and
// no replica has a replication task queued (every table's parts fetched).
func waitReplicasHold(t *testing.T, c *devcluster.Cluster, database string, want uint64) {
	t.Helper()
	waitFor(t, "replicas converge", func() error { return replicasHold(t, c, database, want) })
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
		// Every table's parts, not only the events': a part that only
		// a replica about to die has (its peer's fetch still queued)
		// holds up a mutation on the peer until it returns.
		if q, err := queued(t, r.Addr(), database); err != nil || q > 0 {
			return fmt.Errorf("shard %d replica %d: %d replication tasks queued (%v)", r.Shard, r.Replica, q, err)
		}
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

// queued counts the replication tasks (fetches, merges, mutations) a
// replica has not done yet for database's tables.
func queued(t *testing.T, addr, database string) (uint64, error) {
	return countAt(t, addr, "SELECT count() FROM system.replication_queue WHERE database = ?", database)
}

func localCount(t *testing.T, addr, database string) (uint64, error) {
	return countAt(t, addr, "SELECT count() FROM "+database+".events_local FINAL")
}

// countAt runs a count query on the one server at addr.
func countAt(t *testing.T, addr, query string, args ...any) (uint64, error) {
	cn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		return 0, err
	}
	defer cn.Close()
	var n uint64
	err = cn.QueryRow(t.Context(), query, args...).Scan(&n)
	return n, err
}

// dumpMutations logs, from the replicas live, what a stalled deletion
// waits for: the mutations not done, the replication queue's entries and
// each table's replica state (a failure's evidence, as 18.16 gives it).
func dumpMutations(t *testing.T, c *devcluster.Cluster, database string, live ...int) {
	for _, i := range live {
		host, port, _ := net.SplitHostPort(c.ClickHouse[i].Addr())
		for _, q := range []string{
			"SELECT table, mutation_id, command, parts_to_do, is_done FROM system.mutations WHERE database = '" + database + "' AND is_done = 0",
			"SELECT table, type, new_part_name, num_tries, last_exception, postpone_reason, is_currently_executing FROM system.replication_queue WHERE database = '" + database + "'",
			"SELECT table, is_leader, is_readonly, is_session_expired, queue_size, active_replicas, total_replicas FROM system.replicas WHERE database = '" + database + "'",
		} {
			out, err := exec.Command("clickhouse-client", "--host", host, "--port", port, "--query", q).CombinedOutput()
			t.Logf("replica %d: %s\n%s%v", i, q, out, err)
		}
	}
}
