package dom

import (
	"strings"
	"testing"

	nethtml "golang.org/x/net/html"
)

const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

// hostile is a page made of everything that runs script or fetches,
// spelled the ways that get past naive filters.
func hostile() *sn {
	id := int64(100)
	n := func() int64 { id++; return id }
	a := func(href string) *sn { return el(n(), "a", map[string]any{"href": href}, tx(n(), "link")) }
	return docNode(1, doctype(2), el(3, "html", map[string]any{"manifest": "https://evil.example/app.manifest"},
		el(4, "head", nil,
			el(n(), "base", map[string]any{"href": "https://evil.example/"}),
			el(n(), "meta", map[string]any{"http-equiv": "refresh", "content": "0;url=javascript:alert(1)"}),
			el(n(), "META", map[string]any{"HTTP-EQUIV": "Content-Security-Policy", "content": "script-src *"}),
			el(n(), "title", nil, tx(n(), "</title><script>alert(1)</script>")),
			el(n(), "script", map[string]any{"src": "https://evil.example/x.js"}),
			el(n(), "SCRIPT", nil, tx(n(), "alert(1)")),
			el(n(), "link", map[string]any{"rel": "stylesheet", "href": "https://evil.example/main.css",
				"_cssText": "h1{background:url(https://evil.example/h.png)} @import url(https://evil.example/i.css); h2{color:green}"}),
			el(n(), "link", map[string]any{"rel": "preload", "href": "https://evil.example/font.woff2"}),
			el(n(), "style", nil, styleTx(n(),
				"@import url(http://evil.example/a.css);\n@import 'http://evil.example/b.css';\n@IMPORT \"//evil.example/c.css\" screen;"+
					"@\\69mport 'http://evil.example/d.css';"+
					"body{background:url(http://evil.example/bg.png)} div{background:u\\72l(http://evil.example/esc.png)}"+
					"p{background-image:image-set('http://evil.example/x.png' 1x)} q{background:URL( '//evil.example/q.png' )}"+
					"/* \" */ s{background:url(http://evil.example/s.png)} /* \" */"+
					"em{background:url(\""+png+"\")} "+
					"i{behavior:url(evil.htc);width:expression(alert(1))}"+
					"</style><script>alert(1)</script>"))),
		el(5, "body", map[string]any{"onload": "alert(1)", "background": "http://evil.example/t.png"},
			el(n(), "script", nil, tx(n(), "alert(1)")),
			el(n(), "noscript", nil, tx(n(), "<img src=x onerror=alert(1)>")),
			el(n(), "img", map[string]any{"src": "x", "onerror": "alert(1)", "alt": "x"}),
			el(n(), "img", map[string]any{"src": "https://evil.example/track.gif", "srcset": "https://evil.example/1.png 1x, https://evil.example/2.png 2x"}),
			el(n(), "img", map[string]any{"src": "data:image/svg+xml,<svg onload=alert(1)>"}),
			el(n(), "img", map[string]any{"src": png, "id": "kept-image"}),
			a("javascript:alert(1)"),
			a(" JaVaScRiPt:alert(1)"),
			a("java\tscript:alert(1)"),
			a("java\nscript:alert(1)"),
			a("\x01javascript:alert(1)"),
			a("&#106;avascript:alert(1)"),
			a("javascript&colon;alert(1)"),
			a("jav&#x09;ascript:alert(1)"),
			a("vbscript:msgbox(1)"),
			a("data:text/html,<script>alert(1)</script>"),
			el(n(), "a", map[string]any{"href": "https://example.com/ok", "ping": "https://evil.example/ping", "target": "_top"}, tx(n(), "ok")),
			el(n(), "area", map[string]any{"href": "javascript:alert(1)"}),
			el(n(), "iframe", map[string]any{"src": "https://evil.example/", "srcdoc": "<script>alert(1)</script>"}),
			el(n(), "frameset", nil, el(n(), "frame", map[string]any{"src": "https://evil.example/"})),
			el(n(), "object", map[string]any{"data": "https://evil.example/x.swf"}, el(n(), "param", map[string]any{"name": "movie", "value": "x.swf"})),
			el(n(), "embed", map[string]any{"src": "https://evil.example/x.swf"}),
			el(n(), "applet", map[string]any{"code": "X.class"}),
			el(n(), "portal", map[string]any{"src": "https://evil.example/"}),
			el(n(), "template", nil, el(n(), "script", nil, tx(n(), "alert(1)"))),
			el(n(), "form", map[string]any{"action": "javascript:alert(1)", "method": "post"},
				el(n(), "button", map[string]any{"formaction": "javascript:alert(1)"}, tx(n(), "Go")),
				el(n(), "input", map[string]any{"type": "image", "src": "https://evil.example/btn.png"}),
				el(n(), "input", map[string]any{"name": "user", "value": "*****"})),
			el(n(), "video", map[string]any{"poster": "https://evil.example/p.png", "src": "https://evil.example/v.mp4", "autoplay": ""},
				el(n(), "source", map[string]any{"src": "https://evil.example/v.webm"}),
				el(n(), "track", map[string]any{"src": "https://evil.example/t.vtt"})),
			el(n(), "table", map[string]any{"background": "https://evil.example/t.png"}),
			el(n(), "div", map[string]any{"style": "background:url(//evil.example/x.png); color: red", "title": `"><script>alert(1)</script>`}),
			el(n(), "div", map[string]any{"x onerror": "alert(1)", `"onclick`: "alert(1)", "data-ok": "1"}),
			el(n(), "img src=x onerror=alert(1)", nil, tx(n(), "bad tag")),
			el(n(), "textarea", nil, tx(n(), "</textarea><script>alert(1)</script>")),
			el(n(), "xmp", nil, tx(n(), "</xmp><script>alert(1)</script>")),
			el(n(), "p", nil, tx(n(), "<img src=x onerror=alert(1)>")),
			comment(n(), "--><script>alert(1)</script>"),
			el(n(), "blockquote", map[string]any{"cite": "javascript:alert(1)"}),
			el(n(), "math", map[string]any{"href": "javascript:alert(1)"}),
			svgEl(n(), "svg", map[string]any{"onload": "alert(1)", "viewBox": "0 0 10 10"},
				svgEl(n(), "script", nil, tx(n(), "alert(1)")),
				svgEl(n(), "a", map[string]any{"xlink:href": "javascript:alert(1)"}, svgEl(n(), "text", nil, tx(n(), "svg link"))),
				svgEl(n(), "animate", map[string]any{"attributeName": "href", "to": "javascript:alert(1)"}),
				svgEl(n(), "set", map[string]any{"attributeName": " onmouseover", "to": "alert(1)"}),
				svgEl(n(), "foreignObject", nil, el(n(), "img", map[string]any{"src": "x", "onerror": "alert(1)"})),
				svgEl(n(), "image", map[string]any{"href": "https://evil.example/x.png"}),
				svgEl(n(), "use", map[string]any{"href": "https://evil.example/sprite.svg#a"}),
				svgEl(n(), "use", map[string]any{"href": "#icon"}),
				svgEl(n(), "rect", map[string]any{"fill": "url(https://evil.example/f.svg#x)", "stroke": "url(#grad)"}),
				svgEl(n(), "style", nil, tx(n(), "@import 'https://evil.example/x.css'; rect{fill:url(http://evil.example/)}"))),
		)))
}

