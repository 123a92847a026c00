package sourcemap

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Defaults for a Resolver's zero fields.
const (
	DefaultMaxBytes   = 8 << 20 // the largest map fetched or decoded
	DefaultTimeout    = 10 * time.Second
	DefaultMaxEntries = 64 // maps (and failures) kept in the cache
)

// ErrNoMapping is returned by Resolver.MapFrame for a position the map
// does not cover.
var ErrNoMapping = errors.New("sourcemap: no mapping for the position")

// Frame is one stack frame as the Chrome DevTools Protocol reports it:
// URL is the script's URL, Line and Column are 0-based.
type Frame struct {
	Function string
	URL      string
	Line     int
	Column   int
}

// Resolver fetches the source maps scripts name, caches them per map URL
// (failures too) and maps frames through them. The zero value is ready to
// use; set the fields before the first call. A Resolver is safe for
// concurrent use, and concurrent calls for one map fetch it once.
type Resolver struct {
	// Client fetches http and https maps; nil means http.DefaultClient.
	Client *http.Client
	// MaxBytes caps a map's size, fetched or inline (default
	// DefaultMaxBytes).
	MaxBytes int64
	// Timeout bounds one fetch (default DefaultTimeout). A fetch runs to
	// its end even when the call that started it gives up on its context,
	// so that its result can be cached for the calls after it.
	Timeout time.Duration
	// MaxEntries caps how many maps and failures are cached (default
	// DefaultMaxEntries); past it, the oldest entry is dropped.
	MaxEntries int

	mu      sync.Mutex
	entries map[string]*entry
	order   []string // keys, oldest first
}

type entry struct {
	done chan struct{} // closed once m and err are set
	m    *Map
	err  error
}

