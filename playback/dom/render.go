package dom

import (
	"html"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/flightrec/flightrec/event"
)

// CSP is the Content-Security-Policy the HTTP layer must send with every
// RenderInert output. The rendering removes everything that could run or
// fetch, and this policy forbids the same things again, so that one slip
// in either layer is not enough: no script, no connection, no frame, no
// plug-in, no external style, image or font (only inline styles and data:
// images and fonts), no form submission, no <base>, framing only by our own
// pages, and a sandbox with no allowances (an opaque origin, no script, no
// forms, no popups, no top navigation), so the recorded page never acts in
// flightrec's origin even if it were served without the rendering's care.
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; " +
	"form-action 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox"

// SetHeaders sets the response headers an inert rendering must be served
// with: the HTML type in UTF-8 (as the document declares), CSP, no
// sniffing, no referrer, same-origin framing only (for browsers without
// frame-ancestors) and same-origin embedding. Caching is the caller's: a
// rendering of a recording at one seq never changes, so Doc.Seq makes an
// ETag, but it is served because this caller may read the recording.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// headMetas opens every rendering's <head>: the charset (the document is
// UTF-8 whatever the recorded page declared, and the recorded <meta>s are
// dropped) and no referrer for anything the viewer does follow.
const headMetas = `<meta charset="utf-8"><meta name="referrer" content="no-referrer">`

// dropElements are not rendered, nor anything inside them: they run script
// (script, SVG handler/listener), load or embed other documents or
// plug-ins (frames, object, embed, applet, portal, fencedframe), change how
// the rest resolves or behaves (base, meta: refresh, CSP, charset), hold
// fallback or inert markup that must not be parsed as live (noscript,
// noembed, noframes, template), or embed another namespace's content
// (SVG foreignObject). <link> is rendered only as the style sheet rrweb
// inlined into it.
var dropElements = map[string]bool{
	"script": true, "noscript": true, "iframe": true, "frame": true, "frameset": true,
	"object": true, "embed": true, "applet": true, "portal": true, "fencedframe": true,
	"param": true, "base": true, "meta": true, "template": true, "noembed": true,
	"noframes": true, "foreignobject": true, "handler": true, "listener": true,
}

// svgAnimations are dropped when they target an attribute that could
// navigate or run script: an animation can set href to javascript: after
// the rendering's checks ran.
var svgAnimations = map[string]bool{
	"animate": true, "set": true, "animatemotion": true, "animatetransform": true, "animatecolor": true,
}

// dropAttrs are never rendered: they submit or ping (action, formaction,
// ping), hold a document (srcdoc), or name resources to fetch in ways not
// worth rewriting (srcset candidates, plug-in and manifest URLs).
var dropAttrs = map[string]bool{
	"action": true, "formaction": true, "ping": true, "srcdoc": true, "srcset": true,
	"imagesrcset": true, "manifest": true, "codebase": true, "archive": true, "classid": true,
	"longdesc": true, "profile": true, "icon": true, "lowsrc": true, "dynsrc": true,
	"http-equiv": true, "nonce": true, "integrity": true,
}

// fetchAttrs load their URL as the page renders: only raster data: images
// are kept, so nothing is fetched from the recorded site (or anywhere).
var fetchAttrs = map[string]bool{"src": true, "poster": true, "background": true, "data": true}

var voidElements = map[string]bool{
	"area": true, "br": true, "col": true, "embed": true, "hr": true, "img": true, "input": true,
	"link": true, "meta": true, "source": true, "track": true, "wbr": true, "keygen": true,
	"base": true, "param": true,
}

