package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// recordDemo records a shipped demo flow (with extra steps spliced in
// after step index at, when given) and waits until it is indexed.
func recordDemo(t *testing.T, base, shop, name string, at int, extra ...string) string {
	t.Helper()
	fl := testenv.DemoFlow(t, name)
	if len(extra) > 0 {
		src := "name: x\nstart_url: \"http://127.0.0.1/\"\nsteps:\n"
		for _, e := range extra {
			src += "  - " + e + "\n"
		}
		ex, err := flow.Parse("extra.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		steps := append([]flow.Step{}, fl.Steps[:at]...)
		steps = append(steps, ex.Steps...)
		fl.Steps = append(steps, fl.Steps[at:]...)
	}
	res := testenv.Record(t, base, shop, fl)
	waitRow(t, base, res.ID, func(r store.RecordingRow) bool { return r.State == store.StateFinished && r.IndexedTo >= res.Total })
	return res.ID
}

func waitRow(t *testing.T, base, id string, ok func(store.RecordingRow) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var row store.RecordingRow
		getJSON(t, base+"/v1/recordings/"+id, &row)
		if ok(row) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("recording %s: %+v", id, row)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// diffCLI runs flightrec diff in process against the server at base.
func diffCLI(t *testing.T, base string, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"diff", "--server", base}, args...), &out, &errOut)
	return out.String() + errOut.String(), code
}

// TestDiffDemoRuns is diffrun's acceptance test on real recordings of the
// demo storefront: passing against failing names the Pay step and the
// 500 GIFT_CARD_STATE; two fresh passing runs do not diverge although
// their ids, nonces and timestamps differ; a run with a retried step
// aligns around it; three failing runs and a passing one reproduce 3 of 4.
func TestDiffDemoRuns(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	shop, err := demoapp.Start(demoapp.Options{GiftCardBug: true})
	if err != nil {
		t.Fatal(err)
	}
	defer shop.Close()
	pass1 := recordDemo(t, srv.Base, shop.URL(), "checkout-passes", 0)
	pass2 := recordDemo(t, srv.Base, shop.URL(), "checkout-passes", 0)
	// A retry: Add to cart clicked (and waited for) twice.
	retry := recordDemo(t, srv.Base, shop.URL(), "checkout-passes", 6, `click: button "Add to cart"`, `wait: {text: "Added to cart"}`)
	var fails []string
	for i := 0; i < 3; i++ {
		fails = append(fails, recordDemo(t, srv.Base, shop.URL(), "checkout-with-gift-card-fails", 0))
	}

	// Passing against failing: the Pay step, with the 500 named.
	var rep diffrun.Report
	getJSON(t, srv.Base+"/v1/diff?a="+pass1+"&b="+fails[0], &rep)
	fd := rep.FirstDivergence
	if fd == nil {
		t.Fatalf("pass vs fail: no divergence: %+v", rep)
	}
	if !strings.Contains(fd.Explanation, "Pay") || !strings.Contains(fd.Explanation, "500") || !strings.Contains(fd.Explanation, "GIFT_CARD_STATE") {
		t.Errorf("pass vs fail: first divergence %+v, want the Pay step with 500 GIFT_CARD_STATE", fd)
	}
	if fd.StepA != 16 || fd.StepB != 15 {
		t.Errorf("pass vs fail: diverge at steps %d/%d, want 16 (Pay in the passing flow) / 15 (Pay in the failing one)", fd.StepA, fd.StepB)
	}
	out, code := diffCLI(t, srv.Base, pass1, fails[0])
	if code != exitFound || !strings.Contains(out, "GIFT_CARD_STATE") {
		t.Errorf("flightrec diff pass fail: exit %d\n%s", code, out)
	}

	// Two passing runs: nothing material.
	rep = diffrun.Report{}
	getJSON(t, srv.Base+"/v1/diff?a="+pass1+"&b="+pass2, &rep)
	if rep.FirstDivergence != nil {
		t.Errorf("pass vs pass diverge: %+v", rep.FirstDivergence)
	}
	for _, p := range rep.Pairs {
		if p.Material || p.Op == "inserted" || p.Op == "deleted" {
			t.Errorf("pass vs pass: pair %+v", p)
		}
	}
	if out, code := diffCLI(t, srv.Base, pass1, pass2); code != exitOK {
		t.Errorf("flightrec diff pass pass: exit %d\n%s", code, out)
	}

	// The retried steps are inserted, everything else matches.
	rep = diffrun.Report{}
	getJSON(t, srv.Base+"/v1/diff?a="+pass1+"&b="+retry, &rep)
	inserted, matched := 0, 0
	for _, p := range rep.Pairs {
		switch p.Op {
		case "inserted":
			inserted++
		case "match", "changed":
			matched++
		}
	}
	if rep.FirstDivergence != nil || inserted != 2 || matched != 20 {
		t.Errorf("pass vs retry: divergence %+v, %d inserted, %d matched; want none, 2, 20", rep.FirstDivergence, inserted, matched)
	}

	// Three failing runs and one passing: reproduced 3 of 4.
	var g diffrun.GroupReport
	getJSON(t, srv.Base+"/v1/diff/group?id="+strings.Join(append(fails, pass1), "&id="), &g)
	if g.Reproduced != 3 || g.Of != 4 || !strings.Contains(g.Signature, "GIFT_CARD_STATE") || len(g.Odd) != 1 || g.Odd[0].ID != pass1 {
		t.Errorf("group: %+v", g)
	}
	out, code = diffCLI(t, srv.Base, append([]string{"--group"}, append(fails, pass1)...)...)
	if code != exitFound || !strings.Contains(out, "reproduced 3 of 4") {
		t.Errorf("flightrec diff --group: exit %d\n%s", code, out)
	}
}

