package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/internal/testgen"
)

// TestFlagsAfterPositionals: commands take flags before, between and
// after their positional arguments, as git and kubectl do.
func TestFlagsAfterPositionals(t *testing.T) {
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	evs := testgen.Recording(testgen.Options{Seed: 9, Steps: 5, EventsPerStep: 10, FrameBytes: 1000})
	file := filepath.Join(t.TempDir(), "rec.ndjson")
	if err := os.WriteFile(file, testgen.NDJSON(evs), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := flightrec(t, "ingest", file, "--server", "http://"+p.addr, "--project", "flags", "--json")
	var rec struct{ ID string }
	if code != exitOK || json.Unmarshal([]byte(out), &rec) != nil || rec.ID == "" {
		t.Fatalf("ingest FILE --server URL: exit %d %q %q", code, out, errOut)
	}
	p.stop()

	dir := t.TempDir()
	car, att := filepath.Join(dir, "r.car"), filepath.Join(dir, "r.intoto.json")
	for _, args := range [][]string{
		{"audit", "redaction", rec.ID, "--data", p.data},
		{"export", "bundle", rec.ID, "--data", p.data, "-o", car},
		{"verify", car, "--json"},
		{"export", "attestation", rec.ID, "-o", att, "--data", p.data},
		{"verify", "--attestation", att, car, "--key", filepath.Join(p.data, "keys", "attestation.pub")},
		{"audit", "verify", filepath.Join(p.data, "audit.log"), "--json"},
	} {
		if out, errOut, code := flightrec(t, args...); code != exitOK {
			t.Errorf("flightrec %s: exit %d %q %q", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestParseFlagsAnywhere: the one parse path keeps positionals in order,
// wherever the flags are, and "--" ends the flags.
func TestParseFlagsAnywhere(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	n := fs.Int("n", 0, "")
	b := fs.Bool("b", false, "")
	if code := parse(fs, []string{"a", "-n", "3", "b", "--b", "--", "-c", "--n=4"}); code >= 0 {
		t.Fatalf("parse: %d", code)
	}
	if *n != 3 || !*b || !reflect.DeepEqual(fs.Args(), []string{"a", "b", "-c", "--n=4"}) {
		t.Fatalf("n=%d b=%v args=%q", *n, *b, fs.Args())
	}
}