// hrefAttr is the attribute a link's target is kept in: inert text a
// viewer can show, never followed.
const hrefAttr = "data-flightrec-href"

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// validTagName accepts the names a serializer can write without changing
// what is parsed: an ASCII letter, then letters, digits, "-", "_", ".",
// ":". An element with another name (rrweb records what the page's DOM
// held, which script can make anything) is rendered as its children.
func validTagName(s string) bool {
	if s == "" || !('a' <= s[0]|0x20 && s[0]|0x20 <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(('a' <= c|0x20 && c|0x20 <= 'z') || ('0' <= c && c <= '9') || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// validAttrName is validTagName's rule for attributes (which may also
// start with "_" or ":"); anything else is dropped, so that no name can
// smuggle a quote, "=", "/" or ">" into the markup.
func validAttrName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(('a' <= c|0x20 && c|0x20 <= 'z') || c == '_' || c == ':' || (i > 0 && (('0' <= c && c <= '9') || c == '-' || c == '.'))) {
			return false
		}
	}
	return true
}

func attrFold(x *node, name string) (string, bool) {
	for i := range x.attrs {
		if strings.EqualFold(x.attrs[i].name, name) {
			return x.attrs[i].val, true
		}
	}
	return "", false
}

type frame struct {
	name string // the end tag to write; "" for none
	svg  bool
}

type renderer struct {
	d     *Doc
	w     io.Writer
	buf   []byte
	err   error
	metas bool
	open  []frame
}

// RenderInert writes the document as a standalone HTML page that runs
// nothing and fetches nothing, for a viewer to show as the page stood.
//
// Removed: script, noscript, frames, object, embed, applet, portal, base,
// every meta (charset and referrer metas of its own open <head>), template,
// SVG foreignObject and script, SVG animations of href or handlers; every
// on* attribute, srcdoc, action, formaction, ping, srcset; any attribute
// whose value is a javascript:, vbscript: or data: URL (other than a raster
// data: image), however spaced, cased or entity-encoded; src, poster,
// background and SVG hrefs unless they are raster data: images (or, for
// hrefs, "#fragment" references); a link's href is kept as inert text in
// data-flightrec-href. <link> becomes a <style> holding the sheet rrweb
// inlined (_cssText), if any; every style sheet and style attribute loses
// @import and url() other than raster data: images and fragments. rrweb's
// own attributes (rr_*, _cssText) are not written, nor are comments. Text
// and attribute values are escaped (and invalid UTF-8 replaced), so that a
// recorded string is only ever text.
//
// Form controls show their recorded value and checkedness. The output is
// UTF-8; serve it with SetHeaders.
func (d *Doc) RenderInert(w io.Writer) error {
	r := &renderer{d: d, w: w, buf: make([]byte, 0, 32<<10)}
	r.document()
	r.flush()
	return r.err
}

func (r *renderer) flush() {
	if r.err == nil && len(r.buf) > 0 {
		_, r.err = r.w.Write(r.buf)
	}
	r.buf = r.buf[:0]
}

func (r *renderer) s(s string) {
	r.buf = append(r.buf, s...)
	if len(r.buf) >= 32<<10 {
		r.flush()
	}
}

func (r *renderer) document() {
	d := r.d
	if d.root < 0 {
		r.s("<!DOCTYPE html><html><head>" + headMetas + "</head><body></body></html>\n")
		return
	}
	root := &d.nodes[d.root]
	if root.kind != event.RRWebNodeDocument {
		r.s("<html><head>" + headMetas + "</head><body>")
		r.tree(d.root)
		r.s("</body></html>\n")
		return
	}
	html := false
	for c := root.first; c >= 0; c = d.nodes[c].next {
		if d.nodes[c].kind == event.RRWebNodeDocType {
			r.s("<!DOCTYPE html>")
			break
		}
	}
	for c := root.first; c >= 0; c = d.nodes[c].next {
		if d.nodes[c].kind == event.RRWebNodeElement {
			html = lower(d.nodes[c].tag) == "html"
			break
		}
	}
	if !html {
		r.s("<html><head>" + headMetas + "</head><body>")
		r.metas = true
	}
	for c := root.first; c >= 0; c = d.nodes[c].next {
		if k := d.nodes[c].kind; k == event.RRWebNodeElement || (!html && k == event.RRWebNodeText) {
			r.tree(c)
		}
	}
	if !html {
		r.s("</body></html>")
	}
	r.s("\n")
}

func (r *renderer) tree(top int32) {
	r.d.walk(top, r.enter, r.leave)
}

func (r *renderer) leave(int32) {
	f := r.open[len(r.open)-1]
	r.open = r.open[:len(r.open)-1]
	if f.name != "" {
		r.s("</")
		r.s(f.name)
		r.s(">")
	}
}

func (r *renderer) inSVG() bool { return len(r.open) > 0 && r.open[len(r.open)-1].svg }

func (r *renderer) enter(n int32) bool {
	x := &r.d.nodes[n]
	switch x.kind {
	case event.RRWebNodeText:
		r.text(x.text)
		return false
	case event.RRWebNodeElement:
		return r.element(n, x)
	}
	// Doctypes, comments and CDATA sections show nothing (and a comment's
	// text could end it early); a document inside an element is a frame's,
	// rendered by frameContent, never from here.
	return false
}

// frameContent renders a frame element whose document rrweb recorded
// (a same-origin frame's, or a cross-origin one's the recorder asked rrweb
// for) as a block holding that document's elements, rendered by the same
// rules as the page's: the frame's content shows where the frame was, and
// nothing is loaded or run. It reports false when the frame has no
// recorded document (then it is dropped like any frame).
func (r *renderer) frameContent(x *node) bool {
	d := r.d
	doc := int32(-1)
	for c := x.first; c >= 0; c = d.nodes[c].next {
		if d.nodes[c].kind == event.RRWebNodeDocument {
			doc = c
			break
		}
	}
	if doc < 0 {
		return false
	}
	r.s(`<div data-flightrec-frame="`)
	if t, ok := attrFold(x, "title"); ok {
		r.esc(t, true)
	}
	r.s(`" style="display:block;border:1px dashed #9aa5b1">`)
	r.open = append(r.open, frame{name: "div"})
	for c := d.nodes[doc].first; c >= 0; c = d.nodes[c].next {
		if d.nodes[c].kind == event.RRWebNodeElement {
			r.tree(c)
		}
	}
	r.leave(doc)
	return true
}

func (r *renderer) element(n int32, x *node) bool {
	lt := lower(x.tag)
	svg := x.flags&fSVG != 0 || r.inSVG() || lt == "svg"
	if !validTagName(x.tag) {
		r.open = append(r.open, frame{svg: r.inSVG()})
		return true
	}
	if (lt == "iframe" || lt == "frame") && r.frameContent(x) {
		return false
	}
	if dropElements[lt] {
		return false
	}
	if svgAnimations[lt] {
		t, _ := attrFold(x, "attributeName")
		// Any name ending in href (href, xlink:href, another prefix's
		// href): an animation never needs to retarget a link.
		// The whole name, folded as urlPrefix folds it but uncut: a
		// long name must not hide its href suffix past a prefix's cap.
		t = strings.ToLower(strings.Map(func(r rune) rune {
			if r <= ' ' || r == 0x7f {
				return -1
			}
			return r
		}, html.UnescapeString(t)))
		if strings.HasSuffix(t, "href") || t == "src" || strings.HasPrefix(t, "on") {
			return false
		}
	}
	switch lt {
	case "link":
		if css, ok := attrFold(x, "_cssText"); ok {
			r.s("<style")
			if m, ok := attrFold(x, "media"); ok && !dangerousURL(m) {
				r.s(` media="`)
				r.esc(m, true)
				r.s(`"`)
			}
			r.s(">")
			r.css(css, false)
			r.s("</style>")
		}
		return false
	case "style":
		css, ok := attrFold(x, "_cssText")
		if !ok {
			css = r.d.childText(n)
		}
		r.s("<style")
		r.attrs(x, lt, svg, nil)
		r.s(">")
		r.css(css, svg)
		r.s("</style>")
		return false
	case "textarea":
		if !svg {
			val, ok := attrFold(x, "value")
			if !ok {
				val = r.d.childText(n)
			}
			r.s("<textarea")
			r.attrs(x, lt, svg, nil)
			r.s(">")
			if strings.HasPrefix(val, "\n") { // the parser drops a first newline
				r.s("\n")
			}
			r.text(val)
			r.s("</textarea>")
			return false
		}
	}
	name := x.tag
	if !svg {
		name = lt
		if lt == "xmp" || lt == "plaintext" { // raw-text elements: as <pre>, so escaped text reads as text
			name = "pre"
		}
	}
	var selected *bool
	if lt == "option" && !svg {
		selected = r.d.optionSelected(n)
	}
	r.s("<")
	r.s(name)
	r.attrs(x, lt, svg, selected)
	r.s(">")
	if lt == "html" && !r.metas && !r.d.hasChild(n, "head") {
		r.s("<head>" + headMetas + "</head>")
		r.metas = true
	}
	if lt == "head" && !r.metas {
		r.s(headMetas)
		r.metas = true
	}
	if !svg && voidElements[lt] {
		return false
	}
	if !svg && (name == "pre" || lt == "listing") {
		if c := x.first; c >= 0 && r.d.nodes[c].kind == event.RRWebNodeText && strings.HasPrefix(r.d.nodes[c].text, "\n") {
			r.s("\n")
		}
	}
	r.open = append(r.open, frame{name: name, svg: svg})
	return true
}

// attrs writes an element's attributes that are safe to keep (see
// RenderInert). selected, for an <option> of a <select> whose value was
// recorded, replaces the recorded selected attribute.
func (r *renderer) attrs(x *node, lt string, svg bool, selected *bool) {
	for i := range x.attrs {
		name, val := x.attrs[i].name, x.attrs[i].val
		if !validAttrName(name) {
			continue
		}
		ln := lower(name)
		switch {
		case strings.HasPrefix(ln, "on"), strings.HasPrefix(ln, "rr_"), ln == "_csstext", dropAttrs[ln]:
			continue
		case fetchAttrs[ln]:
			if !rasterURL(val) {
				continue
			}
		case ln == "href" || strings.HasSuffix(ln, ":href"):
			switch {
			case fragmentURL(val):
			case svg && (lt == "image" || lt == "feimage") && rasterURL(val):
			case lt == "a" || lt == "area":
				if !dangerousURL(val) {
					r.attr(hrefAttr, val)
				}
				continue
			default:
				continue
			}
		case ln == "style":
			val = sanitizeCSS(val)
			if strings.TrimSpace(val) == "" {
				continue
			}
		case svg && strings.IndexByte(val, '(') >= 0:
			// SVG presentation attributes (fill, filter, mask, clip-path,
			// marker-*, cursor) are CSS values: url() in them fetches.
			val = sanitizeCSS(val)
		case (lt == "textarea" || lt == "select") && ln == "value":
			continue // shown as the content, or as the selected option
		case selected != nil && ln == "selected":
			continue
		}
		if dangerousURL(val) {
			continue
		}
		r.attr(name, val)
	}
	if selected != nil && *selected {
		r.s(" selected")
	}
}

func (r *renderer) attr(name, val string) {
	r.s(" ")
	r.s(name)
	r.s(`="`)
	r.esc(val, true)
	r.s(`"`)
}

func (r *renderer) text(s string) { r.esc(s, false) }

// css writes sanitized style-sheet text. In HTML a <style> is raw text,
// which sanitizeCSS has made free of "<"; inside SVG it is parsed as
// text, so "&" is escaped there too.
func (r *renderer) css(s string, svg bool) {
	s = sanitizeCSS(s)
	if svg {
		r.esc(s, false)
		return
	}
	r.raw(s)
}

// esc writes s escaped for text or a double-quoted attribute value. NUL
// and invalid UTF-8 become U+FFFD, so the output is always valid UTF-8.
func (r *renderer) esc(s string, attr bool) {
	valid := utf8.ValidString(s)
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		var rep string
		size := 1
		switch {
		case c == '&':
			rep = "&amp;"
		case c == '<':
			rep = "&lt;"
		case c == '>':
			rep = "&gt;"
		case c == '"' && attr:
			rep = "&quot;"
		case c == '\'' && attr:
			rep = "&#39;"
		case c == 0:
			rep = "\uFFFD"
		case c >= 0x80 && !valid:
			var ru rune
			ru, size = utf8.DecodeRuneInString(s[i:])
			if ru == utf8.RuneError && size == 1 {
				rep = "\uFFFD"
			}
		}
		if rep == "" {
			i += size
			continue
		}
		r.s(s[last:i])
		r.s(rep)
		i += size
		last = i
	}
	r.s(s[last:])
}

