package redact

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/jsonspan"
)

// A small CSS selector matcher over the DOM model, for the plan's mask
// selectors. It errs towards matching: masking more is safe, masking less
// leaks. So:
//   - names and values compare ASCII case-insensitively (tags, #id, .class,
//     attribute values — HTML itself does so for type= and friends);
//   - descendant and child combinators walk the model's parents, which run
//     through iframe documents and shadow hosts: a selector matches inside
//     each document and shadow tree, and may also match across them;
//   - the sibling combinators "+" and "~" are widened to the descendant or
//     child relation the sibling has with the left side's parent ("a > b + c"
//     is read as "a > c");
//   - :not() with simple selectors is evaluated; every other pseudo-class
//     and pseudo-element is taken as true.
// Attribute selectors on "value" are refused: values are what redaction
// erases, so a decision made on one could not be made again from the
// redacted log.

type attrOp byte

const (
	opExists   attrOp = 0
	opEq       attrOp = '='
	opWord     attrOp = '~'
	opDash     attrOp = '|'
	opPrefix   attrOp = '^'
	opSuffix   attrOp = '$'
	opContains attrOp = '*'
)

type attrSel struct {
	name string // lowercase
	op   attrOp
	val  string // as written
	lval string // lowercase
}

// compound is a sequence of simple selectors on one element.
type compound struct {
	tag   string // lowercase; "" is any
	attrs []attrSel
	not   []compound // :not(a, b): matches none of them
	loose bool       // holds a pseudo-class taken as true
}

// complexSel is compounds joined by combinators; comb[i] joins parts[i] and
// parts[i+1]: ' ' descendant, '>' child.
type complexSel struct {
	parts []compound
	comb  []byte
}

// selectorSet is a parsed comma list (from several plan entries).
type selectorSet struct {
	sels  []complexSel
	attrs map[string]bool // attribute names the selectors read
}

func (s *selectorSet) empty() bool { return s == nil || len(s.sels) == 0 }

// parseSelectors parses plan selectors. An unparsable one is an error: a
// selector that silently matched nothing would leak.
func parseSelectors(list []string) (*selectorSet, error) {
	set := &selectorSet{attrs: map[string]bool{}}
	for _, text := range list {
		p := &selParser{s: text, attrs: set.attrs}
		sels, err := p.list()
		if err != nil {
			return nil, fmt.Errorf("redact: mask selector %q: %w", text, err)
		}
		set.sels = append(set.sels, sels...)
	}
	return set, nil
}

type selParser struct {
	s     string
	i     int
	attrs map[string]bool
}

func (p *selParser) errf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: "+format, append([]any{p.i}, args...)...)
}

func (p *selParser) eof() bool { return p.i >= len(p.s) }

