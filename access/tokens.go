// Package access is flightrec's access control: bearer tokens (issued once,
// kept only as hashes in the data directory) and the HTTP middleware that
// resolves a request's token, finds the project the request is about and
// asks the access policy (policy.Engine.Access, Rego) whether to let it
// through.
package access

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/statedoc"
)

// TokensFile is the token file's name in the data directory.
var TokensFile = filepath.Base(layout.Of("").Tokens())

// MaxTokenLen bounds a presented token: a longer one is refused before it
// is parsed or hashed.
const MaxTokenLen = 128

// A token is "frt_" + 12 hex characters of id + "_" + 43 characters of
// base64url secret (32 random bytes). The id finds the grant; only the
// SHA-256 of the secret is stored.
const (
	tokenPrefix = "frt_"
	idLen       = 12
	secretLen   = 43
)

// Grant is a stored token: what it allows, never the secret.
type Grant struct {
	ID        string   `json:"id"`
	Hash      string   `json:"sha256,omitempty"` // hex SHA-256 of the secret
	Project   string   `json:"project"`
	Scopes    []string `json:"scopes"`
	Note      string   `json:"note,omitempty"`
	CreatedAt int64    `json:"created_at"`           // unix ns
	ExpiresAt int64    `json:"expires_at,omitempty"` // unix ns; 0 never
	RevokedAt int64    `json:"revoked_at,omitempty"` // unix ns; 0 not revoked
}

// Active says whether the grant may be used at now.
func (g *Grant) Active(now time.Time) bool {
	return g.RevokedAt == 0 && (g.ExpiresAt == 0 || now.UnixNano() < g.ExpiresAt)
}

// Claims is the grant as the access policy sees it.
func (g *Grant) Claims() policy.Claims {
	return policy.Claims{ID: g.ID, Project: g.Project, Scopes: g.Scopes}
}

// Errors of token checks. Their messages never hold a token.
var (
	ErrMalformed = errors.New("the token is not a flightrec token")
	ErrUnknown   = errors.New("the token is not valid")
	ErrRevoked   = errors.New("the token was revoked")
	ErrExpired   = errors.New("the token has expired")
	// ErrNoGrant is a revoke of a token that does not exist.
	ErrNoGrant = errors.New("auth: no such token")
	// ErrBadRequest is a token request that cannot be granted as asked.
	ErrBadRequest = errors.New("auth: bad token request")
)

// Tokens is the token list: a file in the data directory (the single-node
// default) or one object in the deployment's object store (shared mode),
// given as a statedoc.Doc. Each change re-reads the list and writes it
// back through the Doc, which keeps a concurrent writer's change (a
// mutex for the file, whose writers also take the data directory's lock;
// a conditional put on the object's ETag across nodes).
//
// A server re-reads the list at most once a second, and at once (at most
// every 100 ms) for a token it does not know, so a token created or
// revoked through another node, or a file restored from a backup, takes
// effect within about a second. In shared mode a list that could not be
// re-read for longer than MaxStale stops verifying tokens
// (ErrStateUnavailable): a revocation is never ignored for longer.
type Tokens struct {
	doc statedoc.Doc
	now func() time.Time

	mu      sync.Mutex
	grants  map[string]*Grant
	raw     []byte    // the bytes grants were parsed from
	checked time.Time // last re-read tried
	loaded  time.Time // last re-read that succeeded
}

// MaxStale is how long a shared token list that cannot be re-read is
// still trusted: past it, Verify answers ErrStateUnavailable.
const MaxStale = 2 * time.Second

// readTimeout bounds one re-read of the token list.
const readTimeout = time.Second

// ErrStateUnavailable: the shared token list could not be read lately, so
// no token is verified (the answer is 503: try again).
var ErrStateUnavailable = errors.New("the shared token list cannot be read right now")

// OpenTokens opens the token file of data directory dir (it need not
// exist yet).
func OpenTokens(dir string) (*Tokens, error) {
	return NewTokens(statedoc.File(layout.Of(dir).Tokens(), 0o600))
}

