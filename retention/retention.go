// Package retention keeps recordings exactly as long as their class or
// their evidence requires, then removes every byte of them: classes from
// the retention policy (Rego, package flightrec.retention), pins that hold
// a recording beyond its class, and the sweeper that deletes expired
// recordings, their index rows and every blob no kept recording
// references (mark and sweep), writing each step to the audit log.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// Day is a retention day.
const Day = 24 * time.Hour

// Status is a recording's retention as of a moment (its shape is the
// read API's, in wire).
type Status = wire.Retention

// Sweeper decides and carries out retention.
type Sweeper struct {
	Store  *store.Store
	Index  store.Index
	Policy *policy.Engine
	Pins   *Pins
	Audit  *audit.Log
	Now    func() time.Time // the clock; tests move it
	Log    *slog.Logger

	mu sync.Mutex // one sweep at a time
}

func (s *Sweeper) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Status computes one recording's retention at now.
func (s *Sweeper) Status(ctx context.Context, row store.RecordingRow, now time.Time) Status {
	st := Status{ID: row.ID, Project: row.Project, Open: row.State != store.StateFinished}
	c, err := s.Policy.Retention(ctx, policy.RetentionInput{Project: row.Project, Flow: row.Flow,
		Labels: row.Labels, Executor: row.Executor, Verdict: row.Verdict, Damaged: s.damaged(row)})
	if err != nil {
		st.PolicyError = err.Error()
		return st
	}
	st.Class, st.Days = c.Name, c.Days
	base := row.FinishedAt
	if base == 0 {
		base = row.CreatedAt
	}
	st.ExpiresAt = base + int64(c.Days)*int64(Day)
	if s.Pins != nil {
		pins, err := s.Pins.List(row.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			// Pins that cannot be read (the shared object store out of
			// reach) might hold it: keep it, and say why.
			st.PolicyError = err.Error()
			return st
		}
		st.Pins = pins
	}
	st.HeldUntil = heldUntil(st.Pins, now)
	if st.Open || now.UnixNano() < st.ExpiresAt || st.HeldUntil != 0 {
		return st
	}
	st.Expired, st.Why = true, "class expiry"
	for _, p := range st.Pins {
		if p.Until > st.ExpiresAt {
			st.Why = "pin ended" // a pin kept it past its class, and has ended
		}
	}
	return st
}

// damaged reports whether a finished recording is damaged evidence: its
// manifest declares gaps (repaired), or cannot be read. Either way it is
// kept like a failure (retention.rego), not expired as a passing run.
// It asks the store, not the row's state: an index row may lag a repair.
func (s *Sweeper) damaged(row store.RecordingRow) bool {
	root, err := s.Store.Root(row.ID)
	if err == nil && root == "" {
		return false // no longer stored: an index row a crashed sweep left
	}
	var m *store.Manifest
	if err == nil {
		m, err = s.Store.ReadManifest(root)
	}
	return err != nil || len(m.Gaps) > 0
}

// Report is what a sweep did (or, dry, would do).
type Report struct {
	Now        int64    `json:"now"`
	DryRun     bool     `json:"dry_run"`
	Considered int      `json:"considered"`
	Kept       int      `json:"kept"`
	Pinned     int      `json:"pinned"` // kept only because a pin holds them
	Deleted    []Status `json:"deleted"`
	// RecordingBytes are the recordings' own files removed (metadata,
	// logs, pins); BlobsRemoved and BlobBytes what garbage collection
	// removed after (BlobBytes: the bytes of blob files and packs the
	// store no longer occupies, pack headers and indexes included).
	RecordingBytes int64    `json:"recording_bytes"`
	BlobsRemoved   int      `json:"blobs_removed"`
	BlobBytes      int64    `json:"blob_bytes"`
	Errors         []string `json:"errors,omitempty"`
	// Elsewhere says another node of a shared deployment holds the sweep
	// lease: this sweep removed nothing (one sweeper at a time).
	Elsewhere string `json:"elsewhere,omitempty"`
}

// Freed is every byte the sweep removed.
func (r Report) Freed() int64 { return r.RecordingBytes + r.BlobBytes }

// page is how many recordings a sweep reads from the index at a time.
const page = 1000

