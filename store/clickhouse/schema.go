package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/flightrec/flightrec/event"
)

// schemaVersion is the version the migrations bring a database to. Bump it
// and append a step to migrations when the schema changes; never edit a
// released step, and make every step idempotent (IF NOT EXISTS; 18.16 has
// no ADD COLUMN IF NOT EXISTS, so a column step must check system.columns),
// since two processes may run the same step at once.
const schemaVersion = 4

// table is one table of the schema, described once for both the
// single-server DDL (migrations) and the cluster DDL (ClusterDDL).
type table struct {
	name    string
	columns [][2]string // name, type
	// engine is the MergeTree engine without "Replicated"; version is its
	// version column, if any.
	engine, version string
	orderBy         string
	// settings is the table's SETTINGS clause, if any.
	settings string
	// shardKey is the Distributed table's sharding expression: every row
	// of one recording lives on one shard, so ReplacingMergeTree collapses
	// its duplicates there and a recording's reads touch one shard.
	shardKey string
}

// The tables. Timestamps are UInt64 nanoseconds; every column is plain
// (no Nullable, no LowCardinality) so the DDL runs on 18.16.
var (
	eventsTable = table{
		name: "events",
		columns: [][2]string{
			{"recording", "String"},
			{"seq", "UInt64"},
			{"step", "Int64"},
			{"ts", "UInt64"},
			{"kind", "String"},
			{"cid", "String"},
			{"size", "UInt64"},
			{"seg", "UInt32"},
			{"off", "UInt64"},
			{"len", "UInt32"},
			{"url", "String"},
			{"method", "String"},
			{"status", "Int32"},
			{"level", "String"},
			{"text", "String"},
			{"action", "String"},
			{"outcome", "String"},
			{"error_code", "String"},
		},
		// Playback reads a recording by step; the step is a function of
		// the seq within a recording, so the key is unique on
		// (recording, seq), the identity duplicates collapse on.
		engine:   "ReplacingMergeTree",
		orderBy:  "recording, step, seq",
		shardKey: "cityHash64(recording)",
	}
	// recordingColumns are the columns of a recording's metadata row, in
	// both tables that hold it.
	recordingColumns = [][2]string{
		{"id", "String"},
		{"project", "String"},
		{"flow", "String"},
		{"labels", "String"},   // JSON object
		{"executor", "String"}, //
		{"versions", "String"}, // JSON object
		{"plan_digest", "String"},
		{"created_at", "UInt64"},
		{"finished_at", "UInt64"},
		{"verdict", "String"},
		{"failure_signature", "String"},
		{"state", "String"},
		{"root", "String"},
		{"updated_at", "UInt64"}, // the row's version: the newest wins
	}
	// Every PutRecording writes one row, versioned by updated_at, into two
	// tables that differ only in their key, since 18.16 reads a MergeTree
	// in order of nothing but its key:
	//
	//   - recordings_meta, ordered by id in granules of 256 rows: one
	//     recording's rows are one range of the key (Recording, a page's
	//     rows, paging's After), and a page of 100 ids reads a few hundred
	//     rows per part rather than 8,192;
	//   - recordings_list, ordered by (created_at, id) in granules of 1,024
	//     rows: the newest recordings are the end of the key, so a listing
	//     reads a window of recent granules, not the whole table.
	//
	// Reads take each id's newest row with argMax; a placeholder row
	// (events indexed before the metadata) has version 0 and created_at 0.
	// Schema version 1 had one table, recordings, ordered by (project,
	// created_at, id): the migration to version 2 copies it into
	// recordings_by_id (version 2's by-id table, in granules of 8,192) and
	// recordings_list and drops it; the migration to version 3 copies
	// recordings_by_id into recordings_meta and drops it.
	recordingsMetaTable = table{
		name:     "recordings_meta",
		columns:  recordingColumns,
		engine:   "ReplacingMergeTree",
		version:  "updated_at",
		orderBy:  "id",
		settings: "index_granularity = 256",
		shardKey: "cityHash64(id)",
	}
	// legacyRecordingsByIDTable is schema version 2's by-id table, as
	// released: migration 2 creates it.
	legacyRecordingsByIDTable = table{
		name:     "recordings_by_id",
		columns:  recordingColumns,
		engine:   "ReplacingMergeTree",
		version:  "updated_at",
		orderBy:  "id",
		shardKey: "cityHash64(id)",
	}
	recordingsListTable = table{
		name:     "recordings_list",
		columns:  recordingColumns,
		engine:   "ReplacingMergeTree",
		version:  "updated_at",
		orderBy:  "created_at, id",
		settings: "index_granularity = 1024",
		shardKey: "cityHash64(id)",
	}
	// stepsTable holds each step's totals (the timeline's rows, and the
	// recordings' counters summed over them), derived from events: after
	// each insert of events, the writer recomputes the totals of every
	// step the insert touched from the events table itself, each seq once
	// (LIMIT 1 BY seq), and inserts them. A step's events only ever grow
	// (until the recording is deleted, with its steps), so the row seen
	// with the most events is the latest: the version is events, and reads
	// take each step's row with the most. Recomputing from the table,
	// rather than adding up the batch, keeps the totals exact under
	// replayed rows; a crash between the events and their totals leaves
	// the cursor behind, so the projector sends the rows again and the
	// totals follow.
	stepsTable = table{
		name:     "steps",
		columns:  stepColumns(),
		engine:   "ReplacingMergeTree",
		version:  "events",
		orderBy:  "recording, step",
		shardKey: "cityHash64(recording)",
	}
	cursorsTable = table{
		name:     "cursors",
		columns:  [][2]string{{"recording", "String"}, {"through", "UInt64"}},
		engine:   "ReplacingMergeTree",
		version:  "through",
		orderBy:  "recording",
		shardKey: "cityHash64(recording)",
	}
	tables = []table{eventsTable, recordingsMetaTable, recordingsListTable, stepsTable, cursorsTable}
)

