package app

import (
	"context"
	"net/http"
	"time"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/wire"
)

// RebuildResult is the answer of POST /v1/index/rebuild (and what
// flightrec reindex prints with --json).
type RebuildResult struct {
	Recordings int   `json:"recordings"`
	Millis     int64 `json:"ms"`
}

// handleRebuild rebuilds the index from the logs and manifests inside the
// running server (flightrec reindex --server): its projector does it, in
// step with the ingest it keeps taking, so no acknowledged event is lost.
// It stops when the client goes or the server shuts down; the index is
// then partial until the next rebuild.
func (a *App) handleRebuild(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-a.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	n, err := a.Proj.Rebuild(ctx, nil)
	if err != nil {
		a.log.Error("index rebuild failed; the projector keeps retrying", "err", err)
		a.edge.Fail(w, r, wire.New(http.StatusInternalServerError, "REBUILD_FAILED",
			"check the index backend and the server log, then rebuild again; the projector keeps retrying meanwhile",
			"the index rebuild failed after %d recordings", n))
		return
	}
	a.log.Info("index rebuilt", "recordings", n, "ms", time.Since(start).Milliseconds())
	httpx.JSON(w, http.StatusOK, RebuildResult{Recordings: n, Millis: time.Since(start).Milliseconds()})
}