// NewTokens opens the token list kept in doc.
func NewTokens(doc statedoc.Doc) (*Tokens, error) {
	t := &Tokens{doc: doc, now: time.Now, grants: map[string]*Grant{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload re-reads the list. Called with t.mu held.
func (t *Tokens) reload() error {
	t.checked = time.Now()
	// Bounded: token checks wait on this re-read (an object store that
	// hangs must not hang every request).
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	b, err := t.doc.Read(ctx)
	if err != nil {
		return fmt.Errorf("auth: reading the token list: %w", err)
	}
	if err := t.use(b); err != nil {
		return err
	}
	t.loaded = t.checked
	return nil
}

// use makes b the grants (parsing it only when it changed).
func (t *Tokens) use(b []byte) error {
	if t.raw != nil && bytes.Equal(b, t.raw) {
		return nil
	}
	grants, err := parseGrants(b)
	if err != nil {
		return err
	}
	t.grants, t.raw = grants, b
	return nil
}

func parseGrants(b []byte) (map[string]*Grant, error) {
	var list []*Grant
	if len(b) > 0 {
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("auth: the token list is damaged: %w", err)
		}
	}
	grants := make(map[string]*Grant, len(list))
	for _, g := range list {
		grants[g.ID] = g
	}
	return grants, nil
}

// fresh re-reads the list when the last read is a second old, or (miss)
// 100 ms old for a token id not in it. A failed re-read keeps the grants
// as they were (an unreadable list cannot grant anything new); in shared
// mode fresh then answers ErrStateUnavailable once they are MaxStale old.
// Called with t.mu held.
func (t *Tokens) fresh(miss bool) error {
	now := time.Now()
	if age := now.Sub(t.checked); age >= time.Second || miss && age >= 100*time.Millisecond {
		_ = t.reload()
	}
	if t.doc.Shared() && now.Sub(t.loaded) > MaxStale {
		return ErrStateUnavailable
	}
	return nil
}

// change applies fn to the current grants and writes them back through
// the Doc (fn may run again when another node wrote first). Called with
// t.mu held.
func (t *Tokens) change(fn func(grants map[string]*Grant) error) error {
	var written []byte
	err := t.doc.Update(context.Background(), func(old []byte) ([]byte, error) {
		grants, err := parseGrants(old)
		if err != nil {
			return nil, err
		}
		if err := fn(grants); err != nil {
			return nil, err
		}
		written, err = marshalGrants(grants)
		return written, err
	})
	if err != nil {
		return fmt.Errorf("auth: writing the token list: %w", err)
	}
	t.checked = time.Now()
	t.loaded = t.checked
	return t.use(written)
}

func marshalGrants(grants map[string]*Grant) ([]byte, error) {
	list := make([]*Grant, 0, len(grants))
	for _, g := range grants {
		list = append(list, g)
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].CreatedAt < list[j].CreatedAt || list[i].CreatedAt == list[j].CreatedAt && list[i].ID < list[j].ID
	})
	return json.MarshalIndent(list, "", "  ")
}

// Create issues a token for project (or policy.AllProjects) with scopes,
// valid for ttl (0: until revoked). The token is returned once; only its
// hash is kept.
func (t *Tokens) Create(project string, scopes []string, ttl time.Duration, note string) (token string, g Grant, err error) {
	if project == "" {
		return "", g, fmt.Errorf("%w: a token needs a project (or * for every project)", ErrBadRequest)
	}
	if len(scopes) == 0 {
		return "", g, fmt.Errorf("%w: a token needs at least one scope", ErrBadRequest)
	}
	var sc []string
	for _, s := range scopes {
		s = strings.TrimSpace(s)
		if !slices.Contains(policy.Scopes, s) {
			return "", g, fmt.Errorf("%w: unknown scope %q (want %s)", ErrBadRequest, s, strings.Join(policy.Scopes, ", "))
		}
		if !slices.Contains(sc, s) {
			sc = append(sc, s)
		}
	}
	sort.Strings(sc)
	var idb [idLen / 2]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", g, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", g, err
	}
	id := hex.EncodeToString(idb[:])
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	now := t.now()
	g = Grant{ID: id, Hash: hashSecret(sec), Project: project, Scopes: sc, Note: note, CreatedAt: now.UnixNano()}
	if ttl > 0 {
		g.ExpiresAt = now.Add(ttl).UnixNano()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.change(func(grants map[string]*Grant) error { grants[id] = &g; return nil }); err != nil {
		return "", Grant{}, err
	}
	return tokenPrefix + id + "_" + sec, g, nil
}

