package redact

import (
	"strings"

	"github.com/flightrec/flightrec/event"
)

// Resolving a fill's or a check's target against what the recording has
// shown, whatever form the target takes, so that a value typed into a
// masked field is masked however the executor named the field:
//
//   - a ref ("@e5", "e5") resolves through the snapshots: every ref a
//     snapshot line carries is remembered with whether that line's field is
//     masked (refs below);
//   - a CSS selector ("selector" or "css") resolves against the DOM model:
//     it is masked when any element it matches is masked (css.go matches);
//   - role and name resolve by the name, as the plan's name patterns say.
//
// A target nothing resolves — no DOM yet, an imported HAR, a selector
// matching no element the model knows, an XPath, an unknown frame — fails
// closed: its value is masked.

// maxRefs bounds the refs remembered; past it they are forgotten, and a
// fill aimed at a forgotten ref fails closed.
const maxRefs = 4096

// Snapshot text is read for refs only when a fill or check needs one
// resolved: each snapshot's text is kept (a reference to the decoded
// string, bounded by maxPendingSnaps and maxPendingBytes; past them the
// oldest are forgotten, and a ref only they showed fails closed), and
// learnPending reads them all then. Most snapshots are never needed.
const (
	maxPendingSnaps = 32
	maxPendingBytes = 2 << 20
)

// noteSnapshot keeps snapshot text for learnPending.
func (r *Redactor) noteSnapshot(text string) {
	if text == "" || !strings.ContainsAny(text, "@=") {
		return
	}
	r.pendingSnaps = append(r.pendingSnaps, text)
	r.pendingBytes += len(text)
	for len(r.pendingSnaps) > maxPendingSnaps || r.pendingBytes > maxPendingBytes {
		r.pendingBytes -= len(r.pendingSnaps[0])
		r.pendingSnaps[0] = ""
		r.pendingSnaps = r.pendingSnaps[1:]
	}
}

// learnPending learns the refs of the snapshots kept since the last call.
func (r *Redactor) learnPending() {
	for i, t := range r.pendingSnaps {
		r.learnRefs(t)
		r.pendingSnaps[i] = ""
	}
	r.pendingSnaps, r.pendingBytes = r.pendingSnaps[:0], 0
}

// learnRefs remembers the refs of snapshot text, each with whether its
// line names a masked field (impliesPassword, the plan's name patterns).
// It reads names, never values, so observing the stored (redacted) text
// after a restart learns the same.
func (r *Redactor) learnRefs(text string) {
	d := r.det
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '@')
		k := strings.Index(text[i:], "ref=")
		if j < 0 && k < 0 {
			return
		}
		at := i + j
		if j < 0 || (k >= 0 && k < j) {
			at = i + k + 3 // refIn reads from the '='; "@"-less refs are stored bare
		}
		ls := strings.LastIndexByte(text[:at], '\n') + 1
		le := strings.IndexByte(text[at:], '\n')
		if le < 0 {
			le = len(text)
		} else {
			le += at
		}
		line := text[ls:le]
		ref := refIn(text[max(at-3, ls):le])
		if ref == "" {
			i = at + 1
			continue
		}
		masked := impliesPassword(line)
		if !masked {
			if _, name, ok := quotedAfter(line, 0); ok {
				masked = d.maskedName(name)
			}
		}
		if len(d.refs) >= maxRefs {
			clear(d.refs)
		}
		d.refs[ref] = d.refs[ref] || masked
		if masked {
			if len(d.maskedRefs) >= maxRefs {
				clear(d.maskedRefs)
			}
			d.maskedRefs[ref] = true
		}
		i = at + 1
	}
}

// refMasked resolves a ref: masked, and whether it is known at all. A
// ref is matched with and without its '@'.
func (r *Redactor) refMasked(ref string) (masked, resolved bool) {
	r.learnPending()
	d := r.det
	ref = strings.TrimSpace(ref)
	for _, k := range []string{ref, "@" + strings.TrimPrefix(ref, "@"), strings.TrimPrefix(ref, "@")} {
		if d.maskedRefs[k] {
			return true, true
		}
		if _, ok := d.refs[k]; ok {
			resolved = true
		}
	}
	return false, resolved
}

