package sourcemap

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// mapServer serves hand at /static/app.min.js.map and counts the
// requests for each path; /slow answers only when the request ends.
type mapServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newMapServer(t *testing.T) *mapServer {
	t.Helper()
	s := &mapServer{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		switch r.URL.Path {
		case "/static/app.min.js.map", "/maps/app.js.map":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(hand))
		case "/bad.map":
			_, _ = w.Write([]byte(`{"version":2}`))
		case "/slow.map":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *mapServer) hitsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func TestResolverLoad(t *testing.T) {
	srv := newMapServer(t)
	script := srv.URL + "/static/app.min.js"
	inline := "data:application/json;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte(hand))
	for _, c := range []struct {
		name, script, ref, wantSource string
	}{
		{"relative", script, "app.min.js.map", srv.URL + "/static/b.js"},
		{"relative up", script, "../maps/app.js.map?v=1#x", srv.URL + "/maps/b.js"},
		{"rooted", script, "/maps/app.js.map", srv.URL + "/maps/b.js"},
		{"absolute", "https://elsewhere.example/x.js", srv.URL + "/static/app.min.js.map", srv.URL + "/static/b.js"},
		{"inline base64", script, inline, srv.URL + "/static/b.js"},
		{"inline base64 unpadded", script, strings.TrimRight(inline, "="), srv.URL + "/static/b.js"},
		{"inline percent-encoded", script, "data:application/json," + url.PathEscape(hand), srv.URL + "/static/b.js"},
	} {
		var r Resolver
		m, err := r.Load(context.Background(), c.script, c.ref)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if p, ok := m.Lookup(2, 6); !ok || p != (Position{c.wantSource, 1, 16, "foo"}) {
			t.Errorf("%s: Lookup(2, 6) = %+v, %v; want %s 1:16 foo", c.name, p, ok, c.wantSource)
		}
	}
}

func TestResolverErrors(t *testing.T) {
	srv := newMapServer(t)
	script := srv.URL + "/static/app.min.js"
	for _, c := range []struct {
		name, script, ref, want string
		malformed               bool
	}{
		{"no map", script, "", "names no source map", false},
		{"404", script, "missing.map", "HTTP 404", false},
		{"wrong version", script, "/bad.map", `"version" is 2, want 3`, true},
		{"file scheme", script, "file:///etc/passwd", `scheme "file" not allowed`, false},
		{"relative to a file script", "file:///tmp/app.js", "app.js.map", `scheme "file" not allowed`, false},
		{"relative without a script URL", "", "app.js.map", "without a usable URL", false},
		{"javascript scheme", script, "javascript:alert(1)", `scheme "javascript" not allowed`, false},
		{"data without comma", script, "data:application/json;base64", "without a comma", false},
		{"data bad base64", script, "data:application/json;base64,!!!!", "bad base64", false},
		{"data malformed map", script, "data:application/json,{}", `inline map: sourcemap: malformed source map: no "version"`, true},
	} {
		var r Resolver
		_, err := r.Load(context.Background(), c.script, c.ref)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrMalformed) != c.malformed {
			t.Errorf("%s: %v; want %q (malformed %v)", c.name, err, c.want, c.malformed)
		}
	}
}

func TestResolverSizeCap(t *testing.T) {
	srv := newMapServer(t)
	r := Resolver{MaxBytes: int64(len(hand) - 1)}
	if _, err := r.Load(context.Background(), srv.URL+"/x.js", "/static/app.min.js.map"); err == nil || !strings.Contains(err.Error(), "allowed") {
		t.Errorf("over the cap over HTTP: %v", err)
	}
	inline := "data:application/json;base64," + base64.StdEncoding.EncodeToString([]byte(hand))
	if _, err := r.Load(context.Background(), srv.URL+"/x.js", inline); err == nil || !strings.Contains(err.Error(), "allowed") {
		t.Errorf("over the cap inline: %v", err)
	}
	r = Resolver{MaxBytes: int64(len(hand))}
	if _, err := r.Load(context.Background(), srv.URL+"/x.js", "/static/app.min.js.map"); err != nil {
		t.Errorf("at the cap: %v", err)
	}
}

