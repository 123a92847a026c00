package redact

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/flightrec/flightrec/event"
)

// redactText redacts receipt, snapshot, console, check and meta events.
//
// Every string value, whatever member holds it (console text, URLs, stack
// frames, snapshot text and origin, check target/expect/actual, meta
// labels and versions, receipt messages, effects and navigation), goes
// through URL scrubbing, the detectors and the known values; members named
// by the plan's SecretKeys are erased whole. On top of that:
//
//   - snapshot text (and a receipt's snapshot_delta): the value="…" of a
//     line whose accessible name is masked (MaskNamePatterns, or a name
//     saying password / passcode / PIN), or whose value a detector flags,
//     is erased (rule "snapshot:masked-field") and remembered;
//   - receipt: fill / type / press aimed at a masked target (name, role or
//     selector matching MaskNamePatterns, a selector in MaskSelectors, a ref
//     a snapshot showed masked): every string in action.args is erased (rule
//     "receipt:masked-target") and, for fill and type, remembered;
//   - check: a target naming a masked field erases expect and actual whole
//     (rule "check:masked-field").
//
// Most events are clean, so the raw JSON is checked first (rawNeedsWork and
// the kind's own triggers, read from the typed payload) and a clean event
// returns Result{} without being decoded.
func (r *Redactor) redactText(d *event.Decoded) (Result, error) {
	if !r.textNeedsWork(d) {
		return Result{}, nil
	}
	m, err := decodeObject(d.Data)
	if err != nil {
		return Result{}, err
	}
	if err := canonText(d.Kind, m); err != nil {
		return Result{}, err
	}
	w := &scrubber{r: r, channel: string(d.Kind)}
	changed := false
	switch d.Kind {
	case event.KindSnapshot:
		if t, ok := m["text"].(string); ok {
			w.push("text")
			if nt, ch := w.snapshotText(t); ch {
				m["text"], changed = nt, true
			}
			w.pop()
		}
	case event.KindReceipt:
		changed = w.receipt(m)
	case event.KindCheck:
		changed = w.check(m)
	}
	if _, ch := w.walk(m); ch {
		changed = true
	}
	if !changed {
		return Result{}, nil
	}
	out, err := marshalJSON(m)
	if err != nil {
		return Result{}, errBadData
	}
	return Result{Data: out, Findings: w.findings}, nil
}

// canonText spells the members redaction reads canonically (canonKeys).
func canonText(k event.Kind, m map[string]any) error {
	tgt := []string{"ref", "role", "name", "selector"}
	switch k {
	case event.KindSnapshot:
		return canonKeys(m, "text")
	case event.KindCheck:
		return canonKeys(m, "target", "expect", "actual")
	case event.KindReceipt:
		if err := canonKeys(m, "action", "resolved", "effects"); err != nil {
			return err
		}
		if e, ok := m["effects"].(map[string]any); ok {
			if err := canonKeys(e, "snapshot_delta"); err != nil {
				return err
			}
		}
		if r, ok := m["resolved"].(map[string]any); ok {
			if err := canonKeys(r, tgt...); err != nil {
				return err
			}
		}
		if a, ok := m["action"].(map[string]any); ok {
			if err := canonKeys(a, "verb", "target", "args"); err != nil {
				return err
			}
			if t, ok := a["target"].(map[string]any); ok {
				return canonKeys(t, tgt...)
			}
		}
	}
	return nil
}

// errBadData never quotes the input (it may hold the very secret).
var errBadData = errors.New("redact: event data is not a JSON object")

// textNeedsWork is the fast path's verdict for a text event.
func (r *Redactor) textNeedsWork(d *event.Decoded) bool {
	if r.rawNeedsWork(d.Data) {
		return true
	}
	switch d.Kind {
	case event.KindSnapshot:
		p, ok := d.Payload.(*event.Snapshot)
		if ok {
			r.noteSnapshot(p.Text)
		}
		return !ok || r.snapshotMasks(p.Text)
	case event.KindReceipt:
		p, ok := d.Payload.(*event.Receipt)
		if !ok {
			return true
		}
		if p.Effects != nil {
			r.noteSnapshot(p.Effects.SnapshotDelta)
			if r.snapshotMasks(p.Effects.SnapshotDelta) {
				return true
			}
		}
		// A fill is resolved on the decoded target (target.go), which may
		// carry members the typed one does not.
		return fillVerb(p.Action.Verb) && hasArgs(p.Action.Args)
	case event.KindCheck:
		p, ok := d.Payload.(*event.Check)
		return !ok || (hasArgs(p.Expect) || hasArgs(p.Actual)) && r.checkTargetMasked(p.Type, p.Target)
	}
	return false
}

