package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/flightrec/flightrec/wire"
)

// maxAPIBody bounds one read API reply this client reads (an events page
// of 1,000 events with HAR bodies at their 64 KiB cap fits).
const maxAPIBody = 96 << 20

// api is the read API as this server calls it: GETs with the bearer token,
// error envelopes turned into *wire.Error.
type api struct {
	base  string
	token string
	http  *http.Client
}

// get fetches path (with its query) and returns the body.
func (a *api) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := a.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		// The error names the URL, never the token (it is in a header).
		return nil, wire.New(0, "UNREACHABLE", "check that flightrec serve runs at "+a.base, "%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxAPIBody {
		return nil, wire.New(0, "REPLY_TOO_LARGE", "ask for a smaller page", "the server's reply to %s is over %d bytes", path, maxAPIBody)
	}
	if resp.StatusCode/100 != 2 {
		return nil, wire.Decode(resp.StatusCode, body)
	}
	return body, nil
}

// getJSON fetches path and decodes its JSON reply into v.
func (a *api) getJSON(ctx context.Context, path string, q url.Values, v any) error {
	body, err := a.get(ctx, path, q)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}
