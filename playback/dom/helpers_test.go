package dom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"testing"

	nethtml "golang.org/x/net/html"

	"github.com/flightrec/flightrec/event"
)

// sn is a serialized node as rrweb-snapshot writes it.
type sn struct {
	Type        int            `json:"type"`
	ID          int64          `json:"id"`
	TagName     string         `json:"tagName,omitempty"`
	Attributes  map[string]any `json:"attributes,omitempty"`
	ChildNodes  []*sn          `json:"childNodes,omitempty"`
	TextContent *string        `json:"textContent,omitempty"`
	IsStyle     bool           `json:"isStyle,omitempty"`
	IsSVG       bool           `json:"isSVG,omitempty"`
	Name        string         `json:"name,omitempty"`
	PublicID    *string        `json:"publicId,omitempty"`
	SystemID    *string        `json:"systemId,omitempty"`
}

func docNode(id int64, kids ...*sn) *sn {
	return &sn{Type: event.RRWebNodeDocument, ID: id, ChildNodes: kids}
}

func doctype(id int64) *sn {
	e := ""
	return &sn{Type: event.RRWebNodeDocType, ID: id, Name: "html", PublicID: &e, SystemID: &e}
}

func el(id int64, tag string, attrs map[string]any, kids ...*sn) *sn {
	if attrs == nil {
		attrs = map[string]any{}
	}
	return &sn{Type: event.RRWebNodeElement, ID: id, TagName: tag, Attributes: attrs, ChildNodes: kids}
}

func svgEl(id int64, tag string, attrs map[string]any, kids ...*sn) *sn {
	n := el(id, tag, attrs, kids...)
	n.IsSVG = true
	return n
}

func tx(id int64, text string) *sn { return &sn{Type: event.RRWebNodeText, ID: id, TextContent: &text} }

func styleTx(id int64, text string) *sn {
	n := tx(id, text)
	n.IsStyle = true
	return n
}

