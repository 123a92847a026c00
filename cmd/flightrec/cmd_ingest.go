package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/wire"
)

func runIngest(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("ingest", "ingest [flags] FILE.ndjson", errOut)
	server := serverFlag(fs, serverByDefault, "server URL")
	project := fs.String("project", "default", "project of the new recording")
	flow := fs.String("flow", "", "flow of the new recording")
	labels := fs.String("labels", "", "labels as k=v,k=v")
	resume := fs.String("recording", "", "append to this already-open recording instead of opening one")
	verdict := fs.String("verdict", "", "verdict at finish (default: fail if any receipt failed, else pass)")
	noFinish := fs.Bool("no-finish", false, "leave the recording open")
	batch := fs.Int("batch", 1000, "events per batch")
	batchBytes := fs.Int("batch-bytes", 4<<20, "bytes per batch (at most)")
	gz := fs.Bool("gzip", true, "gzip batches")
	retryFor := fs.Duration("retry-for", 2*time.Minute, "keep retrying one request this long")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the file path", "%v", err))
		return exitFailure
	}
	lines, err := client.ParseLines(data)
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "MALFORMED_INPUT", "fix the file; nothing was sent", "%s: %v", fs.Arg(0), err))
		return exitUsage
	}
	c := newClient(*server, *gz, *retryFor, errOut)
	id := *resume
	if id == "" {
		req := wire.OpenRequest{Project: *project, Flow: *flow, Executor: "flightrec ingest"}
		if *labels != "" {
			req.Labels = map[string]string{}
			for _, kv := range strings.Split(*labels, ",") {
				k, v, _ := strings.Cut(kv, "=")
				req.Labels[k] = v
			}
		}
		rep, err := c.Open(ctx, req)
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		id = rep.ID
		if !*asJSON {
			fmt.Fprintf(out, "recording %s\n", id)
		}
	}
	total := len(lines)
	last := time.Now()
	acked, err := c.Send(ctx, id, lines, *batch, *batchBytes, func(a uint64) {
		if time.Since(last) > time.Second {
			last = time.Now()
			fmt.Fprintf(errOut, "acked through seq %d of %d\n", a, total)
		}
	})
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	result := map[string]any{"id": id, "acked_through": acked, "events": total}
	if !*noFinish {
		v := *verdict
		if v == "" {
			v = inferVerdict(lines)
		}
		rep, err := c.Finish(ctx, id, v)
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		result["root"], result["verdict"] = rep.Root, v
	}
	if *asJSON {
		printJSON(out, result)
	} else {
		fmt.Fprintf(out, "acked through seq %d\n", acked)
		if r, ok := result["root"]; ok {
			fmt.Fprintf(out, "finished %s: root %s\n", result["verdict"], r)
		}
	}
	return exitOK
}

// inferVerdict is fail when any receipt failed, else pass.
func inferVerdict(lines []client.Line) string {
	for _, l := range lines {
		var e struct {
			Kind string `json:"kind"`
			Data struct {
				Outcome string `json:"outcome"`
			} `json:"data"`
		}
		if json.Unmarshal(l.JSON, &e) == nil && e.Kind == "receipt" && e.Data.Outcome == "failed" {
			return "fail"
		}
	}
	return "pass"
}
