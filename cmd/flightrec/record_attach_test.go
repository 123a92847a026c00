package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/wire"
)

// attachFixture starts a Chromium with a DevTools port and the demo
// storefront with its gift-card bug on, for as long as the test runs.
func attachFixture(t testing.TB) (endpoint, shop string, browser *os.Process) {
	return attachFixtureWith(t, demoapp.Options{GiftCardBug: true})
}

func attachFixtureWith(t testing.TB, opts demoapp.Options) (endpoint, shop string, browser *os.Process) {
	t.Helper()
	endpoint, browser = testenv.ChromiumCDP(t)
	srv, err := demoapp.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return endpoint, srv.URL(), browser
}

// attachProc is one flightrec record --attach process.
type attachProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	exited chan struct{}
}

// startAttach starts record --attach at endpoint into data and returns
// once it said the pages open now are recorded.
func startAttach(t testing.TB, bin, endpoint, data string, args ...string) *attachProc {
	t.Helper()
	p := &attachProc{t: t, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"record", "--attach", endpoint, "--data", data, "--json"}, args...)...)
	p.cmd.Stdout = &p.stdout
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(errPipe)
		said := false
		for sc.Scan() {
			p.stderr.WriteString(sc.Text() + "\n")
			if !said && strings.HasPrefix(sc.Text(), "attached to ") {
				said = true
				close(ready)
			}
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("record --attach exited before it attached:\n%s", p.stderr.String())
	case <-time.After(2 * time.Minute): // a guard against a hang, not a timed assertion
		t.Fatalf("record --attach did not attach within 2m:\n%s", p.stderr.String())
	}
	return p
}

// stop signals the recorder and returns its result.
func (p *attachProc) stop(sig os.Signal) recorder.Result {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		p.t.Fatalf("record --attach did not finish within 2m of %v:\n%s", sig, p.stderr.String())
	}
	var res recorder.Result
	if err := json.Unmarshal(p.stdout.Bytes(), &res); err != nil || res.ID == "" {
		p.t.Fatalf("record --attach --json: %v: %s\n%s", err, p.stdout.String(), p.stderr.String())
	}
	return res
}

// browserAlive says whether the browser at endpoint answers and how many
// pages it has.
func browserAlive(endpoint string) (pages int, ok bool) {
	resp, err := http.Get(endpoint + "/json/list")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var list []struct {
		Type string `json:"type"`
	}
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &list) != nil {
		return 0, false
	}
	for _, l := range list {
		if l.Type == "page" {
			pages++
		}
	}
	return pages, true
}

