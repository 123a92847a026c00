package store

import (
	"context"
	"fmt"
	"slices"
)

// In shared mode (a SharedBlobs store: serve --blobs s3://…) several nodes
// write one index. Index.Reset would empty it under every node: the
// finished recordings other nodes ingested would vanish from the list and
// search (this data directory does not hold them), and the recordings
// open on other nodes would lose their indexed events for good, their
// owners' projectors' cursors being past them. So a rebuild in shared
// mode (Store.Reindex, Projector.Rebuild) never resets: it rebuilds
// recording by recording what planSharedRebuild lists (docs/design.md §
// Rebuilding the index on a shared index).

// sharedRebuild is what a rebuild on a shared index does.
type sharedRebuild struct {
	// project are rebuilt from their first record (their rows deleted
	// first): every recording published in the shared blob store and
	// every finished one in this data directory, minus stale copies of
	// recordings another node removed.
	project []string
	// overlay are the recordings open in this data directory: projected
	// again from their first record over their rows, which are kept
	// (rows are idempotent on seq, and a cursor never moves back). In
	// cluster mode another node may have taken one over while this one
	// was stopped, and its projector's cursor is past the rows a delete
	// would remove.
	overlay []string
	// drop are indexed recordings that exist nowhere any more (finished,
	// neither published nor here, and no hold record of them left): their
	// rows are deleted.
	drop []string
}

// planSharedRebuild lists what a rebuild on a shared index does; shared
// is false with a local blob store (the rebuild then resets, as a single
// node's always did). A recording the index holds as open that is
// neither here nor published is left alone: it is open on another node,
// whose projector holds its cursor.
func (s *Store) planSharedRebuild(ctx context.Context, idx Index) (plan sharedRebuild, shared bool, err error) {
	published, shared, err := s.SharedIDs()
	if !shared || err != nil {
		return plan, shared, err
	}
	local, err := s.IDs()
	if err != nil {
		return plan, true, err
	}
	// known: every recording rebuilt, true for those projected afresh,
	// false for those open here (overlay).
	known := map[string]bool{}
	for _, id := range published {
		known[id] = true
	}
	dropped := map[string]bool{}
	for _, id := range local {
		if _, ok := known[id]; ok {
			continue
		}
		root, err := s.localRoot(id)
		if err != nil {
			return plan, true, err
		}
		if root == "" {
			plan.overlay = append(plan.overlay, id)
			known[id] = false
			continue
		}
		// Finished here and not published: sealed here and not yet
		// published (its holds remain), or removed by another node (this
		// copy is a stale cache).
		gone, err := s.RemovedElsewhere(id)
		if err != nil {
			return plan, true, err
		}
		if gone {
			plan.drop = append(plan.drop, id)
			dropped[id] = true
			continue
		}
		known[id] = true
	}
	for id, afresh := range known {
		if afresh {
			plan.project = append(plan.project, id)
		}
	}
	slices.Sort(plan.project)
	err = eachIndexed(ctx, idx, func(row RecordingRow) error {
		if _, ok := known[row.ID]; ok || row.State != StateFinished || dropped[row.ID] {
			return nil
		}
		gone, err := s.RemovedElsewhere(row.ID)
		if gone {
			plan.drop = append(plan.drop, row.ID)
		}
		return err
	})
	return plan, true, err
}

// eachIndexed calls fn with every recording row the index holds, page by
// page.
func eachIndexed(ctx context.Context, idx Index, fn func(RecordingRow) error) error {
	after := ""
	for {
		rows, err := idx.Recordings(ctx, RecordingFilter{After: after, Limit: MaxRecordingsPage})
		if err != nil {
			return fmt.Errorf("list the index's recordings: %w", err)
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(rows) < MaxRecordingsPage {
			return nil
		}
		after = rows[len(rows)-1].ID
	}
}

// BatchDeleter is an Index that deletes several recordings in one go (the
// ClickHouse index: one mutation per table, however many recordings).
type BatchDeleter interface {
	DeleteRecordings(ctx context.Context, ids []string) error
}

// deleteRows deletes the index rows of the recordings ids.
func deleteRows(ctx context.Context, idx Index, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if bd, ok := idx.(BatchDeleter); ok {
		return bd.DeleteRecordings(ctx, ids)
	}
	for _, id := range ids {
		if err := idx.DeleteRecording(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// rebuildSet empties what a rebuild rebuilds and returns the recordings
// to project from their first record, sorted: on a shared index
// (shared true), planSharedRebuild's (the rows of those to project and
// drop deleted, those of the open ones here kept); else the whole index
// is emptied, and every recording of this data directory is returned.
func (s *Store) rebuildSet(ctx context.Context, idx Index) (ids []string, shared bool, err error) {
	plan, shared, err := s.planSharedRebuild(ctx, idx)
	if err != nil {
		return nil, shared, fmt.Errorf("plan the rebuild of the shared index: %w", err)
	}
	if shared {
		if err := deleteRows(ctx, idx, append(plan.drop, plan.project...)); err != nil {
			return nil, true, fmt.Errorf("delete the rows to rebuild: %w", err)
		}
		ids = append(plan.project, plan.overlay...)
		slices.Sort(ids)
		return ids, true, nil
	}
	if err := idx.Reset(ctx); err != nil {
		return nil, false, fmt.Errorf("reset: %w", err)
	}
	ids, err = s.IDs()
	return ids, false, err
}

// KnownIDs lists every recording this node reads: those in this data
// directory and, in shared mode, every one published in the shared blob
// store by any node (sorted, once each). Recordings open on other nodes
// are not among them: their logs are on their nodes.
func (s *Store) KnownIDs() ([]string, error) {
	local, err := s.IDs()
	if err != nil {
		return nil, err
	}
	published, _, err := s.SharedIDs()
	if err != nil {
		return nil, fmt.Errorf("list the published recordings: %w", err)
	}
	ids := append(local, published...)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
