package playback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// maxGroup bounds the recordings of one group report.
const maxGroup = 100

// maxFrameBytes bounds a frame read for the pixel comparison.
const maxFrameBytes = 32 << 20

// handleDiff serves GET /v1/diff?a=ID&b=ID: the two runs aligned step by
// step, their differences per channel and the first material divergence.
func (s *Service) handleDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a, b := q.Get("a"), q.Get("b")
	if a == "" || b == "" {
		s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_PARAMETER", "send ?a=ID&b=ID", "a diff needs two recordings, a and b"))
		return
	}
	ra, err := s.run(r.Context(), a)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	rb, err := s.run(r.Context(), b)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	httpx.JSON(w, http.StatusOK, diffrun.Diff(ra, rb, diffrun.Options{Frame: s.blobBytes}))
}

// handleDiffGroup serves GET /v1/diff/group?id=ID&id=ID…: which failure
// signature the runs share, "reproduced k of n", and the odd ones out.
func (s *Service) handleDiffGroup(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	if len(ids) < 2 || len(ids) > maxGroup {
		s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_PARAMETER", fmt.Sprintf("send 2 to %d ?id= parameters", maxGroup),
			"a group needs 2 to %d recordings, got %d", maxGroup, len(ids)))
		return
	}
	runs := make([]*diffrun.Run, 0, len(ids))
	for _, id := range ids {
		run, err := s.run(r.Context(), id)
		if err != nil {
			s.edge.Fail(w, r, err)
			return
		}
		runs = append(runs, run)
	}
	httpx.JSON(w, http.StatusOK, diffrun.Group(runs))
}

// run loads a recording for diffrun; an unknown one is the usual 404.
func (s *Service) run(ctx context.Context, id string) (*diffrun.Run, error) {
	if !store.ValidRecordingID(id) {
		return nil, notFound()
	}
	run, err := diffrun.Load(ctx, s.st, s.idx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound()
	}
	if err != nil {
		s.log.Error("loading a recording for a diff failed", "recording", id, "err", err)
		return nil, storeReadFailed("the recording could not be read for the diff")
	}
	return run, nil
}

// blobBytes reads a frame for the pixel comparison.
func (s *Service) blobBytes(c string) ([]byte, error) { return s.readBlob(c, maxFrameBytes) }

// readBlob reads a blob by its CID, at most limit bytes of it.
func (s *Service) readBlob(c string, limit int64) ([]byte, error) {
	id, err := store.ParseCID(c)
	if err != nil {
		return nil, err
	}
	rc, err := s.st.Blobs.Open(id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, limit))
}