// frameTargets lists the URLs of the browser's frame targets (its
// out-of-process iframes).
func frameTargets(t *testing.T, endpoint string) []string {
	t.Helper()
	resp, err := http.Get(endpoint + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range list {
		if l.Type == "iframe" {
			out = append(out, l.URL)
		}
	}
	return out
}

// TestRecordAttachPlaywright is issue 25's acceptance test: playwright-core
// drives the storefront's failing gift-card checkout over CDP in a running
// Chromium while record --attach records it. The recording has one step
// per Playwright action, with its verb and role+name target and the rule
// "observed"; the Pay step failed with the 500 whose body says
// GIFT_CARD_STATE; the card number and the password are in no byte
// written; flightrec diff against the passing reference run names the
// same first divergence as the reference recorder's failing run, with the
// steps aligned; and the browser outlives the recorder.
//
// The payment provider is another site (CrossSitePayment): its card frame
// is out of process, so the recorder reaches it through the frame's own
// session, which the test checks it did (the frame target is attached).
func TestRecordAttachPlaywright(t *testing.T) {
	endpoint, shop, _ := attachFixtureWith(t, demoapp.Options{GiftCardBug: true, CrossSitePayment: true})
	bin, data := binary(t), t.TempDir()

	rec := startAttach(t, bin, endpoint, data, "--flow", "checkout-with-gift-card-fails")
	run, _ := testenv.PlaywrightAttachCheckout(t, endpoint, shop)
	if run.Shown != "Payment failed: GIFT_CARD_STATE" {
		t.Fatalf("the driven run showed %q", run.Shown)
	}
	// The card frame is out of process: the browser lists it as a frame
	// target of its own (a frame in the page's process has none).
	if frames := frameTargets(t, endpoint); len(frames) != 1 || !strings.HasPrefix(frames[0], "http://localhost:") ||
		!strings.Contains(frames[0], "/pay/card") {
		t.Fatalf("frame targets %q: want the payment frame on localhost, out of process", frames)
	}
	res := rec.stop(syscall.SIGINT)
	if pages, ok := browserAlive(endpoint); !ok || pages == 0 {
		t.Errorf("after the recorder stopped the browser answers %v with %d pages", ok, pages)
	}
	if res.Verdict != "fail" || res.Steps != len(run.Actions) || len(res.Failed) != 1 {
		t.Fatalf("result %+v for %d actions\n%s", res, len(run.Actions), rec.stderr.String())
	}

	// The reference recorder's runs of the same flows, in the same store.
	work := t.TempDir()
	refFail := recordFlow(t, nil, shippedFlow(t, "checkout-with-gift-card-fails", work), shop, data)
	pass := recordFlow(t, nil, shippedFlow(t, "checkout-passes", work), shop, data)

	p := &serverProc{t: t, bin: bin, addr: freeAddr(t), data: data}
	p.start()
	base := "http://" + p.addr
	var receipts, hars wire.EventPage
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=receipt&limit=1000", &receipts)
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=har&limit=1000", &hars)
	if len(receipts.Events) != len(run.Actions) {
		t.Fatalf("%d receipts for %d actions", len(receipts.Events), len(run.Actions))
	}
	payStep := 0
	for i, e := range receipts.Events {
		var r event.Receipt
		if err := json.Unmarshal(e.Data, &r); err != nil {
			t.Fatal(err)
		}
		want := run.Actions[i]
		got := r.Action.Verb + " "
		if r.Action.Target != nil {
			got += fmt.Sprintf("%s %q", r.Action.Target.Role, r.Action.Target.Name)
		} else {
			var args struct {
				URL string `json:"url"`
			}
			_ = json.Unmarshal(r.Action.Args, &args)
			got += "url " + strings.TrimPrefix(args.URL, shop)
		}
		if got != want[0]+" "+want[1] || r.Rule != recorder.RuleObserved {
			t.Errorf("step %d: %s (rule %q), want %s %s", r.Step, got, r.Rule, want[0], want[1])
		}
		// A target that left with its page before the recorder could ask
		// the tree (a link's navigation) is named by attach.js alone.
		if r.Action.Target != nil && (r.Effects == nil || r.Effects.Navigation == nil) &&
			(r.Resolved == nil || !strings.HasPrefix(r.Resolved.Ref, "@e") && !strings.HasPrefix(r.Resolved.Ref, "@f")) {
			t.Errorf("step %d: resolved %+v, want a ref", r.Step, r.Resolved)
		}
		// The card field is in the payment provider's frame: the step's
		// target names the frame as a flow does, and its ref is the
		// frame's (@f1e1).
		if want[1] == `textbox "Card number"` && (r.Resolved == nil || !strings.HasPrefix(r.Resolved.Ref, "@f") ||
			r.Action.Target.Frame != "Payment card") {
			t.Errorf("step %d: the card field resolved %+v, target %+v: want the frame's", r.Step, r.Resolved, r.Action.Target)
		}
		if r.StartedAt == 0 || r.EndedAt < r.StartedAt {
			t.Errorf("step %d: timings %d..%d", r.Step, r.StartedAt, r.EndedAt)
		}
		isPay := want[1] == `button "Pay"`
		if isPay {
			payStep = r.Step
		}
		switch {
		case isPay && (r.Outcome != event.OutcomeFailed || r.Error == nil || r.Error.Code != recorder.CodeAppError ||
			!strings.Contains(r.Error.Message, "/api/checkout answered 500")):
			t.Errorf("Pay: %s %+v, want failed APP_ERROR on the 500", r.Outcome, r.Error)
		case !isPay && r.Outcome != event.OutcomeDone:
			t.Errorf("step %d (%s): %s %+v", r.Step, got, r.Outcome, r.Error)
		}
	}
	var checkout []string
	tokens := 0
	for _, e := range hars.Events {
		var h event.HAR
		if json.Unmarshal(e.Data, &h) == nil && strings.HasPrefix(h.Request.URL, "http://localhost:") &&
			strings.HasSuffix(h.Request.URL, "/api/tokens") {
			tokens++ // the frame's own request, on the frame's session
		}
		if json.Unmarshal(e.Data, &h) == nil && strings.HasSuffix(h.Request.URL, "/api/checkout") {
			body := ""
			if h.Response.Content.Text != "" && strings.Contains(h.Response.Content.Text, "GIFT_CARD_STATE") {
				body = " GIFT_CARD_STATE"
			}
			checkout = append(checkout, fmt.Sprintf("%s %d%s in step %d", h.Request.Method, h.Response.Status, body, e.Step))
		}
	}
	if want := fmt.Sprintf("[POST 500 GIFT_CARD_STATE in step %d]", payStep); payStep == 0 || fmt.Sprint(checkout) != want {
		t.Errorf("/api/checkout: %v, want %s", checkout, want)
	}
	if tokens != 1 {
		t.Errorf("%d token requests of the out-of-process card frame in the HAR, want 1", tokens)
	}

	// Against the passing run, the attached recording diverges where the
	// reference recorder's failing run does, and its steps align.
	var byRef, byAttach diffrun.Report
	getJSON(t, base+"/v1/diff?a="+pass+"&b="+refFail, &byRef)
	getJSON(t, base+"/v1/diff?a="+pass+"&b="+res.ID, &byAttach)
	if byRef.FirstDivergence == nil || byAttach.FirstDivergence == nil {
		t.Fatalf("first divergence: reference %+v, attached %+v", byRef.FirstDivergence, byAttach.FirstDivergence)
	}
	for _, fd := range []*diffrun.Divergence{byRef.FirstDivergence, byAttach.FirstDivergence} {
		if !strings.Contains(fd.Explanation, `button "Pay"`) || !strings.Contains(fd.Explanation, "500") ||
			!strings.Contains(fd.Explanation, "GIFT_CARD_STATE") {
			t.Errorf("first divergence %q, want the Pay step with 500 GIFT_CARD_STATE", fd.Explanation)
		}
	}
	if byAttach.FirstDivergence.StepB != payStep || byAttach.FirstDivergence.StepA != byRef.FirstDivergence.StepA {
		t.Errorf("attached diverges at %d/%d, reference at %d/%d; Pay is step %d", byAttach.FirstDivergence.StepA,
			byAttach.FirstDivergence.StepB, byRef.FirstDivergence.StepA, byRef.FirstDivergence.StepB, payStep)
	}
	// Against the reference recorder's run of the same flow, every step
	// but the goto (a flow's start_url, which has no step) aligns. (Their
	// snapshots may differ: an observer reads a step's after views when
	// the next input was seen, after the page's own click handler ran.)
	var same diffrun.Report
	getJSON(t, base+"/v1/diff?a="+refFail+"&b="+res.ID, &same)
	matched := map[int]bool{}
	for _, pr := range same.Pairs {
		if pr.StepA > 0 && pr.StepB > 0 {
			matched[pr.StepB] = true
		}
	}
	if len(matched) != len(run.Actions)-1 || matched[1] {
		t.Errorf("attached vs reference: %d of %d steps aligned (%v); pairs %+v", len(matched), len(run.Actions), matched, same.Pairs)
	}
	// Nor may they differ beyond the snapshots, but for the reference's
	// trailing waits and checks, which no observer sees (the attached run
	// "ended early").
	if fd := same.FirstDivergence; fd != nil && fd.Channel != "snapshot" && fd.StepB != 0 {
		t.Errorf("attached vs reference diverge beyond the snapshots: %+v", fd)
	}
	p.stop()

	stored := testenv.Corpus{}
	stored.AddFiles(t, data, "after")
	stored.AddSQLite(t, filepath.Join(data, "index.sqlite"))
	stored["recorder stdout"] = rec.stdout.Bytes()
	stored["recorder stderr"] = rec.stderr.Bytes()
	secrets := []string{demoapp.Card, strings.ReplaceAll(demoapp.Card, " ", ""), demoapp.Password}
	if hits := stored.Hits(secrets, []string{"card", "card digits", "password"}); len(hits) > 0 {
		t.Errorf("secrets typed by the driving client are stored (%d places):\n  %s", len(hits), strings.Join(hits, "\n  "))
	}
	t.Logf("%d steps, %d events; %d bytes searched", res.Steps, res.Total, stored.Size())
}

// TestRecordAttachDoesNotInterfere: the Playwright run's own actions and
// outcome are the same with the recorder attached and without, and the
// browser (and the run in it) survives the recorder's SIGKILL. The run
// goes on with the Terms popup, which Playwright's own auto-attach pauses
// and releases as the recorder's does: the popup's document request is in
// the HAR under the popup's page all the same, once, with its body. It
// ends with a receipt's download, which lands where Playwright put it with
// the recorder attached too, and which the click's receipt describes
// (name, size, state) without a hash (the bytes are the driving client's).
func TestRecordAttachDoesNotInterfere(t *testing.T) {
	endpoint, shop, _ := attachFixture(t)
	bin, data := binary(t), t.TempDir()

	// The runs end with the Terms popup, which the recorder pauses at its
	// start, and a download: the driving client's run must not notice,
	// while the recorder is attached or after it was killed.
	alone, _ := testenv.PlaywrightAttachCheckout(t, endpoint, shop, "terms", "receipt")
	rec := startAttach(t, bin, endpoint, data)
	watched, _ := testenv.PlaywrightAttachCheckout(t, endpoint, shop, "terms", "receipt")
	if !strings.HasPrefix(alone.Popup, "Terms of sale") || !alone.Download.Landed || alone.Download.Size == 0 ||
		fmt.Sprint(alone) != fmt.Sprint(watched) {
		t.Errorf("the run differs with the recorder attached:\n alone   %+v\n watched %+v", alone, watched)
	}
	res := rec.stop(syscall.SIGINT)
	p := &serverProc{t: t, bin: bin, addr: freeAddr(t), data: data}
	p.start()
	var hars, receipts wire.EventPage
	getJSON(t, "http://"+p.addr+"/v1/recordings/"+res.ID+"/events?kind=har&limit=1000", &hars)
	getJSON(t, "http://"+p.addr+"/v1/recordings/"+res.ID+"/events?kind=receipt&limit=1000", &receipts)
	p.stop()
	var terms []string
	for _, e := range hars.Events {
		var h event.HAR
		if json.Unmarshal(e.Data, &h) == nil && strings.HasSuffix(h.Request.URL, "/terms") {
			terms = append(terms, fmt.Sprintf("%s %d on page %q body %v", h.Request.Method, h.Response.Status, h.PageRef,
				strings.Contains(h.Response.Content.Text, "Terms of sale")))
		}
	}
	if want := `[GET 200 on page "p2" body true]`; fmt.Sprint(terms) != want {
		t.Errorf("the popup's document in the HAR: %v, want %s\n%s", terms, want, rec.stderr.String())
	}
	// The order id differs from run to run: {order}, as the driver says.
	orderID := regexp.MustCompile(`ord_[0-9a-f]+`)
	var files []string
	for _, e := range receipts.Events {
		var r event.Receipt
		if json.Unmarshal(e.Data, &r) != nil || r.Effects == nil || len(r.Effects.Files) == 0 {
			continue
		}
		target := ""
		if r.Action.Target != nil {
			target = r.Action.Target.Name
		}
		for _, f := range r.Effects.Files {
			files = append(files, orderID.ReplaceAllString(fmt.Sprintf("%s %q: %s %d type %q %s hash %q in %v",
				r.Action.Verb, target, f.Name, f.Size, f.MIME, f.State, f.SHA256, r.Effects.Downloads), "{order}"))
		}
	}
	// No type: the link has a download attribute, so the browser fetched
	// the file outside the page's network (no response to take it from).
	want := fmt.Sprintf(`[click "Download receipt": %[1]s %[2]d type "" completed hash "" in [%[1]s]]`,
		watched.Download.Name, watched.Download.Size)
	if fmt.Sprint(files) != want {
		t.Errorf("the recording's downloads: %v, want %s", files, want)
	}

	// Killed: the browser and the next run go on as if it never was.
	rec = startAttach(t, bin, endpoint, t.TempDir())
	if err := rec.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-rec.exited
	if pages, ok := browserAlive(endpoint); !ok || pages == 0 {
		t.Fatalf("after the recorder's SIGKILL the browser answers %v with %d pages", ok, pages)
	}
	after, _ := testenv.PlaywrightAttachCheckout(t, endpoint, shop, "terms", "receipt")
	if fmt.Sprint(alone) != fmt.Sprint(after) {
		t.Errorf("the run differs after the recorder was killed:\n alone %+v\n after %+v", alone, after)
	}
}

// attachDriver builds testdata/attachdriver, a chromedp client of its own.
func attachDriver(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "attachdriver")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/attachdriver").CombinedOutput(); err != nil {
		t.Fatalf("go build attachdriver: %v\n%s", err, out)
	}
	return bin
}