// stepKinds are the kinds counted in a step's n_<kind> columns, as schema
// version 2 created them. A new event kind needs a migration that adds its
// column (TestStepKinds keeps this list and event.Kinds together).
var stepKinds = []event.Kind{event.KindReceipt, event.KindSnapshot, event.KindDOM, event.KindHAR, event.KindConsole,
	event.KindFrame, event.KindVideo, event.KindScreenshot, event.KindCheck, event.KindMeta,
	event.KindDownload} // version 4

// stepColumns are the steps table's columns: a step's totals as the
// timeline reports them, its receipt's summary, and a count per kind.
func stepColumns() [][2]string {
	cols := [][2]string{
		{"recording", "String"},
		{"step", "Int64"},
		{"events", "UInt64"},
		{"bytes", "UInt64"},
		{"first_ts", "UInt64"},
		{"last_ts", "UInt64"},
		{"first_seq", "UInt64"},
		{"last_seq", "UInt64"},
		{"action", "String"},
		{"target", "String"},
		{"outcome", "String"},
		{"error_code", "String"},
	}
	for _, k := range stepKinds {
		cols = append(cols, [2]string{"n_" + string(k), "UInt64"})
	}
	return cols
}

// stepTotalsSQL selects, in the steps table's column order, the totals of
// the steps of events whose rows where selects (all, if empty), each seq
// once (LIMIT 1 BY collapses copies not merged yet). The receipt summary
// is the step's highest-seq receipt.
func stepTotalsSQL(where string) string {
	counts := make([]string, len(stepKinds))
	for i, k := range stepKinds {
		counts[i] = fmt.Sprintf("countIf(kind = %s)", quoteString(string(k)))
	}
	if where != "" {
		where = " WHERE " + where
	}
	return `SELECT recording, step, count(), sum(size), min(ts), max(ts), min(seq), max(seq),
		argMaxIf(action, seq, kind = 'receipt'), argMaxIf(text, seq, kind = 'receipt'),
		argMaxIf(outcome, seq, kind = 'receipt'), argMaxIf(error_code, seq, kind = 'receipt'),
		` + strings.Join(counts, ", ") + `
		FROM (SELECT recording, step, seq, ts, size, kind, action, text, outcome, error_code
			FROM events` + where + ` LIMIT 1 BY recording, seq)
		GROUP BY recording, step`
}

// columnList is the table's columns, comma-separated, in order.
func (t table) columnList() string {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c[0]
	}
	return strings.Join(names, ", ")
}

func (t table) columnDefs() string {
	var b strings.Builder
	for i, c := range t.columns {
		sep := ","
		if i == len(t.columns)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %-17s %s%s\n", c[0], c[1], sep)
	}
	return b.String()
}

// createSQL is the single-server CREATE TABLE.
func (t table) createSQL() string {
	engine := t.engine
	if t.version != "" {
		engine += "(" + t.version + ")"
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s\n(\n%s)\nENGINE = %s\nORDER BY (%s)%s",
		t.name, t.columnDefs(), engine, t.orderBy, t.settingsClause())
}

func (t table) settingsClause() string {
	if t.settings == "" {
		return ""
	}
	return "\nSETTINGS " + t.settings
}

