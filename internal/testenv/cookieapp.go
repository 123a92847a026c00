package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// CookieAppDoneTitle is the document title the cookie app's page sets once
// both of its fetches have been answered.
const CookieAppDoneTitle = "cookieapp: done"

// cookieAppPage fetches /api/me (the browser sends the cookies back),
// sends two analytics-style beacons to /collect that echo the cookies and
// the session, and then POSTs a form with a password it makes up itself, so that the
// password is never in a response body: it is a secret only the request
// carries. The page shows the outcome in its title.
const cookieAppPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>cookieapp</title></head>
<body><h1>cookie app</h1><pre id="out"></pre>
<script>
(async () => {
  const out = document.getElementById("out");
  try {
    const me = await fetch("/api/me", {headers: {"Accept": "application/json"}}).then(r => r.json());
    // Analytics-style beacons echo the cookies: URL-encoded inside a query
    // value (utmcc=__utma%3D…%3B…), and in a JSON body, plainly, base64'd
    // and with the session the page was told.
    const csrf = (document.cookie.match(/(?:^|; )csrf=([^;]*)/) || [])[1] || "";
    await fetch("/collect?v=1&utmcc=" + encodeURIComponent("__utma=" + csrf + ";+__utmz=1.2.3") + "&z=" + Date.now());
    await fetch("/collect", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({cookie: document.cookie, b64: btoa("c=" + csrf + "&s=" + me.session), s: me.session})});
    const pw = Array.from(crypto.getRandomValues(new Uint8Array(12)), b => b.toString(16).padStart(2, "0")).join("");
    const login = await fetch("/api/login", {
      method: "POST",
      headers: {"Content-Type": "application/x-www-form-urlencoded"},
      body: "user=buyer&password=" + encodeURIComponent(pw),
    });
    await login.text();
    out.textContent = "me: " + (me.session ? "yes" : "no") + ", login: " + login.status;
    document.title = login.ok && me.session ? "` + CookieAppDoneTitle + `" : "cookieapp: failed";
  } catch (e) {
    out.textContent = String(e);
    document.title = "cookieapp: failed";
  }
})();
</script></body></html>
`

// CookieApp starts a small app on 127.0.0.1 that hands out and receives
// secrets the way a real login page does. GET / sets two cookies with fresh
// random values (sid, HttpOnly; csrf) and serves a page whose script
// fetches /api/me, which answers {"session":"<sid>"} from the Cookie
// header, and then POSTs user=buyer&password=<random> to /api/login.
//
// issued returns every secret the app handed out or received: each cookie
// value it set and each password it was sent, so a test can search for
// them. The server closes on t.Cleanup.
func CookieApp(t testing.TB) (baseURL string, issued func() []string) {
	t.Helper()
	var (
		mu      sync.Mutex
		secrets []string
		seen    = map[string]bool{}
	)
	keep := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if s != "" && !seen[s] {
			seen[s] = true
			secrets = append(secrets, s)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		sid, csrf := randomHex(16), randomHex(12)
		keep(sid)
		keep(csrf)
		// Two Set-Cookie lines: CDP joins them with "\n" in one header.
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: sid, Path: "/", HttpOnly: true})
		http.SetCookie(w, &http.Cookie{Name: "csrf", Value: csrf, Path: "/"})
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(cookieAppPage))
	})
	mux.HandleFunc("GET /api/me", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("sid")
		if err != nil {
			http.Error(w, `{"error":"no session"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]string{"session": c.Value})
	})
	mux.HandleFunc("POST /api/login", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		pw := r.PostForm.Get("password")
		if pw == "" {
			http.Error(w, `{"error":"no password"}`, http.StatusBadRequest)
			return
		}
		keep(pw)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
	})
	mux.HandleFunc("/collect", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), secrets...)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
