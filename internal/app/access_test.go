package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// routeScope is what each route needs, written out here independently of
// the Rego policy, so the matrix checks the policy rather than repeating it.
var routeScope = map[string]string{
	"POST /v1/recordings":                           "ingest",
	"POST /v1/recordings/{id}/events":               "ingest",
	"POST /v1/recordings/{id}/finish":               "ingest",
	"POST /v1/recordings/{id}/abort":                "ingest",
	"POST /v1/recordings/{id}/repair":               "admin",
	"GET /v1/recordings":                            "read",
	"GET /v1/recordings/{id}":                       "read",
	"GET /v1/recordings/{id}/steps":                 "read",
	"GET /v1/recordings/{id}/steps/{n}":             "read",
	"GET /v1/recordings/{id}/events":                "read",
	"GET /v1/recordings/{id}/redaction":             "read",
	"GET /v1/recordings/{id}/blobs/{cid}":           "read",
	"GET /v1/diff":                                  "read",
	"GET /v1/recordings/{id}/retention":             "read",
	"GET /v1/recordings/{id}/har":                   "read",
	"GET /v1/recordings/{id}/rrweb":                 "read",
	"GET /v1/recordings/{id}/bundle":                "read",
	"GET /v1/recordings/{id}/attestation":           "read",
	"GET /v1/recordings/{id}/evidence":              "read",
	"POST /v1/recordings/{id}/evidence":             "share",
	"GET /v1/recordings/{id}/steps/{n}/dom":         "read",
	"GET /v1/recordings/{id}/snapshots/{seq}":       "read",
	"GET /v1/recordings/{id}/video.webm":            "read",
	"GET /v1/recordings/{id}/at":                    "read",
	"GET /v1/recordings/{id}/search":                "read",
	"GET /v1/search":                                "read",
	"POST /v1/recordings/{id}/pins":                 "pin",
	"DELETE /v1/recordings/{id}/pins/{pin}":         "pin",
	"POST /v1/retention/sweep":                      "admin",
	"POST /v1/index/rebuild":                        "admin",
	"GET /v1/audit":                                 "admin",
	"GET /v1/diff/group":                            "read",
	"POST /v1/groups":                               "read",
	"GET /v1/groups/{id}":                           "read",
	"GET /v1/blobs/{cid}":                           "admin",
	"GET /metrics":                                  "admin",
	"GET /v1/tokens":                                "admin",
	"POST /v1/tokens":                               "admin",
	"DELETE /v1/tokens/{id}":                        "admin",
	"POST /v1/recordings/{id}/shares":               "share",
	"GET /v1/recordings/{id}/shares":                "share",
	"DELETE /v1/recordings/{id}/shares/{sid}":       "share",
	"GET /v1/recordings/{id}/views":                 "admin",
	"GET /v1/recordings/{id}/comments":              "read",
	"POST /v1/recordings/{id}/comments":             "comment",
	"PATCH /v1/recordings/{id}/comments/{comment}":  "comment",
	"DELETE /v1/recordings/{id}/comments/{comment}": "comment",
	"GET /s/{secret}":                               "",
	"GET /healthz":                                  "",
	"GET /readyz":                                   "",
	"GET /v1/openapi.json":                          "",
	"GET /v1/attestation/key":                       "",
	"GET /":                                         "",
	"GET /r/{id}":                                   "",
	"GET /compare":                                  "",
	"GET /ui/*":                                     "",
}

// fixture is two projects' recordings sharing a frame's bytes.
type fixture struct {
	base       string
	app        *app.App
	rec        map[string]string // project → a finished recording
	shared     string            // the CID of the frame both recordings hold
	alphaOnly  string            // a CID only alpha's recording holds
	unknownRec string
	group      map[string]string // project → a group of its recording
	t0         map[string]int64  // project → its recording's first event time
	videoLink  string            // the secret of a video share link of alpha's recording
	snapshot   map[string]uint64 // project → the seq of its recording's snapshot event
}