// TestDiffSocketMessage: two passing runs against storefronts whose cart
// sockets differ by one message the server sends differ in flightrec diff,
// on the network channel, naming the message.
func TestDiffSocketMessage(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	plain, _ := testenv.Shop(t, demoapp.Options{})
	chatty, _ := testenv.Shop(t, demoapp.Options{SocketExtra: `{"type":"promo","text":"free shipping"}`})
	a := recordDemo(t, srv.Base, plain, "checkout-passes", 0)
	b := recordDemo(t, srv.Base, chatty, "checkout-passes", 0)
	var rep diffrun.Report
	getJSON(t, srv.Base+"/v1/diff?a="+a+"&b="+b, &rep)
	if fd := rep.FirstDivergence; fd == nil || fd.Channel != diffrun.ChannelNetwork || !strings.Contains(fd.Explanation, "free shipping") {
		t.Errorf("first divergence %+v, want the promo message on the network channel", rep.FirstDivergence)
	}
	if out, code := diffCLI(t, srv.Base, a, b); code != exitFound || !strings.Contains(out, "/ws/cart: receive 1") {
		t.Errorf("flightrec diff: exit %d\n%s", code, out)
	}
}

// TestDiffEdgeCases: empty runs, a one-step run, runs of different flows
// and a recording still being ingested are answered, not refused or
// forced; an unknown recording is the usual 404 and a bad call a 2.
func TestDiffEdgeCases(t *testing.T) {
	srv := appserver.Start(t)
	open := func(flowName string, evs []event.Envelope, finish bool) string {
		t.Helper()
		c := client.New(srv.Base)
		rep, err := c.Open(context.Background(), wire.OpenRequest{Project: "p", Flow: flowName})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			if _, err := c.Append(context.Background(), rep.ID, testgen.NDJSON(evs)); err != nil {
				t.Fatal(err)
			}
		}
		if finish {
			if _, err := c.Finish(context.Background(), rep.ID, "pass"); err != nil {
				t.Fatal(err)
			}
		}
		waitRow(t, srv.Base, rep.ID, func(r store.RecordingRow) bool { return r.IndexedTo >= uint64(len(evs)) })
		return rep.ID
	}
	receipt := func(seq uint64, step int, verb, name string) event.Envelope {
		return event.Envelope{Seq: seq, TS: int64(seq) * 1e9, Step: step, Kind: event.KindReceipt,
			Data: json.RawMessage(fmt.Sprintf(`{"step":%d,"action":{"verb":%q,"target":{"role":"button","name":%q}},"outcome":"done","started_at":%d,"ended_at":%d}`,
				step, verb, name, int64(seq)*1e9, int64(seq)*1e9+1e8))}
	}
	empty1, empty2 := open("checkout", nil, true), open("checkout", nil, true)
	one := open("checkout", []event.Envelope{receipt(1, 1, "click", "Pay")}, true)
	other := open("signup", []event.Envelope{receipt(1, 1, "click", "Join")}, true)
	live := open("checkout", []event.Envelope{receipt(1, 1, "click", "Pay"), receipt(2, 2, "click", "Done")}, false)

	for _, c := range []struct {
		name, a, b string
		check      func(diffrun.Report) string
	}{
		{"empty runs", empty1, empty2, func(r diffrun.Report) string {
			if r.FirstDivergence != nil || len(r.Pairs) != 0 {
				return "want no pairs, no divergence"
			}
			return ""
		}},
		{"one step against empty", one, empty1, func(r diffrun.Report) string {
			if len(r.Pairs) != 1 || r.Pairs[0].Op != "deleted" {
				return "want the one step deleted"
			}
			return ""
		}},
		{"different flows", one, other, func(r diffrun.Report) string {
			if r.SameFlow || len(r.Notes) == 0 || !strings.Contains(strings.Join(r.Notes, " "), "signup") {
				return "want same_flow false and a note naming the flows"
			}
			return ""
		}},
		{"still ingesting", one, live, func(r diffrun.Report) string {
			if r.B.State != "open" || !strings.Contains(strings.Join(r.Notes, " "), "still") {
				return "want b open and a note that it is still being ingested"
			}
			return ""
		}},
	} {
		var rep diffrun.Report
		getJSON(t, srv.Base+"/v1/diff?a="+c.a+"&b="+c.b, &rep)
		if msg := c.check(rep); msg != "" {
			b, _ := json.Marshal(rep)
			t.Errorf("%s: %s: %s", c.name, msg, b)
		}
	}
	resp, err := http.Get(srv.Base + "/v1/diff?a=" + one + "&b=" + store.NewRecordingID(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown recording: %d, want 404", resp.StatusCode)
	}
	if out, code := diffCLI(t, srv.Base, one); code != exitUsage {
		t.Errorf("one argument: exit %d, %s", code, out)
	}
	if out, code := diffCLI(t, srv.Base, one, "00000000000000000000000000"); code != exitUsage || !strings.Contains(out, "RECORDING_NOT_FOUND") {
		t.Errorf("unknown recording: exit %d, %s", code, out)
	}
}