// runDriver runs the driver in mode and returns the actions it reports.
func runDriver(t *testing.T, bin, mode, endpoint, base string) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, mode, endpoint, base)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("attachdriver %s: %v\n%s", mode, err, errOut.String())
	}
	if strings.TrimSpace(out.String()) == "" {
		return nil
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// TestRecordAttachChromedpLate: a second kind of client, chromedp in a
// process of its own, with the recorder attached after the page was open.
// The recording starts with a full snapshot of the page as found (rrweb's
// and the text views, in step 0), then has one step per action, typed
// keys included (each field's keystrokes are one fill), and the Pay step
// failed with the 500; the typed secrets are in no byte written.
func TestRecordAttachChromedpLate(t *testing.T) {
	endpoint, shop, _ := attachFixture(t)
	bin, data, driver := binary(t), t.TempDir(), attachDriver(t)

	runDriver(t, driver, "open", endpoint, shop)
	rec := startAttach(t, bin, endpoint, data, "--flow", "checkout-with-gift-card-fails")
	acts := runDriver(t, driver, "checkout", endpoint, shop)
	res := rec.stop(syscall.SIGTERM)
	if pages, ok := browserAlive(endpoint); !ok || pages == 0 {
		t.Errorf("after the recorder stopped the browser answers %v with %d pages", ok, pages)
	}
	if res.Verdict != "fail" || res.Steps != len(acts) {
		t.Errorf("result %+v for the %d actions %q\n%s", res, len(acts), acts, rec.stderr.String())
	}

	p := &serverProc{t: t, bin: bin, addr: freeAddr(t), data: data}
	p.start()
	base := "http://" + p.addr
	var receipts, doms, snaps wire.EventPage
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=receipt&limit=1000", &receipts)
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=dom&limit=10000", &doms)
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=snapshot&limit=1000", &snaps)
	p.stop()
	full := false
	for _, e := range doms.Events {
		var d event.DOM
		if json.Unmarshal(e.Data, &d) == nil && d.Type != nil && *d.Type == 2 && e.Step == 0 {
			full = true
		}
	}
	seen := false
	for _, e := range snaps.Events {
		var s event.Snapshot
		if json.Unmarshal(e.Data, &s) == nil && e.Step == 0 && s.View == "interactive" && strings.Contains(s.Text, `button "Sign in"`) {
			seen = true
		}
	}
	if !full || !seen {
		t.Errorf("step 0: rrweb full snapshot %v, interactive view of the open page %v", full, seen)
	}
	if len(receipts.Events) != len(acts) {
		var got []string
		for _, e := range receipts.Events {
			got = append(got, string(e.Data))
		}
		t.Fatalf("%d receipts for %d actions:\n%s", len(receipts.Events), len(acts), strings.Join(got, "\n"))
	}
	for i, e := range receipts.Events {
		var r event.Receipt
		if err := json.Unmarshal(e.Data, &r); err != nil {
			t.Fatal(err)
		}
		got := r.Action.Verb
		if r.Action.Target != nil {
			got += fmt.Sprintf(" %s %q", r.Action.Target.Role, r.Action.Target.Name)
		}
		want := acts[i]
		if got != want || r.Rule != recorder.RuleObserved {
			t.Errorf("step %d: %s (rule %q), want %s", r.Step, got, r.Rule, want)
		}
		pay := want == `click button "Pay"`
		if pay != (r.Outcome == event.OutcomeFailed) || (pay && (r.Error == nil || r.Error.Code != recorder.CodeAppError)) {
			t.Errorf("step %d (%s): %s %+v", r.Step, want, r.Outcome, r.Error)
		}
	}
	stored := testenv.Corpus{}
	stored.AddFiles(t, data, "after")
	secrets := []string{demoapp.Card, strings.ReplaceAll(demoapp.Card, " ", ""), demoapp.Password}
	if hits := stored.Hits(secrets, []string{"card", "card digits", "password"}); len(hits) > 0 {
		t.Errorf("secrets typed by the driving client are stored (%d places):\n  %s", len(hits), strings.Join(hits, "\n  "))
	}
}

// BenchmarkRecordAttach reports what recording costs the run it watches:
// the Playwright checkout's wall time with record --attach attached over
// the same run alone in the same browser (overhead_x, 1.0 is none), and
// the events the recorder made per second of the watched run (events/s).
// Reported, not asserted.
func BenchmarkRecordAttach(b *testing.B) {
	endpoint, shop, _ := attachFixture(b)
	bin := binary(b)
	testenv.PlaywrightAttachCheckout(b, endpoint, shop) // warm the browser and the shop
	var alone, watched time.Duration
	var events uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, took := testenv.PlaywrightAttachCheckout(b, endpoint, shop)
		alone += took
		rec := startAttach(b, bin, endpoint, b.TempDir())
		_, took = testenv.PlaywrightAttachCheckout(b, endpoint, shop)
		watched += took
		events += rec.stop(syscall.SIGINT).Total
	}
	b.ReportMetric(watched.Seconds()/alone.Seconds(), "overhead_x")
	b.ReportMetric(float64(events)/watched.Seconds(), "events/s")
	b.ReportMetric(watched.Seconds()/float64(b.N), "watched_s/op")
	b.ReportMetric(alone.Seconds()/float64(b.N), "alone_s/op")
}