func TestRenderInertHostile(t *testing.T) {
	d := NewDoc()
	mustApply(t, d, fullEv(hostile()))
	// The same things arriving by mutation: added nodes, and attributes
	// set on nodes that were harmless.
	mustApply(t, d, mutEv(mutM{
		Adds: []addM{
			{ParentID: 5, Node: el(900, "script", nil, tx(901, "alert(1)"))},
			{ParentID: 5, Node: el(902, "img", map[string]any{"src": "x", "onerror": "alert(1)"})},
			{ParentID: 5, Node: el(903, "a", map[string]any{"href": "javascript:alert(1)"}, tx(904, "added"))},
			{ParentID: 5, Node: el(905, "iframe", map[string]any{"src": "https://evil.example/"})},
			{ParentID: 4, Node: el(906, "base", map[string]any{"href": "https://evil.example/"})},
			{ParentID: 4, Node: el(907, "meta", map[string]any{"http-equiv": "refresh", "content": "0;url=https://evil.example/"})},
			{ParentID: 5, Node: el(908, "div", nil)},
		},
		Attributes: []attrM{
			{ID: 908, Attributes: map[string]any{"onclick": "alert(1)", "style": map[string]any{"background": "url(https://evil.example/m.png)"}}},
		},
	}))
	out := render(t, d)
	for _, p := range inertProblems(out) {
		t.Errorf("rendering is not inert: %s", p)
	}
	low := strings.ToLower(out)
	for _, bad := range []string{"<script", "<iframe", "<object", "<embed", "<base", "<meta http", "http-equiv",
		"srcdoc", "formaction", "javascript:", "vbscript:", "evil.example", "@import", "expression(", ` onerror="`, ` onload="`, ` onclick="`,
		"_csstext", "<!--"} {
		if strings.Contains(low, bad) {
			t.Errorf("rendering contains %q", bad)
		}
	}
	for _, s := range styleTexts(out) {
		ls := strings.ToLower(s)
		for i := strings.Index(ls, "url("); i >= 0; i = strings.Index(ls, "url(") {
			rest := ls[i+4:]
			if !strings.HasPrefix(rest, `"data:image/png`) && !strings.HasPrefix(rest, `"#`) {
				t.Errorf("style keeps %s", s[i:])
			}
			ls = rest
		}
	}
	// What must survive, as text or as kept attributes.
	for _, want := range []string{
		`<meta charset="utf-8"><meta name="referrer" content="no-referrer">`,
		`<title>&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;</title>`,
		`<style>h1{background:none}   h2{color:green}</style>`,
		`<img id="kept-image" src="` + png + `">`,
		`<a data-flightrec-href="https://example.com/ok" target="_top">ok</a>`,
		`<textarea>&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;</textarea>`,
		`<pre>&lt;/xmp&gt;&lt;script&gt;alert(1)&lt;/script&gt;</pre>`,
		`<p>&lt;img src=x onerror=alert(1)&gt;</p>`,
		`<div data-ok="1"></div>`,
		`<input name="user" value="*****">`,
		`<use href="#icon"></use>`,
		`<rect fill="none" stroke="url(&#34;#grad&#34;)"></rect>`,
		`em{background:url("` + png + `")}`,
		`title="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`,
		"bad tag",
	} {
		want = strings.ReplaceAll(want, "&#34;", "&quot;")
		if !strings.Contains(out, want) {
			t.Errorf("rendering lacks %s", want)
		}
	}
	// Text nodes came out as text: the textarea holds exactly its string.
	doc, err := nethtml.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	var walk func(*nethtml.Node)
	walk = func(n *nethtml.Node) {
		if n.Type == nethtml.ElementNode && n.Data == "textarea" {
			found = n.FirstChild != nil && n.FirstChild.Data == "</textarea><script>alert(1)</script>"
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if !found {
		t.Errorf("the textarea's text did not survive as text")
	}
	if t.Failed() {
		t.Logf("rendering:\n%s", out)
	}
}

func TestSanitizeCSS(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a{color:red}", "a{color:red}"},
		{"a{background:url(x.png)}", "a{background:none}"},
		{"a{background:url( 'x.png' )}", "a{background:none}"},
		{`a{background:url("` + png + `")}`, `a{background:url("` + png + `")}`},
		{"a{background:url(" + png + ")}", `a{background:url("` + png + `")}`},
		{"a{background:url(data:image/svg+xml,<svg/>)}", "a{background:none}"},
		{"a{fill:url(#g)}", `a{fill:url("#g")}`},
		{`a{b:\75 rl(x)}`, "a{b:none}"},
		{`a{b:\000075rl(x)}`, "a{b:none}"},
		{`@\69mport "x"; a{}`, "  a{}"},
		{`@import url(x) screen; a{}`, "  a{}"},
		{`@media print{@import "x";a{b:c}}`, `@media print{ a{b:c}}`},
		{`ur@import x;l(http://e/)`, `ur l(http://e/)`},
		{`a{content:"url(x)"}`, `a{content:"url(x)"}`},
		{`/* " */ a{b:url(x)} /* " */`, `  a{b:none}  `},
		{`a{b:src("x")} c{d:image-set("x" 1x, "y" 2x)} e{f:-webkit-image-set(url(x) 1x)}`, `a{b:none} c{d:none} e{f:none}`},
		{`a{b:expression(alert(1))}`, `a{b:none}`},
		{`a{b:"</style>"}`, `a{b:"\3c /style>"}`},
		{`</style><script>`, `\3c /style>\3c script>`},
		{`a{b:url(x`, `a{b:none`},
		{`a{b:url("x" y)}`, `a{b:none}`},
		{`a{b:url(x y)} c{}`, `a{b:none} c{}`},
		{`a{b:url(x"y)} c{}`, `a{b:none} c{}`},
		{`a{b:-url(x)}`, `a{b:-url(x)}`},
	} {
		got := sanitizeCSS(c.in)
		if got != c.want {
			t.Errorf("sanitizeCSS(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := sanitizeCSS(got); again != got {
			t.Errorf("sanitizeCSS is not idempotent on %q: %q", got, again)
		}
	}
}

func TestDangerousURL(t *testing.T) {
	for v, want := range map[string]bool{
		"javascript:alert(1)": true, " JaVaScRiPt:x": true, "java\tscript:x": true, "\x00javascript:x": true,
		"&#106;avascript:x": true, "&#x6A;avascript:x": true, "javascript&colon;x": true, "jav&Tab;ascript:x": true,
		"vbscript:x": true, "data:text/html,x": true, "DATA:image/svg+xml,x": true, "data:image/png;base64,x": false,
		"data:image/pngx,": true, "https://example.com/": false, "/relative": false, "#frag": false, "": false,
		"javascript": false, "mailto:a@b": false,
	} {
		if got := dangerousURL(v); got != want {
			t.Errorf("dangerousURL(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestRenderEmptyAndFragments(t *testing.T) {
	d := NewDoc()
	out := render(t, d)
	if out != "<!DOCTYPE html><html><head>"+headMetas+"</head><body></body></html>\n" {
		t.Fatalf("empty rendering = %q", out)
	}
	if d.Text() != "" {
		t.Fatalf("empty Text = %q", d.Text())
	}
	// No <html> element, no <head>: the rendering supplies them.
	mustApply(t, d, fullEv(docNode(1, el(2, "div", nil, tx(3, "bare")))))
	if out := render(t, d); !strings.Contains(out, "<html><head>"+headMetas+"</head><body><div>bare</div></body></html>") {
		t.Fatalf("bare rendering = %q", out)
	}
	mustApply(t, d, fullEv(docNode(1, el(2, "html", nil, el(3, "body", nil, el(4, "pre", nil, tx(5, "\nx")))))))
	if out := render(t, d); !strings.Contains(out, "<html><head>"+headMetas+"</head><body><pre>\n\nx</pre>") {
		t.Fatalf("headless rendering = %q", out)
	}
	// Invalid UTF-8 and NUL never reach the output.
	mustApply(t, d, []byte("{\"type\":3,\"data\":{\"source\":0,\"texts\":[{\"id\":5,\"value\":\"a\\u0000b\xffc\"}]}}"))
	if out := render(t, d); !strings.Contains(out, "a\uFFFDb\uFFFDc") {
		t.Fatalf("rendering = %q", out)
	}
}

// The inertness check itself finds what it looks for, so that a rendering
// that let something through would fail the tests above.
func TestInertCheckerCatches(t *testing.T) {
	bad := `<html><head><base href="https://e/"><meta http-equiv="refresh" content="0"><link rel=stylesheet href="https://e/x.css"></head>` +
		`<body onload="x()"><script>x()</script><iframe src="https://e/"></iframe><a href=" java&#x09;script:x">a</a>` +
		`<img src="//e/x.png"><img src="data:image/svg+xml,x"><object data="x"></object><embed src="x">` +
		`<form action="https://e/"><button formaction="x">b</button></form><svg><script>x()</script><a xlink:href="https://e/">s</a>` +
		`<set attributeName="href" to="javascript:x"/><foreignObject></foreignObject></svg><style>a{}</style></body></html>`
	got := strings.Join(inertProblems(bad), "\n")
	for _, want := range []string{"<base>", "meta http-equiv", "<link>", "<body onload>", "<script>", "<iframe>",
		`<a href=" java\tscript:x">`, `<img src="//e/x.png"> fetches`, `<img src="data:image/svg+xml,x">`, "<object>", "<embed>",
		"<form action=", "<button formaction=", "<a xlink:href=", "svg animation of href", "<foreignobject>"} {
		if !strings.Contains(got, want) {
			t.Errorf("the checker misses %s; it found:\n%s", want, got)
		}
	}
	if p := inertProblems(`<html><head></head><body><style>x{}</style><a data-flightrec-href="https://e/">a</a><img src="` + png + `"></body></html>`); len(p) != 0 {
		t.Errorf("the checker flags an inert page: %v", p)
	}
}

// TestRenderFrameDocument: a frame whose document rrweb recorded (the
// recorder's cross-origin payment frame) shows its content in place, by
// the same inert rules; a frame without a recorded document is dropped.
func TestRenderFrameDocument(t *testing.T) {
	d := NewDoc()
	mustApply(t, d, fullEv(docNode(1, el(2, "html", nil, el(3, "body", nil,
		el(4, "iframe", map[string]any{"title": `Payment "card"`, "src": "https://pay.example/card"},
			docNode(5, el(6, "html", nil, el(7, "body", nil,
				el(8, "label", nil, tx(9, "Card number")),
				el(10, "input", map[string]any{"name": "card", "value": "****", "onfocus": "alert(1)"}),
				el(11, "script", nil, tx(12, "alert(2)")),
				el(13, "iframe", map[string]any{"src": "https://evil.example/"})))))),
		el(14, "iframe", map[string]any{"src": "https://evil.example/empty"})))))
	out := render(t, d)
	for _, p := range inertProblems(out) {
		t.Errorf("rendering is not inert: %s", p)
	}
	for _, want := range []string{`<div data-flightrec-frame="Payment &quot;card&quot;"`, `<label>Card number</label>`, `<input name="card" value="****">`} {
		if !strings.Contains(out, want) {
			t.Errorf("rendering lacks %s", want)
		}
	}
	for _, bad := range []string{"<iframe", "<script", "alert", "evil.example", "pay.example"} {
		if strings.Contains(out, bad) {
			t.Errorf("rendering contains %q", bad)
		}
	}
	if t.Failed() {
		t.Logf("rendering:\n%s", out)
	}
}
