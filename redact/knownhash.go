package redact

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
	"strings"
)

// The known-value set outlives a restart without a value on disk. For each
// spelling of each known value (knownSpellings) the redactor keeps a
// KnownHashSize-byte entry: the spelling's length, its keyed rolling hash
// (a polynomial hash modulo 2^61-1 whose base is derived from the server's
// redact-pseudonym key), the first 8 bytes of its HMAC-SHA256 under that
// key, and the value's pseudonym (the HMAC of the value, which is what
// erase writes). Ingest appends the entries of the values a batch taught to
// the recording's known-hashes file before the batch's log records, so an
// acknowledged event's secrets are remembered; a restarted server loads
// them (LoadKnownHashes) and finds the spellings in later text by sliding
// the rolling hash over it at each remembered length and confirming a hit
// with the HMAC. Without the key nothing in the file is a value: guessing
// a value means computing HMACs under a key the file does not hold.

// KnownHashSize is the size of one entry: length (4), rolling hash (8),
// HMAC prefix (8), pseudonym (8), little-endian.
const KnownHashSize = 28

type knownHash struct {
	mac, pseudo [8]byte
}

// hashedKnown is the set loaded from disk, by length then rolling hash.
type hashedKnown struct {
	base  uint64                           // the rolling hash's base (keyed)
	byLen map[int]map[uint64][]knownHash   // length → rolling hash → entries
	pow   map[int]uint64                   // base^(length-1)
	seen  map[[KnownHashSize]byte]struct{} // entries held, to skip repeats
}

const rollMod = 1<<61 - 1

func mulMod(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	// 2^64 = 2^3 (mod 2^61-1): fold the high part in
	r := (hi<<3 | lo>>61) + (lo & rollMod) // < 2^62: at most two subtractions
	for r >= rollMod {
		r -= rollMod
	}
	return r
}

func addMod(a, b uint64) uint64 {
	r := a + b
	if r >= rollMod {
		r -= rollMod
	}
	return r
}

func rollBase(key []byte) uint64 {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("flightrec known-value rolling hash base"))
	b := binary.LittleEndian.Uint64(m.Sum(nil)) % rollMod
	if b < 256 {
		b += 256
	}
	return b
}

func rollHash(base uint64, s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = addMod(mulMod(h, base), uint64(s[i])+1)
	}
	return h
}

// rollSlide moves a window's rolling hash one byte on: out leaves, in
// enters; pw is base^(length-1).
func rollSlide(hv uint64, out, in byte, pw, base uint64) uint64 {
	hv = addMod(hv, rollMod-mulMod(uint64(out)+1, pw))
	return addMod(mulMod(hv, base), uint64(in)+1)
}

func (r *Redactor) mac8(s string) (out [8]byte) {
	m := hmac.New(sha256.New, r.hkey)
	m.Write([]byte(s))
	copy(out[:], m.Sum(nil))
	return out
}

// hashKnown queues the entries of a newly known value for
// TakeKnownHashes.
func (r *Redactor) hashKnown(v string) {
	if r.hkey == nil {
		return
	}
	if r.hashed.base == 0 {
		r.hashed.base = rollBase(r.hkey)
	}
	pseudo := r.mac8(v)
	for _, f := range append([]string{v}, encodedForms(v)...) {
		if len(f) < 4 {
			continue
		}
		var e [KnownHashSize]byte
		binary.LittleEndian.PutUint32(e[0:], uint32(len(f)))
		binary.LittleEndian.PutUint64(e[4:], rollHash(r.hashed.base, f))
		m := r.mac8(f)
		copy(e[12:], m[:])
		copy(e[20:], pseudo[:])
		r.pendingHashes = append(r.pendingHashes, e[:]...)
	}
}

// TakeKnownHashes returns the entries of the values learned since the last
// call (nil when none), for the caller to make durable with the events.
func (r *Redactor) TakeKnownHashes() []byte {
	b := r.pendingHashes
	r.pendingHashes = nil
	return b
}

var errKnownHashes = errors.New("redact: known-value hashes are not whole entries")