// migrations[i] takes the schema from version i to i+1.
var migrations = [][]string{
	{eventsTable.createSQL(), legacyRecordingsSQL, cursorsTable.createSQL()},
	{
		legacyRecordingsByIDTable.createSQL(), recordingsListTable.createSQL(), stepsTable.createSQL(),
		// Copy version 1's recordings into both tables, then drop it; a
		// second process migrating at once may find it gone (see
		// ignoreMissing), after the first copied it.
		"INSERT INTO recordings_by_id (" + legacyRecordingsByIDTable.columnList() + ") SELECT " +
			legacyRecordingsByIDTable.columnList() + " FROM recordings",
		"INSERT INTO recordings_list (" + recordingsListTable.columnList() + ") SELECT " +
			recordingsListTable.columnList() + " FROM recordings",
		"DROP TABLE IF EXISTS recordings",
		// Every step's totals, from the events already indexed.
		"INSERT INTO steps (" + stepsTable.columnList() + ") " + stepTotalsSQL(""),
	},
	{
		// The by-id table again in granules of 256 (18.16 cannot change a
		// table's granularity): copy, then drop. Two processes migrating
		// at once may both copy; the copies are the same versions, which
		// reads collapse like any other.
		recordingsMetaTable.createSQL(),
		"INSERT INTO recordings_meta (" + recordingsMetaTable.columnList() + ") SELECT " +
			recordingsMetaTable.columnList() + " FROM recordings_by_id",
		"DROP TABLE IF EXISTS recordings_by_id",
	},
	{
		// The download kind's count. A database migrated from version 1
		// or 2 here has it already (migration 1 creates steps with every
		// kind of stepKinds): see ignoreMissing.
		addStepKindSQL + "download UInt64",
	},
}

// addStepKindSQL begins a migration adding a kind's n_<kind> column.
const addStepKindSQL = "ALTER TABLE steps ADD COLUMN n_"

// legacyRecordingsSQL is schema version 1's recordings table, as released.
const legacyRecordingsSQL = `CREATE TABLE IF NOT EXISTS recordings
(
    id                String,
    project           String,
    flow              String,
    labels            String,
    executor          String,
    versions          String,
    plan_digest       String,
    created_at        UInt64,
    finished_at       UInt64,
    verdict           String,
    failure_signature String,
    state             String,
    root              String,
    updated_at        UInt64
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (project, created_at, id)`

const createMigrationsSQL = `CREATE TABLE IF NOT EXISTS schema_migrations
(
    version    UInt32,
    applied_at UInt64
)
ENGINE = ReplacingMergeTree
ORDER BY (version)`

// migrate brings the database to schemaVersion. Each step runs once per
// database (schema_migrations records it) and is idempotent, so two
// processes migrating at once both succeed.
func (db *DB) migrate(ctx context.Context) error {
	if db.cluster != "" {
		return db.checkClusterTables(ctx)
	}
	if err := db.execDDL(ctx, createMigrationsSQL); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var v uint32
	if err := db.conn.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("index schema version %d is newer than this binary's %d; use a newer flightrec or rebuild the index", v, schemaVersion)
	}
	for ; v < schemaVersion; v++ {
		for _, stmt := range migrations[v] {
			if err := ignoreMissing(stmt, db.execDDL(ctx, stmt)); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
		}
		if err := db.recordVersion(ctx, v+1); err != nil {
			return fmt.Errorf("record schema version %d: %w", v+1, err)
		}
	}
	return nil
}

// ignoreMissing forgives a copy out of an old version's table (version
// 1's recordings, version 2's recordings_by_id) that another process,
// migrating at the same time, has already copied and dropped, and a kind's
// column that the steps table has already (created with it, or added by
// another process).
func ignoreMissing(stmt string, err error) error {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && (ex.Code == 60 || ex.Code == 218) && // UNKNOWN_TABLE, TABLE_IS_DROPPED
		(strings.HasSuffix(stmt, " FROM recordings") || strings.HasSuffix(stmt, " FROM recordings_by_id")) {
		return nil
	}
	// 18.16 says ILLEGAL_COLUMN (44), current releases DUPLICATE_COLUMN (15).
	if errors.As(err, &ex) && (ex.Code == 44 || ex.Code == 15) && strings.HasPrefix(stmt, addStepKindSQL) &&
		strings.Contains(ex.Message, "already exists") {
		return nil
	}
	return err
}

// recordVersion notes in schema_migrations that version v is in place.
// Inserts go through PrepareBatch: an INSERT … VALUES sent as a plain
// query leaves the server waiting for a data block.
func (db *DB) recordVersion(ctx context.Context, v uint32) error {
	b, err := db.conn.PrepareBatch(ctx, `INSERT INTO schema_migrations (version, applied_at)`)
	if err != nil {
		return err
	}
	if err := b.Append(v, uint64(time.Now().UnixNano())); err != nil {
		_ = b.Abort()
		return err
	}
	return b.Send()
}