// Sweep removes the recordings whose class has expired and no pin holds,
// then collects the blobs nothing kept references. With dryRun it only
// reports what would go at the sweeper's now. progress, when set, hears
// about long phases.
func (s *Sweeper) Sweep(ctx context.Context, dryRun bool, progress func(phase string, done, total int)) (Report, error) {
	return s.sweep(ctx, s.now(), dryRun, progress)
}

// DryRunAt reports what a sweep at now would remove, and removes nothing.
func (s *Sweeper) DryRunAt(ctx context.Context, now time.Time) (Report, error) {
	return s.sweep(ctx, now, true, s.LogProgress())
}

func (s *Sweeper) sweep(ctx context.Context, now time.Time, dryRun bool, progress func(phase string, done, total int)) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := Report{Now: now.UnixNano(), DryRun: dryRun, Deleted: []Status{}}
	var doomed []Status
	f := store.RecordingFilter{Limit: page}
	for {
		rows, err := s.Index.Recordings(ctx, f)
		if err != nil {
			return rep, fmt.Errorf("retention: listing recordings: %w", err)
		}
		for _, row := range rows {
			rep.Considered++
			st := s.Status(ctx, row, now)
			switch {
			case st.Expired:
				doomed = append(doomed, st)
			case !st.Open && st.PolicyError == "" && now.UnixNano() >= st.ExpiresAt:
				rep.Pinned++
				rep.Kept++
			default:
				rep.Kept++
			}
		}
		if len(rows) < page {
			break
		}
		f.After = rows[len(rows)-1].ID
		if progress != nil {
			progress("deciding", rep.Considered, 0)
		}
	}
	sort.Slice(doomed, func(i, j int) bool { return doomed[i].ExpiresAt < doomed[j].ExpiresAt })
	if dryRun {
		rep.Deleted = append(rep.Deleted, doomed...)
		return rep, nil
	}

	// From here every blob an ingest touches is spared, so a recording
	// written during the sweep never loses one.
	sw := s.Store.Blobs.BeginSweep()
	defer sw.End()
	// In a shared deployment one node at a time sweeps, under the blob
	// store's lease: a sweep that finds it held removes nothing.
	if e, ok := sw.(interface{ Elsewhere() error }); ok {
		if err := e.Elsewhere(); err != nil {
			rep.Elsewhere = err.Error()
			return rep, nil
		}
	}
	for i, st := range doomed {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		// The store first: it is the truth. A crash after it leaves an
		// index row, which the next sweep (or reindex) removes.
		freed, err := s.Store.RemoveRecording(st.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", st.ID, err))
			continue
		}
		if err := s.Index.DeleteRecording(ctx, st.ID); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: index: %v", st.ID, err))
		}
		if s.Pins != nil {
			if err := s.Pins.forget(st.ID); err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: pins: %v", st.ID, err))
			}
		}
		rep.RecordingBytes += freed
		rep.Deleted = append(rep.Deleted, st)
		s.audit(audit.Entry{Kind: "delete", Recording: st.ID, Project: st.Project, Why: st.Why, BytesFreed: freed,
			Details: map[string]any{"class": st.Class, "expired_at": st.ExpiresAt}})
		if progress != nil {
			progress("deleting", i+1, len(doomed))
		}
	}
	// Deletion leaves no trace: once per sweep, as a purge may rewrite the
	// whole text index.
	if p, ok := s.Index.(store.Purger); ok && len(doomed) > 0 {
		if err := p.PurgeDeleted(ctx); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("index: purge deleted text: %v", err))
		}
	}

	// Mark: every blob a kept recording references, open ones included.
	live := map[string]struct{}{}
	ids, err := s.Store.IDs()
	if err != nil {
		return rep, err
	}
	ids, local, err := s.markIDs(ids)
	if err != nil {
		return rep, err
	}
	for i, id := range ids {
		refs, err := s.Store.References(id)
		if errors.Is(err, store.ErrNotFound) && !local[id] {
			continue // another node removed it since the listing
		}
		if err != nil {
			// A recording that cannot be read keeps everything: collect
			// nothing rather than something it might need.
			return rep, fmt.Errorf("retention: references of %s: %w (no blob was collected)", id, err)
		}
		for _, c := range refs {
			live[c] = struct{}{}
		}
		if progress != nil && i%1000 == 999 {
			progress("marking", i+1, len(ids))
		}
	}
	cr, err := sw.Collect(func(c cid.Cid) bool { _, ok := live[c.String()]; return ok },
		func(done, total int) {
			if progress != nil {
				progress("collecting", done, total)
			}
		})
	if err != nil {
		return rep, fmt.Errorf("retention: collecting blobs: %w", err)
	}
	rep.BlobsRemoved, rep.BlobBytes = cr.Removed, cr.DiskFreed
	s.audit(audit.Entry{Kind: "sweep", BytesFreed: cr.Freed, Details: map[string]any{
		"removed": len(rep.Deleted), "blobs_removed": cr.Removed, "recording_bytes": rep.RecordingBytes, "errors": len(rep.Errors)}})
	return rep, nil
}

