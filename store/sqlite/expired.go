package sqlite

import (
	"context"
	"fmt"

	"github.com/flightrec/flightrec/store"
)

// Expired lists up to limit (default 1000) finished recordings created
// before before (unix ns), oldest first: the candidates a retention sweep
// considers. store/clickhouse answers the same.
func (db *DB) Expired(ctx context.Context, before int64, limit int) ([]string, error) {
	if limit <= 0 {
		limit = store.MaxRecordingsPage
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id FROM recordings INDEXED BY recordings_newest
		WHERE state = ? AND created_at < ? ORDER BY created_at, id LIMIT ?`, store.StateFinished, before, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite index: expired: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite index: expired: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite index: expired: %w", err)
	}
	return out, nil
}
