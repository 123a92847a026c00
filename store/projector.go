package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Projector feeds the Index from the logs. Each recording has a cursor (the
// highest seq indexed) kept in the index itself and moved in the same write
// as the rows, so the projection resumes exactly where it stopped, and an
// index that is down or failing never holds up an acknowledgement: the log
// is the truth and the projector catches up.
type Projector struct {
	st   *Store
	idx  Index
	log  *slog.Logger
	wake chan struct{}
	// pass serializes projection passes (Run's and Flush's), so Flush is a
	// barrier: it returns only after any pass in flight has finished.
	pass   sync.Mutex
	mu     sync.Mutex
	recs   map[string]*projection
	batch  int
	closed chan struct{}
	done   chan struct{}
	// failed counts failed index writes (FailedWrites, for metrics).
	failed atomic.Uint64
	// onComplete is NewProjector's OnComplete.
	onComplete OnComplete
}

// OnComplete is called once per recording (in this process) after a pass
// has indexed a finished recording through its last event, within that
// pass, so Flush waits for it: what needs the whole recording in the
// index (its failure signature) runs there. An error fails the pass like
// an index error: logged, retried with backoff.
type OnComplete func(ctx context.Context, id string) error

type projection struct {
	target  uint64 // highest seq acknowledged
	cursor  uint64 // highest seq indexed
	pos     Pos
	loaded  bool // cursor read from the index
	pending bool
	row     *RecordingRow // metadata not yet written to the index
	// finished is set when the recording is sealed; complete once
	// onComplete has run for it.
	finished, complete bool
}

// NewProjector returns a projector; call Run in a goroutine. onComplete
// may be nil.
func NewProjector(st *Store, idx Index, log *slog.Logger, onComplete OnComplete) *Projector {
	return &Projector{st: st, idx: idx, log: log, wake: make(chan struct{}, 1),
		recs: map[string]*projection{}, batch: 5000, onComplete: onComplete,
		closed: make(chan struct{}), done: make(chan struct{})}
}

// FailedWrites counts the index writes that failed (each is retried).
func (p *Projector) FailedWrites() uint64 { return p.failed.Load() }

// Notify tells the projector that recording id's log is durable through
// seq. It never blocks.
func (p *Projector) Notify(id string, through uint64) {
	p.mu.Lock()
	r := p.recs[id]
	if r == nil {
		r = &projection{}
		p.recs[id] = r
	}
	if through > r.target {
		r.target = through
	}
	r.pending = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Put queues a recording's metadata row for the index; like events, it is
// retried until the index takes it, so opening or finishing a recording
// never fails because the index is down.
func (p *Projector) Put(row RecordingRow) {
	p.mu.Lock()
	r := p.recs[row.ID]
	if r == nil {
		r = &projection{}
		p.recs[row.ID] = r
	}
	r.row = &row
	r.pending = true
	if row.State == StateFinished {
		r.finished = true
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Lag is how many acknowledged events are not yet indexed.
func (p *Projector) Lag() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for _, r := range p.recs {
		if r.target > r.cursor {
			n += r.target - r.cursor
		}
	}
	return n
}

// Forget drops a recording's state (after deletion).
func (p *Projector) Forget(id string) {
	p.mu.Lock()
	delete(p.recs, id)
	p.mu.Unlock()
}

// Run projects until ctx ends or Close is called.
func (p *Projector) Run(ctx context.Context) {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.closed:
			return
		case <-p.wake:
		}
		failed := p.drain(ctx)
		if failed {
			select { // retry later, and keep retrying until it works
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			case <-p.closed:
				return
			}
			if backoff < 5*time.Second {
				backoff *= 2
			}
			select {
			case p.wake <- struct{}{}:
			default:
			}
		} else {
			backoff = 100 * time.Millisecond
		}
	}
}

// Close stops Run after its current pass, first projecting what is pending.
func (p *Projector) Close() {
	select {
	case <-p.closed:
		return
	default:
	}
	close(p.closed)
	<-p.done
}

// Flush projects everything pending now, in the caller's goroutine. Tests
// and reindex use it; it reports the first error.
func (p *Projector) Flush(ctx context.Context) error {
	p.pass.Lock()
	defer p.pass.Unlock()
	for {
		ids := p.pendingIDs()
		if len(ids) == 0 {
			return nil
		}
		for _, id := range ids {
			if err := p.project(ctx, id); err != nil {
				return err
			}
		}
	}
}

// Project indexes recording id now, through what Put and Notify asked,
// and returns once the index has it, or with the index's error, or when
// ctx ends: for a caller that must not answer before the index holds a
// recording (cluster mode's finish, whose node may be lost right after:
// no other node would index a finished recording). A failure leaves it
// pending for the next pass, as always.
func (p *Projector) Project(ctx context.Context, id string) error {
	// The pass lock, without outwaiting ctx: a pass in flight may be
	// retrying an index that is down.
	for !p.pass.TryLock() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	defer p.pass.Unlock()
	p.mu.Lock()
	_, ok := p.recs[id]
	p.mu.Unlock()
	if !ok {
		return nil
	}
	return p.project(ctx, id)
}

// Rebuild drops every row of the index and projects every recording of
// the store again from its first record, while the projector keeps
// serving: it holds the pass lock, so no other pass writes meanwhile, and
// resets the in-memory cursors with the index, so events acknowledged
// before, during or after the rebuild are all projected (a reset done
// behind a running projector's back left its cursors ahead of the empty
// index, and the events below them were lost for good while Lag said 0).
// Lag counts what the rebuild has still to index. Appends that arrive
// during the rebuild are projected by it or by the next pass; reads see a
// partial index until it returns. progress, when set, is called after
// each recording. On an index shared with other nodes it projects again
// each recording published or held here, and never touches the rows of
// those open on other nodes (Store.rebuildSet).
func (p *Projector) Rebuild(ctx context.Context, progress func(done, total int)) (recordings int, err error) {
	p.pass.Lock()
	defer p.pass.Unlock()
	ids, shared, err := p.st.rebuildSet(ctx, p.idx)
	if err != nil {
		return 0, fmt.Errorf("rebuild: %w", err)
	}
	p.mu.Lock()
	for id, r := range p.recs {
		// What is rebuilt (everything; on a shared index, ids, among
		// them every recording this process projects) is read again
		// from its start, its rows being gone (or, for one open here on
		// a shared index, kept: rows are idempotent on seq): its cursor
		// is 0, and its row is written again (from the store below, or
		// the newer one ingest queued).
		if _, rebuilt := slices.BinarySearch(ids, id); !shared || rebuilt {
			r.cursor, r.loaded, r.pos, r.pending = 0, true, Pos{}, true
		}
	}
	p.mu.Unlock()
	added := map[string]bool{}
	for _, id := range ids {
		row, last, err := p.st.RowOf(id)
		if errors.Is(err, ErrNotFound) {
			continue // removed since IDs listed it
		}
		if err != nil {
			return recordings, fmt.Errorf("rebuild %s: %w", id, err)
		}
		p.mu.Lock()
		r := p.recs[id]
		if r == nil {
			// Not seen by this process: its failure signature, if any,
			// comes with the row, as reindex writes it.
			r = &projection{loaded: true, pending: true, complete: true}
			p.recs[id] = r
			added[id] = true
		}
		if r.row == nil {
			r.row = &row // a row ingest queued meanwhile is newer: keep it
		}
		r.target = max(r.target, last)
		r.finished = r.finished || row.State == StateFinished
		p.mu.Unlock()
	}
	// One pass over every recording, as drain makes: appends that keep
	// arriving are the next pass's, so the rebuild ends under load.
	ids = p.pendingIDs()
	for i, id := range ids {
		if err := p.project(ctx, id); err != nil {
			if _, merr := p.st.Meta(id); errors.Is(merr, ErrNotFound) {
				p.Forget(id) // removed while the rebuild ran
				continue
			}
			p.failed.Add(1)
			return recordings, fmt.Errorf("rebuild %s: %w", id, err)
		}
		recordings++
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	// Recordings the rebuild added and finished indexing need no state
	// here, as before it ran.
	p.mu.Lock()
	for id := range added {
		if r := p.recs[id]; r != nil && r.finished && !r.pending && r.row == nil && r.cursor >= r.target {
			delete(p.recs, id)
		}
	}
	p.mu.Unlock()
	return recordings, nil
}

// pendingIDs lists the recordings with work to project.
func (p *Projector) pendingIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id, r := range p.recs {
		if r.pending {
			ids = append(ids, id)
		}
	}
	return ids
}

// drain projects every pending recording once; it reports whether any
// failed (they stay pending).
func (p *Projector) drain(ctx context.Context) (failed bool) {
	p.pass.Lock()
	defer p.pass.Unlock()
	for _, id := range p.pendingIDs() {
		if err := p.project(ctx, id); err != nil {
			p.failed.Add(1)
			p.log.Warn("index projection failed; will retry", "recording", id, "err", err)
			failed = true
		}
	}
	return failed
}

// project indexes recording id from its cursor to the end of its log,
// then, the first time a finished recording is indexed through its end,
// calls onComplete.
func (p *Projector) project(ctx context.Context, id string) error {
	if err := p.projectEvents(ctx, id); err != nil || p.onComplete == nil {
		return err
	}
	p.mu.Lock()
	r := p.recs[id]
	due := r.finished && !r.complete && r.loaded && r.cursor >= r.target
	p.mu.Unlock()
	if !due {
		return nil
	}
	if err := p.onComplete(ctx, id); err != nil {
		p.log.Warn("completing a finished recording's index rows failed; will retry", "recording", id, "err", err)
		p.markPending(id)
		return err
	}
	p.mu.Lock()
	r.complete = true
	p.mu.Unlock()
	return nil
}

// projectEvents indexes recording id from its cursor to the end of its log.
func (p *Projector) projectEvents(ctx context.Context, id string) error {
	p.mu.Lock()
	r := p.recs[id]
	r.pending = false
	target := r.target
	row := r.row
	p.mu.Unlock()

	if row != nil {
		put := *row
		if put.State == StateFinished && put.FailureSignature == "" {
			// A signature onComplete recorded in an earlier pass (one that
			// saw the finish arrive mid-pass) must survive this write.
			sig, err := p.st.FailureSignature(id)
			if err != nil {
				p.markPending(id)
				return err
			}
			put.FailureSignature = sig
		}
		if err := p.idx.PutRecording(ctx, put); err != nil {
			p.markPending(id)
			return err
		}
		p.mu.Lock()
		if r.row == row {
			r.row = nil
		}
		p.mu.Unlock()
	}

	if !r.loaded {
		c, err := p.idx.Cursor(ctx, id)
		if err != nil {
			p.markPending(id)
			return err
		}
		p.mu.Lock()
		r.cursor, r.loaded = c, true
		p.mu.Unlock()
	}
	if r.cursor >= target && target != 0 {
		return nil
	}
	rows := make([]EventRow, 0, 256)
	cursor := r.cursor
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		through := rows[len(rows)-1].Seq
		if err := p.idx.IndexEvents(ctx, id, rows, through); err != nil {
			return err
		}
		cursor = through
		p.mu.Lock()
		r.cursor = through
		p.mu.Unlock()
		rows = rows[:0]
		return nil
	}
	var posAtFlush = r.pos
	pos, err := p.st.Scan(id, r.pos, cursor, func(rec Record, loc Locator) error {
		rows = append(rows, RowOf(id, &rec, loc))
		if len(rows) >= p.batch {
			if err := flush(); err != nil {
				return err
			}
			posAtFlush = Pos{Segment: loc.Segment, Offset: loc.Offset + int64(loc.Length)}
		}
		return nil
	})
	if err == nil {
		err = flush()
		if err == nil {
			posAtFlush = pos
		}
	}
	p.mu.Lock()
	r.pos = posAtFlush
	if r.cursor > r.target {
		r.target = r.cursor // after a restart the log may hold more than Notify said
	}
	p.mu.Unlock()
	if err != nil {
		p.markPending(id)
	}
	return err
}

func (p *Projector) markPending(id string) {
	p.mu.Lock()
	if r := p.recs[id]; r != nil {
		r.pending = true
	}
	p.mu.Unlock()
}

// RowOf is the index row of a record.
func RowOf(recording string, rec *Record, loc Locator) EventRow {
	size := int64(loc.Length)
	rec.EachBlob(func(_ string, n int64) { size += n })
	return EventRow{
		Recording: recording, Seq: rec.Seq, Step: rec.Step, TS: rec.TS, Kind: rec.Kind,
		CID: rec.CID, Size: size, Loc: loc, Summary: rec.Summary,
	}
}