func comment(id int64, text string) *sn {
	return &sn{Type: event.RRWebNodeComment, ID: id, TextContent: &text}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func fullEv(root *sn) []byte {
	return mustJSON(map[string]any{"type": 2, "timestamp": 1, "data": map[string]any{
		"node": root, "initialOffset": map[string]int{"left": 0, "top": 0}}})
}

func metaEv(href string, w, h int) []byte {
	return mustJSON(map[string]any{"type": 4, "timestamp": 1, "data": map[string]any{"href": href, "width": w, "height": h}})
}

type addM struct {
	ParentID int64  `json:"parentId"`
	NextID   *int64 `json:"nextId"`
	Node     *sn    `json:"node"`
}

type removeM struct {
	ParentID int64 `json:"parentId"`
	ID       int64 `json:"id"`
}

type textM struct {
	ID    int64   `json:"id"`
	Value *string `json:"value"`
}

type attrM struct {
	ID         int64          `json:"id"`
	Attributes map[string]any `json:"attributes"`
}

type mutM struct {
	Texts      []textM   `json:"texts"`
	Attributes []attrM   `json:"attributes"`
	Removes    []removeM `json:"removes"`
	Adds       []addM    `json:"adds"`
}

func mutEv(m mutM) []byte {
	if m.Texts == nil {
		m.Texts = []textM{}
	}
	if m.Attributes == nil {
		m.Attributes = []attrM{}
	}
	if m.Removes == nil {
		m.Removes = []removeM{}
	}
	if m.Adds == nil {
		m.Adds = []addM{}
	}
	return mustJSON(map[string]any{"type": 3, "timestamp": 1, "data": map[string]any{
		"source": 0, "texts": m.Texts, "attributes": m.Attributes, "removes": m.Removes, "adds": m.Adds}})
}

func inputEv(id int64, text string, checked bool) []byte {
	return mustJSON(map[string]any{"type": 3, "timestamp": 1, "data": map[string]any{
		"source": 5, "id": id, "text": text, "isChecked": checked, "userTriggered": true}})
}

func mouseEv(x, y int) []byte {
	return mustJSON(map[string]any{"type": 3, "timestamp": 1, "data": map[string]any{
		"source": 1, "positions": []map[string]int{{"x": x, "y": y, "id": 9, "timeOffset": 0}}}})
}

func ptr[T any](v T) *T { return &v }

func render(t testing.TB, d *Doc) string {
	t.Helper()
	var b bytes.Buffer
	if err := d.RenderInert(&b); err != nil {
		t.Fatalf("RenderInert: %v", err)
	}
	return b.String()
}

func mustApply(t testing.TB, d *Doc, evs ...[]byte) {
	t.Helper()
	for i, ev := range evs {
		if err := d.Apply(ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
}

// normalized is an attribute value as a URL parser reads its scheme, made
// independently of the package's own urlPrefix: references decoded once
// more, whitespace and controls removed, lowercased.
func normalized(v string) string {
	v = html.UnescapeString(v)
	var b strings.Builder
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			continue
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

func isRasterData(v string) bool {
	for _, t := range []string{"png", "jpeg", "jpg", "gif", "webp", "avif", "bmp", "apng", "x-icon", "vnd.microsoft.icon"} {
		if strings.HasPrefix(v, "data:image/"+t+";") || strings.HasPrefix(v, "data:image/"+t+",") {
			return true
		}
	}
	return false
}

var forbiddenElements = map[string]bool{
	"script": true, "iframe": true, "frame": true, "frameset": true, "object": true,
	"embed": true, "applet": true, "base": true, "portal": true, "fencedframe": true,
	"noscript": true, "link": true, "foreignobject": true, "template": true, "handler": true,
}

var fetchOrNavAttrs = map[string]bool{
	"src": true, "srcset": true, "href": true, "xlink:href": true, "poster": true,
	"background": true, "action": true, "formaction": true, "data": true, "ping": true,
	"imagesrcset": true, "srcdoc": true,
}

// inertProblems parses a rendering as a browser would and lists what in it
// could run or fetch.
func inertProblems(out string) []string {
	var probs []string
	doc, err := nethtml.Parse(strings.NewReader(out))
	if err != nil {
		return []string{"parse: " + err.Error()}
	}
	var walk func(n *nethtml.Node)
	walk = func(n *nethtml.Node) {
		if n.Type == nethtml.ElementNode {
			name := strings.ToLower(n.Data)
			if forbiddenElements[name] {
				probs = append(probs, "element <"+name+">")
			}
			if name == "meta" {
				for _, a := range n.Attr {
					if strings.EqualFold(a.Key, "http-equiv") {
						probs = append(probs, "meta http-equiv")
					}
				}
			}
			if (name == "animate" || name == "set") && n.Namespace == "svg" {
				for _, a := range n.Attr {
					if strings.EqualFold(a.Key, "attributeName") {
						v := normalized(a.Val)
						if strings.HasSuffix(v, "href") || strings.HasPrefix(v, "on") {
							probs = append(probs, "svg animation of "+v)
						}
					}
				}
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				if a.Namespace != "" {
					key = a.Namespace + ":" + key
				}
				v := normalized(a.Val)
				if strings.HasPrefix(key, "on") {
					probs = append(probs, fmt.Sprintf("<%s %s>", name, key))
				}
				for _, s := range []string{"javascript:", "vbscript:", "livescript:"} {
					if strings.HasPrefix(v, s) {
						probs = append(probs, fmt.Sprintf("<%s %s=%q>", name, key, a.Val))
					}
				}
				if strings.HasPrefix(v, "data:") && !isRasterData(v) {
					probs = append(probs, fmt.Sprintf("<%s %s=%q>", name, key, a.Val))
				}
				if fetchOrNavAttrs[key] || strings.HasSuffix(key, ":href") {
					if v != "" && !strings.HasPrefix(v, "#") && !isRasterData(v) {
						probs = append(probs, fmt.Sprintf("<%s %s=%q> fetches or navigates", name, key, a.Val))
					}
				}
				if key == "style" && strings.Contains(a.Val, "<") {
					probs = append(probs, "< in a style attribute")
				}
			}
			if name == "style" {
				var b strings.Builder
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					if c.Type != nethtml.TextNode {
						probs = append(probs, "markup inside <style>")
					} else {
						b.WriteString(c.Data)
					}
				}
				if strings.Contains(b.String(), "<") {
					probs = append(probs, "< inside <style>")
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return probs
}

// styleTexts returns the style sheets and style attributes of a rendering.
func styleTexts(out string) []string {
	doc, err := nethtml.Parse(strings.NewReader(out))
	if err != nil {
		return nil
	}
	var res []string
	var walk func(n *nethtml.Node)
	walk = func(n *nethtml.Node) {
		if n.Type == nethtml.ElementNode {
			if strings.EqualFold(n.Data, "style") && n.FirstChild != nil {
				res = append(res, n.FirstChild.Data)
			}
			for _, a := range n.Attr {
				if a.Key == "style" {
					res = append(res, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return res
}
