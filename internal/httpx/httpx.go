// Package httpx is flightrec's one HTTP edge: JSON replies and error
// replies for every room.
package httpx

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/flightrec/flightrec/wire"
)

// Write sends err as the envelope.
func WriteError(w http.ResponseWriter, err error) {
	e := wire.From(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(wire.Envelope{Error: e})
}