// execDDL runs an idempotent DDL statement. Two concurrent CREATE TABLE IF
// NOT EXISTS can race in ClickHouse, the loser failing with "already
// exists": the outcome is the one asked for, so that is success.
func (db *DB) execDDL(ctx context.Context, stmt string) error {
	err := db.conn.Exec(ctx, stmt)
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && (ex.Code == 57 || ex.Code == 82) { // TABLE_ALREADY_EXISTS, DATABASE_ALREADY_EXISTS
		return nil
	}
	return err
}

// checkClusterTables checks that the cluster DDL has been run: in cluster
// mode the index creates nothing itself.
func (db *DB) checkClusterTables(ctx context.Context) error {
	rows, err := db.conn.Query(ctx, `SELECT name FROM system.tables WHERE database = ?`, db.database)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return fmt.Errorf("list tables: %w", err)
		}
		have[name] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	if have["recordings_local"] && !have["recordings_by_id_local"] {
		return fmt.Errorf("the cluster holds flightrec's index schema version 1, and this binary needs version %d: "+
			"create the new tables with `flightrec clickhouse ddl --cluster %s --database %s | clickhouse-client --multiquery`, "+
			"then rebuild the index with `flightrec reindex` (the old recordings tables can be dropped after)",
			schemaVersion, db.cluster, db.database)
	}
	if have["recordings_by_id_local"] && !have["recordings_meta_local"] {
		return fmt.Errorf("the cluster holds flightrec's index schema version 2, and this binary needs version %d: "+
			"create the new tables with `flightrec clickhouse ddl --cluster %s --database %s | clickhouse-client --multiquery`, "+
			"then copy each recording's rows with `INSERT INTO %s.recordings_meta SELECT * FROM %s.recordings_by_id` "+
			"(or rebuild the index with `flightrec reindex`); recordings_by_id and recordings_by_id_local can be dropped after",
			schemaVersion, db.cluster, db.database, db.database, db.database)
	}
	for _, t := range tables {
		for _, name := range []string{t.name, t.name + "_local"} {
			if !have[name] {
				return fmt.Errorf("table %s.%s is missing: create the cluster schema first with "+
					"`flightrec clickhouse ddl --cluster %s --database %s | clickhouse-client --multiquery`",
					db.database, name, db.cluster, db.database)
			}
		}
	}
	if err := db.checkClusterColumns(ctx); err != nil {
		return err
	}
	return db.checkClusterSettings(ctx)
}

// checkClusterColumns refuses a cluster whose tables lack a column this
// binary writes (a cluster created by an older `clickhouse ddl`: the steps
// table gained n_download in schema version 4), naming the statements that
// add them. A single server migrates itself; a cluster's DDL is the
// operator's. A Replicated table takes ALTER … ON CLUSTER; a Distributed
// one does not on 18.16 (Code 371: "isn't replicated, but shard is
// replicated"), and holds no data, so it is dropped and made again by the
// printed DDL.
func (db *DB) checkClusterColumns(ctx context.Context) error {
	rows, err := db.conn.Query(ctx, `SELECT table, name FROM system.columns WHERE database = ?`, db.database)
	if err != nil {
		return fmt.Errorf("list columns: %w", err)
	}
	defer rows.Close()
	have := map[[2]string]bool{}
	for rows.Next() {
		var table, name string
		if err := rows.Scan(&table, &name); err != nil {
			return fmt.Errorf("list columns: %w", err)
		}
		have[[2]string{table, name}] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list columns: %w", err)
	}
	var fixes, stale []string
	for _, t := range tables {
		dist := false
		for _, c := range t.columns {
			if !have[[2]string{t.name + "_local", c[0]}] {
				fixes = append(fixes, fmt.Sprintf("ALTER TABLE %s.%s_local ON CLUSTER %s ADD COLUMN %s %s",
					db.database, t.name, db.cluster, c[0], c[1]))
			}
			dist = dist || !have[[2]string{t.name, c[0]}]
		}
		if dist {
			stale = append(stale, fmt.Sprintf("DROP TABLE %s.%s ON CLUSTER %s", db.database, t.name, db.cluster))
		}
	}
	if len(fixes)+len(stale) > 0 {
		return fmt.Errorf("the cluster's tables lack columns this binary writes (their schema is older than version %d): run: %s; "+
			"then apply the schema again with `flightrec clickhouse ddl --cluster %s --database %s | clickhouse-client --multiquery`",
			schemaVersion, strings.Join(append(fixes, stale...), "; "), db.cluster, db.database)
	}
	return nil
}

