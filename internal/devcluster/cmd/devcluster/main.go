// Command devcluster runs a devcluster in the foreground until SIGINT or
// SIGTERM: scripts/cluster up starts it in the background, down stops it.
//
//	devcluster -dir DIR [-nodes 3] [-flightrec BIN] [-- serve args…]
//
// When everything answers it writes DIR/url (the proxy's URL, or the
// index's DSN without nodes) and DIR/env (the DSN, S3 endpoint and
// credentials, for a shell to source) and prints the URL.
package main

import (
	"context"
	"flag"
	"fmt"
	"go/build"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flightrec/flightrec/internal/devcluster"
	"github.com/flightrec/flightrec/store/clickhouse"
)

func main() {
	dir := flag.String("dir", "", "directory of the cluster's state (required)")
	nodes := flag.Int("nodes", 3, "flightrec nodes to start behind the proxy (0: none)")
	bin := flag.String("flightrec", "", "flightrec binary the nodes run (required with -nodes > 0)")
	shards := flag.Int("shards", 2, "ClickHouse shards")
	replicas := flag.Int("replicas", 2, "ClickHouse replicas per shard")
	flag.Parse()
	if *dir == "" {
		fail("-dir is required")
	}
	progs, missing := devcluster.FindPrograms(os.Getenv, build.Default.GOPATH)
	if len(missing) > 0 {
		fail(strings.Join(missing, "\n"))
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err.Error())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := devcluster.Start(ctx, devcluster.Config{
		Dir: abs, Shards: *shards, Replicas: *replicas, Nodes: *nodes, Flightrec: *bin,
		NodeArgs: flag.Args(), NodeEnv: os.Environ(), Log: os.Stderr,
		ClickHouseServer: progs.ClickHouseServer, Java: progs.Java,
		ZooKeeperClasspath: progs.ZooKeeperClasspath, VersityGW: progs.VersityGW,
		Schema: clickhouse.ClusterDDL,
	})
	if err != nil {
		fail(err.Error())
	}
	url := c.URL
	if url == "" {
		url = c.DSN
	}
	env := fmt.Sprintf("FLIGHTREC_URL=%q\nFLIGHTREC_INDEX=%q\nFLIGHTREC_BLOBS=%q\nAWS_ACCESS_KEY_ID=%q\nAWS_SECRET_ACCESS_KEY=%q\nZOOKEEPER=%q\n",
		c.URL, c.DSN, c.Blobs, c.S3.AccessKey, c.S3.SecretKey, c.ZooKeeper)
	// The credentials are the private versitygw's, random per cluster;
	// the file is the owner's only.
	if err := os.WriteFile(filepath.Join(abs, "env"), []byte(env), 0o600); err != nil {
		c.Stop()
		fail(err.Error())
	}
	if err := os.WriteFile(filepath.Join(abs, "url"), []byte(url+"\n"), 0o644); err != nil {
		c.Stop()
		fail(err.Error())
	}
	fmt.Println(url)
	<-ctx.Done()
	c.Stop()
	_ = os.Remove(filepath.Join(abs, "url"))
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "devcluster: "+msg)
	os.Exit(1)
}