// TestDiffBesideLiveServer: diff --data and diff --group --data on a
// running server's directory read it without the lock (the store and the
// index opened read-only), answer as the server would, and change no byte
// of it (the index file, its -wal and -shm aside: the live server writes
// them itself).
func TestDiffBesideLiveServer(t *testing.T) {
	p, data, _, a := serveDecade(t)
	defer p.stop()
	b := ingestGenerated(t, p.addr, "keep", "fail", testgen.Options{Seed: 6, Steps: 2, EventsPerStep: 3, StartTS: time.Now().UnixNano()})
	waitIndexed(t, "http://"+p.addr, a)
	waitIndexed(t, "http://"+p.addr, b)
	before := quietTree(t, data)

	// The same answers as the live server's.
	var want diffrun.Report
	getJSON(t, "http://"+p.addr+"/v1/diff?a="+a+"&b="+b, &want)
	out, errOut, code := flightrec(t, "diff", "--data", data, "--json", a, b)
	var got diffrun.Report
	if code == exitUsage || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("diff --data beside a live server: exit %d\n%s%s", code, out, errOut)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff --data = %+v\nthe server says %+v", got, want)
	}
	var wantG diffrun.GroupReport
	getJSON(t, "http://"+p.addr+"/v1/diff/group?id="+a+"&id="+b, &wantG)
	out, errOut, code = flightrec(t, "diff", "--group", "--data", data, "--json", a, b)
	var gotG diffrun.GroupReport
	if code == exitUsage || json.Unmarshal([]byte(out), &gotG) != nil {
		t.Fatalf("diff --group --data beside a live server: exit %d\n%s%s", code, out, errOut)
	}
	if !reflect.DeepEqual(gotG, wantG) || gotG.Of != 2 {
		t.Errorf("diff --group --data = %+v\nthe server says %+v", gotG, wantG)
	}
	// An unknown recording is the usual envelope.
	out, errOut, code = flightrec(t, "diff", "--data", data, a, "rec-unknown")
	if code != exitUsage || !strings.Contains(errOut, "RECORDING_NOT_FOUND") {
		t.Errorf("diff --data of an unknown recording: exit %d\n%s%s", code, out, errOut)
	}

	unchangedButIndex(t, data, before, "diff --data")
}