// LoadKnownHashes adds entries written by TakeKnownHashes (by this server
// before a restart) to the set matched in every string.
func (r *Redactor) LoadKnownHashes(b []byte) error {
	if len(b)%KnownHashSize != 0 {
		// a torn final entry: its batch was never acknowledged
		b = b[:len(b)-len(b)%KnownHashSize]
	}
	if r.hkey == nil {
		if len(b) == 0 {
			return nil
		}
		return errKnownHashes
	}
	h := &r.hashed
	if h.base == 0 {
		h.base = rollBase(r.hkey)
	}
	if h.byLen == nil {
		h.byLen, h.pow, h.seen = map[int]map[uint64][]knownHash{}, map[int]uint64{}, map[[KnownHashSize]byte]struct{}{}
	}
	for ; len(b) >= KnownHashSize; b = b[KnownHashSize:] {
		var e [KnownHashSize]byte
		copy(e[:], b)
		if _, dup := h.seen[e]; dup {
			continue
		}
		h.seen[e] = struct{}{}
		n := int(binary.LittleEndian.Uint32(e[0:]))
		if n < 4 || n > 1<<20 {
			continue
		}
		roll := binary.LittleEndian.Uint64(e[4:])
		var k knownHash
		copy(k.mac[:], e[12:20])
		copy(k.pseudo[:], e[20:28])
		m := h.byLen[n]
		if m == nil {
			m = map[uint64][]knownHash{}
			h.byLen[n] = m
			p := uint64(1)
			for i := 1; i < n; i++ {
				p = mulMod(p, h.base)
			}
			h.pow[n] = p
		}
		m[roll] = append(m[roll], k)
	}
	return nil
}

// hashedSpans finds the spellings of loaded known values in s: sorted,
// non-overlapping spans with their pseudonyms (longer lengths first at a
// position).
func (r *Redactor) hashedSpans(s string, first bool) []hspan {
	h := &r.hashed
	if len(h.byLen) == 0 {
		return nil
	}
	var out []hspan
	for n, m := range h.byLen {
		if len(s) < n {
			continue
		}
		pw := h.pow[n]
		hv := rollHash(h.base, s[:n])
		for i := 0; ; i++ {
			if ks, ok := m[hv]; ok {
				mac := r.mac8(s[i : i+n])
				for _, k := range ks {
					if hmac.Equal(mac[:], k.mac[:]) {
						out = append(out, hspan{i, i + n, k.pseudo})
						if first {
							return out
						}
						break
					}
				}
			}
			if i+n >= len(s) {
				break
			}
			hv = rollSlide(hv, s[i], s[i+n], pw, h.base)
		}
	}
	if len(out) < 2 {
		return out
	}
	sortSpans(out)
	k := out[:1]
	for _, x := range out[1:] {
		if x.st >= k[len(k)-1].en {
			k = append(k, x)
		}
	}
	return k
}

type hspan struct {
	st, en int
	pseudo [8]byte
}

func sortSpans(sp []hspan) {
	// insertion sort: few spans, by start then longest first
	for i := 1; i < len(sp); i++ {
		for j := i; j > 0 && (sp[j].st < sp[j-1].st || sp[j].st == sp[j-1].st && sp[j].en > sp[j-1].en); j-- {
			sp[j], sp[j-1] = sp[j-1], sp[j]
		}
	}
}

// erasePseudo is erase for a value known only by its pseudonym.
func (r *Redactor) erasePseudo(p [8]byte) string {
	if r.key == nil {
		return Erased
	}
	return "[redacted:" + hex.EncodeToString(p[:]) + "]"
}

// replaceHashed replaces the loaded known values' spellings in s.
func (r *Redactor) replaceHashed(s string) (string, bool) {
	sp := r.hashedSpans(s, false)
	if len(sp) == 0 {
		return s, false
	}
	var b strings.Builder
	last := 0
	for _, x := range sp {
		b.WriteString(s[last:x.st])
		b.WriteString(r.erasePseudo(x.pseudo))
		last = x.en
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// base64Forms are the spellings v takes inside longer base64 text, in the
// standard and URL alphabets, at each of the three alignments it can have:
// the characters that v's bytes alone decide (those shared with the
// neighbouring bytes are left out). Forms under 8 characters are left out
// too: they would match unrelated text.
func base64Forms(v string) []string {
	var out []string
	for k := 0; k < 3; k++ {
		enc := base64.RawStdEncoding.EncodeToString([]byte(strings.Repeat("\x00", k) + v))
		skip := (k*8 + 5) / 6
		end := (k + len(v)) * 8 / 6
		if end-skip < 8 {
			continue
		}
		f := enc[skip:end]
		out = append(out, f)
		if u := strings.NewReplacer("+", "-", "/", "_").Replace(f); u != f {
			out = append(out, u)
		}
	}
	return out
}
