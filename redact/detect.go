package redact

import (
	"bytes"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/flightrec/flightrec/policy"
)

// This file holds the secret detectors and the plan's other compiled
// matchers (parameter, header, cookie and key sets, masked names).
//
// Detectors run on every string of every event, so each is a hand-written
// scanner behind a cheap gate (an IndexByte / Index for a fixed prefix, or
// one pass over the bytes with a class table); no regular expression runs
// over event text. On text with nothing to find, scan returns nil without
// allocating.
//
// The same scan runs over an event's raw JSON as the fast path's pre-filter
// (foundRaw). Escaping leaves what the detectors look for readable, except
// a \u escape of a printable ASCII character or an escaped '/', and the
// fast path sends every event with one of those to the slow path
// (rawEscapeHides).

// dspan is a detected secret: s[start:end], found by detector rule.
type dspan struct {
	start, end int
	rule       string
}

// Detector names (policy.Plan.Detectors).
const (
	detJWT     = "jwt"
	detPEM     = "pem"
	detAWS     = "aws"
	detGitHub  = "github"
	detSlack   = "slack"
	detGeneric = "generic"
	detCard    = "card"
)

// detPriority orders detectors when their spans overlap: the more specific
// rule names the merged span.
var detPriority = map[string]int{detPEM: 0, detJWT: 1, detAWS: 2, detGitHub: 3, detSlack: 4, detCard: 5, detGeneric: 6}

// detectors is the plan compiled for matching: the detectors to run and the
// sets and patterns the HAR and text redactors test names against. It keeps
// two small caches (masked-name verdicts, encodings of known values), so like
// the Redactor it is not safe for concurrent use.
type detectors struct {
	jwt, pem, aws, github, slack, generic, card bool
	entropy                                     float64

	dropHeaders map[string]bool
	dropCookies map[string]bool // exact names; allCookies for "*"
	allCookies  bool
	dropParams  map[string]bool
	secretKeys  map[string]string // normalized (lowercase, no '_' '-') -> plan entry
	keyLens     uint64            // bit n: some secret key has length n
	keyFirst    [4]uint64         // bit c: some secret key starts with byte c
	dropMimes   []string
	selectors   map[string]bool

	maskName  *regexp.Regexp // MaskNamePatterns, case-insensitive; nil if none
	nameCache map[string]bool
	// maskedRefs are snapshot refs ("@e4") of fields seen masked, so a
	// receipt aimed at the ref alone is recognised.
	maskedRefs map[string]bool
	// refs are every ref a snapshot showed, true when its field is masked
	// (target.go resolves fills and checks through them).
	refs map[string]bool
	// knownForms caches the JSON-escaped and percent-encoded spellings of
	// known values for the fast path's raw check.
	knownForms map[string][]string
	// known indexes the known values once there are many (known.go).
	known knownIdx
}

func newDetectors(plan *policy.Plan) (*detectors, error) {
	d := &detectors{
		entropy:     plan.EntropyThreshold,
		dropHeaders: map[string]bool{},
		dropCookies: map[string]bool{},
		dropParams:  map[string]bool{},
		secretKeys:  map[string]string{},
		selectors:   map[string]bool{},
		nameCache:   map[string]bool{},
		maskedRefs:  map[string]bool{},
		refs:        map[string]bool{},
		knownForms:  map[string][]string{},
	}
	if d.entropy <= 0 {
		d.entropy = 3.5
	}
	for _, n := range plan.Detectors {
		switch strings.ToLower(n) {
		case detJWT:
			d.jwt = true
		case detPEM:
			d.pem = true
		case detAWS:
			d.aws = true
		case detGitHub:
			d.github = true
		case detSlack:
			d.slack = true
		case detGeneric:
			d.generic = true
		case detCard:
			d.card = true
		default:
			// Fail closed: a plan asking for a detector this build lacks
			// must not silently record without it.
			return nil, fmt.Errorf("redact: unknown detector %q", n)
		}
	}
	for _, h := range plan.DropHeaders {
		d.dropHeaders[strings.ToLower(h)] = true
	}
	for _, c := range plan.DropCookies {
		if c == "*" {
			d.allCookies = true
		}
		d.dropCookies[c] = true
	}
	for _, p := range plan.DropParams {
		d.dropParams[strings.ToLower(p)] = true
	}
	for _, k := range plan.SecretKeys {
		nk := normKey(k)
		if nk == "" {
			continue
		}
		d.secretKeys[nk] = strings.ToLower(k)
		if len(nk) < 64 {
			d.keyLens |= 1 << len(nk)
		}
		d.keyFirst[nk[0]>>6] |= 1 << (nk[0] & 63)
	}
	for _, m := range plan.DropBodyMimes {
		d.dropMimes = append(d.dropMimes, strings.ToLower(m))
	}
	for _, s := range plan.MaskSelectors {
		d.selectors[strings.TrimSpace(s)] = true
	}
	if len(plan.MaskNamePatterns) > 0 {
		parts := make([]string, len(plan.MaskNamePatterns))
		for i, p := range plan.MaskNamePatterns {
			if _, err := regexp.Compile(p); err != nil {
				return nil, fmt.Errorf("redact: mask name pattern %d: %w", i, err)
			}
			parts[i] = "(?:" + p + ")"
		}
		re, err := regexp.Compile("(?i)" + strings.Join(parts, "|"))
		if err != nil {
			return nil, fmt.Errorf("redact: mask name patterns: %w", err)
		}
		d.maskName = re
	}
	return d, nil
}