// TestRecordAttachRefusals: --attach with a flow file, a made-up verdict
// or an endpoint nobody listens on is refused with the error envelope and
// what to do; none of them opens a recording.
func TestRecordAttachRefusals(t *testing.T) {
	data := t.TempDir()
	dead := "http://" + freeAddr(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"record", "--attach", dead, "--data", data, "flow.yaml"}, exitUsage, "--attach takes no flow file"},
		{[]string{"record", "--attach", dead, "--data", data, "--verdict", "great"}, exitUsage, `--verdict "great" is not a verdict`},
		{[]string{"record", "--attach", dead, "--data", data}, exitFailure, "/json/version"},
	} {
		_, errOut, code := flightrecEnv(t, nil, time.Minute, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "next") || strings.Contains(errOut, "recording 0") {
			t.Errorf("%v: exit %d, %q; want %d with %q", c.args[4:], code, errOut, c.code, c.want)
		}
	}
}

// TestRecordAttachUntilBrowserCloses: without a signal the recording ends
// when the browser goes away, and is finished with what was recorded.
func TestRecordAttachUntilBrowserCloses(t *testing.T) {
	endpoint, shop, browser := attachFixture(t)
	rec := startAttach(t, binary(t), endpoint, t.TempDir())
	run, _ := testenv.PlaywrightAttachCheckout(t, endpoint, shop)
	if err := browser.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.exited:
	case <-time.After(2 * time.Minute): // a guard against a hang, not a timed assertion
		t.Fatalf("record --attach still runs 2m after the browser went:\n%s", rec.stderr.String())
	}
	var res recorder.Result
	if err := json.Unmarshal(rec.stdout.Bytes(), &res); err != nil || res.Root == "" {
		t.Fatalf("record --attach after the browser went: %v: %s\n%s", err, rec.stdout.String(), rec.stderr.String())
	}
	if res.Verdict != "fail" || res.Steps != len(run.Actions) {
		t.Errorf("result %+v for %d actions", res, len(run.Actions))
	}
}
