package main

import (
	"context"
	"fmt"
	"io"

	"github.com/flightrec/flightrec/store/clickhouse"
	"github.com/flightrec/flightrec/wire"
)

// runClickHouse: "clickhouse ddl [--cluster NAME] [--database DB]" prints
// the index schema: for a cluster, Replicated tables and Distributed tables
// sharded by recording; without --cluster, the single-server schema that
// flightrec creates by itself.
func runClickHouse(_ context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("clickhouse", "clickhouse ddl [--cluster NAME] [--database DB]", errOut)
	cluster := fs.String("cluster", "", "print the cluster variant for the cluster NAME of the servers' <remote_servers>")
	database := fs.String("database", clickhouse.DefaultDatabase, "database of the index")
	if len(args) == 0 || args[0] != "ddl" {
		fs.Usage()
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			return exitOK
		}
		return exitUsage
	}
	if code := parse(fs, args[1:]); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		printErr(errOut, false, wire.New(0, "USAGE", "run flightrec clickhouse --help", "unexpected argument %q", fs.Arg(0)))
		return exitUsage
	}
	var (
		ddl string
		err error
	)
	if *cluster != "" {
		ddl, err = clickhouse.ClusterDDL(*cluster, *database)
	} else {
		ddl, err = clickhouse.ServerDDL(*database)
	}
	if err != nil {
		printErr(errOut, false, wire.New(0, "USAGE", "run flightrec clickhouse --help", "%s", err))
		return exitUsage
	}
	fmt.Fprint(out, ddl)
	return exitOK
}