// jpegOf is a small solid JPEG of colour c.
func jpegOf(t *testing.T, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 32, 24))
	for y := 0; y < 24; y++ {
		for x := 0; x < 32; x++ {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureLog(t, slog.New(slog.DiscardHandler))
}

// newFixtureLog is newFixture with its server logging to log.
func newFixtureLog(t *testing.T, log *slog.Logger) *fixture {
	t.Helper()
	a, base := serverLog(t, ingest.DefaultLimits, log)
	f := &fixture{base: base, app: a, rec: map[string]string{}, t0: map[string]int64{}, snapshot: map[string]uint64{}, unknownRec: store.NewRecordingID(time.Now()),
		group: map[string]string{}}
	shared := jpegOf(t, color.RGBA{200, 30, 30, 255})
	only := jpegOf(t, color.RGBA{30, 30, 200, 255})
	for _, project := range []string{"alpha", "beta"} {
		r := do(t, "POST", base+"/v1/recordings", []byte(`{"project":"`+project+`","flow":"checkout"}`))
		if r.status != http.StatusCreated {
			t.Fatalf("open: %d %s", r.status, r.body)
		}
		var open wire.OpenReply
		r.decode(t, &open)
		now := time.Now().UnixNano()
		frame := func(img []byte) json.RawMessage {
			b, _ := json.Marshal(event.Frame{Mime: "image/jpeg", Image: img, Width: 32, Height: 24})
			return b
		}
		evs := []event.Envelope{
			{Seq: 1, TS: now, Step: 1, Kind: event.KindReceipt, Data: json.RawMessage(`{"step":1,"action":{"verb":"click"},"outcome":"done"}`)},
			{Seq: 2, TS: now + 1, Step: 1, Kind: event.KindFrame, Data: frame(shared)},
		}
		if project == "alpha" {
			evs = append(evs, event.Envelope{Seq: 3, TS: now + 2, Step: 1, Kind: event.KindFrame, Data: frame(only)})
		}
		// A page (for the DOM route) and a console line every search
		// for "needle" finds in both projects.
		next := uint64(len(evs))
		evs = append(evs,
			event.Envelope{Seq: next + 1, TS: now + 3, Step: 1, Kind: event.KindDOM,
				Data: json.RawMessage(`{"type":4,"data":{"href":"http://shop.test/","width":32,"height":24},"timestamp":1764483600000}`)},
			event.Envelope{Seq: next + 2, TS: now + 4, Step: 1, Kind: event.KindDOM,
				Data: json.RawMessage(`{"type":2,"data":{"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":"html","attributes":{},"childNodes":[{"type":2,"id":3,"tagName":"body","attributes":{},"childNodes":[{"type":3,"id":4,"textContent":"` + project + `"}]}]}]},"initialOffset":{"left":0,"top":0}},"timestamp":1764483600001}`)},
			event.Envelope{Seq: next + 3, TS: now + 5, Step: 1, Kind: event.KindConsole, Data: json.RawMessage(`{"level":"log","text":"matrix needle"}`)},
			// A snapshot, for the snapshot-pages route.
			event.Envelope{Seq: next + 4, TS: now + 6, Step: 1, Kind: event.KindSnapshot, Data: json.RawMessage(`{"view":"interactive","when":"after","text":"button \"Pay\" @e1\n"}`)})
		f.snapshot[project] = next + 4
		f.t0[project] = now
		if a := acked(t, appendBatch(t, base, open.ID, evs)); a.AckedThrough != uint64(len(evs)) {
			t.Fatalf("append: %+v", a)
		}
		if r := do(t, "POST", base+"/v1/recordings/"+open.ID+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 200 {
			t.Fatalf("finish: %d %s", r.status, r.body)
		}
		waitIndexed(t, base, open.ID, uint64(len(evs)))
		f.rec[project] = open.ID
	}
	// A group of each project's recording, made before any token exists.
	for _, project := range []string{"alpha", "beta"} {
		r := do(t, "POST", base+"/v1/groups", []byte(`{"ids":["`+f.rec[project]+`"]}`))
		var g store.Group
		if r.status != http.StatusCreated {
			t.Fatalf("group: %d %s", r.status, r.body)
		}
		r.decode(t, &g)
		f.group[project] = g.ID
	}
	var err error
	// The CIDs, read back before any token exists.
	for _, project := range []string{"alpha", "beta"} {
		var page struct{ Events []event.Envelope }
		do(t, "GET", base+"/v1/recordings/"+f.rec[project]+"/events?kind=frame", nil).decode(t, &page)
		for _, e := range page.Events {
			var fr event.Frame
			_ = json.Unmarshal(e.Data, &fr)
			switch {
			case project == "beta":
				f.shared = fr.ImageCID
			case e.Seq == 3:
				f.alphaOnly = fr.ImageCID
			}
		}
	}
	if _, f.videoLink, err = a.Shares.Create(f.rec["alpha"], "alpha", "video", 0, "matrix"); err != nil {
		t.Fatal(err)
	}
	if f.shared == "" || f.alphaOnly == "" || f.shared == f.alphaOnly {
		t.Fatalf("fixture CIDs: shared %q, alpha only %q", f.shared, f.alphaOnly)
	}
	return f
}

// scopeSets is every non-empty combination of scopes.
func scopeSets() [][]string {
	var out [][]string
	for m := 1; m < 1<<len(policy.Scopes); m++ {
		var s []string
		for i, sc := range policy.Scopes {
			if m&(1<<i) != 0 {
				s = append(s, sc)
			}
		}
		out = append(out, s)
	}
	return out
}

// cell is one request of the matrix and what it must get.
type cell struct {
	name   string
	method string
	route  string
	url    string
	body   []byte
	// target is the project the request is about ("" for none, "?" for
	// an unknown recording); targets, of a request about several.
	target  string
	targets []string
}

// requests builds the requests of one route, about each project's
// recording and an unknown one where the route names a recording.
func (f *fixture) requests(method, route string) []cell {
	var out []cell
	add := func(name, target, path string, body []byte) {
		out = append(out, cell{name: name, method: method, route: route, url: f.base + path, body: body, target: target})
	}
	forRecs := func(suffix func(project, id string) string, body []byte) {
		for _, p := range []string{"alpha", "beta"} {
			add(p+" recording", p, suffix(p, f.rec[p]), body)
		}
		add("unknown recording", "?", suffix("", f.unknownRec), body)
	}
	switch method + " " + route {
	case "POST /v1/recordings":
		add("open in alpha", "alpha", "/v1/recordings", []byte(`{"project":"alpha"}`))
		add("open in beta", "beta", "/v1/recordings", []byte(`{"project":"beta"}`))
	case "POST /v1/recordings/{id}/events":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/events" },
			[]byte(`{"seq":99,"ts":1,"step":1,"kind":"console","data":{"level":"log","text":"x"}}`+"\n"))
	case "POST /v1/recordings/{id}/finish":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/finish" }, []byte(`{"verdict":"pass"}`))
	case "POST /v1/recordings/{id}/abort":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/abort" }, nil)
	case "GET /v1/recordings":
		add("list alpha", "alpha", "/v1/recordings?project=alpha", nil)
		add("list beta", "beta", "/v1/recordings?project=beta", nil)
		add("list all", "", "/v1/recordings", nil)
	case "GET /v1/recordings/{id}":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id }, nil)
	case "GET /v1/recordings/{id}/steps":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/steps" }, nil)
	case "GET /v1/recordings/{id}/steps/{n}":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/steps/1" }, nil)
	case "GET /v1/recordings/{id}/events":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/events" }, nil)
	case "GET /v1/recordings/{id}/redaction":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/redaction" }, nil)
	case "GET /v1/recordings/{id}/blobs/{cid}":
		// The shared frame through each recording, and alpha's own frame
		// through beta's recording (which does not reference it).
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/blobs/" + f.shared }, nil)
		add("alpha's blob via beta", "beta", "/v1/recordings/"+f.rec["beta"]+"/blobs/"+f.alphaOnly, nil)
	case "GET /v1/blobs/{cid}":
		add("bare shared blob", "", "/v1/blobs/"+f.shared, nil)
	case "GET /metrics":
		add("metrics", "", "/metrics", nil)
	case "GET /v1/tokens":
		add("list tokens", "", "/v1/tokens", nil)
	case "POST /v1/tokens":
		add("create token", "", "/v1/tokens", []byte(`{"project":"alpha","scopes":["read"]}`))
	case "DELETE /v1/tokens/{id}":
		add("revoke unknown token", "", "/v1/tokens/000000000000", nil)
	case "GET /v1/diff", "GET /v1/diff/group":
		q := func(x, y string) string { return "?a=" + x + "&b=" + y }
		if route == "/v1/diff/group" {
			q = func(x, y string) string { return "?id=" + x + "&id=" + y }
		}
		a, b := f.rec["alpha"], f.rec["beta"]
		for _, p := range []struct {
			name, x, y string
			targets    []string
		}{
			{"alpha with alpha", a, a, []string{"alpha", "alpha"}},
			{"alpha with beta", a, b, []string{"alpha", "beta"}},
			{"beta with beta", b, b, []string{"beta", "beta"}},
			{"alpha with unknown", a, f.unknownRec, []string{"alpha", "?"}},
		} {
			out = append(out, cell{name: p.name, method: method, route: route, url: f.base + route + q(p.x, p.y), targets: p.targets,
				target: map[bool]string{true: "?"}[p.targets[1] == "?"]})
		}
	case "POST /v1/groups":
		a, b := f.rec["alpha"], f.rec["beta"]
		for _, p := range []struct {
			name, x, y string
			targets    []string
		}{
			{"group alpha", a, a, []string{"alpha", "alpha"}},
			{"group alpha with beta", a, b, []string{"alpha", "beta"}},
			{"group beta", b, b, []string{"beta", "beta"}},
			{"group alpha with unknown", a, f.unknownRec, []string{"alpha", "?"}},
		} {
			out = append(out, cell{name: p.name, method: method, route: route, url: f.base + route, targets: p.targets,
				body:   []byte(`{"ids":["` + p.x + `","` + p.y + `"]}`),
				target: map[bool]string{true: "?"}[p.targets[1] == "?"]})
		}
	case "GET /v1/groups/{id}":
		for _, p := range []string{"alpha", "beta"} {
			out = append(out, cell{name: "group of " + p, method: method, route: route, url: f.base + "/v1/groups/" + f.group[p], targets: []string{p}})
		}
		out = append(out, cell{name: "unknown group", method: method, route: route, url: f.base + "/v1/groups/" + store.NewGroupID(time.Now()),
			targets: []string{"?"}, target: "?"})
	case "GET /v1/recordings/{id}/har":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/har" }, nil)
	case "GET /v1/recordings/{id}/rrweb":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/rrweb" }, nil)
	case "GET /v1/recordings/{id}/bundle":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/bundle" }, nil)
	case "GET /v1/recordings/{id}/attestation":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/attestation" }, nil)
	case "GET /v1/recordings/{id}/evidence":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/evidence?format=json" }, nil)
	case "POST /v1/recordings/{id}/evidence":
		// A card with share links: 201, three links made.
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/evidence" }, []byte(`{"share":"7d"}`))
	case "GET /v1/recordings/{id}/snapshots/{seq}":
		forRecs(func(p, id string) string { return fmt.Sprintf("/v1/recordings/%s/snapshots/%d", id, f.snapshot[p]) }, nil)
	case "GET /v1/recordings/{id}/steps/{n}/dom":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/steps/1/dom?at=after" }, nil)
	case "GET /v1/recordings/{id}/video.webm":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/video.webm" }, nil)
	case "GET /v1/recordings/{id}/at":
		forRecs(func(p, id string) string { return fmt.Sprintf("/v1/recordings/%s/at?t=%d", id, f.t0[p]+1) }, nil)
	case "GET /v1/recordings/{id}/search":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/search?q=needle" }, nil)
	case "GET /v1/search":
		add("search alpha", "alpha", "/v1/search?q=needle&project=alpha", nil)
		add("search beta", "beta", "/v1/search?q=needle&project=beta", nil)
		add("search all", "", "/v1/search?q=needle", nil)
	case "POST /v1/recordings/{id}/shares":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/shares" }, []byte(`{"expires_in":"1d","what":"video"}`))
	case "GET /v1/recordings/{id}/shares":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/shares" }, nil)
	case "DELETE /v1/recordings/{id}/shares/{sid}":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/shares/000000000000" }, nil)
	case "GET /v1/recordings/{id}/views":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/views" }, nil)
	case "GET /v1/recordings/{id}/comments":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/comments" }, nil)
	case "POST /v1/recordings/{id}/comments":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/comments" }, []byte(`{"step":1,"text":"matrix"}`))
	case "PATCH /v1/recordings/{id}/comments/{comment}":
		// No such comment: the handler's own 404 (COMMENT_NOT_FOUND).
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/comments/000000000000" }, []byte(`{"text":"x"}`))
	case "DELETE /v1/recordings/{id}/comments/{comment}":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/comments/000000000000" }, nil)
	case "GET /s/{secret}":
		// A live video link of alpha's recording: no token needed.
		add("video link", "", "/s/"+f.videoLink, nil)
	case "GET /v1/recordings/{id}/retention":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/retention" }, nil)
	case "POST /v1/recordings/{id}/pins":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/pins" }, []byte(`{"reason":"evidence","ref":"acme/shop#1"}`))
	case "DELETE /v1/recordings/{id}/pins/{pin}":
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/pins/pin_000000000000" }, nil)
	case "POST /v1/recordings/{id}/repair":
		// Not damaged: the handler runs and says so (409).
		forRecs(func(_, id string) string { return "/v1/recordings/" + id + "/repair" }, nil)
	case "POST /v1/retention/sweep":
		add("dry sweep", "", "/v1/retention/sweep?dry_run=true", nil)
	case "GET /v1/audit":
		add("audit log", "", "/v1/audit", nil)
	case "POST /v1/index/rebuild":
		add("index rebuild", "", "/v1/index/rebuild", nil)
	case "GET /healthz", "GET /readyz", "GET /v1/openapi.json", "GET /v1/attestation/key", "GET /", "GET /compare":
		add("public", "", route, nil)
	case "GET /r/{id}":
		// The player's page is the same for any id: it carries no data.
		add("player page", "", "/r/"+f.rec["alpha"], nil)
	case "GET /ui/*":
		add("player script", "", "/ui/common.js", nil)
	}
	return out
}