// targetMembers are the members of a target object this resolution reads;
// any other member with a value (xpath, frame, text, test id, …) is a form
// it cannot resolve.
var targetMembers = map[string]bool{"ref": true, "role": true, "name": true, "selector": true, "css": true}

// targetMasked says whether a fill aimed at these targets (the action's
// target and the resolved one, either may be nil) must have its value
// masked.
func (r *Redactor) targetMasked(targets ...any) bool {
	r.learnPending()
	d := r.det
	resolved := false
	for _, tv := range targets {
		m, ok := tv.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { x, _ := m[k].(string); return strings.TrimSpace(x) }
		t := &event.Target{Ref: s("ref"), Role: s("role"), Name: s("name"), Selector: s("selector")}
		if d.maskedTarget(t) {
			return true
		}
		unknown := false
		for k, v := range m {
			if !targetMembers[k] && v != nil && v != "" {
				unknown = true
			}
		}
		if t.Ref != "" {
			masked, ok := r.refMasked(t.Ref)
			if masked {
				return true
			}
			resolved = resolved || ok
		}
		for _, sel := range []string{t.Selector, s("css")} {
			if sel == "" {
				continue
			}
			if d.selectors[sel] || d.maskedName(sel) {
				return true
			}
			masked, ok := r.dom.resolveSelector(sel)
			if masked {
				return true
			}
			resolved = resolved || ok
		}
		if t.Role != "" && t.Name != "" && !unknown {
			resolved = true // by name: maskedTarget said it is not masked
		}
		if unknown {
			// A frame or an XPath this resolution cannot follow: what it
			// resolved elsewhere may be another element.
			return true
		}
	}
	return !resolved
}

// checkTargetMasked says whether a UI check's expect and actual must be
// masked: its target names a masked field (maskedCheckTarget), or is a
// ref or a CSS selector that resolves to a masked element or to nothing.
// A state check's target is an API call or a data row, not an element.
func (r *Redactor) checkTargetMasked(typ, target string) bool {
	r.learnPending()
	d := r.det
	if d.maskedCheckTarget(target) {
		return true
	}
	t := strings.TrimSpace(target)
	if typ == "state" || t == "" {
		return false
	}
	if looksLikeRef(t) {
		masked, ok := r.refMasked(t)
		return masked || !ok
	}
	if strings.ContainsAny(t, "#.[>:=") {
		masked, ok := r.dom.resolveSelector(t)
		return masked || !ok
	}
	return false // role and name: resolved by the name
}

// looksLikeRef: "@e12", "e12", "ref=e12".
func looksLikeRef(t string) bool {
	t = strings.TrimPrefix(strings.TrimPrefix(t, "ref="), "@")
	i := 0
	for i < len(t) && isAlpha(t[i]) {
		i++
	}
	if i == 0 || i == len(t) || i > 3 {
		return false
	}
	for _, c := range []byte(t[i:]) {
		if !isDigitB(c) {
			return false
		}
	}
	return true
}

// maxSelCache bounds the parsed target selectors kept.
const maxSelCache = 256

// resolveSelector matches a target's CSS selector against the elements on
// the page now: masked when any matched element's value is masked;
// resolved when it matched any. Without a DOM, or for a selector this
// matcher refuses, nothing resolves.
func (s *domState) resolveSelector(sel string) (masked, resolved bool) {
	if s.root == nil {
		return false, false
	}
	set, ok := s.selCache[sel]
	if !ok {
		var err error
		if set, err = parseSelectors([]string{sel}); err != nil {
			set = nil
		}
		if len(s.selCache) >= maxSelCache {
			clear(s.selCache)
		}
		s.selCache[sel] = set
	}
	if set == nil {
		return false, false
	}
	var walk func(n *dnode)
	walk = func(n *dnode) {
		if masked {
			return
		}
		if set.matches(n) {
			resolved = true
			if _, ok := s.valueRule(n); ok {
				masked = true
				return
			}
		}
		for c := n.first; c != nil; c = c.next {
			walk(c)
		}
	}
	walk(s.root)
	return masked, resolved
}
