package main

import (
	"context"
	"fmt"
	"io"

	"github.com/flightrec/flightrec/policy"
)

// runPolicy: "policy test [--policy DIR]" runs the Rego tests of the
// default policy and DIR; "policy plan" prints the plan for an input.
func runPolicy(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("policy", "policy test|plan [--policy DIR] [--project P] [--json]", errOut)
	dir := policyFlag(fs, "directory of Rego that extends the default policy")
	project := fs.String("project", "default", "project of the input (policy plan)")
	asJSON := fs.Bool("json", false, "print JSON")
	if len(args) == 0 || (args[0] != "test" && args[0] != "plan") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			fs.Usage()
			return exitOK
		}
		fs.Usage()
		return exitUsage
	}
	verb := args[0]
	if code := parse(fs, args[1:]); code >= 0 {
		return code
	}
	e, err := policy.Load(ctx, *dir)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	if verb == "plan" {
		p, err := e.Plan(ctx, policy.Input{Recording: policy.RecordingInput{Project: *project}})
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
		printJSON(out, map[string]any{"digest": p.Digest(), "plan": p})
		return exitOK
	}
	res, err := e.Test(ctx)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	failed := 0
	for _, r := range res {
		if !r.Pass {
			failed++
		}
	}
	if *asJSON {
		printJSON(out, res)
	} else {
		for _, r := range res {
			status := "PASS"
			if !r.Pass {
				status = "FAIL"
			}
			fmt.Fprintf(out, "%s %s (%s) %s\n", status, r.Name, r.Location, r.Error)
		}
		fmt.Fprintf(out, "%d passed, %d failed\n", len(res)-failed, failed)
	}
	if failed > 0 {
		return exitFound
	}
	return exitOK
}
