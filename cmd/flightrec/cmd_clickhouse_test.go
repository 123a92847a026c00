package main

import (
	"strings"
	"testing"
)

// TestClickHouseDDL: the printed schema names every table, for a cluster
// as Replicated local tables and Distributed ones sharded by recording,
// and is the same on every run.
func TestClickHouseDDL(t *testing.T) {
	out, errOut, code := flightrec(t, "clickhouse", "ddl", "--cluster", "prod", "--database", "fr")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	again, _, _ := flightrec(t, "clickhouse", "ddl", "--cluster", "prod", "--database", "fr")
	if out != again {
		t.Error("two runs printed different DDL")
	}
	for _, table := range []string{"events", "recordings_meta", "recordings_list", "steps", "cursors"} {
		for _, want := range []string{
			"CREATE TABLE IF NOT EXISTS fr." + table + "_local ON CLUSTER prod",
			"'/clickhouse/tables/{shard}/fr/" + table + "_local', '{replica}'",
			"CREATE TABLE IF NOT EXISTS fr." + table + " ON CLUSTER prod AS fr." + table + "_local",
			"ENGINE = Distributed(prod, fr, " + table + "_local, cityHash64(",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("cluster DDL lacks %q", want)
			}
		}
	}
	for _, engine := range []string{"ReplicatedReplacingMergeTree(", "CREATE DATABASE IF NOT EXISTS fr ON CLUSTER prod;"} {
		if !strings.Contains(out, engine) {
			t.Errorf("cluster DDL lacks %q", engine)
		}
	}
	for _, banned := range []string{"LowCardinality", "CODEC", "TTL", "DateTime64", "INDEX "} {
		if strings.Contains(out, banned) {
			t.Errorf("cluster DDL uses %s, which 18.16 lacks", banned)
		}
	}

	single, _, code := flightrec(t, "clickhouse", "ddl")
	if code != exitOK || !strings.Contains(single, "CREATE TABLE IF NOT EXISTS flightrec.events") ||
		strings.Contains(single, "ON CLUSTER") || strings.Contains(single, "Replicated") {
		t.Errorf("single-server DDL: exit %d\n%s", code, single)
	}
	if _, errOut, code := flightrec(t, "clickhouse", "ddl", "--cluster", "a;b"); code != exitUsage || !strings.Contains(errOut, "cluster name") {
		t.Errorf("bad cluster name: exit %d, %q", code, errOut)
	}
	if _, _, code := flightrec(t, "clickhouse", "tables"); code != exitUsage {
		t.Errorf("unknown verb: exit %d", code)
	}
}
