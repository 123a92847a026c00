// Package access is flightrec's access control: bearer tokens (issued once,
// kept only as hashes in the data directory) and the HTTP middleware that
// resolves a request's token, finds the project the request is about and
// asks the access policy (policy.Engine.Access, Rego) whether to let it
// through.
package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
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

// Tokens is the token file of a data directory. Its writers take the
// data directory's lock (a server holds it while it runs, so the CLI
// changes tokens through the server's API then), and each change re-reads
// the file first, under a mutex, so none is lost. A server also re-reads
// the file when its size or time changed, at most once a second, so a
// file replaced by other means (a restored backup) takes effect.
type Tokens struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	grants  map[string]*Grant
	stamp   fileStamp
	checked time.Time
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// OpenTokens opens the token file of data directory dir (it need not
// exist yet).
func OpenTokens(dir string) (*Tokens, error) {
	t := &Tokens{path: layout.Of(dir).Tokens(), now: time.Now, grants: map[string]*Grant{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(true); err != nil {
		return nil, err
	}
	return t, nil
}

// reload re-reads the file when it changed (or always, with force).
// Called with t.mu held.
func (t *Tokens) reload(force bool) error {
	fi, err := os.Stat(t.path)
	if errors.Is(err, os.ErrNotExist) {
		t.grants, t.stamp = map[string]*Grant{}, fileStamp{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	st := fileStamp{fi.Size(), fi.ModTime()}
	if !force && st == t.stamp {
		return nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	var list []*Grant
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("auth: %s is damaged: %w", t.path, err)
	}
	grants := make(map[string]*Grant, len(list))
	for _, g := range list {
		grants[g.ID] = g
	}
	t.grants, t.stamp = grants, st
	return nil
}

// fresh re-reads the file at most once a second. A failed re-read keeps
// the grants as they were (an unreadable file cannot grant anything new).
func (t *Tokens) fresh() {
	if now := time.Now(); now.Sub(t.checked) >= time.Second {
		t.checked = now
		_ = t.reload(false)
	}
}

// save writes every grant atomically (temp, fsync, rename, fsync dir),
// readable by the owner only. Called with t.mu held.
func (t *Tokens) save() error {
	list := make([]*Grant, 0, len(t.grants))
	for _, g := range t.grants {
		list = append(list, g)
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].CreatedAt < list[j].CreatedAt || list[i].CreatedAt == list[j].CreatedAt && list[i].ID < list[j].ID
	})
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o755); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := store.WriteFileAtomic(t.path, b, 0o600); err != nil {
		return fmt.Errorf("auth: writing %s: %w", t.path, err)
	}
	if fi, err := os.Stat(t.path); err == nil {
		t.stamp = fileStamp{fi.Size(), fi.ModTime()}
	}
	return nil
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
	if err := t.reload(true); err != nil {
		return "", Grant{}, err
	}
	t.grants[id] = &g
	if err := t.save(); err != nil {
		delete(t.grants, id)
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
	if err := t.reload(true); err != nil {
		return Grant{}, err
	}
	g := t.grants[id]
	if g == nil {
		return Grant{}, ErrNoGrant
	}
	if g.RevokedAt == 0 {
		g.RevokedAt = t.now().UnixNano()
		if err := t.save(); err != nil {
			g.RevokedAt = 0
			return Grant{}, err
		}
	}
	return *g, nil
}

// List returns every grant, oldest first.
func (t *Tokens) List() []Grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fresh()
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
	t.fresh()
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
	t.fresh()
	g := t.grants[id]
	var cp Grant
	if g != nil {
		cp = *g
	}
	t.mu.Unlock()
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