// normKey lowercases k and removes '_' and '-', as SecretKeys are matched.
func normKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '_' || c == '-' {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// normKeyBuf is normKey into a caller's buffer (no allocation); ok is false
// when k does not fit.
func normKeyBuf(buf []byte, k string) ([]byte, bool) {
	n := 0
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '_' || c == '-' {
			continue
		}
		if n == len(buf) {
			return nil, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	return buf[:n], true
}

// isSecretKey: a normalized key is one of the SecretKeys. A length and
// first-byte check spares most map lookups.
func (d *detectors) isSecretKey(k []byte) bool {
	if len(k) == 0 || len(k) >= 64 || d.keyLens&(1<<len(k)) == 0 || d.keyFirst[k[0]>>6]&(1<<(k[0]&63)) == 0 {
		return false
	}
	_, ok := d.secretKeys[string(k)]
	return ok
}

// secretKey returns the plan entry when key (any case, '_' and '-' ignored)
// is one of the plan's SecretKeys.
func (d *detectors) secretKey(key string) (string, bool) {
	if len(d.secretKeys) == 0 {
		return "", false
	}
	var buf [64]byte
	n, ok := normKeyBuf(buf[:], key)
	if !ok {
		return "", false
	}
	e, ok := d.secretKeys[string(n)]
	return e, ok
}

// dropParam returns the plan entry when a parameter name is to be scrubbed.
func (d *detectors) dropParam(name string) (string, bool) {
	if len(d.dropParams) == 0 || name == "" {
		return "", false
	}
	if strings.ContainsAny(name, "%+") {
		if u, err := url.QueryUnescape(name); err == nil {
			name = u
		}
	}
	// Rails-style nesting: user[password] is the password.
	if strings.HasSuffix(name, "]") {
		if i := strings.LastIndexByte(name, '['); i >= 0 {
			if e, ok := d.dropParam(name[i+1 : len(name)-1]); ok {
				return e, true
			}
		}
	}
	var buf [64]byte
	if len(name) > len(buf) {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	if d.dropParams[string(buf[:len(name)])] {
		return strings.ToLower(name), true
	}
	return "", false
}

// dropCookie reports whether a cookie's value is to be erased.
func (d *detectors) dropCookie(name string) bool {
	if d.allCookies || d.dropCookies[name] {
		return true
	}
	for c := range d.dropCookies {
		if strings.EqualFold(c, name) {
			return true
		}
	}
	return false
}

// dropMime returns the plan entry matching a body's mime type.
func (d *detectors) dropMime(mime string) (string, bool) {
	if len(d.dropMimes) == 0 || mime == "" {
		return "", false
	}
	m := strings.ToLower(strings.TrimSpace(mime))
	if i := strings.IndexByte(m, ';'); i >= 0 {
		m = strings.TrimSpace(m[:i])
	}
	for _, e := range d.dropMimes {
		if e == m || e == "*/*" || e == "*" {
			return e, true
		}
		if strings.HasSuffix(e, "/*") && strings.HasPrefix(m, e[:len(e)-1]) {
			return e, true
		}
	}
	return "", false
}

// maskedName reports whether an element's accessible name, role or
// selector marks it masked: the plan's MaskNamePatterns, or a name that
// says password, passcode or PIN.
func (d *detectors) maskedName(name string) bool {
	if name == "" {
		return false
	}
	if v, ok := d.nameCache[name]; ok {
		return v
	}
	v := impliesPassword(name) || (d.maskName != nil && d.maskName.MatchString(name))
	if len(d.nameCache) >= 4096 {
		clear(d.nameCache)
	}
	d.nameCache[name] = v
	return v
}

// impliesPassword: the name contains "password" or "passcode", or the word
// "pin" (so "Shipping" is not a PIN), in any case. It does not allocate.
func impliesPassword(s string) bool {
	for i := 0; i+3 <= len(s); i++ {
		if s[i]|0x20 != 'p' {
			continue
		}
		if hasFold(s[i:], "password") || hasFold(s[i:], "passcode") {
			return true
		}
		if hasFold(s[i:], "pin") && (i == 0 || !isAlnum(s[i-1])) && (i+3 == len(s) || !isAlnum(s[i+3])) {
			return true
		}
	}
	return false
}

// hasFold: s starts with lower (lowercase ASCII letters), in any case.
func hasFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		if s[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// --- byte classes ---

const (
	cDigit = 1 << iota
	cUpper
	cLower
	cB64URL // A-Z a-z 0-9 _ -
	cTok    // A-Z a-z 0-9 + / = _ -   (entropy tokens)
	cIdent  // A-Z a-z 0-9 _ - .       (keys)
	cB64    // A-Z a-z 0-9 + / =
)

var detClass = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] |= cDigit | cB64URL | cTok | cIdent | cB64
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= cUpper | cB64URL | cTok | cIdent | cB64
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= cLower | cB64URL | cTok | cIdent | cB64
	}
	t['_'] |= cB64URL | cTok | cIdent
	t['-'] |= cB64URL | cTok | cIdent
	t['.'] |= cIdent
	t['+'] |= cTok | cB64
	t['/'] |= cTok | cB64
	t['='] |= cTok | cB64
	return
}()

func isDigitB(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool  { return detClass[c]&(cDigit|cUpper|cLower) != 0 }
func isAlpha(c byte) bool  { return detClass[c]&(cUpper|cLower) != 0 }

// runOf returns the end of the run of class cl starting at i.
func runOf(s string, i int, cl uint8) int {
	for i < len(s) && detClass[s[i]]&cl != 0 {
		i++
	}
	return i
}

// --- scanning ---

// scan returns the secret spans in s, sorted and merged (overlapping spans
// become one, named by the more specific detector). It returns nil, without
// allocating, when nothing is found.
func (d *detectors) scan(s string) []dspan {
	out := d.find(s, false)
	if len(out) == 0 {
		return nil
	}
	return mergeSpans(out)
}

// found reports whether scan would find something (the pre-filter).
func (d *detectors) found(s string) bool { return len(d.find(s, false)) > 0 }

// foundRaw is the fast path's pre-filter over an event's raw JSON: any
// detector match, or a member (in the JSON or JSON-escaped inside a
// string) whose key is one of the SecretKeys, whatever its value.
func (d *detectors) foundRaw(s string) bool { return len(d.find(s, true)) > 0 }

// find runs the planned detectors; with keys, a SecretKey before a ':'
// counts as a find too (one pass over the separators serves both).
func (d *detectors) find(s string, keys bool) []dspan {
	if len(s) < 8 {
		return nil
	}
	var out []dspan
	if d.pem {
		out = scanPEM(s, out)
	}
	if d.jwt {
		out = scanJWT(s, out)
	}
	if d.aws {
		out = scanAWSKeyID(s, out)
	}
	if d.github {
		out = scanGitHub(s, out)
	}
	if d.slack {
		out = scanSlack(s, out)
	}
	if d.card {
		out = scanCard(s, out)
	}
	if d.aws || d.generic || (keys && len(d.secretKeys) > 0) {
		out = d.scanKV(s, out, keys)
	}
	if d.generic {
		out = d.scanEntropy(s, out)
	}
	return out
}

func mergeSpans(sp []dspan) []dspan {
	if len(sp) == 1 {
		return sp
	}
	sort.Slice(sp, func(i, j int) bool {
		if sp[i].start != sp[j].start {
			return sp[i].start < sp[j].start
		}
		return sp[i].end > sp[j].end
	})
	out := sp[:1]
	for _, x := range sp[1:] {
		last := &out[len(out)-1]
		if x.start < last.end {
			if x.end > last.end {
				last.end = x.end
			}
			if detPriority[x.rule] < detPriority[last.rule] {
				last.rule = x.rule
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// scanJWT: header.payload.signature, base64url, the header starting "eyJ"
// ('{"'); JWE's five segments too. An unsigned token (empty signature) needs
// a payload that starts "eyJ" as well.
func scanJWT(s string, out []dspan) []dspan {
	for i := 2; i < len(s); {
		// anchor on the rare 'J' of "eyJ"
		j := strings.IndexByte(s[i:], 'J')
		if j < 0 {
			break
		}
		st := i + j - 2
		i += j + 1
		if s[st] != 'e' || s[st+1] != 'y' {
			continue
		}
		e1 := runOf(s, st, cB64URL)
		// On failure, skip the run: a later "eyJ" inside it ends at the
		// same place and fails the same way (so scanning stays linear).
		if e1-st < 10 || e1 >= len(s) || s[e1] != '.' {
			i = max(i, e1)
			continue
		}
		e2 := runOf(s, e1+1, cB64URL)
		if e2-(e1+1) < 2 || e2 >= len(s) || s[e2] != '.' {
			i = max(i, e1)
			continue
		}
		e3 := runOf(s, e2+1, cB64URL)
		if e3 == e2+1 && !strings.HasPrefix(s[e1+1:], "eyJ") {
			i = max(i, e1)
			continue
		}
		end := e3
		for k := 0; k < 2 && end+1 < len(s) && s[end] == '.'; k++ { // JWE
			e := runOf(s, end+1, cB64URL)
			if e == end+1 {
				break
			}
			end = e
		}
		out = append(out, dspan{st, end, detJWT})
		i = end
	}
	return out
}

// scanPEM: "-----BEGIN <label>-----" with a label naming a private key,
// through its END line; without one, to the end of s (fail closed).
func scanPEM(s string, out []dspan) []dspan {
	const begin = "-----BEGIN "
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], begin)
		if j < 0 {
			break
		}
		st := i + j
		i = st + len(begin)
		rest := s[i:]
		k := strings.Index(rest, "-----")
		if k < 0 || k > 64 || !strings.Contains(rest[:k], "PRIVATE KEY") {
			continue
		}
		label := rest[:k]
		endMarker := "-----END " + label + "-----"
		end := len(s)
		if e := strings.Index(s[i+k:], endMarker); e >= 0 {
			end = i + k + e + len(endMarker)
		}
		out = append(out, dspan{st, end, detPEM})
		i = end
	}
	return out
}

// scanAWSKeyID: AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA + 16 [A-Z0-9].
func scanAWSKeyID(s string, out []dspan) []dspan {
	for i := 0; i+20 <= len(s); {
		j := strings.IndexByte(s[i:len(s)-19], 'A')
		if j < 0 {
			break
		}
		st := i + j
		i = st + 1
		if s[st+3] != 'A' {
			continue
		}
		switch s[st : st+4] {
		case "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA":
		default:
			continue
		}
		ok := true
		for k := st + 4; k < st+20; k++ {
			if detClass[s[k]]&(cUpper|cDigit) == 0 {
				ok = false
				break
			}
		}
		if !ok || (st+20 < len(s) && isAlnum(s[st+20])) {
			continue
		}
		out = append(out, dspan{st, st + 20, detAWS})
		i = st + 20
	}
	return out
}

// scanGitHub: ghp_ gho_ ghu_ ghs_ ghr_ + 36 alphanumerics; github_pat_ + 82
// [A-Za-z0-9_].
func scanGitHub(s string, out []dspan) []dspan {
	// anchor on the '_' of "ghp_" … and of "github_pat_"
	for i := 3; i < len(s); {
		j := strings.IndexByte(s[i:], '_')
		if j < 0 {
			break
		}
		u := i + j
		i = u + 1
		if s[u-3] == 'g' && s[u-2] == 'h' {
			switch s[u-1] {
			case 'p', 'o', 'u', 's', 'r':
				e := runOf(s, u+1, cDigit|cUpper|cLower)
				if e-(u+1) >= 36 {
					out = append(out, dspan{u - 3, e, detGitHub})
				}
				i = e
			}
			continue
		}
		if u >= 10 && s[u-1] == 't' && strings.HasPrefix(s[u-10:], "github_pat_") {
			e := u + 1
			for e < len(s) && (isAlnum(s[e]) || s[e] == '_') {
				e++
			}
			if e-(u+1) >= 82 {
				out = append(out, dspan{u - 10, e, detGitHub})
				i = e
			}
		}
	}
	return out
}

// scanSlack: xox[baprs]- tokens and https://hooks.slack.com/services/… URLs.
func scanSlack(s string, out []dspan) []dspan {
	for i := 0; i+5 <= len(s); {
		j := strings.Index(s[i:], "xox")
		if j < 0 {
			break
		}
		st := i + j
		i = st + 3
		if st+5 > len(s) || s[st+4] != '-' {
			continue
		}
		switch s[st+3] {
		case 'b', 'a', 'p', 'r', 's':
		default:
			continue
		}
		e := runOf(s, st+5, cDigit|cUpper|cLower|cB64URL)
		if e-(st+5) >= 10 {
			out = append(out, dspan{st, e, detSlack})
		}
		i = e
	}
	const hook = "hooks.slack.com/services/"
	for i := len("hooks.slac"); i < len(s); {
		// anchor on the 'k' of "slack"
		j := strings.IndexByte(s[i:], 'k')
		if j < 0 {
			break
		}
		st := i + j - len("hooks.slac")
		if s[st] != 'h' || !strings.HasPrefix(s[st:], hook) {
			i += j + 1
			continue
		}
		e := st + len(hook)
		for e < len(s) && (detClass[s[e]]&cB64URL != 0 || s[e] == '/') {
			e++
		}
		i = e
		if e-(st+len(hook)) < 8 {
			continue
		}
		if strings.HasSuffix(s[:st], "https://") {
			st -= len("https://")
		} else if strings.HasSuffix(s[:st], "http://") {
			st -= len("http://")
		}
		out = append(out, dspan{st, e, detSlack})
	}
	return out
}

// --- cards ---

// scanCard finds 13–19 digit Luhn-valid numbers, contiguous or in groups of
// 3–7 digits separated by single spaces, dashes or dots (one kind per
// number).
// A contiguous run longer than 19 digits is not a card, nor a run glued to
// letters (hex ids) or to a decimal point. The first digit must be one a
// card network issues (2–6, 8, 9), which rules out unix timestamps.
func scanCard(s string, out []dspan) []dspan {
	n := len(s)
	// A card spans at least 13 bytes, so sampling every 13th byte finds
	// every candidate: only a sample on a digit (or on a separator between
	// digits) leads to a look at the run around it.
	const stride = 13
	floor := 0 // where the last run was left: never look back past it
	for p := stride - 1; p < n; {
		if !cardByte(s, p) {
			p += stride
			continue
		}
		// back to the start of the run of digit groups
		st := p
		for st > floor && cardByte(s, st-1) {
			st--
		}
		for st < n && !isDigitB(s[st]) {
			st++
		}
		var gs [24]cardGroup
		ng := 0
		j := st
		for {
			g := cardGroup{st: j}
			if ng > 0 {
				g.sep = s[j-1]
			}
			for j < n && isDigitB(s[j]) {
				j++
			}
			g.en = j
			gs[ng] = g
			ng++
			if ng < len(gs) && j+1 < n && cardSep(s[j]) && isDigitB(s[j+1]) {
				j++
				continue
			}
			break
		}
		out = cardInRun(s, gs[:ng], out)
		if ng == len(gs) { // a very long run: go on from a few groups back
			j = gs[ng-6].st
		}
		floor = j
		p = max(p+stride, j+stride-1)
	}
	return out
}

// cardByte: a digit, or a single separator between digits.
func cardByte(s string, i int) bool {
	c := s[i]
	if isDigitB(c) {
		return true
	}
	return cardSep(c) && i > 0 && i+1 < len(s) && isDigitB(s[i-1]) && isDigitB(s[i+1])
}

// cardSep: what separates a card's digit groups — a space, a dash or a dot
// ("4111.1111.1111.1111").
func cardSep(c byte) bool { return c == ' ' || c == '-' || c == '.' }

// cardGroup is one run of digits, s[st:en], and the separator before it.
type cardGroup struct {
	st, en int
	sep    byte
}

func cardInRun(s string, gs []cardGroup, out []dspan) []dspan {
	// A group is glued when letters (a hex id) or a decimal point touch it
	// from outside the window: before its first group, after its last.
	gluedBefore := func(g cardGroup) bool {
		if g.st > 0 {
			p := s[g.st-1]
			if isAlpha(p) || (p == '.' && g.st > 1 && isDigitB(s[g.st-2])) {
				return true
			}
			if (p == '-' || p == '_') && g.st > 1 && isAlpha(s[g.st-2]) {
				return true
			}
		}
		return false
	}
	gluedAfter := func(g cardGroup) bool {
		if g.en < len(s) {
			q := s[g.en]
			if isAlpha(q) || (q == '.' && g.en+1 < len(s) && isDigitB(s[g.en+1])) {
				return true
			}
			if (q == '-' || q == '_') && g.en+1 < len(s) && isAlpha(s[g.en+1]) {
				return true
			}
		}
		return false
	}
	if len(gs) == 1 {
		g := gs[0]
		if l := g.en - g.st; l >= 13 && l <= 19 && !gluedBefore(g) && !gluedAfter(g) && cardDigitsOK(s[g.st:g.en]) {
			out = append(out, dspan{g.st, g.en, detCard})
		}
		return out
	}
	// Separated groups: the longest valid window of whole groups, left to
	// right. Groups of 3–7 digits (the first at least 4), one kind of
	// separator; a window's edge groups must not be glued to letters.
	for a := 0; a < len(gs); {
		best := -1
		total := 0
		for b := a; b < len(gs); b++ {
			l := gs[b].en - gs[b].st
			if l < 3 || l > 7 || (b == a && l < 4) || (b > a+1 && gs[b].sep != gs[a+1].sep) {
				break
			}
			total += l
			if total > 19 {
				break
			}
			if b > a && total >= 13 && !gluedBefore(gs[a]) && !gluedAfter(gs[b]) && cardDigitsOK(s[gs[a].st:gs[b].en]) {
				best = b
			}
		}
		if best < 0 {
			a++
			continue
		}
		out = append(out, dspan{gs[a].st, gs[best].en, detCard})
		a = best + 1
	}
	return out
}

// cardDigitsOK: a network's first digit and a valid Luhn checksum over the
// digits of s (separators skipped).
func cardDigitsOK(s string) bool {
	switch s[0] {
	case '2', '3', '4', '5', '6', '8', '9':
	default:
		return false
	}
	sum, dbl := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if !isDigitB(c) {
			continue
		}
		v := int(c - '0')
		if dbl {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		dbl = !dbl
	}
	return sum%10 == 0
}

// --- key = value (generic, AWS secret keys) ---

var wordBearer = []byte("bearer")

// secretish reports whether a normalized key (lowercase, no '_' '-') looks
// like it names a secret. "auth" counts unless it is only "author…"
// ("authority", "author"); "authorization" counts.
func secretish(k []byte) bool {
	for i := 0; i+3 <= len(k); i++ {
		r := k[i:]
		switch r[0] {
		case 'p':
			switch r[1] {
			case 'a':
				if pre(r, "passw") || pre(r, "passphrase") {
					return true
				}
			case 'w':
				if r[2] == 'd' {
					return true
				}
			case 'r':
				if pre(r, "privatekey") {
					return true
				}
			}
		case 's':
			if r[1] == 'e' && (pre(r, "secret") || pre(r, "session") || pre(r, "sessid")) {
				return true
			}
		case 't':
			if r[1] == 'o' && pre(r, "token") {
				return true
			}
		case 'a':
			switch r[1] {
			case 'p':
				if pre(r, "apikey") {
					return true
				}
			case 'c':
				if pre(r, "accesskey") {
					return true
				}
			case 'u':
				if pre(r, "auth") && (!pre(r[4:], "or") || pre(r[4:], "oriz") || pre(r[4:], "oris")) {
					return true
				}
			}
		case 'c':
			if r[1] == 'r' && pre(r, "credential") {
				return true
			}
		}
	}
	return false
}

// keySignals reports whether a normalized key names a secret so plainly
// that whatever follows it is the secret, whatever its entropy or case
// ("password: SECRETCOLONCONSOLE"): password, pwd, passwd, passphrase,
// secret, token, api key, access token, auth, authorization, credential
// and the keys that contain them. "session" alone does not: "Session:
// expired" is prose.
func keySignals(k []byte) bool {
	if bytes.HasPrefix(k, wordAuthor) && !bytes.HasPrefix(k, wordAuthoriz) && !bytes.HasPrefix(k, wordAuthoris) {
		k = k[len(wordAuthor):] // "author…" names a person; a later word may still signal
	}
	for _, w := range signalWords {
		if bytes.Contains(k, w) {
			return true
		}
	}
	return false
}

var (
	wordAuthor, wordAuthoriz, wordAuthoris = []byte("author"), []byte("authoriz"), []byte("authoris")
	signalWords                            = [][]byte{[]byte("passw"), []byte("pwd"), []byte("passphrase"),
		[]byte("secret"), []byte("token"), []byte("apikey"), []byte("privatekey"), []byte("auth"), []byte("credential")}
)

// pre is bytes.HasPrefix for a constant prefix (inlined to a compare).
func pre(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// keyBefore reads the key that ends just before a separator at p: it skips
// spaces and one closing quote (plain or backslash-escaped), then takes a
// run of [A-Za-z0-9_.-] of at most 64 bytes. It returns the normalized key
// in buf.
func keyBefore(s string, p int, buf *[64]byte) ([]byte, bool) {
	j := p - 1
	for j >= 0 && j > p-4 && s[j] == ' ' {
		j--
	}
	if j >= 0 && (s[j] == '"' || s[j] == '\'') {
		j--
		if j >= 0 && s[j] == '\\' {
			j--
		}
	}
	end := j + 1
	for j >= 0 && detClass[s[j]]&cIdent != 0 && end-j <= 64 {
		j--
	}
	if end-j > 64 || end-(j+1) == 0 {
		return nil, false
	}
	return normKeyBuf(buf[:], s[j+1:end])
}

// valueAfter reads the value after a separator at p. quoted is true for a
// quoted value (its span excludes the quotes); spaced for "key: value".
func valueAfter(s string, p int) (st, en int, quoted, spaced bool) {
	q := p + 1
	for q < len(s) && (s[q] == ' ' || s[q] == '\t') {
		q++
	}
	spaced = q > p+1
	if q >= len(s) {
		return q, q, false, spaced
	}
	switch {
	case s[q] == '"' || s[q] == '\'':
		qc := s[q]
		st = q + 1
		en = st
		for en < len(s) && s[en] != qc {
			if s[en] == '\\' {
				en++
			}
			en++
		}
		return st, min(en, len(s)), true, spaced
	case s[q] == '\\' && q+1 < len(s) && s[q+1] == '"': // \"value\" inside a JSON string
		st = q + 2
		en = st
		for en < len(s) && s[en] != '"' {
			if s[en] == '\\' {
				if en+1 < len(s) && s[en+1] == '"' {
					break
				}
				if en+2 < len(s) && s[en+1] == '\\' {
					en++
				}
			}
			en++
		}
		return st, min(en, len(s)), true, spaced
	}
	en = q
	for en < len(s) && !valueStop(s[en]) {
		en++
	}
	// "Authorization: Bearer xyz": the scheme and the credential.
	if en-q <= 6 && en+1 < len(s) && s[en] == ' ' {
		switch strings.ToLower(s[q:en]) {
		case "bearer", "basic", "token", "digest", "bot":
			e := en + 1
			for e < len(s) && !valueStop(s[e]) {
				e++
			}
			if e > en+1 {
				en = e
			}
		}
	}
	return q, en, false, spaced
}

// firstValueByte is the first byte of the value after a separator at p,
// past spaces and an opening quote (plain or backslash-escaped).
func firstValueByte(s string, p int) byte {
	q := p + 1
	for q < len(s) && (s[q] == ' ' || s[q] == '\t') {
		q++
	}
	if q < len(s) && s[q] == '\\' {
		q++
	}
	if q < len(s) && (s[q] == '"' || s[q] == '\'') {
		q++
	}
	if q < len(s) {
		return s[q]
	}
	return 0
}

func valueStop(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '&', ';', ',', '"', '\'', '<', '>', ')', '}', ']', '\\':
		return true
	}
	return false
}

// wordLike: letters only, and all lowercase, capitalized or all caps — an
// ordinary word ("expired", "Missing", "OK").
func wordLike(v string) bool {
	upperAfterFirst, lower := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			if i > 0 {
				upperAfterFirst = true
			}
		default:
			return false
		}
	}
	return !(upperAfterFirst && lower)
}

func trivialValue(v string) bool {
	switch strings.ToLower(v) {
	case "", "null", "nil", "none", "true", "false", "undefined", "***", "xxx":
		return true
	}
	return strings.HasPrefix(v, "[redacted") || strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[")
}

// scanKV finds key=value, key: value and "key":"value" where the key looks
// like a secret (or is one of the plan's SecretKeys): the generic detector.
// With the aws detector, a 40-character value after an AWS secret-key key.
func (d *detectors) scanKV(s string, out []dspan, keys bool) []dspan {
	var buf [64]byte
	// nc, ne: the next ':' and '=' at or after i (-1: none left).
	nc, ne := strings.IndexByte(s, ':'), strings.IndexByte(s, '=')
	for i := 0; i < len(s); {
		if nc >= 0 && nc < i {
			if nc = strings.IndexByte(s[i:], ':'); nc >= 0 {
				nc += i
			}
		}
		if ne >= 0 && ne < i {
			if ne = strings.IndexByte(s[i:], '='); ne >= 0 {
				ne += i
			}
		}
		var p int
		switch {
		case nc < 0 && ne < 0:
			return out
		case nc < 0:
			p = ne
		case ne < 0:
			p = nc
		default:
			p = min(nc, ne)
		}
		i = p + 1
		if p+1 < len(s) && s[p] == ':' && s[p+1] == '/' { // scheme://
			continue
		}
		if p+1 < len(s) && s[p] == '=' && s[p+1] == '=' { // "==" comparison or base64 padding
			i = p + 2
			continue
		}
		k, ok := keyBefore(s, p, &buf)
		if !ok || len(k) < 3 || isDigitB(k[0]) {
			continue
		}
		sec := secretish(k)
		if d.aws && sec && (bytes.Contains(k, []byte("secretaccesskey")) || bytes.Contains(k, []byte("awssecretkey"))) {
			st, en, _, _ := valueAfter(s, p)
			if en-st >= 40 {
				e := st + 40
				for k := st; k < e; k++ {
					if detClass[s[k]]&cB64 == 0 {
						e = -1
						break
					}
				}
				if e > 0 && (e == len(s) || detClass[s[e]]&cB64 == 0) {
					out = append(out, dspan{st, e, detAWS})
					i = e
					continue
				}
			}
		}
		isKey := d.isSecretKey(k)
		if keys && isKey && s[p] == ':' {
			return append(out, dspan{p, p + 1, detGeneric})
		}
		if !d.generic || (!sec && !isKey) {
			continue
		}
		// A value that opens an object or array is not itself the secret
		// (its members are scanned in turn); deciding that from its first
		// byte keeps the scan linear.
		if c := firstValueByte(s, p); c == '{' || c == '[' {
			continue
		}
		st, en, quoted, spaced := valueAfter(s, p)
		v := s[st:en]
		if trivialValue(v) {
			continue
		}
		if !quoted && spaced && s[p] == ':' && (wordLike(v) || len(v) < 4) && !keySignals(k) {
			continue // "Session: expired" is prose
		}
		out = append(out, dspan{st, en, detGeneric})
		i = en
	}
	return out
}

// scanEntropy finds standalone high-entropy tokens (≥ 20 characters of
// [A-Za-z0-9+/=_-], at least two character classes, entropy ≥ the plan's
// threshold) that follow a secret-looking word within 24 bytes: "api key
// 8f3kq…", "Bearer Zm9v…".
func (d *detectors) scanEntropy(s string, out []dspan) []dspan {
	n := len(s)
	// A candidate spans at least 20 bytes: sample every 20th byte and look
	// around only samples that are token bytes.
	const stride = 20
	for p := stride - 1; p < n; {
		if detClass[s[p]]&cTok == 0 {
			p += stride
			continue
		}
		st, en := p, p+1
		for st > 0 && detClass[s[st-1]]&cTok != 0 {
			st--
		}
		for en < n && detClass[s[en]]&cTok != 0 {
			en++
		}
		p = en + stride
		if en-st < 20 {
			continue
		}
		tok := s[st:en]
		if strings.Count(tok, "/") > 2 || !mixedClasses(tok) || shannon(tok) < d.entropy {
			continue
		}
		if !secretWordBefore(s, st) {
			continue
		}
		out = append(out, dspan{st, en, detGeneric})
	}
	return out
}

func mixedClasses(t string) bool {
	var m uint8
	for i := 0; i < len(t); i++ {
		m |= detClass[t[i]] & (cDigit | cUpper | cLower)
	}
	return m&(m-1) != 0
}

// secretWordBefore looks at up to 24 bytes before st for a secret word.
func secretWordBefore(s string, st int) bool {
	from := max(0, st-24)
	var buf [24]byte
	n := 0
	for k := from; k < st; k++ {
		c := s[k]
		if c == '_' || c == '-' || c == ' ' {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	w := buf[:n]
	return secretish(w) || bytes.Contains(w, wordBearer)
}

// shannon is the Shannon entropy of s in bits per byte.
func shannon(s string) float64 {
	var cnt [256]uint16
	for i := 0; i < len(s); i++ {
		cnt[s[i]]++
	}
	h, n := 0.0, float64(len(s))
	for _, c := range cnt {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
