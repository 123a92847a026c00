package devcluster

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// zooKeeper is a standalone ZooKeeper server: Debian's zookeeper package
// ships a classpath, not a service one can start as is, so it runs
// org.apache.zookeeper.server.quorum.QuorumPeerMain under java.
type zooKeeper struct {
	java      string
	classpath []string
	dir       string
	port      int
	p         *Process // nil while stopped
}

func (z *zooKeeper) endpoint() string { return "127.0.0.1:" + strconv.Itoa(z.port) }

func (z *zooKeeper) logPath() string { return filepath.Join(z.dir, "zookeeper.log") }

// writeConfig writes zoo.cfg: loopback only, data under dir, and the
// admin server off (else Jetty takes port 8080).
func (z *zooKeeper) writeConfig() error {
	if err := os.MkdirAll(filepath.Join(z.dir, "data"), 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`tickTime=500
initLimit=10
syncLimit=5
dataDir=%s/data
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=30000
`, z.dir, z.port)
	return os.WriteFile(filepath.Join(z.dir, "zoo.cfg"), []byte(cfg), 0o644)
}

// start starts the server and waits until `srvr` says Mode: standalone
// (`ruok` answers before the server serves).
func (z *zooKeeper) start() error {
	if z.p != nil {
		return nil
	}
	cmd := exec.Command(z.java, "-Xmx256m", "-XX:+UseSerialGC",
		"-cp", strings.Join(z.classpath, string(os.PathListSeparator)),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(z.dir, "zoo.cfg"))
	cmd.Dir = z.dir
	p, err := StartProcess(cmd, z.logPath())
	if err != nil {
		return fmt.Errorf("start zookeeper: %w", err)
	}
	z.p = p
	err = WaitUntil(60*time.Second, 25*time.Millisecond, p.Exited(), z.endpoint(), func() error {
		out, err := fourLetter(z.endpoint(), "srvr")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "Mode: standalone") {
			return fmt.Errorf("srvr: %q", out)
		}
		return nil
	})
	if err != nil {
		z.kill()
		return fmt.Errorf("zookeeper did not start: %v\n%s", err, LogTail(z.logPath()))
	}
	return nil
}

func (z *zooKeeper) stop() { stopProcess(&z.p, 30*time.Second) }

func (z *zooKeeper) kill() { stopProcess(&z.p, 0) }

// fourLetter sends one of ZooKeeper's four-letter commands and returns the
// answer.
func fourLetter(endpoint, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", endpoint, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var b strings.Builder
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String(), nil
}