// clusterSettings are the server settings the index needs on a cluster,
// which it cannot send itself: clickhouse-go sends only numeric and
// boolean settings to a server as old as 18.16, so these come from the
// user's profile (users.xml).
var clusterSettings = [][2]string{
	// A recording's events and metadata share a shard, so a subquery
	// runs locally on each; without it listing and some searches fail
	// with Code 288 (double-distributed IN).
	{"distributed_product_mode", "local"},
	// Reads go to the first live replica of each shard, the one a
	// synchronous insert wrote; with the default (random) a read right
	// after an insert missed the row 72 times in 300.
	{"load_balancing", "in_order"},
}

// checkClusterSettings refuses a profile without clusterSettings, saying
// what to set.
func (db *DB) checkClusterSettings(ctx context.Context) error {
	for _, kv := range clusterSettings {
		var value string
		err := db.conn.QueryRow(ctx, "SELECT value FROM system.settings WHERE name = ?", kv[0]).Scan(&value)
		if err != nil {
			return fmt.Errorf("read setting %s: %w", kv[0], err)
		}
		if value != kv[1] {
			return fmt.Errorf("the server's setting %s is %q, and the index on a cluster needs %q: "+
				"set <%s>%s</%s> in the profile of the user flightrec connects as (users.xml) on every server",
				kv[0], value, kv[1], kv[0], kv[1], kv[0])
		}
	}
	return nil
}

// ClusterDDL is the schema for a cluster named cluster: on every node, a
// Replicated table per table (name_local, replicated within its shard
// through the {shard} and {replica} macros of each server's config) and a
// Distributed table under the table's own name that shards rows by
// recording. The index reads and inserts through the Distributed tables
// and sends mutations to the local ones ON CLUSTER. The output is
// deterministic: statements end with ";" and run with clickhouse-client
// --multiquery.
func ClusterDDL(cluster, database string) (string, error) {
	if !identRE.MatchString(cluster) {
		return "", fmt.Errorf("cluster name %q: use letters, digits and _", cluster)
	}
	if database == "" {
		database = DefaultDatabase
	}
	if !identRE.MatchString(database) {
		return "", fmt.Errorf("database name %q: use letters, digits and _", database)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- flightrec index schema version %d for cluster %s.\n", schemaVersion, cluster)
	fmt.Fprintf(&b, "-- Run once against any node: clickhouse-client --multiquery < this-file\n")
	fmt.Fprintf(&b, "-- Every server needs <macros> with {shard} and {replica}, ZooKeeper, and %s in <remote_servers>.\n", cluster)
	fmt.Fprintf(&b, "-- Then run flightrec with --index 'clickhouse://USER:PASS@HOST:9000/%s?cluster=%s'.\n\n", database, cluster)
	fmt.Fprintf(&b, "CREATE DATABASE IF NOT EXISTS %s ON CLUSTER %s;\n", database, cluster)
	for _, t := range tables {
		local := t.name + "_local"
		args := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", database, local)
		if t.version != "" {
			args += ", " + t.version
		}
		fmt.Fprintf(&b, "\nCREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s\n(\n%s)\nENGINE = Replicated%s(%s)\nORDER BY (%s)%s;\n",
			database, local, cluster, t.columnDefs(), t.engine, args, t.orderBy, t.settingsClause())
		fmt.Fprintf(&b, "\nCREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s AS %s.%s\nENGINE = Distributed(%s, %s, %s, %s);\n",
			database, t.name, cluster, database, local, cluster, database, local, t.shardKey)
	}
	return b.String(), nil
}

// ServerDDL is the schema Open creates on a single server (version
// schemaVersion), as statements for clickhouse-client --multiquery.
func ServerDDL(database string) (string, error) {
	if database == "" {
		database = DefaultDatabase
	}
	if !identRE.MatchString(database) {
		return "", fmt.Errorf("database name %q: use letters, digits and _", database)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- flightrec index schema version %d for one server.\n", schemaVersion)
	fmt.Fprintf(&b, "-- flightrec creates it by itself when it opens clickhouse://HOST:9000/%s.\n\n", database)
	fmt.Fprintf(&b, "CREATE DATABASE IF NOT EXISTS %s;\n", database)
	for _, t := range tables {
		fmt.Fprintf(&b, "\n%s;\n", strings.Replace(t.createSQL(), "IF NOT EXISTS "+t.name, "IF NOT EXISTS "+database+"."+t.name, 1))
	}
	return b.String(), nil
}
