package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store"
)

// rerun runs flightrec rerun --json and decodes its result.
func rerun(t *testing.T, args ...string) RerunResult {
	t.Helper()
	out, errOut, code := flightrecEnv(t, nil, 10*time.Minute, append([]string{"rerun", "--json", "--quiet"}, args...)...)
	if code != exitOK {
		t.Fatalf("rerun %v: exit %d\n%s\n%s", args, code, out, errOut)
	}
	var res RerunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("rerun --json: %v: %s", err, out)
	}
	return res
}

// TestRerunFastAndDeep is the seed's rerun on the demo storefront: the
// failing run, rerun 3 times with clock, randomness and network pinned
// against a storefront whose API answers only 503 (so every answer came
// from the recording), reproduces 3 of 3 with its signature; rerun deep
// against the real storefront with the bug off, it is not reproduced.
// The groups read back through GET /v1/groups/{id}, each recording names
// its group, and diff --group takes the group's id.
func TestRerunFastAndDeep(t *testing.T) {
	testenv.RequireChromium(t)
	buggy := startStorefront(t, "--bug")
	frontend := startStorefront(t, "--frontend-only")
	fixed := startStorefront(t)
	data := t.TempDir()
	shipped := shippedFlow(t, "checkout-with-gift-card-fails", t.TempDir())
	orig := recordFlow(t, nil, shipped, buggy, data)
	// The masked values the exported flow asks for, supplied as record's.
	params := []string{"--param", "card_number=" + demoapp.Card, "--param", "password=" + demoapp.Password,
		"--param", "gift_card_code=" + demoapp.GiftCode}
	const sig = "POST /api/checkout 500 GIFT_CARD_STATE"

	fast := rerun(t, append([]string{orig, "--times", "3", "--pin", "clock,random,network", "--base", frontend, "--data", data}, params...)...)
	t.Logf("fast rerun (network from the recording), 3 runs: %s", fast.Wall.Round(time.Millisecond))
	g := fast.Group
	if g.Verdict != store.GroupReproduced || g.Reproduced != 3 || g.Of != 3 || g.Signature != sig ||
		g.Summary != "reproduced 3 of 3: "+sig || g.Purpose != store.GroupRerun || g.Seed != orig {
		t.Errorf("fast rerun group: %+v, want reproduced 3 of 3: %s", g, sig)
	}
	if !slices.Equal(g.Pins, []string{"clock", "random", "network"}) {
		t.Errorf("fast rerun pins: %v", g.Pins)
	}

	deep := rerun(t, append([]string{orig, "--times", "3", "--pin", "clock,random", "--base", fixed, "--data", data}, params...)...)
	t.Logf("deep rerun (the real backend, bug off), 3 runs: %s", deep.Wall.Round(time.Millisecond))
	if d := deep.Group; d.Verdict != store.GroupNotReproduced || d.Reproduced != 0 || d.Of != 3 || d.Signature != sig {
		t.Errorf("deep rerun group: %+v, want not_reproduced against %s", d, sig)
	}

	// Through a server: the group, each member's groups, diff --group.
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	var got store.Group
	getJSON(t, base+"/v1/groups/"+g.ID, &got)
	if got.ID != g.ID || !slices.Equal(got.Members, g.Members) || got.Verdict != store.GroupReproduced || got.Summary != g.Summary {
		t.Errorf("GET /v1/groups/%s: %+v, want %+v", g.ID, got, g)
	}
	for _, m := range g.Members {
		var row struct {
			Groups []string `json:"groups"`
			Labels map[string]string
		}
		getJSON(t, base+"/v1/recordings/"+m, &row)
		if !slices.Equal(row.Groups, []string{g.ID}) {
			t.Errorf("recording %s: groups %v, want [%s]", m, row.Groups, g.ID)
		}
	}
	out, errOut, code := flightrec(t, "diff", "--group", g.ID, "--server", base)
	if code != exitOK || !strings.Contains(out, "reproduced 3 of 3: "+sig) || !strings.Contains(out, "group "+g.ID) {
		t.Errorf("diff --group %s: exit %d\n%s\n%s", g.ID, code, out, errOut)
	}
	// Through the server (no plan at hand: the recorded bodies' redaction
	// marks, under JSON re-ordered by redaction, match the live secrets).
	viaServer := rerun(t, append([]string{orig, "--times", "1", "--pin", "clock,random,network", "--base", frontend, "--server", base}, params...)...)
	if s := viaServer.Group; s.Verdict != store.GroupReproduced || s.Summary != "reproduced 1 of 1: "+sig {
		t.Errorf("rerun --server: %+v", s)
	}
	// An unknown group is the envelope, with where to go next.
	resp, err := http.Get(base + "/v1/groups/" + store.NewGroupID(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"GROUP_NOT_FOUND"`) || !strings.Contains(string(body), `"next"`) {
		t.Errorf("unknown group: %d %s", resp.StatusCode, body)
	}
	// No masked value reached the group or the rerun's output.
	gb, _ := json.Marshal(fast)
	for _, secret := range []string{demoapp.Card, demoapp.Password, demoapp.GiftCode} {
		if strings.Contains(string(gb), secret) {
			t.Errorf("rerun's result holds a masked value (%d bytes of it)", len(secret))
		}
	}
}

// serveLoopback serves h on a free loopback port until the test ends and
// returns its base URL.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// pinnedPage serves a page that shows Date.now(), Math.random(),
// crypto.getRandomValues and the time a timer fires at, and posts what it
// showed to /report, where the test collects it.
func pinnedPage(t *testing.T) (base string, reports func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>pinned</title><body><p id="out">waiting</p><script>
var b = new Uint32Array(2); crypto.getRandomValues(b);
var first = "now=" + Date.now() + " random=" + Math.random() + " bytes=" + b[0] + "," + b[1] + " date=" + new Date().toISOString();
setTimeout(function () {
  var text = first + " later=" + Date.now() + " perf=" + performance.now();
  document.getElementById("out").textContent = "shown " + text;
  fetch("/report", {method: "POST", body: text});
}, 50);
</script></body>`)
	})
	mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return serveLoopback(t, mux), func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(got)
		got = nil
		return out
	}
}

