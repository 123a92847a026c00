package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// checkOpenLimits refuses an open over the global limit of open
// recordings, or over the project's own: one project's abandoned
// recordings must not hold every slot.
func (s *Service) checkOpenLimits(project string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max := s.cfg.MaxOpenRecordings; max > 0 && len(s.open) >= max {
		return tooManyOpen(fmt.Sprintf("%d recordings are open, the limit", max), "")
	}
	if max := s.cfg.MaxOpenPerProject; max > 0 {
		n := 0
		for _, r := range s.open {
			if r.meta.Project == project {
				n++
			}
		}
		if n >= max {
			return tooManyOpen(fmt.Sprintf("project has %d recordings open, the limit per project", n), project)
		}
	}
	return nil
}

func tooManyOpen(msg, project string) error {
	e := wire.New(http.StatusTooManyRequests, "TOO_MANY_OPEN_RECORDINGS",
		"finish recordings that are done, abort abandoned ones (POST /v1/recordings/{id}/abort), or retry later",
		"%s", msg)
	e.RetryAfter = 5
	if project != "" {
		e.With("scope", "project")
	}
	return e
}

// errNotStill is seal's answer when its condition no longer holds.
var errNotStill = errors.New("ingest: the recording changed before it was sealed")

// expireIdle aborts open recordings nothing was appended to for timeout,
// until Close.
func (s *Service) expireIdle(timeout time.Duration) {
	defer s.idle.Done()
	t := time.NewTicker(min(max(timeout/4, 10*time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		// At once first: recordings idle across a restart go now.
		s.abortIdle(timeout)
		select {
		case <-s.stopIdle:
			return
		case <-t.C:
		}
	}
}

// abortIdle aborts every open recording idle for timeout now.
func (s *Service) abortIdle(timeout time.Duration) {
	idleSince := func(r *recording) bool {
		return s.now().Sub(time.Unix(0, r.lastWrite.Load())) >= timeout
	}
	s.mu.Lock()
	var idle []string
	for id, r := range s.open {
		if idleSince(r) {
			idle = append(idle, id)
		}
	}
	s.mu.Unlock()
	for _, id := range idle {
		select {
		case <-s.stopIdle:
			return
		default:
		}
		// Checked again under the recording's lock: an append may have
		// come meanwhile.
		_, err := s.seal(context.Background(), id, store.VerdictAborted, idleSince)
		switch {
		case err == nil:
			s.log.Warn("aborted an idle open recording", "recording", id, "idle_for", timeout)
		case errors.Is(err, errNotStill):
		default:
			s.log.Error("aborting an idle open recording failed; retried later", "recording", id, "err", err)
		}
	}
}
