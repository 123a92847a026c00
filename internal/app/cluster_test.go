package app_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/wire"
)

// TestClusterModeNeedsSharedStore: a node in cluster mode without the
// shared object store or a URL to be reached at, or with a lease too short
// to trust, refuses to start and says what to pass.
func TestClusterModeNeedsSharedStore(t *testing.T) {
	srv := testenv.S3(t)
	keys := deployKeys(t)
	for name, tc := range map[string]struct {
		shared bool
		c      app.ClusterConfig
		code   string
	}{
		"no --blobs":     {false, app.ClusterConfig{Node: "n1", Advertise: "http://127.0.0.1:1", LeaseTTL: 10 * time.Second}, "CLUSTER_NEEDS_SHARED_STORE"},
		"no --advertise": {true, app.ClusterConfig{Node: "n1", LeaseTTL: 10 * time.Second}, "CLUSTER_NEEDS_SHARED_STORE"},
		"short lease":    {true, app.ClusterConfig{Node: "n1", Advertise: "http://127.0.0.1:1", LeaseTTL: time.Millisecond}, "BAD_LEASE_TTL"},
	} {
		var cfg app.Config
		if tc.shared {
			cfg = sharedConfig(srv, "clusterrefused", keys)
		}
		cfg.Store.Data = t.TempDir()
		cfg.Cluster = tc.c
		a, err := app.New(cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			a.Close()
			t.Fatalf("%s: the node started", name)
		}
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != tc.code || we.Next == "" {
			t.Errorf("%s: %v, want %s with a next step", name, err, tc.code)
		}
	}
}
