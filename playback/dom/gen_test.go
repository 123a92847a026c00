package dom

import (
	"fmt"
	"math/rand"
	"strings"
)

// genOpts shapes a synthetic recording of a single-page app: a page of a
// product list that stays about one size while items come and go, texts
// and attributes change, form fields are typed into, the pointer moves,
// and now and then the app navigates (a new full snapshot).
type genOpts struct {
	seed      int64
	events    int
	items     int // the list's size it hovers around
	steps     int
	snapshots int  // full snapshots after the first
	noise     bool // also unknown ids and malformed events
}

type genItem struct{ li, name, nameText, price, priceText, btn, btnText, link, linkText int64 }

type gen struct {
	r       *rand.Rand
	o       genOpts
	next    int64
	list    int64
	items   []genItem
	inputs  []int64 // text inputs and the textarea
	checks  []int64
	selects []int64
	status  int64 // a text node in the header
	evs     []Event
}

func genEvents(o genOpts) []Event {
	g := &gen{r: rand.New(rand.NewSource(o.seed)), o: o}
	navAt := map[int]bool{}
	for k := 1; k <= o.snapshots; k++ {
		navAt[k*o.events/(o.snapshots+1)] = true
	}
	g.emit(metaEv("https://app.example/list", 1280, 800))
	g.emit(g.page())
	for len(g.evs) < o.events {
		if navAt[len(g.evs)] {
			g.emit(metaEv(fmt.Sprintf("https://app.example/list?page=%d", len(g.evs)), 1280, 800))
			g.emit(g.page())
			continue
		}
		g.op()
	}
	return g.evs
}

func (g *gen) emit(data []byte) {
	seq := uint64(len(g.evs) + 1)
	step := 1 + int(uint64(g.o.steps)*(seq-1)/uint64(g.o.events))
	g.evs = append(g.evs, Event{Seq: seq, Step: step, Data: data})
}

func (g *gen) id() int64 { g.next++; return g.next }

func (g *gen) word() string {
	words := []string{"red", "blue", "lamp", "chair", "desk", "mug", "pen", "book", "sofa", "rug", "vase", "clock"}
	return words[g.r.Intn(len(words))]
}

func (g *gen) item() (genItem, *sn) {
	it := genItem{li: g.id(), name: g.id(), nameText: g.id(), price: g.id(), priceText: g.id(),
		btn: g.id(), btnText: g.id(), link: g.id(), linkText: g.id()}
	n := el(it.li, "li", map[string]any{"class": "row", "data-id": fmt.Sprint(it.li)},
		el(it.name, "span", map[string]any{"class": "name"}, tx(it.nameText, g.word()+" "+g.word())),
		el(it.price, "span", map[string]any{"class": "price", "style": "color: black;"}, tx(it.priceText, fmt.Sprintf("$%d.%02d", g.r.Intn(500), g.r.Intn(100)))),
		el(it.btn, "button", map[string]any{"type": "button", "data-state": "idle"}, tx(it.btnText, "Add")),
		el(it.link, "a", map[string]any{"href": fmt.Sprintf("/item/%d", it.li)}, tx(it.linkText, "details")))
	return it, n
}

const genCSS = `body{font:14px/1.4 system-ui;margin:0;background:#fafafa url(https://cdn.app.example/bg.png)}
header{display:flex;gap:8px;padding:8px 16px;background:#223;color:#fff}
nav a{color:#ccd;text-decoration:none} nav a:hover{color:#fff}
ul.list{list-style:none;padding:0;margin:0 16px} li.row{display:grid;grid-template-columns:1fr 80px 60px 60px;padding:4px 0;border-bottom:1px solid #eee}
li.row.selected{background:#eef} .price{font-variant-numeric:tabular-nums;text-align:right}
button{border:1px solid #99a;border-radius:4px;background:#fff} button[data-state=busy]{opacity:.5}
aside form{display:grid;gap:6px;padding:16px} footer{padding:16px;color:#667;font-size:12px}
@media (max-width:600px){li.row{grid-template-columns:1fr 60px}}
`