func (p *selParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

func (p *selParser) space() bool {
	s := p.i
	for !p.eof() && strings.IndexByte(" \t\n\r\f", p.s[p.i]) >= 0 {
		p.i++
	}
	return p.i > s
}

func (p *selParser) list() ([]complexSel, error) {
	var out []complexSel
	for {
		p.space()
		c, err := p.complex()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		p.space()
		if p.eof() {
			return out, nil
		}
		if p.peek() != ',' {
			return nil, p.errf("unexpected %q", p.peek())
		}
		p.i++
	}
}

func (p *selParser) complex() (complexSel, error) {
	var c complexSel
	first, err := p.compound()
	if err != nil {
		return c, err
	}
	c.parts = append(c.parts, first)
	for {
		ws := p.space()
		if p.eof() || p.peek() == ',' || p.peek() == ')' {
			return c, nil
		}
		comb := byte(' ')
		switch p.peek() {
		case '>', '+', '~':
			comb = p.peek()
			p.i++
			p.space()
		default:
			if !ws {
				return c, p.errf("unexpected %q", p.peek())
			}
		}
		next, err := p.compound()
		if err != nil {
			return c, err
		}
		if comb == '+' || comb == '~' {
			// A sibling shares the left side's parent: drop the left
			// compound and keep the relation it had to its own left.
			last := len(c.parts) - 1
			if last == 0 {
				c.parts[0] = next
			} else {
				c.parts[last] = next
			}
			continue
		}
		c.parts = append(c.parts, next)
		c.comb = append(c.comb, comb)
	}
}

func (p *selParser) compound() (compound, error) {
	var c compound
	start := p.i
	if p.peek() == '*' {
		p.i++
	} else if cssIdentStart(p.s, p.i) {
		name, err := p.ident()
		if err != nil {
			return c, err
		}
		c.tag = strings.ToLower(name)
	}
	if p.peek() == '|' {
		return c, p.errf("namespaces are not supported")
	}
	for !p.eof() {
		switch p.peek() {
		case '#':
			p.i++
			name, err := p.ident()
			if err != nil {
				return c, err
			}
			p.attrs["id"] = true
			c.attrs = append(c.attrs, attrSel{name: "id", op: opEq, val: name, lval: strings.ToLower(name)})
		case '.':
			p.i++
			name, err := p.ident()
			if err != nil {
				return c, err
			}
			p.attrs["class"] = true
			c.attrs = append(c.attrs, attrSel{name: "class", op: opWord, val: name, lval: strings.ToLower(name)})
		case '[':
			a, err := p.attr()
			if err != nil {
				return c, err
			}
			c.attrs = append(c.attrs, a)
		case ':':
			if err := p.pseudo(&c); err != nil {
				return c, err
			}
		default:
			if p.i == start {
				return c, p.errf("expected a selector")
			}
			return c, nil
		}
	}
	if p.i == start {
		return c, p.errf("expected a selector")
	}
	return c, nil
}

func (p *selParser) attr() (attrSel, error) {
	var a attrSel
	p.i++ // [
	p.space()
	name, err := p.ident()
	if err != nil {
		return a, err
	}
	if p.peek() == '|' && p.i+1 < len(p.s) && p.s[p.i+1] != '=' {
		return a, p.errf("namespaces are not supported")
	}
	a.name = strings.ToLower(name)
	if a.name == "value" {
		return a, p.errf("attribute selectors on value are not supported (values are erased)")
	}
	p.attrs[a.name] = true
	p.space()
	if p.peek() == ']' {
		p.i++
		return a, nil
	}
	switch p.peek() {
	case '=':
		a.op = opEq
		p.i++
	case '~', '|', '^', '$', '*':
		a.op = attrOp(p.peek())
		p.i++
		if p.peek() != '=' {
			return a, p.errf("expected =")
		}
		p.i++
	default:
		return a, p.errf("unexpected %q in attribute selector", p.peek())
	}
	p.space()
	var val string
	if q := p.peek(); q == '"' || q == '\'' {
		val, err = p.quoted(q)
	} else {
		val, err = p.ident()
	}
	if err != nil {
		return a, err
	}
	a.val, a.lval = val, strings.ToLower(val)
	p.space()
	if c := p.peek(); c == 'i' || c == 'I' || c == 's' || c == 'S' {
		p.i++ // outside :not() every comparison is case-insensitive
		p.space()
	}
	if p.peek() != ']' {
		return a, p.errf("expected ]")
	}
	p.i++
	return a, nil
}

func (p *selParser) pseudo(c *compound) error {
	p.i++
	if p.peek() == ':' {
		p.i++
	}
	name, err := p.ident()
	if err != nil {
		return err
	}
	if p.peek() != '(' {
		c.loose = true // taken as true
		return nil
	}
	if strings.EqualFold(name, "not") {
		// The argument is matched strictly (case-sensitive values), and
		// only when it is exact: an over-approximate argument would
		// make :not() under-approximate, and under-matching leaks.
		save := p.i
		p.i++
		var alts []compound
		ok := true
		for ok {
			p.space()
			alt, err := p.compound()
			if err != nil || alt.loose || len(alt.not) > 0 {
				ok = false
				break
			}
			alts = append(alts, alt)
			p.space()
			switch p.peek() {
			case ',':
				p.i++
			case ')':
				p.i++
				c.not = append(c.not, alts...)
				return nil
			default:
				ok = false
			}
		}
		p.i = save // not simple: taken as true
	}
	c.loose = true
	return p.skipParens()
}

// skipParens skips a balanced (...) group, honouring quotes.
func (p *selParser) skipParens() error {
	depth := 0
	for !p.eof() {
		switch c := p.s[p.i]; c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				p.i++
				return nil
			}
		case '"', '\'':
			if _, err := p.quoted(c); err != nil {
				return err
			}
			continue
		case '\\':
			p.i++
		}
		p.i++
	}
	return p.errf("unbalanced parentheses")
}

