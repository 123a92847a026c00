package audit

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/wire"
)

// Page is the answer of GET /v1/audit. NextAfter is the number of the last
// entry in Entries, or the request's after when there is none: ask again
// with after=NextAfter until it reaches Head.N. Each entry is served in its
// canonical encoding, byte for byte its line in the log, so a client can
// check a page with Entry.ComputeHash, n and prev as Verify does.
type Page struct {
	Entries   []Entry `json:"entries"`
	Head      Head    `json:"head"`
	NextAfter uint64  `json:"next_after"`
}

// Routes mounts the audit log (an admin route, by the access policy):
//
//	GET /v1/audit?after=N&limit=M   entries after entry N (default 0), at most M (1–1000, default 100)
//
// Error replies go through edge.
func Routes(r chi.Router, l *Log, edge *httpx.Edge) {
	r.Get(wire.RouteAudit, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var after uint64
		if s := q.Get("after"); s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST",
					"send after as an entry number (0 for the first page)", "after is not an entry number"))
				return
			}
			after = n
		}
		limit := DefaultPageSize
		if s := q.Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > MaxPageSize {
				edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST",
					"send limit between 1 and 1000", "limit is not a number between 1 and %d", MaxPageSize))
				return
			}
			limit = n
		}
		entries, head, err := l.page(after, limit)
		if err != nil {
			var p *Problem
			if errors.As(err, &p) {
				edge.Fail(w, r, httpx.Because(wire.New(http.StatusInternalServerError, "AUDIT_LOG_CORRUPT",
					"verify DATA/audit.log; the server log has the error",
					"the audit log fails verification at line %d", p.Line), err))
				return
			}
			edge.Fail(w, r, err)
			return
		}
		next := after
		if len(entries) > 0 {
			next = entries[len(entries)-1].N
		}
		// Verbatim: the entries keep their canonical bytes.
		httpx.JSON(w, http.StatusOK, Page{Entries: entries, Head: head, NextAfter: next}, httpx.NoStore, httpx.NoSniff, httpx.Verbatim)
	})
}
