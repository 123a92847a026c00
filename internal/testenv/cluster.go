package testenv

import (
	"context"
	"go/build"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/devcluster"
)

// Cluster starts a devcluster for the test (ZooKeeper, cfg.Shards ×
// cfg.Replicas ClickHouse servers, versitygw, and cfg.Nodes flightrec
// nodes when cfg.Flightrec names the binary) with its state in a
// temporary directory unless cfg.Dir is set, logging its steps to the
// test, and stops it when the test ends. The programs are found as
// devcluster.FindPrograms says; without one the test is skipped on a
// developer's machine and fails in CI (CI set). Nodes get the test's
// environment.
func Cluster(t testing.TB, cfg devcluster.Config) *devcluster.Cluster {
	t.Helper()
	progs, missing := devcluster.FindPrograms(os.Getenv, build.Default.GOPATH)
	if len(missing) > 0 {
		Missing(t, strings.Join(missing, "; "))
	}
	cfg.ClickHouseServer, cfg.Java, cfg.ZooKeeperClasspath, cfg.VersityGW =
		progs.ClickHouseServer, progs.Java, progs.ZooKeeperClasspath, progs.VersityGW
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = testLog{t}
	}
	if cfg.NodeEnv == nil {
		cfg.NodeEnv = os.Environ()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := devcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after t.TempDir, so it runs first.
	t.Cleanup(c.Stop)
	return c
}

// testLog writes lines to the test's log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