// raw writes s unescaped but for NUL and invalid UTF-8.
func (r *renderer) raw(s string) {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		r.s(s)
		return
	}
	for _, ru := range s {
		if ru == 0 {
			ru = utf8.RuneError
		}
		r.buf = utf8.AppendRune(r.buf, ru)
	}
}

// childText is the text of n's text children (a <style>'s or <textarea>'s
// content).
func (d *Doc) childText(n int32) string {
	var b strings.Builder
	for c := d.nodes[n].first; c >= 0; c = d.nodes[c].next {
		if d.nodes[c].kind == event.RRWebNodeText {
			b.WriteString(d.nodes[c].text)
		}
	}
	return b.String()
}

func (d *Doc) hasChild(n int32, tag string) bool {
	for c := d.nodes[n].first; c >= 0; c = d.nodes[c].next {
		if d.nodes[c].kind == event.RRWebNodeElement && lower(d.nodes[c].tag) == tag {
			return true
		}
	}
	return false
}

// optionSelected decides an <option>'s selectedness from its <select>'s
// recorded value (an input event records the select's value, not which
// option), or returns nil to keep the recorded selected attribute.
func (d *Doc) optionSelected(n int32) *bool {
	p := d.nodes[n].parent
	if p >= 0 && lower(d.nodes[p].tag) == "optgroup" {
		p = d.nodes[p].parent
	}
	if p < 0 || d.nodes[p].kind != event.RRWebNodeElement || lower(d.nodes[p].tag) != "select" {
		return nil
	}
	want, ok := d.nodes[p].attr("value")
	if !ok {
		return nil
	}
	v, ok := d.nodes[n].attr("value")
	if !ok {
		v = strings.Join(strings.Fields(d.childText(n)), " ")
	}
	sel := v == want
	return &sel
}

