package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// waitMutations polls system.mutations until no mutation of the index's
// tables is pending. 18.16 has no mutations_sync setting, and ALTER …
// DELETE returns as soon as the mutation is queued.
//
// On a cluster it asks the replica of each shard the mutations went to
// (onShards), and a mutation whose only parts left to do are stranded
// (strandedParts: parts only a dead replica has) counts as done: no live
// replica holds those rows, so no read can see them, and the dead
// replica applies the mutation from the shard's log when it returns.
func (db *DB) waitMutations(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, db.mutationTimeout)
	defer cancel()
	tables := make([]string, len(mutable))
	for i, m := range mutable {
		tables[i] = quoteString(m.table)
		if db.cluster != "" {
			tables[i] = quoteString(m.table + "_local")
		}
	}
	in := strings.Join(tables, ", ")
	delay := 5 * time.Millisecond
	for {
		shards := []liveShard{{first: db.conn}}
		if db.cluster != "" {
			var err error
			if shards, err = db.liveShards(ctx); err != nil {
				return fmt.Errorf("wait for mutations: %w", err)
			}
		}
		pending := 0
		for _, shard := range shards {
			n, err := db.pendingMutations(ctx, shard, in)
			if err != nil {
				return fmt.Errorf("wait for mutations: %w", err)
			}
			pending += n
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for mutations: %d still pending: %w", pending, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// mutation is one mutation not done on a replica: parts_to_do counts the
// parts the replica still has to rewrite, including the parts it has yet
// to fetch; blocks is the block number the mutation got in each
// partition (a part needs it if its data version is below).
type mutation struct {
	table     string
	partsToDo int64
	blocks    map[string]int64
}

// pendingMutations counts the mutations of the tables in (quoted, comma
// separated) not done on a shard's first live replica, leaving out those
// waiting only for stranded parts.
func (db *DB) pendingMutations(ctx context.Context, shard liveShard, in string) (int, error) {
	rows, err := shard.first.Query(ctx, `SELECT table, parts_to_do, block_numbers.partition_id, block_numbers.number
		FROM system.mutations WHERE database = ? AND table IN (`+in+`) AND is_done = 0`, db.database)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var muts []mutation
	for rows.Next() {
		var m mutation
		var partitions []string
		var numbers []int64
		if err := rows.Scan(&m.table, &m.partsToDo, &partitions, &numbers); err != nil {
			return 0, err
		}
		m.blocks = map[string]int64{}
		for i, p := range partitions {
			if i < len(numbers) {
				m.blocks[p] = numbers[i]
			}
		}
		muts = append(muts, m)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(muts) == 0 || db.cluster == "" {
		return len(muts), nil
	}
	stranded, err := db.strandedParts(ctx, shard, in)
	if err != nil {
		return 0, err
	}
	pending := 0
	for _, m := range muts {
		var n int64
		for _, p := range stranded[m.table] {
			if b, ok := m.blocks[p.partition]; ok && p.version < b {
				n++
			}
		}
		// Without a stranded part it is waited for as on one server,
		// until is_done (parts_to_do may reach 0 before it).
		if n == 0 || m.partsToDo > n {
			pending++
		}
	}
	return pending, nil
}

// part is a data part's name parsed: partition_min_max_level[_mutation].
type part struct {
	partition string
	// version is the data version: the mutation the part had applied,
	// else its lowest block number.
	version int64
}

// parsePart parses a part name of the custom-partitioning format (the
// only one the index's tables use); a partition id has no underscore.
func parsePart(name string) (part, bool) {
	f := strings.Split(name, "_")
	if len(f) != 4 && len(f) != 5 {
		return part{}, false
	}
	n := make([]int64, len(f)-1)
	for i, s := range f[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return part{}, false
		}
		n[i] = v
	}
	p := part{partition: f[0], version: n[0]}
	if len(n) == 4 {
		p.version = n[3]
	}
	return p, true
}

// strandedParts returns, by table, the parts the shard's first live
// replica has tried and failed to fetch (a GET_PART in its replication
// queue with a try behind it) that no live replica of the shard holds:
// parts written to a replica that died before its peers fetched them.
// The peer's mutation waits for them ("No active replica has part") until
// that replica returns, and no read sees their rows meanwhile.
func (db *DB) strandedParts(ctx context.Context, shard liveShard, in string) (map[string][]part, error) {
	rows, err := shard.first.Query(ctx, `SELECT table, new_part_name FROM system.replication_queue
		WHERE database = ? AND table IN (`+in+`) AND type = 'GET_PART' AND num_tries > 0`, db.database)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// Part names repeat across tables: a part is its table and name.
	type tablePart struct{ table, name string }
	queued := map[tablePart]bool{}
	var names []string
	for rows.Next() {
		var table, name string
		if err := rows.Scan(&table, &name); err != nil {
			return nil, err
		}
		queued[tablePart{table, name}] = true
		names = append(names, quoteString(name))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(queued) == 0 {
		return nil, nil
	}
	// A part another live replica holds is not stranded: the fetch will
	// get it. (The replicas before the first live one are down.)
	for _, addr := range shard.rest {
		r, err := db.replicaConn(ctx, addr)
		if err != nil {
			continue // down: it serves no read
		}
		held, err := r.Query(ctx, `SELECT table, name FROM system.parts WHERE database = ? AND table IN (`+in+`)
			AND active AND name IN (`+strings.Join(names, ", ")+`)`, db.database)
		if err != nil {
			return nil, err
		}
		for held.Next() {
			var tp tablePart
			if err := held.Scan(&tp.table, &tp.name); err != nil {
				held.Close()
				return nil, err
			}
			delete(queued, tp)
		}
		err = held.Err()
		held.Close()
		if err != nil {
			return nil, err
		}
	}
	out := map[string][]part{}
	for tp := range queued {
		if p, ok := parsePart(tp.name); ok {
			out[tp.table] = append(out[tp.table], p)
		}
	}
	return out, nil
}
