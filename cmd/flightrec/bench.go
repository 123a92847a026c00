package main

import (
	"context"
	"io"
)

func runBench(ctx context.Context, args []string, out, errOut io.Writer) int {
	printErr(errOut, false, errNotYet)
	return exitFailure
}
