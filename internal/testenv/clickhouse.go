package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
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
	name := "flightrec_test_" + chRandomHex(6)
	u.Path = "/" + name
	t.Cleanup(func() { dropDatabase(t, base, name) })
	return u.String()
}

func chRandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
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
	if p := os.Getenv("CLICKHOUSE_SERVER"); p != "" {
		if _, err := exec.LookPath(p); err == nil {
			return []string{p}, true
		}
		return []string{p}, false
	}
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return []string{p}, true
	}
	if p, err := exec.LookPath("clickhouse"); err == nil {
		return []string{p, "server"}, true
	}
	return []string{"clickhouse-server"}, false
}

// ClickHouseServer is a private clickhouse-server a test starts and stops.
type ClickHouseServer struct {
	t    testing.TB
	argv []string
	dir  string
	port int
	d    *daemon // nil while stopped
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
		msg := "ClickHouse server not found (" + argv[0] + "): " + clickhouseHelp
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &ClickHouseServer{t: t, argv: argv, dir: t.TempDir()}
	// Registered after t.TempDir, so it runs first: the server is gone
	// before its directory is removed.
	t.Cleanup(s.Stop)
	tcp, http := freePort(t), freePort(t)
	s.port = tcp
	if err := WriteClickHouseConfig(s.dir, tcp, http); err != nil {
		t.Fatal(err)
	}
	s.Start()
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/flightrec", tcp), s.Stop, s.Start
}

// Start starts the server and waits until it answers a query.
func (s *ClickHouseServer) Start() {
	s.t.Helper()
	if s.d != nil {
		return
	}
	cmd := exec.Command(s.argv[0], append(s.argv[1:], "--config-file="+filepath.Join(s.dir, "config.xml"))...)
	cmd.Dir = s.dir
	d, err := startDaemon(cmd, filepath.Join(s.dir, "stdout.log"))
	if err != nil {
		s.t.Fatalf("start clickhouse-server: %v", err)
	}
	s.d = d
	if err := WaitClickHouse(s.port, 60*time.Second, d.exited()); err != nil {
		s.Stop()
		s.t.Fatalf("clickhouse-server did not start: %v\n%s", err, s.logTail())
	}
}

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after 60s).
func (s *ClickHouseServer) Stop() {
	if s.d == nil {
		return
	}
	s.d.stop(60 * time.Second)
	s.d = nil
}

func (s *ClickHouseServer) logTail() string {
	return logTail(filepath.Join(s.dir, "stdout.log")) + logTail(filepath.Join(s.dir, "log/error.log"))
}

// WaitClickHouse waits until the server on 127.0.0.1:port answers a query,
// or exited reports that it stopped, or timeout passes.
func WaitClickHouse(port int, timeout time.Duration, exited <-chan error) error {
	opts := &clickhouse.Options{Addr: []string{"127.0.0.1:" + strconv.Itoa(port)}, DialTimeout: time.Second}
	return waitUntil(timeout, 50*time.Millisecond, exited, "port "+strconv.Itoa(port), func() error {
		conn, err := clickhouse.Open(opts)
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return conn.Ping(ctx)
	})
}

// WriteClickHouseConfig writes config.xml and users.xml for a server that
// listens on 127.0.0.1 only and keeps everything under dir: data, temporary
// files and logs. The default user has no password and is allowed from
// loopback only.
func WriteClickHouseConfig(dir string, tcpPort, httpPort int) error {
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>%[1]s/log/server.log</log>
        <errorlog>%[1]s/log/error.log</errorlog>
        <size>10M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>
</yandex>
`, dir, tcpPort, httpPort)
	users := `<?xml version="1.0"?>
<yandex>
    <profiles><default></default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default></default></quotas>
</yandex>
`
	for _, d := range []string{"log", "data", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o644)
}

// freePort returns a TCP port on loopback that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
