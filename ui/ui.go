// Package ui is the web player and the compare view: static pages and
// framework-free scripts embedded in the binary, which read everything
// through the public API (/v1/…) like any other client. No CDN, no
// build step, nothing fetched from anywhere but this server.
//
// Pages:
//
//	/                 the recordings list (filters, search)
//	/r/{id}?step=N    the player: steps, video, DOM, network, console,
//	                  receipt, snapshots, reports and evidence, in sync
//	/compare?a=&b=    two runs aligned, the first divergence highlighted
//	/ui/*             the scripts and styles
//
// The pages carry no data, so they need no token; the API calls they make
// do (a token pasted into the page is kept in sessionStorage and sent as
// a bearer header).
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

//go:embed static
var static embed.FS

// CSP is every page's policy: scripts and styles only from this server's
// files (no inline script), media and frames from this server or blob:
// URLs the scripts make, and the recorded DOM only ever inside a sandboxed
// frame (its own response carries a stricter policy still).
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
	"media-src 'self' blob:; frame-src 'self' blob:; connect-src 'self'; font-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Routes mounts the pages and their assets on r.
func Routes(r chi.Router) {
	files, _ := fs.Sub(static, "static")
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, err := fs.ReadFile(files, name)
			if err != nil {
				http.Error(w, "missing page", http.StatusInternalServerError)
				return
			}
			setHeaders(w.Header())
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(b)
		}
	}
	r.Get("/", page("index.html"))
	r.Get("/r/{id}", page("player.html"))
	r.Get("/compare", page("compare.html"))
	assets := http.StripPrefix("/ui/", http.FileServer(http.FS(files)))
	r.Get("/ui/*", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") || strings.HasSuffix(r.URL.Path, ".html") {
			http.NotFound(w, r) // pages only under their own routes
			return
		}
		setHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-cache")
		assets.ServeHTTP(w, r)
	})
}

func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// Public lists the page routes, which need no token (app.Guard).
var Public = []string{"/", "/r/{id}", "/compare", "/ui/*"}