func (g *gen) page() []byte {
	g.next = 0 // a new page: rrweb numbers its nodes from 1 again
	g.items, g.inputs, g.checks, g.selects = nil, nil, nil, nil
	d, dt, html, head := g.id(), g.id(), g.id(), g.id()
	var nav []*sn
	for i := 0; i < 20; i++ {
		nav = append(nav, el(g.id(), "a", map[string]any{"href": fmt.Sprintf("/section/%d", i)}, tx(g.id(), fmt.Sprintf("Section %d", i))))
	}
	g.status = g.id()
	header := el(g.id(), "header", nil, el(g.id(), "nav", nil, nav...), el(g.id(), "span", map[string]any{"class": "status"}, tx(g.status, "ready")))
	g.list = g.id()
	var rows []*sn
	for i := 0; i < g.o.items; i++ {
		it, n := g.item()
		g.items = append(g.items, it)
		rows = append(rows, n)
	}
	var fields []*sn
	for i := 0; i < 8; i++ {
		in := g.id()
		g.inputs = append(g.inputs, in)
		fields = append(fields, el(g.id(), "label", nil, tx(g.id(), fmt.Sprintf("Field %d", i)),
			el(in, "input", map[string]any{"type": "text", "name": fmt.Sprintf("f%d", i), "value": ""})))
	}
	for i := 0; i < 4; i++ {
		c := g.id()
		g.checks = append(g.checks, c)
		fields = append(fields, el(c, "input", map[string]any{"type": "checkbox", "name": fmt.Sprintf("c%d", i)}))
	}
	ta := g.id()
	g.inputs = append(g.inputs, ta)
	fields = append(fields, el(ta, "textarea", map[string]any{"name": "notes"}))
	sel := g.id()
	g.selects = append(g.selects, sel)
	var opts []*sn
	for i := 0; i < 5; i++ {
		opts = append(opts, el(g.id(), "option", map[string]any{"value": fmt.Sprint(i)}, tx(g.id(), fmt.Sprintf("Option %d", i))))
	}
	fields = append(fields, el(sel, "select", map[string]any{"name": "sort"}, opts...))
	var foot []*sn
	for i := 0; i < 10; i++ {
		foot = append(foot, el(g.id(), "p", nil, tx(g.id(), strings.Repeat("Fine print. ", 8))))
	}
	var paths []*sn
	for i := 0; i < 5; i++ {
		paths = append(paths, svgEl(g.id(), "path", map[string]any{"d": "M0 0L10 10Z", "fill": "currentColor"}))
	}
	root := docNode(d, doctype(dt), el(html, "html", map[string]any{"lang": "en"},
		el(head, "head", nil,
			el(g.id(), "meta", map[string]any{"charset": "utf-8"}),
			el(g.id(), "title", nil, tx(g.id(), "App")),
			el(g.id(), "link", map[string]any{"rel": "stylesheet", "href": "https://cdn.app.example/app.css", "_cssText": genCSS}),
			el(g.id(), "style", nil, styleTx(g.id(), genCSS)),
			el(g.id(), "script", map[string]any{"src": "https://cdn.app.example/app.js"})),
		el(g.id(), "body", nil,
			header,
			el(g.id(), "main", nil, el(g.id(), "h1", nil, tx(g.id(), "Products")), el(g.list, "ul", map[string]any{"class": "list"}, rows...)),
			el(g.id(), "aside", nil, el(g.id(), "form", map[string]any{"action": "/search"}, fields...)),
			el(g.id(), "footer", nil, foot...),
			svgEl(g.id(), "svg", map[string]any{"viewBox": "0 0 10 10", "width": "16"}, paths...))))
	return fullEv(root)
}

func (g *gen) pick() genItem { return g.items[g.r.Intn(len(g.items))] }

