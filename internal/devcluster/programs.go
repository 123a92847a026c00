package devcluster

import (
	"os"
	"os/exec"
	"path/filepath"
)

// Programs are the binaries a cluster runs, found by FindPrograms.
type Programs struct {
	ClickHouseServer   []string
	Java               string
	ZooKeeperClasspath []string
	VersityGW          string
}

// Debian's zookeeper package: the server's jar (its manifest names the
// rest of its classpath) and an slf4j binding, so that it logs.
const (
	zooKeeperJar = "/usr/share/java/zookeeper.jar"
	slf4jSimple  = "/usr/share/java/slf4j-simple.jar"
)

// Install hints, for the message of a missing program.
const (
	ClickHouseHelp = "apt-get install clickhouse-server clickhouse-client"
	ZooKeeperHelp  = "apt-get install zookeeper (it pulls default-jre; .ci/run does it)"
	VersityGWHelp  = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 (about 2 minutes; .ci/run does it), " +
		"or set $VERSITYGW to its path"
)

// FindPrograms looks the cluster's programs up: getenv's CLICKHOUSE_SERVER
// and VERSITYGW when set, else $PATH (clickhouse-server, or upstream's
// single clickhouse binary; java; versitygw, or gopath/bin/versitygw),
// and Debian's ZooKeeper jar. missing says, for each one not found, what
// to install.
func FindPrograms(getenv func(string) string, gopath string) (p Programs, missing []string) {
	var ok bool
	if p.ClickHouseServer, ok = ClickHouseServerPath(getenv); !ok {
		missing = append(missing, "ClickHouse server not found ("+p.ClickHouseServer[0]+"): "+ClickHouseHelp)
	}
	if java, err := exec.LookPath("java"); err == nil {
		p.Java = java
	} else {
		missing = append(missing, "java not found on $PATH: "+ZooKeeperHelp)
	}
	if _, err := os.Stat(zooKeeperJar); err == nil {
		p.ZooKeeperClasspath = []string{zooKeeperJar}
		if _, err := os.Stat(slf4jSimple); err == nil {
			p.ZooKeeperClasspath = append(p.ZooKeeperClasspath, slf4jSimple)
		}
	} else {
		missing = append(missing, zooKeeperJar+" not found: "+ZooKeeperHelp)
	}
	if p.VersityGW, ok = VersityGWPath(getenv, gopath); !ok {
		missing = append(missing, "versitygw not found ("+p.VersityGW+"): "+VersityGWHelp)
	}
	return p, missing
}

// ClickHouseServerPath returns the server binary to run: getenv's
// CLICKHOUSE_SERVER, else clickhouse-server on $PATH (Debian's package),
// else the single clickhouse binary of upstream packages (run as
// "clickhouse server").
func ClickHouseServerPath(getenv func(string) string) (argv []string, ok bool) {
	if p := getenv("CLICKHOUSE_SERVER"); p != "" {
		_, err := exec.LookPath(p)
		return []string{p}, err == nil
	}
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return []string{p}, true
	}
	if p, err := exec.LookPath("clickhouse"); err == nil {
		return []string{p, "server"}, true
	}
	return []string{"clickhouse-server"}, false
}

// VersityGWPath returns the versitygw binary to run: getenv's VERSITYGW,
// else versitygw on $PATH, else the one `go install` put in a bin
// directory of gopath.
func VersityGWPath(getenv func(string) string, gopath string) (path string, ok bool) {
	if p := getenv("VERSITYGW"); p != "" {
		_, err := exec.LookPath(p)
		return p, err == nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, true
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, true
		}
	}
	return "versitygw", false
}