// audit appends to the audit log; a failure is logged, never fatal to a
// deletion already done.
func (s *Sweeper) audit(e audit.Entry) {
	if s.Audit == nil {
		return
	}
	if _, err := s.Audit.Append(e); err != nil && s.Log != nil {
		s.Log.Error("writing the audit log failed", "kind", e.Kind, "recording", e.Recording, "err", err)
	}
}

// Run sweeps every interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := s.Sweep(ctx, false, s.LogProgress())
		if s.Log == nil {
			continue
		}
		if err != nil {
			s.Log.Error("retention sweep failed", "err", err)
			continue
		}
		s.Log.Info("retention sweep", "deleted", len(rep.Deleted), "blobs_removed", rep.BlobsRemoved,
			"bytes_freed", rep.Freed(), "errors", len(rep.Errors))
	}
}

// LogProgress returns a progress function that logs a long sweep's phase
// and count at most once a second (nil without a logger).
func (s *Sweeper) LogProgress() func(phase string, done, total int) {
	if s.Log == nil {
		return nil
	}
	var last time.Time
	return func(phase string, done, total int) {
		if time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		s.Log.Info("retention sweep in progress", "phase", phase, "done", done, "total", total)
	}
}

// markIDs is the recordings whose references a sweep marks, given those
// of the data directory: all of them on a single node. In shared mode,
// the published ones (every node's finished recordings) and the local
// ones still open; their other blobs are kept by hold records, which
// BeginSweep read. A local finished recording that is not published is
// left out: another node removed it (this node fetched a copy to serve it)
// or this node has yet to publish it, and then its holds are not released.
// A copy whose published root changed is replaced (store.CheckCopy).
func (s *Sweeper) markIDs(localIDs []string) (ids []string, local map[string]bool, err error) {
	published, shared, err := s.Store.SharedIDs()
	if err != nil {
		return nil, nil, fmt.Errorf("retention: listing published recordings: %w (no blob was collected)", err)
	}
	local = map[string]bool{}
	if !shared {
		for _, id := range localIDs {
			local[id] = true
		}
		return localIDs, local, nil
	}
	isPublished := map[string]bool{}
	for _, id := range published {
		isPublished[id] = true
	}
	ids = append([]string(nil), published...)
	for _, id := range localIDs {
		// A copy another node re-redacted since is replaced first: marking
		// the old root would keep what the re-redaction erased.
		root, err := s.Store.CheckCopy(id)
		if err != nil {
			return nil, nil, fmt.Errorf("retention: %s: %w (no blob was collected)", id, err)
		}
		if root == "" || isPublished[id] {
			local[id] = true
			if !isPublished[id] {
				ids = append(ids, id)
			}
			continue
		}
		// A copy of a recording another node removed goes too.
		if gone, err := s.Store.RemovedElsewhere(id); err != nil {
			return nil, nil, fmt.Errorf("retention: %s: %w (no blob was collected)", id, err)
		} else if gone {
			if _, err := s.Store.RemoveRecording(id); err != nil {
				return nil, nil, fmt.Errorf("retention: dropping the copy of %s: %w (no blob was collected)", id, err)
			}
		}
	}
	slices.Sort(ids)
	return ids, local, nil
}