// TestRerunPinsClockAndRandom: a page that shows the time and random
// values renders the same text in all three runs of a rerun with the
// clock and randomness pinned, and different text without the pins.
func TestRerunPinsClockAndRandom(t *testing.T) {
	testenv.RequireChromium(t)
	base, reports := pinnedPage(t)
	dir := t.TempDir()
	fl := filepath.Join(dir, "pinned.yaml")
	if err := os.WriteFile(fl, []byte("name: pinned-page\nstart_url: \"{{base}}/\"\nsteps:\n  - wait: {text: \"shown now=\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	pinned := rerun(t, fl, "--times", "3", "--pin", "clock,random", "--base", base, "--data", data)
	texts := reports()
	if len(texts) != 3 || texts[0] != texts[1] || texts[1] != texts[2] {
		t.Fatalf("pinned runs showed %q, want one text three times", texts)
	}
	if !strings.Contains(texts[0], "later=") || strings.Contains(texts[0], "NaN") {
		t.Errorf("pinned text %q", texts[0])
	}
	// The pinned clock starts at the rerun's start and the timer moved it
	// by exactly its delay.
	var now, later int64
	if _, err := fmt.Sscanf(texts[0][strings.Index(texts[0], "now="):], "now=%d", &now); err != nil {
		t.Fatalf("pinned text %q: %v", texts[0], err)
	}
	if _, err := fmt.Sscanf(texts[0][strings.Index(texts[0], "later="):], "later=%d", &later); err != nil {
		t.Fatalf("pinned text %q: %v", texts[0], err)
	}
	if later-now != 50 {
		t.Errorf("the pinned clock moved %d ms over a 50 ms timer", later-now)
	}
	if g := pinned.Group; g.Purpose != store.GroupRerun || len(g.Members) != 3 || g.Verdict != store.GroupNotReproduced {
		t.Errorf("pinned group %+v", g)
	}

	rerun(t, fl, "--times", "3", "--base", base, "--data", data)
	free := reports()
	if len(free) != 3 || (free[0] == free[1] && free[1] == free[2]) {
		t.Errorf("unpinned runs showed %q, want different texts", free)
	}
	for _, f := range free {
		if f == texts[0] {
			t.Errorf("an unpinned run showed the pinned text %q", f)
		}
	}
}

// TestRerunNetworkNotRecorded: under the network pin, an API request the
// recording never made fails its step with NETWORK_NOT_RECORDED and its
// URL, a recorded one is answered from the recording (the live app is
// not asked), and a WebSocket is refused.
func TestRerunNetworkNotRecorded(t *testing.T) {
	testenv.RequireChromium(t)
	var mu sync.Mutex
	api, beacons, live := "a", []string{}, 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		path := api
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>net</title><body><button id="load">Load</button><p id="out"></p><script>
var ws;
try { new WebSocket("ws://" + location.host + "/ws"); ws = "opened"; } catch (e) { ws = e.name; }
new Image().src = "/beacon?ws=" + ws;
document.getElementById("load").onclick = function () {
  fetch("/api/`+path+`").then(function (r) { return r.json(); })
    .then(function (j) { document.getElementById("out").textContent = "api=" + j.v; })
    .catch(function () { document.getElementById("out").textContent = "api=failed"; });
};
</script></body>`)
	})
	mux.HandleFunc("GET /api/{name}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		live++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"v":%q}`, r.PathValue("name"))
	})
	mux.HandleFunc("GET /beacon", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		beacons = append(beacons, r.URL.Query().Get("ws"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	base := serveLoopback(t, mux)
	fl := filepath.Join(t.TempDir(), "net.yaml")
	if err := os.WriteFile(fl, []byte("name: net\nstart_url: \"{{base}}/\"\nsteps:\n  - click: button \"Load\"\n  - wait: {text: \"api=\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	orig := recordFlow(t, nil, fl, base, data)

	// The same app: its API answered from the recording, not asked.
	mu.Lock()
	live, beacons = 0, nil
	mu.Unlock()
	same := rerun(t, orig, "--times", "1", "--pin", "network", "--base", base, "--data", data)
	mu.Lock()
	if live != 0 || len(same.Runs[0].Failed) != 0 || !slices.Equal(beacons, []string{"NotSupportedError"}) {
		t.Errorf("replayed run: %d live API requests, failed %+v, WebSocket %v", live, same.Runs[0].Failed, beacons)
	}
	// A build that asks another API path: not in the recording.
	api = "b"
	mu.Unlock()
	changed := rerun(t, orig, "--times", "1", "--pin", "network", "--base", base, "--data", data)
	f := changed.Runs[0].Failed
	if len(f) == 0 || f[0].Step != 1 || f[0].Code != "NETWORK_NOT_RECORDED" || !strings.Contains(f[0].Message, base+"/api/b") {
		t.Errorf("changed build under the network pin: failed %+v, want step 1 NETWORK_NOT_RECORDED naming /api/b", f)
	}
	mu.Lock()
	defer mu.Unlock()
	if live != 0 {
		t.Errorf("the live API was asked %d times under the network pin", live)
	}
}