func hasArgs(a json.RawMessage) bool { return len(a) > 0 && string(a) != "null" }

// fillVerb: the verbs that put text into their target.
func fillVerb(v string) bool {
	switch strings.ToLower(v) {
	case "fill", "type", "press":
		return true
	}
	return false
}

// maskedTarget: a receipt target whose name, role or selector is masked, a
// selector the plan masks, or a ref a snapshot showed masked.
func (d *detectors) maskedTarget(t *event.Target) bool {
	if t == nil {
		return false
	}
	if d.maskedName(t.Name) || d.maskedName(t.Role) || d.maskedName(t.Selector) {
		return true
	}
	if t.Selector != "" && d.selectors[strings.TrimSpace(t.Selector)] {
		return true
	}
	return t.Ref != "" && d.maskedRefs[t.Ref]
}

// maskedCheckTarget: a check target naming a masked field — by the quoted
// accessible name in it ("textbox \"Card number\""), the whole target, a
// masked selector or a masked ref.
func (d *detectors) maskedCheckTarget(t string) bool {
	t = strings.TrimSpace(t)
	if t == "" {
		return false
	}
	if d.selectors[t] || d.maskedRefs[t] {
		return true
	}
	if _, name, ok := quotedAfter(t, 0); ok && d.maskedName(name) {
		return true
	}
	return d.maskedName(t)
}

// --- snapshot text ---

const valueAttr = `value="`

// snapField is one value="…" in snapshot text: the value is text[st:en].
type snapField struct {
	st, en int
	masked bool
	ref    string
}

// snapIter walks the value="…" fields of snapshot text in order. It keeps
// the current line's bounds, so a long line with many fields is still read
// once.
type snapIter struct {
	d              *detectors
	text           string
	i              int // where to look for the next field
	lineSt, lineEn int // the line the last field was on
}

// next returns the next value="…" field.
func (it *snapIter) next() (f snapField, ok bool) {
	text := it.text
	if it.i >= len(text) {
		return f, false
	}
	j := strings.Index(text[it.i:], valueAttr)
	if j < 0 {
		it.i = len(text)
		return f, false
	}
	at := it.i + j
	if at >= it.lineEn || it.lineEn == 0 { // a new line
		it.lineSt = strings.LastIndexByte(text[:at], '\n') + 1
		it.lineEn = len(text)
		if k := strings.IndexByte(text[at:], '\n'); k >= 0 {
			it.lineEn = at + k
		}
	}
	lineSt, lineEn := it.lineSt, it.lineEn
	d := it.d
	f = snapField{}
	f.st = at + len(valueAttr)
	f.en = f.st
	for f.en < lineEn && text[f.en] != '"' {
		if text[f.en] == '\\' {
			f.en++
		}
		f.en++
	}
	f.en = min(f.en, lineEn)
	// what names the field: the line before it (not before an earlier
	// field on the same line, and at most 256 bytes)
	from := max(lineSt, it.i, at-256)
	prefix := strings.TrimLeft(text[from:at], " \t-")
	_, name, _ := quotedAfter(prefix, 0)
	f.masked = impliesPassword(prefix) || d.maskedName(name)
	f.ref = refIn(text[min(f.en+1, lineEn):min(lineEn, f.en+64)])
	it.i = max(f.en+1, at+len(valueAttr))
	return f, true
}

// quotedAfter returns the first "…" in s at or after i (backslash escapes
// kept as written).
func quotedAfter(s string, i int) (end int, q string, ok bool) {
	a := strings.IndexByte(s[i:], '"')
	if a < 0 {
		return 0, "", false
	}
	a += i + 1
	b := a
	for b < len(s) && s[b] != '"' {
		if s[b] == '\\' {
			b++
		}
		b++
	}
	if b > len(s) {
		b = len(s)
	}
	return b, s[a:b], true
}

// refIn finds an element ref in the rest of a snapshot line: "@e4" or
// "[ref=e4]".
func refIn(rest string) string {
	if k := strings.IndexByte(rest, '@'); k >= 0 {
		e := k + 1
		for e < len(rest) && isAlnum(rest[e]) {
			e++
		}
		if e > k+1 {
			return rest[k:e]
		}
	}
	if k := strings.Index(rest, "ref="); k >= 0 {
		e := k + 4
		for e < len(rest) && isAlnum(rest[e]) {
			e++
		}
		if e > k+4 {
			return rest[k+4 : e]
		}
	}
	return ""
}