func cssIdentStart(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	if c == '-' {
		return i+1 < len(s) && (s[i+1] == '-' || cssIdentStart(s, i+1))
	}
	return c == '_' || c == '\\' || c >= 0x80 || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func (p *selParser) ident() (string, error) {
	if !cssIdentStart(p.s, p.i) {
		return "", p.errf("expected a name")
	}
	var b strings.Builder
	for !p.eof() {
		c := p.s[p.i]
		switch {
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		case c == '-' || c == '_' || c >= 0x80 || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z'):
			b.WriteByte(c)
			p.i++
		default:
			return b.String(), nil
		}
	}
	return b.String(), nil
}

// escape reads a CSS escape at p.i (a backslash).
func (p *selParser) escape() (rune, error) {
	p.i++
	if p.eof() {
		return 0, p.errf("escape at end")
	}
	hex := 0
	var r rune
	for hex < 6 && !p.eof() && jsonspan.Unhex(p.s[p.i]) >= 0 {
		c := p.s[p.i] | 0x20
		d := rune(c - '0')
		if c >= 'a' {
			d = rune(c-'a') + 10
		}
		r = r*16 + d
		hex++
		p.i++
	}
	if hex > 0 {
		if !p.eof() && strings.IndexByte(" \t\n\r\f", p.s[p.i]) >= 0 {
			p.i++
		}
		if r == 0 || r > utf8.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
			r = utf8.RuneError
		}
		return r, nil
	}
	r, size := utf8.DecodeRuneInString(p.s[p.i:])
	p.i += size
	return r, nil
}

func (p *selParser) quoted(q byte) (string, error) {
	p.i++
	var b strings.Builder
	for !p.eof() {
		c := p.s[p.i]
		switch c {
		case q:
			p.i++
			return b.String(), nil
		case '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", p.errf("unterminated string")
}

// matches reports whether n matches any selector of the set.
func (s *selectorSet) matches(n *dnode) bool {
	if s == nil || n.kind != event.RRWebNodeElement {
		return false
	}
	for i := range s.sels {
		sel := &s.sels[i]
		if matchComplex(sel, len(sel.parts)-1, n) {
			return true
		}
	}
	return false
}

// matchComplex matches sel.parts[:k+1] with parts[k] on n.
func matchComplex(sel *complexSel, k int, n *dnode) bool {
	if !sel.parts[k].match(n, false) {
		return false
	}
	if k == 0 {
		return true
	}
	switch sel.comb[k-1] {
	case '>':
		p := n.parentElement()
		return p != nil && matchComplex(sel, k-1, p)
	default:
		for p := n.parentElement(); p != nil; p = p.parentElement() {
			if matchComplex(sel, k-1, p) {
				return true
			}
		}
		return false
	}
}

// match matches c on n. strict compares values case-sensitively, for
// :not() arguments, where matching less is the safe side.
func (c *compound) match(n *dnode, strict bool) bool {
	if c.tag != "" && c.tag != n.tag {
		return false
	}
	for i := range c.attrs {
		if !c.attrs[i].match(n, strict) {
			return false
		}
	}
	for i := range c.not {
		if c.not[i].match(n, true) {
			return false
		}
	}
	return true
}

func (a *attrSel) match(n *dnode, strict bool) bool {
	v, ok := n.attr(a.name)
	if !ok {
		return false
	}
	if a.op == opExists {
		return true
	}
	want := a.val
	if !strict {
		v, want = strings.ToLower(v), a.lval
	}
	return compareAttr(a.op, v, want)
}

func compareAttr(op attrOp, v, want string) bool {
	switch op {
	case opEq:
		return v == want
	case opWord:
		if want == "" {
			return false
		}
		for _, w := range strings.Fields(v) {
			if w == want {
				return true
			}
		}
		return false
	case opDash:
		return v == want || strings.HasPrefix(v, want+"-")
	case opPrefix:
		return want != "" && strings.HasPrefix(v, want)
	case opSuffix:
		return want != "" && strings.HasSuffix(v, want)
	case opContains:
		return want != "" && strings.Contains(v, want)
	}
	return false
}