// token is one grant of the matrix.
type token struct {
	project string
	scopes  []string
	secret  string
}

func (tk token) has(scope string) bool {
	for _, s := range tk.scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// expect is the matrix's oracle: the status class a cell must get.
//
//	"pass"   the handler ran (not 401, 403, and not a hidden 404)
//	"401"    no valid token
//	"403"    refused, naming why
//	"hidden" 404 exactly like an unknown recording's
func expect(tk *token, c cell) string {
	need := routeScope[c.method+" "+c.route]
	switch {
	case need == "":
		return "pass"
	case tk == nil:
		return "401"
	case !tk.has(need):
		return "403"
	}
	all := tk.project == "*"
	switch {
	case len(c.targets) > 0:
		for _, p := range c.targets {
			if p == "?" || !(all || tk.project == p) {
				return "hidden"
			}
		}
		return "pass"
	case strings.Contains(c.route, "{id}") && strings.HasPrefix(c.route, "/v1/recordings/"):
		if c.target == "?" {
			return "hidden" // unknown: the handler's own 404, or the guard's identical one
		}
		if all || tk.project == c.target {
			return "pass"
		}
		return "hidden"
	case need == "admin":
		if all {
			return "pass"
		}
		return "403"
	case c.target == "":
		if all || c.method == "GET" { // a project's token lists its own project
			return "pass"
		}
		return "403"
	default:
		if all || tk.project == c.target {
			return "pass"
		}
		return "403"
	}
}

// TestAccessMatrix: two projects, a token for every scope combination for
// each project and for every project, every route with every method; each
// cell's status is checked against the oracle above, refusals of another
// project's recording must be byte-identical to an unknown recording's,
// and lists never show another project's recordings.
func TestAccessMatrix(t *testing.T) {
	f := newFixture(t)
	// Every route of the router must be in the matrix.
	var routes []string
	err := chi.Walk(f.app.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(routes)
	for _, r := range routes {
		if _, ok := routeScope[r]; !ok {
			t.Fatalf("route %s is not in the access matrix: add it to routeScope and requests", r)
		}
	}
	var toks []*token
	for _, p := range []string{"alpha", "beta", "*"} {
		for _, sc := range scopeSets() {
			sec, _, err := f.app.Tokens.Create(p, sc, 0, "matrix")
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, &token{project: p, scopes: sc, secret: sec})
		}
	}
	toks = append(toks, nil) // no token

	// What an unknown recording looks like, per route and method.
	admin := toks[len(toks)-2] // "*" with every scope
	unknown := map[string]reply{}
	wrong, cells := 0, 0
	for _, r := range routes {
		method, route, _ := strings.Cut(r, " ")
		reqs := f.requests(method, route)
		if len(reqs) == 0 {
			t.Fatalf("no requests for %s", r)
		}
		for _, c := range reqs {
			if c.target == "?" {
				unknown[r] = do(t, method, c.url, c.body, "Authorization", "Bearer "+admin.secret)
			}
		}
		for _, tk := range toks {
			for _, c := range reqs {
				cells++
				hdr := []string{}
				if tk != nil {
					hdr = []string{"Authorization", "Bearer " + tk.secret}
				}
				got := do(t, method, c.url, c.body, hdr...)
				want := expect(tk, c)
				if msg := checkCell(t, want, got, unknown[r], c); msg != "" {
					wrong++
					who := "no token"
					if tk != nil {
						who = fmt.Sprintf("token %s %v", tk.project, tk.scopes)
					}
					if wrong <= 30 {
						t.Errorf("%s, %s %s (%s): %s", who, method, route, c.name, msg)
					}
				}
				if c.method == "GET" && route == "/v1/search" && got.status == 200 {
					var res struct{ Hits []struct{ Recording string } }
					got.decode(t, &res)
					for _, h := range res.Hits {
						if tk != nil && tk.project != "*" && h.Recording != f.rec[tk.project] {
							wrong++
							t.Errorf("token for %s found recording %s (%s)", tk.project, h.Recording, c.name)
						}
					}
					if len(res.Hits) == 0 {
						wrong++
						t.Errorf("%s found nothing", c.name)
					}
				}
				if c.method == "GET" && route == "/v1/recordings" && got.status == 200 && tk != nil && tk.project != "*" {
					var list struct{ Recordings []store.RecordingRow }
					got.decode(t, &list)
					for _, rec := range list.Recordings {
						if rec.Project != tk.project {
							wrong++
							t.Errorf("token for %s listed a %s recording (%s)", tk.project, rec.Project, c.name)
						}
					}
				}
			}
		}
		// Every method a route does not have: 405, whoever asks.
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if _, ok := routeScope[m+" "+route]; ok {
				continue
			}
			path := reqs[0].url
			for _, tk := range []*token{nil, toks[0]} {
				cells++
				hdr := []string{}
				if tk != nil {
					hdr = []string{"Authorization", "Bearer " + tk.secret}
				}
				if got := do(t, m, path, nil, hdr...); got.status != http.StatusMethodNotAllowed {
					wrong++
					t.Errorf("%s %s: %d, want 405", m, route, got.status)
				}
			}
		}
	}
	t.Logf("%d cells, %d wrong, %d tokens, %d routes", cells, wrong, len(toks)-1, len(routes))
	if wrong > 0 {
		t.Fatalf("%d of %d cells wrong", wrong, cells)
	}
}