// snapshotMasks reports whether snapshot text has a masked field with a
// value (the fast path; a detector-flagged value is caught by the raw scan).
func (r *Redactor) snapshotMasks(text string) bool {
	it := snapIter{d: r.det, text: text}
	for {
		f, ok := it.next()
		if !ok {
			return false
		}
		if f.masked && f.en > f.st && !isErased(text[f.st:f.en]) {
			return true
		}
	}
}

// snapshotText erases the values of masked (or detector-flagged) fields.
func (w *scrubber) snapshotText(text string) (string, bool) {
	if !strings.Contains(text, valueAttr) {
		return text, false
	}
	var edits []uedit
	d := w.r.det
	it := snapIter{d: d, text: text}
	for {
		f, ok := it.next()
		if !ok {
			break
		}
		v := text[f.st:f.en]
		if v == "" || isErased(v) {
			continue
		}
		if f.masked || d.found(v) || w.r.knownIn(v) {
			edits = append(edits, uedit{f.st, f.en, w.r.erase(v)})
			w.find("snapshot:masked-field")
			w.remember(unescapeSnap(v))
			if f.masked && f.ref != "" {
				if len(d.maskedRefs) > 4096 {
					clear(d.maskedRefs)
				}
				d.maskedRefs[f.ref] = true
			}
		}
	}
	if len(edits) == 0 {
		return text, false
	}
	return applyEdits(text, edits), true
}

// unescapeSnap undoes a snapshot value's backslash escapes (\" and \\).
func unescapeSnap(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// --- receipts and checks ---

// receipt erases a masked fill's arguments and masked fields in the
// snapshot delta.
func (w *scrubber) receipt(m map[string]any) bool {
	changed := false
	if eff, ok := m["effects"].(map[string]any); ok {
		if t, ok := eff["snapshot_delta"].(string); ok {
			w.push("effects")
			w.push("snapshot_delta")
			if nt, ch := w.snapshotText(t); ch {
				eff["snapshot_delta"], changed = nt, true
			}
			w.pop()
			w.pop()
		}
	}
	act, ok := m["action"].(map[string]any)
	if !ok {
		return changed
	}
	verb, _ := act["verb"].(string)
	args, has := act["args"]
	if !fillVerb(verb) || !has || args == nil {
		return changed
	}
	if !w.r.targetMasked(act["target"], m["resolved"]) {
		return changed
	}
	keep := !strings.EqualFold(verb, "press") // key names are not secrets
	w.push("action")
	w.push("args")
	na, ch := w.eraseLeaves(args, "receipt:masked-target", keep)
	w.pop()
	w.pop()
	if ch {
		act["args"] = na
		changed = true
	}
	return changed
}

// eraseLeaves erases every string and number inside v, one finding each.
func (w *scrubber) eraseLeaves(v any, rule string, remember bool) (any, bool) {
	switch x := v.(type) {
	case string:
		if x == "" || isErased(x) {
			return v, false
		}
		w.find(rule)
		if remember {
			w.remember(x)
		}
		return w.r.erase(x), true
	case json.Number:
		w.find(rule)
		if remember {
			w.remember(x.String())
		}
		return w.r.erase(x.String()), true
	case map[string]any, []any:
		return w.eachChild(x, func(_ string, c any) (any, bool) { return w.eraseLeaves(c, rule, remember) })
	}
	return v, false
}

// check erases expect and actual whole when the target names a masked field.
func (w *scrubber) check(m map[string]any) bool {
	t, _ := m["target"].(string)
	typ, _ := m["type"].(string)
	if !w.r.checkTargetMasked(typ, t) {
		return false
	}
	changed := false
	for _, k := range []string{"expect", "actual"} {
		v, ok := m[k]
		if !ok || v == nil {
			continue
		}
		if s, ok := v.(string); ok && (s == "" || isErased(s)) {
			continue
		}
		w.push(k)
		w.rememberLeaves(v)
		b, err := marshalJSON(v)
		if err != nil {
			b = nil
		}
		m[k] = w.r.erase(string(b))
		w.find("check:masked-field")
		w.pop()
		changed = true
	}
	return changed
}
