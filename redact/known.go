package redact

import (
	"strings"

	"github.com/flightrec/flightrec/event"
)

// Known values (knownValues in redact.go) are matched in every event. With
// a handful, strings.Contains per value is fastest; a long recording can
// remember hundreds (tokens, cookies, typed passwords), and then a
// per-value loop would cost every event microseconds. knownIdx indexes the
// values, and the spellings they take in raw JSON, by their first four
// bytes (every known value has at least four: knownValues.minLen), behind a
// 64 Ki-bit filter, so one pass over a string finds every candidate.

// knownLoopMax is the number of known values up to which a plain loop is
// used.
const knownLoopMax = 2

type knownForm struct{ form, value string }

type knownIdx struct {
	count  int                 // len(knownValues.vals) when last synced
	vals   map[string]struct{} // values indexed
	first  map[uint32][]knownForm
	filter [1 << 10]uint64 // bit h(first four bytes) of every form
	short  []string        // values under four bytes, matched by a loop
}

func quad(s string, i int) uint32 {
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}

func quadHash(q uint32) uint32 { return (q * 0x9E3779B1) >> 16 }

// sync indexes values added since the last call (by anyone: the DOM
// redactor adds to the same set).
func (d *detectors) syncKnown(k *knownValues) *knownIdx {
	x := &d.known
	if x.count == len(k.vals) {
		return x
	}
	if x.vals == nil {
		x.vals = map[string]struct{}{}
		x.first = map[uint32][]knownForm{}
	}
	for v := range k.vals {
		if _, ok := x.vals[v]; ok {
			continue
		}
		x.vals[v] = struct{}{}
		if len(v) < 4 { // knownValues.minLen keeps these out; should that change, stay correct
			x.short = append(x.short, v)
			continue
		}
		x.addForm(v, v)
		for _, f := range encodedForms(v) {
			if len(f) >= 4 {
				x.addForm(f, v)
			}
		}
	}
	x.count = len(k.vals)
	return x
}

func (x *knownIdx) addForm(f, v string) {
	q := quad(f, 0)
	h := quadHash(q)
	x.filter[h>>6] |= 1 << (h & 63)
	x.first[q] = append(x.first[q], knownForm{f, v})
}

// knownIn reports whether any known value appears in raw JSON s, plainly,
// JSON-escaped or percent-encoded.
func (r *Redactor) knownIn(s string) bool {
	if len(r.hashed.byLen) > 0 && len(r.hashedSpans(s, true)) > 0 {
		return true
	}
	vals := r.known.vals
	if len(vals) == 0 {
		return false
	}
	if len(vals) <= knownLoopMax {
		for v := range vals {
			if strings.Contains(s, v) {
				return true
			}
			forms, ok := r.det.knownForms[v]
			if !ok {
				forms = encodedForms(v)
				if len(r.det.knownForms) > 1<<14 {
					clear(r.det.knownForms)
				}
				r.det.knownForms[v] = forms
			}
			for _, f := range forms {
				if strings.Contains(s, f) {
					return true
				}
			}
		}
		return false
	}
	x := r.det.syncKnown(r.known)
	for _, v := range x.short {
		if strings.Contains(s, v) {
			return true
		}
	}
	for i := 0; i+4 <= len(s); i++ {
		q := quad(s, i)
		h := quadHash(q)
		if x.filter[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, f := range x.first[q] {
			if strings.HasPrefix(s[i:], f.form) {
				return true
			}
		}
	}
	return false
}

// replaceKnown replaces every known value in s, in any of its spellings
// (JSON inside a string, percent-encoded), the longest at a position
// first, with the value's erased form.
func (r *Redactor) replaceKnown(s string) (string, bool) {
	out, hit := r.replacePlainKnown(s)
	if len(r.hashed.byLen) > 0 {
		if o, h := r.replaceHashed(out); h {
			out, hit = o, true
		}
	}
	return out, hit
}

func (r *Redactor) replacePlainKnown(s string) (string, bool) {
	if len(r.known.vals) == 0 {
		return s, false
	}
	x := r.det.syncKnown(r.known)
	var b *strings.Builder
	last := 0
	for i := 0; i+4 <= len(s); {
		q := quad(s, i)
		h := quadHash(q)
		if x.filter[h>>6]&(1<<(h&63)) == 0 {
			i++
			continue
		}
		var best knownForm
		for _, f := range x.first[q] {
			if len(f.form) > len(best.form) && strings.HasPrefix(s[i:], f.form) {
				best = f
			}
		}
		if best.form == "" {
			i++
			continue
		}
		if b == nil {
			b = &strings.Builder{}
			b.Grow(len(s))
		}
		b.WriteString(s[last:i])
		b.WriteString(r.erase(best.value))
		i += len(best.form)
		last = i
	}
	out, hit := s, b != nil
	if b != nil {
		b.WriteString(s[last:])
		out = b.String()
	}
	for _, v := range x.short {
		if strings.Contains(out, v) {
			out, hit = strings.ReplaceAll(out, v, r.erase(v)), true
		}
	}
	return out, hit
}

// RescrubKnown replaces the known values in an event's already redacted
// data. Ingest calls it for the events of a batch that were redacted
// before a later event of the same batch taught a value (a cookie an
// analytics beacon echoed in its URL before the request that carries it),
// so the whole batch is scrubbed with the set as it stands when the batch
// is written. It returns nil when nothing changed.
func (r *Redactor) RescrubKnown(kind event.Kind, data []byte) ([]byte, []Finding, error) {
	if !r.knownIn(bytesString(data)) {
		return nil, nil, nil
	}
	v, err := decodeJSON(data)
	if err != nil {
		return nil, nil, errBadData
	}
	w := &scrubber{r: r, channel: string(kind)}
	nv, changed := w.knownOnly(v)
	if !changed {
		return nil, nil, nil
	}
	out, err := marshalJSON(nv)
	if err != nil {
		return nil, nil, errBadData
	}
	return out, w.findings, nil
}

// knownOnly replaces known values in every string of v (object members'
// names are left alone).
func (w *scrubber) knownOnly(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		s, ok := w.r.replaceKnown(x)
		if ok {
			w.find("known-value")
		}
		return s, ok
	case map[string]any, []any:
		return w.eachChild(x, func(_ string, c any) (any, bool) { return w.knownOnly(c) })
	}
	return v, false
}