// checkCell says what is wrong with a reply, or "".
func checkCell(t *testing.T, want string, got, unknown reply, c cell) string {
	t.Helper()
	switch want {
	case "401":
		if got.status != http.StatusUnauthorized || !strings.HasPrefix(got.header.Get("WWW-Authenticate"), "Bearer") {
			return fmt.Sprintf("got %d (WWW-Authenticate %q), want 401 with a Bearer challenge", got.status, got.header.Get("WWW-Authenticate"))
		}
		got.errCode(t)
	case "403":
		if got.status != http.StatusForbidden {
			return fmt.Sprintf("got %d %s, want 403", got.status, short(got.body))
		}
		got.errCode(t)
	case "hidden":
		if got.status != http.StatusNotFound || !bytes.Equal(got.body, unknown.body) {
			return fmt.Sprintf("got %d %s, want the unknown recording's %d %s", got.status, short(got.body), unknown.status, short(unknown.body))
		}
	case "pass":
		if got.status == http.StatusUnauthorized || got.status == http.StatusForbidden {
			return fmt.Sprintf("got %d %s, want the handler's answer", got.status, short(got.body))
		}
		if c.name == "alpha's blob via beta" {
			if got.status != http.StatusNotFound {
				return fmt.Sprintf("a blob beta's recording does not reference: got %d, want 404", got.status)
			}
			return ""
		}
		if got.status == http.StatusNotFound && strings.Contains(string(got.body), "RECORDING_NOT_FOUND") {
			return "got RECORDING_NOT_FOUND for a recording the token may reach"
		}
		if strings.HasPrefix(c.method+" "+c.route, "GET ") && c.route != "/v1/recordings/{id}/steps/{n}" &&
			c.route != "/v1/tokens/{id}" && got.status != http.StatusOK {
			return fmt.Sprintf("got %d %s, want 200", got.status, short(got.body))
		}
	}
	return ""
}

func short(b []byte) string {
	if len(b) > 160 {
		return string(b[:160]) + "…"
	}
	return string(b)
}