// A map, or a failure, is fetched once per map URL, however many callers
// ask at once; a failure is cached like a map.
func TestResolverCaches(t *testing.T) {
	srv := newMapServer(t)
	var r Resolver
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < 16; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Two scripts naming one map: one fetch.
			script := srv.URL + "/static/app.min.js"
			if i%2 == 1 {
				script = srv.URL + "/static/other.js"
			}
			if _, err := r.Load(context.Background(), script, "app.min.js.map"); err != nil {
				failed.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := r.Load(context.Background(), srv.URL+"/x.js", "/missing.map"); err == nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d loads went wrong", failed.Load())
	}
	if a, b := srv.hitsOf("/static/app.min.js.map"), srv.hitsOf("/missing.map"); a != 1 || b != 1 {
		t.Errorf("fetches: the map %d, the missing map %d; want 1 each", a, b)
	}
}

func TestResolverEvicts(t *testing.T) {
	srv := newMapServer(t)
	r := Resolver{MaxEntries: 1}
	for _, ref := range []string{"/static/app.min.js.map", "/maps/app.js.map", "/static/app.min.js.map"} {
		if _, err := r.Load(context.Background(), srv.URL+"/x.js", ref); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.hitsOf("/static/app.min.js.map"); n != 2 {
		t.Errorf("the first map was fetched %d times; want 2, as it was dropped for the second", n)
	}
	if len(r.entries) != 1 || len(r.order) != 1 {
		t.Errorf("cache holds %d entries, %d keys", len(r.entries), len(r.order))
	}
}

// A caller whose context ends gets its context's error, while the fetch
// it started goes on and is cached for the next caller.
func TestResolverCallerGivesUp(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		close(arrived)
		<-release
		_, _ = w.Write([]byte(hand))
	}))
	defer srv.Close()
	var r Resolver
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Load(ctx, srv.URL+"/x.js", "x.js.map")
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that gave up: %v", err)
	}
	close(release)
	m, err := r.Load(context.Background(), srv.URL+"/x.js", "x.js.map")
	if err != nil || m == nil || hits.Load() != 1 {
		t.Errorf("the next caller: %v, %v after %d fetches", m, err, hits.Load())
	}
	if _, err := r.Load(ctx, srv.URL+"/x.js", "x.js.map"); !errors.Is(err, context.Canceled) {
		t.Errorf("a caller whose context has ended: %v", err)
	}
}

// A fetch that takes longer than the Resolver's Timeout fails, and the
// failure is cached.
func TestResolverTimeout(t *testing.T) {
	srv := newMapServer(t)
	r := Resolver{Timeout: 1} // 1ns: the fetch's deadline passes at once
	for range 2 {
		if _, err := r.Load(context.Background(), srv.URL+"/x.js", "/slow.map"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("past the fetch's timeout: %v", err)
		}
	}
	if n := srv.hitsOf("/slow.map"); n > 1 {
		t.Errorf("%d fetches; want at most 1", n)
	}
}

func TestResolverClient(t *testing.T) {
	var used atomic.Bool
	client := &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
		used.Store(true)
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
	})}
	r := Resolver{Client: client}
	_, err := r.Load(context.Background(), "https://shop.example/app.js", "app.js.map")
	if !used.Load() || !errors.Is(err, ErrMalformed) {
		t.Errorf("client used %v, err %v", used.Load(), err)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestMapFrame(t *testing.T) {
	srv := newMapServer(t)
	var r Resolver
	script := srv.URL + "/static/app.min.js"
	for _, c := range []struct {
		in   Frame
		want Frame
		err  error
	}{
		{Frame{"n", script, 2, 7}, Frame{"n", srv.URL + "/static/b.js", 1, 16}, nil},
		{Frame{"", script, 0, 12}, Frame{"", srv.URL + "/static/a.js", 0, 10}, nil},
		{Frame{"n", script, 1, 0}, Frame{}, ErrNoMapping},
		{Frame{"n", script, 9, 0}, Frame{}, ErrNoMapping},
	} {
		got, err := r.MapFrame(context.Background(), c.in, "app.min.js.map")
		if got != c.want || !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("MapFrame(%+v) = %+v, %v; want %+v, %v", c.in, got, err, c.want, c.err)
		}
	}
	if _, err := r.MapFrame(context.Background(), Frame{URL: script}, "nope.map"); err == nil || errors.Is(err, ErrNoMapping) {
		t.Errorf("a map that does not load: %v", err)
	}
}
