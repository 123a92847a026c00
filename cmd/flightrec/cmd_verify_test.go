package main

import (
	"testing"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/wire"
)

// TestVerifyBesideLiveServer: verify --data on a running server's
// directory takes no lock and changes no byte of it (SQLite's -shm and
// -wal aside), and run during ingest it leaves every acknowledged event
// and frame served intact.
func TestVerifyBesideLiveServer(t *testing.T) {
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	// A recording left open mid-way (its log and pack are the server's
	// open files), then finished ones.
	c := client.New(base)
	evs := testgen.Recording(testgen.Options{Seed: 7, Steps: 10, EventsPerStep: 20, FrameBytes: 2000})
	lines, err := client.ParseLines(testgen.NDJSON(evs))
	if err != nil {
		t.Fatal(err)
	}
	open, err := c.Open(t.Context(), wire.OpenRequest{Project: "lock", Flow: "open"})
	if err != nil {
		t.Fatal(err)
	}
	half := lines[:len(lines)/2]
	openAcked, err := c.Send(t.Context(), open.ID, half, 30, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := startFeeder(base, 200, 15)
	f.waitAcked(t, 1000)
	acked := f.halt(t)
	acked[open.ID] = openAcked

	before := quietTree(t, p.data)
	out, errOut, code := flightrec(t, "verify", "--data", p.data, "--json")
	if code != exitOK {
		t.Errorf("verify of a live server's sound directory: exit %d %s %s", code, out, errOut)
	}
	after := hashTree(t, p.data)
	for path, h := range before {
		if a, ok := after[path]; !ok {
			t.Errorf("verify removed %s", path)
		} else if a != h {
			t.Errorf("verify changed %s", path)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("verify created %s", path)
		}
	}

	// During ingest: verify runs several times while the server writes.
	f = startFeeder(base, 300, 15)
	for i := 0; i < 3; i++ {
		f.waitAcked(t, f.ackedSoFar()+300)
		if _, errOut, code := flightrec(t, "verify", "--data", p.data); code != exitOK && code != exitFound {
			t.Errorf("verify during ingest: exit %d %s", code, errOut)
		}
	}
	for id, n := range f.halt(t) {
		acked[id] = n
	}
	events, frames := checkServed(t, base, acked)
	t.Logf("%d recordings, %d events, %d frames served intact; %d files unchanged by verify", len(acked), events, frames, len(before))
}