// Load returns the map of a script, given the script's URL and its
// sourceMappingURL as Debugger.scriptParsed reports it: relative to the
// script's URL, absolute, or a data: URL (inline map, whose sources are
// then resolved against the script's URL). Only http, https and data maps
// are loaded. The result, map or error, is cached per map URL; a call that
// gives up because ctx ends returns ctx's error and caches nothing.
func (r *Resolver) Load(ctx context.Context, scriptURL, sourceMappingURL string) (*Map, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mapURL, base, key, err := locate(scriptURL, sourceMappingURL)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	e := r.entries[key]
	if e == nil {
		e = &entry{done: make(chan struct{})}
		r.add(key, e)
		go func() {
			defer close(e.done)
			e.m, e.err = r.fetch(context.WithoutCancel(ctx), mapURL, base)
		}()
	}
	r.mu.Unlock()
	select {
	case <-e.done:
		return e.m, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// add caches e under key, dropping the oldest entries past MaxEntries.
// r.mu is held.
func (r *Resolver) add(key string, e *entry) {
	if r.entries == nil {
		r.entries = map[string]*entry{}
	}
	r.entries[key] = e
	r.order = append(r.order, key)
	max := r.MaxEntries
	if max <= 0 {
		max = DefaultMaxEntries
	}
	for len(r.order) > max {
		delete(r.entries, r.order[0])
		r.order = r.order[1:]
	}
}

// MapFrame maps f (f.URL the script, 0-based position) through the map
// the script names in sourceMappingURL. The result has the original
// source's URL and 0-based position, and keeps f.Function: what a mapping
// names at a call site is the callee, not the function the frame is in
// (that name is in Position.Name, from Lookup). A position the map does
// not cover is an error wrapping ErrNoMapping.
func (r *Resolver) MapFrame(ctx context.Context, f Frame, sourceMappingURL string) (Frame, error) {
	m, err := r.Load(ctx, f.URL, sourceMappingURL)
	if err != nil {
		return Frame{}, err
	}
	p, ok := m.Lookup(f.Line, f.Column)
	if !ok {
		return Frame{}, fmt.Errorf("%w: %s:%d:%d (0-based)", ErrNoMapping, f.URL, f.Line, f.Column)
	}
	return Frame{Function: f.Function, URL: p.Source, Line: p.Line, Column: p.Column}, nil
}

// locate resolves a sourceMappingURL against the script's URL. It returns
// the map's URL, the URL its sources are relative to, and the cache key.
func locate(scriptURL, sourceMappingURL string) (mapURL *url.URL, base, key string, err error) {
	ref := strings.TrimSpace(sourceMappingURL)
	if ref == "" {
		return nil, "", "", errors.New("sourcemap: the script names no source map")
	}
	if isData(ref) {
		// An inline map: key it by its digest (with the script's URL, as
		// its sources resolve against it), not by its possibly long text.
		sum := sha256.Sum256([]byte(ref))
		return &url.URL{Scheme: "data", Opaque: ref[len("data:"):]}, scriptURL,
			"data:" + hex.EncodeToString(sum[:]) + " " + scriptURL, nil
	}
	u, err := url.Parse(ref)
	if err != nil {
		return nil, "", "", fmt.Errorf("sourcemap: sourceMappingURL %q: %w", ref, err)
	}
	if !u.IsAbs() {
		b, err := url.Parse(scriptURL)
		if err != nil || !b.IsAbs() || b.Opaque != "" {
			return nil, "", "", fmt.Errorf("sourcemap: relative sourceMappingURL %q of a script without a usable URL (%q)", ref, scriptURL)
		}
		u = b.ResolveReference(u)
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, "", "", fmt.Errorf("sourcemap: %s: scheme %q not allowed (only http, https and data)", u.Redacted(), u.Scheme)
	}
	u.Fragment, u.RawFragment = "", ""
	s := u.String()
	return u, s, s, nil
}

func isData(s string) bool {
	return len(s) >= 5 && strings.EqualFold(s[:5], "data:")
}

func (r *Resolver) fetch(ctx context.Context, u *url.URL, base string) (*Map, error) {
	max := r.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	var (
		data []byte
		err  error
		name string
	)
	if u.Scheme == "data" {
		name = "inline map"
		data, err = decodeData(u.Opaque, max)
	} else {
		name = u.Redacted()
		data, err = r.get(ctx, u, max)
	}
	if err != nil {
		return nil, fmt.Errorf("sourcemap: %s: %w", name, err)
	}
	m, err := Parse(data, base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

func (r *Resolver) get(ctx context.Context, u *url.URL, max int64) ([]byte, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	c := r.Client
	if c == nil {
		c = http.DefaultClient
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", res.StatusCode)
	}
	if res.ContentLength > max {
		return nil, fmt.Errorf("%d bytes, more than the %d allowed", res.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("more than the %d bytes allowed", max)
	}
	return data, nil
}

// decodeData decodes the part of a data: URL after "data:":
// [mediatype][;base64],payload.
func decodeData(s string, max int64) ([]byte, error) {
	meta, payload, ok := strings.Cut(s, ",")
	if !ok {
		return nil, errors.New("data URL without a comma")
	}
	if strings.HasSuffix(strings.ToLower(meta), ";base64") {
		payload = strings.TrimRight(payload, "=")
		if int64(base64.RawStdEncoding.DecodedLen(len(payload))) > max {
			return nil, fmt.Errorf("more than the %d bytes allowed", max)
		}
		data, err := base64.RawStdEncoding.DecodeString(payload)
		if err != nil {
			// Some writers percent-encode the base64 text.
			p, uerr := url.PathUnescape(payload)
			if uerr != nil {
				return nil, fmt.Errorf("bad base64: %w", err)
			}
			if data, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(p, "=")); err != nil {
				return nil, fmt.Errorf("bad base64: %w", err)
			}
		}
		return data, nil
	}
	if int64(len(payload)) > 3*max {
		return nil, fmt.Errorf("more than the %d bytes allowed", max)
	}
	data, err := url.PathUnescape(payload)
	if err != nil {
		return nil, fmt.Errorf("bad percent-encoding: %w", err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("more than the %d bytes allowed", max)
	}
	return []byte(data), nil
}