// textSkip are elements whose text a reader does not see.
var textSkip = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true, "head": true,
	"title": true, "iframe": true, "object": true, "noembed": true, "noframes": true,
}

// inline elements do not separate the words around them.
var inline = map[string]bool{
	"a": true, "abbr": true, "b": true, "bdi": true, "bdo": true, "cite": true, "code": true,
	"data": true, "dfn": true, "em": true, "font": true, "i": true, "kbd": true, "label": true,
	"mark": true, "q": true, "s": true, "samp": true, "small": true, "span": true,
	"strong": true, "sub": true, "sup": true, "time": true, "u": true, "var": true,
}

// Text returns the text a reader of the page sees in its <body>: the text
// nodes outside script, style, noscript, template and frames, with a word
// break at every element that is not inline and whitespace collapsed to
// single spaces. It is what tests and diffs compare two states by.
func (d *Doc) Text() string {
	top := d.body()
	var b strings.Builder
	enter := func(n int32) bool {
		x := &d.nodes[n]
		switch x.kind {
		case event.RRWebNodeText:
			b.WriteString(x.text)
		case event.RRWebNodeElement:
			lt := lower(x.tag)
			if textSkip[lt] {
				return false
			}
			if !inline[lt] {
				b.WriteByte(' ')
			}
			return true
		case event.RRWebNodeDocument:
			return n == d.root
		}
		return false
	}
	leave := func(n int32) {
		if x := &d.nodes[n]; x.kind == event.RRWebNodeElement && !inline[lower(x.tag)] {
			b.WriteByte(' ')
		}
	}
	d.walk(top, enter, leave)
	return strings.Join(strings.Fields(b.String()), " ")
}

// body finds the <body> element (the root when there is none).
func (d *Doc) body() int32 {
	if d.root < 0 {
		return -1
	}
	for c := d.nodes[d.root].first; c >= 0; c = d.nodes[c].next {
		if d.nodes[c].kind == event.RRWebNodeElement && lower(d.nodes[c].tag) == "html" {
			for b := d.nodes[c].first; b >= 0; b = d.nodes[b].next {
				if d.nodes[b].kind == event.RRWebNodeElement && lower(d.nodes[b].tag) == "body" {
					return b
				}
			}
		}
	}
	return d.root
}