func (g *gen) op() {
	p := g.r.Float64()
	switch {
	case p < 0.18:
		if len(g.items) > g.o.items*6/5 {
			g.remove()
		} else {
			g.add()
		}
	case p < 0.32:
		if len(g.items) < g.o.items*4/5 || len(g.items) < 2 {
			g.add()
		} else {
			g.remove()
		}
	case p < 0.36 && len(g.items) > 1:
		g.move()
	case p < 0.56 && len(g.items) > 0:
		it := g.pick()
		id, val := it.nameText, g.word()+" "+g.word()
		if g.r.Intn(2) == 0 {
			id, val = it.priceText, fmt.Sprintf("$%d.%02d", g.r.Intn(500), g.r.Intn(100))
		}
		texts := []textM{{ID: id, Value: &val}}
		if g.r.Intn(4) == 0 {
			texts = append(texts, textM{ID: g.status, Value: ptr(fmt.Sprintf("%d items", len(g.items)))})
		}
		g.emit(mutEv(mutM{Texts: texts}))
	case p < 0.70 && len(g.items) > 0:
		it := g.pick()
		var a attrM
		switch g.r.Intn(4) {
		case 0:
			cls := any("row selected")
			if g.r.Intn(2) == 0 {
				cls = "row"
			}
			a = attrM{ID: it.li, Attributes: map[string]any{"class": cls}}
		case 1:
			a = attrM{ID: it.price, Attributes: map[string]any{"style": map[string]any{
				"color": []string{"red", "green", "black"}[g.r.Intn(3)], "font-weight": []any{false, "bold", []string{"700", "important"}}[g.r.Intn(3)]}}}
		case 2:
			a = attrM{ID: it.btn, Attributes: map[string]any{"data-state": []any{"idle", "busy", nil}[g.r.Intn(3)], "disabled": []any{"", nil}[g.r.Intn(2)]}}
		default:
			a = attrM{ID: it.link, Attributes: map[string]any{"href": fmt.Sprintf("/item/%d?v=%d", it.li, g.r.Intn(9))}}
		}
		g.emit(mutEv(mutM{Attributes: []attrM{a}}))
	case p < 0.80:
		switch g.r.Intn(3) {
		case 0:
			g.emit(inputEv(g.inputs[g.r.Intn(len(g.inputs))], strings.Repeat("*", g.r.Intn(12)), false))
		case 1:
			g.emit(inputEv(g.checks[g.r.Intn(len(g.checks))], "on", g.r.Intn(2) == 0))
		default:
			g.emit(inputEv(g.selects[0], fmt.Sprint(g.r.Intn(5)), false))
		}
	case g.o.noise && p < 0.81:
		if g.r.Intn(2) == 0 {
			g.emit(mutEv(mutM{Removes: []removeM{{ParentID: g.list, ID: 1 << 40}}, Texts: []textM{{ID: 1<<40 + 1, Value: ptr("x")}}}))
		} else {
			g.emit([]byte(`{"type":3,"data":{"source":0,"adds":[{"parentId":`))
		}
	default:
		switch g.r.Intn(3) {
		case 0:
			g.emit(mouseEv(g.r.Intn(1280), g.r.Intn(800)))
		case 1:
			g.emit(mustJSON(map[string]any{"type": 3, "timestamp": 1, "data": map[string]any{"source": 3, "id": 1, "x": 0, "y": g.r.Intn(5000)}}))
		default:
			g.emit(mustJSON(map[string]any{"type": 3, "timestamp": 1, "data": map[string]any{"source": 2, "type": 2, "id": g.list, "x": 5, "y": 5}}))
		}
	}
}

// adds serializes an item the way rrweb's recorder often does: each node
// its own add, in an order where children and next siblings may come
// before the nodes they need; or, half the time, as one node with its
// children inline.
func (g *gen) adds(it genItem, n *sn, next *int64) []addM {
	if g.r.Intn(2) == 0 {
		return []addM{{ParentID: g.list, NextID: next, Node: n}}
	}
	var out []addM
	var flat func(parent int64, c *sn, next *int64)
	flat = func(parent int64, c *sn, next *int64) {
		kids := c.ChildNodes
		cp := *c
		cp.ChildNodes = nil
		out = append(out, addM{ParentID: parent, NextID: next, Node: &cp})
		for i, k := range kids {
			var nx *int64
			if i+1 < len(kids) {
				nx = ptr(kids[i+1].ID)
			}
			flat(c.ID, k, nx)
		}
	}
	flat(g.list, n, next)
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (g *gen) add() {
	it, n := g.item()
	pos := g.r.Intn(len(g.items) + 1)
	var next *int64
	if pos < len(g.items) {
		next = ptr(g.items[pos].li)
	}
	g.items = append(g.items[:pos], append([]genItem{it}, g.items[pos:]...)...)
	g.emit(mutEv(mutM{Adds: g.adds(it, n, next)}))
}

func (g *gen) remove() {
	k := g.r.Intn(len(g.items))
	it := g.items[k]
	g.items = append(g.items[:k], g.items[k+1:]...)
	g.emit(mutEv(mutM{Removes: []removeM{{ParentID: g.list, ID: it.li}}}))
}

// move takes an item out and puts it back elsewhere with the same ids, as
// rrweb records a moved node.
func (g *gen) move() {
	k := g.r.Intn(len(g.items))
	it := g.items[k]
	g.items = append(g.items[:k], g.items[k+1:]...)
	pos := g.r.Intn(len(g.items) + 1)
	var next *int64
	if pos < len(g.items) {
		next = ptr(g.items[pos].li)
	}
	g.items = append(g.items[:pos], append([]genItem{it}, g.items[pos:]...)...)
	n := el(it.li, "li", map[string]any{"class": "row moved"},
		el(it.name, "span", map[string]any{"class": "name"}, tx(it.nameText, "moved "+g.word())),
		el(it.price, "span", map[string]any{"class": "price"}, tx(it.priceText, "$1.00")),
		el(it.btn, "button", nil, tx(it.btnText, "Add")),
		el(it.link, "a", map[string]any{"href": "/moved"}, tx(it.linkText, "details")))
	m := mutM{Removes: []removeM{{ParentID: g.list, ID: it.li}}, Adds: g.adds(it, n, next)}
	g.emit(mutEv(m))
}
