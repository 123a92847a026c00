package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/flightrec/flightrec/internal/devcluster"
)

// ClickHouseEnv names the variable holding the DSN of a running ClickHouse
// server for tests (clickhouse://127.0.0.1:19000). scripts/test starts one
// and sets it.
const ClickHouseEnv = "FLIGHTREC_TEST_CLICKHOUSE"

const clickhouseHelp = "apt-get install clickhouse-server, then run scripts/test (it starts a private server) " +
	"or start one yourself and set " + ClickHouseEnv + "=clickhouse://127.0.0.1:PORT"

// ClickHouse returns the DSN of a fresh, uniquely named database on the
// server $FLIGHTREC_TEST_CLICKHOUSE names, and drops the database when the
// test ends. Without the variable the test is skipped on a developer's
// machine and fails in CI (CI set).
func ClickHouse(t testing.TB) string {
	t.Helper()
	base := os.Getenv(ClickHouseEnv)
	if base == "" {
		msg := ClickHouseEnv + " is not set: " + clickhouseHelp
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "clickhouse" {
		t.Fatalf("%s=%q: want clickhouse://host:port", ClickHouseEnv, base)
	}
	name := "flightrec_test_" + devcluster.RandomHex(6)
	u.Path = "/" + name
	t.Cleanup(func() { dropDatabase(t, base, name) })
	return u.String()
}

// dropDatabase drops a test database over a connection to the server's
// default database.
func dropDatabase(t testing.TB, base, name string) {
	opts, err := clickhouse.ParseDSN(base)
	if err != nil {
		t.Errorf("drop test database: %v", err)
		return
	}
	opts.Auth.Database = ""
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Errorf("drop test database: %v", err)
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		t.Errorf("drop test database %s: %v", name, err)
	}
}

// ClickHouseServerPath returns the server binary to run: $CLICKHOUSE_SERVER,
// else clickhouse-server on $PATH (Debian's package), else the single
// clickhouse binary of upstream packages (run as "clickhouse server").
func ClickHouseServerPath() (argv []string, ok bool) {
	return devcluster.ClickHouseServerPath(os.Getenv)
}

// ClickHouseServer is a private clickhouse-server a test starts and stops.
type ClickHouseServer struct {
	t testing.TB
	r *devcluster.Replica
}

// StartClickHouse starts a private ClickHouse server on loopback, on free
// ports, with its configuration and data in a temporary directory, and
// returns the DSN of a database on it (created by whoever opens it) with
// functions that stop it (SIGTERM, as an operator would) and start it
// again on the same ports and data. The server is stopped when the test
// ends. Without a server binary the test is skipped on a developer's
// machine and fails in CI (CI set).
func StartClickHouse(t testing.TB) (dsn string, stop, start func()) {
	t.Helper()
	argv, ok := ClickHouseServerPath()
	if !ok {
		Missing(t, "ClickHouse server not found ("+argv[0]+"): "+clickhouseHelp)
	}
	r, err := devcluster.NewClickHouse(argv, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &ClickHouseServer{t: t, r: r}
	// Registered after t.TempDir, so it runs first: the server is gone
	// before its directory is removed.
	t.Cleanup(s.Stop)
	s.Start()
	return fmt.Sprintf("clickhouse://%s/flightrec", r.Addr()), s.Stop, s.Start
}

// Start starts the server and waits until it answers a query.
func (s *ClickHouseServer) Start() {
	s.t.Helper()
	if err := s.r.Start(); err != nil {
		s.t.Fatal(err)
	}
}

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after 60s).
func (s *ClickHouseServer) Stop() { s.r.Stop() }