// TokenID is the grant id of s, a token or already an id.
func TokenID(s string) string {
	if strings.HasPrefix(s, tokenPrefix) {
		if id, _, ok := parse(s); ok {
			return id
		}
	}
	return s
}

// Revoke revokes the grant id (a token's id, or the token itself).
func (t *Tokens) Revoke(id string) (Grant, error) {
	id = TokenID(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	var out Grant
	err := t.change(func(grants map[string]*Grant) error {
		g := grants[id]
		if g == nil {
			return ErrNoGrant
		}
		if g.RevokedAt == 0 {
			g.RevokedAt = t.now().UnixNano()
		}
		out = *g
		return nil
	})
	if errors.Is(err, ErrNoGrant) {
		return Grant{}, ErrNoGrant
	}
	return out, err
}

// List returns every grant, oldest first.
func (t *Tokens) List() []Grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.fresh(false)
	out := make([]Grant, 0, len(t.grants))
	for _, g := range t.grants {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out
}

// Empty says whether no grant exists at all (revoked ones count: a server
// that had tokens does not fall back to anonymous access).
func (t *Tokens) Empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.fresh(false)
	return len(t.grants) == 0
}

// Verify checks a presented token and returns its grant. The secret's
// hash is compared in constant time; the id only selects the grant.
func (t *Tokens) Verify(token string) (Grant, error) {
	if len(token) > MaxTokenLen {
		return Grant{}, ErrMalformed
	}
	id, sec, ok := parse(token)
	if !ok {
		return Grant{}, ErrMalformed
	}
	t.mu.Lock()
	stale := t.fresh(false)
	if t.grants[id] == nil {
		stale = t.fresh(true)
	}
	g := t.grants[id]
	var cp Grant
	if g != nil {
		cp = *g
	}
	t.mu.Unlock()
	if stale != nil {
		return Grant{}, stale
	}
	// Hash and compare even for an unknown id, so both cost the same.
	var want [sha256.Size]byte
	if g != nil {
		_, _ = hex.Decode(want[:], []byte(cp.Hash))
	}
	got := sha256.Sum256([]byte(sec))
	if compareHashes(got[:], want[:]) != 1 || g == nil {
		return Grant{}, ErrUnknown
	}
	switch now := t.now(); {
	case cp.RevokedAt != 0:
		return Grant{}, ErrRevoked
	case cp.ExpiresAt != 0 && now.UnixNano() >= cp.ExpiresAt:
		return Grant{}, ErrExpired
	}
	return cp, nil
}

// parse splits a token into id and secret, checking its shape.
func parse(token string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok || len(rest) != idLen+1+secretLen || rest[idLen] != '_' {
		return "", "", false
	}
	id, secret = rest[:idLen], rest[idLen+1:]
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", "", false
		}
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", "", false
		}
	}
	// 43 characters of base64url carry 258 bits: the last one holds 2 bits
	// of the 32 bytes and 4 zero bits, as Create writes it.
	if strings.IndexByte("AEIMQUYcgkosw048", secret[len(secret)-1]) < 0 {
		return "", "", false
	}
	return id, secret, true
}

// compareHashes compares two digests in time independent of where they
// differ; tests replace it to see that every check goes through it.
var compareHashes = subtle.ConstantTimeCompare

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}
