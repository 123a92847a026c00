package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/lease"
	"github.com/flightrec/flightrec/store/objstore"
)

// The index catch-up of cluster mode. A node indexes what it appends,
// takes over or seals; should it be lost while the index is down (a
// ClickHouse outage, ZooKeeper gone), nothing it sealed would reach the
// index until an operator's reindex. So the sealer writes a marker,
// cluster/unindexed/<id>, before its seal lands, and removes it once its
// index holds the recording. Every node lists the markers now and then,
// and indexes the recordings of markers older than a sealer's attempt
// takes, one node at a time by the recording's lease (a sealed
// recording's lease is free). Projecting is idempotent: what the index
// holds already (its cursor) is not written again.

// catchUpEvery is how often a node lists the markers, in lease lives;
// catchUpAfter is how old a marker must be before another node acts on
// it (its sealer's indexNow waits one lease life).
const (
	catchUpEvery = 3
	catchUpAfter = 2
)

// markUnindexed writes recording id's marker.
func (s *Service) markUnindexed(ctx context.Context, id string) error {
	_, err := s.cl.cfg.Objects.Put(ctx, clusterUnindexed+id, bytes.NewReader(nil), 0, objstore.PutOptions{})
	return err
}

// indexed removes recording id's marker: the index holds it.
func (s *Service) indexed(ctx context.Context, id string) {
	if err := s.unmark(ctx, id); err != nil {
		s.log.Warn("removing an indexed recording's catch-up marker failed (a later catch-up removes it)", "recording", id, "err", err)
	}
}

// unmark deletes recording id's marker, if there is one.
func (s *Service) unmark(ctx context.Context, id string) error {
	err := s.cl.cfg.Objects.Delete(ctx, clusterUnindexed+id)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil
	}
	return err
}

// catchUpPass runs catchUp (every catchUpEvery lease lives).
func (s *Service) catchUpPass() {
	if n, err := s.catchUp(s.cl.bg); err != nil {
		s.log.Warn("catching the index up with sealed recordings failed; retrying", "err", err, "indexed", n)
	}
}

// catchUp indexes the recordings of the markers older than catchUpAfter
// lease lives, and says how many it indexed.
func (s *Service) catchUp(ctx context.Context) (int, error) {
	c := s.cl
	var due []string
	for info, err := range c.cfg.Objects.List(ctx, clusterUnindexed) {
		if err != nil {
			return 0, err
		}
		// The object store's clock, against this node's: the margin is a
		// lease life.
		if s.now().Sub(info.ModTime) < catchUpAfter*c.cfg.TTL {
			continue
		}
		due = append(due, strings.TrimPrefix(info.Key, clusterUnindexed))
	}
	n := 0
	var errs []error
	for _, id := range due {
		if ctx.Err() != nil {
			break
		}
		done, err := s.catchUpOne(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
		if done {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// catchUpOne indexes recording id if it is sealed and no other node is
// at it, and removes its marker; true: it indexed it.
func (s *Service) catchUpOne(ctx context.Context, id string) (bool, error) {
	c := s.cl
	if !store.ValidRecordingID(id) {
		return false, s.dropMarker(ctx, id, "not a recording id")
	}
	_, err := c.cfg.Objects.Stat(ctx, clusterSealed+id+".json")
	if errors.Is(err, objstore.ErrNotExist) {
		// Not published: still open (its seal did not land; whoever
		// seals it writes the marker again), or its sealer died between
		// its seal object and publishing (the executor's retried finish
		// publishes it, on any node), or removed since.
		if _, err := c.cfg.Objects.Stat(ctx, clusterOpen+id+".json"); errors.Is(err, objstore.ErrNotExist) {
			return false, s.dropMarker(ctx, id, "the recording is gone")
		} else if err != nil {
			return false, err
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l, err := c.leases.Acquire(ctx, id, c.cfg.Advertise, c.cfg.TTL)
	var held *lease.HeldError
	if errors.As(err, &held) {
		return false, nil // another node is at it
	}
	if err != nil {
		return false, err
	}
	defer s.releaseSealed(context.WithoutCancel(ctx), l)
	// What the shared store publishes now: the sealed root, or the one a
	// re-redaction put in its place.
	row, last, err := s.st.RowOf(id)
	if err != nil {
		return false, err
	}
	s.proj.Put(row)
	s.proj.Notify(id, last)
	pctx, cancel := context.WithTimeout(ctx, c.cfg.TTL)
	err = s.proj.Project(pctx, id)
	cancel()
	if err != nil {
		return false, err
	}
	s.indexed(ctx, id)
	s.log.Info("indexed a sealed recording its sealer had not", "recording", id, "through", last)
	return true, nil
}

// dropMarker removes a marker that names no sealed recording.
func (s *Service) dropMarker(ctx context.Context, id, why string) error {
	s.log.Info("dropping a catch-up marker", "marker", id, "why", why)
	return s.unmark(ctx, id)
}
