package testenv

import (
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// Markdown is what a CommonMark parser (goldmark, with GitHub's table
// extension) reads in a document: its headings, tables and links, as
// text, so a test checks the structure a reader sees rather than the
// bytes.
type Markdown struct {
	Headings []string     // each heading's text, in order
	Tables   [][][]string // each table's rows (the header first) of cells' text
	Links    []MDLink
	Images   []MDLink // each image: its alt text and source
	// HTML counts raw HTML blocks and inline HTML (<details>, <br>).
	HTML int
}

// MDLink is one link: its text and destination.
type MDLink struct{ Text, URL string }

// ParseMarkdown parses src as GitHub-flavoured Markdown.
func ParseMarkdown(src []byte) Markdown {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	doc := md.Parser().Parse(text.NewReader(src))
	var out Markdown
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			out.Headings = append(out.Headings, nodeText(n, src))
			return ast.WalkSkipChildren, nil
		case *east.Table:
			var rows [][]string
			for r := n.FirstChild(); r != nil; r = r.NextSibling() {
				var cells []string
				for c := r.FirstChild(); c != nil; c = c.NextSibling() {
					cells = append(cells, nodeText(c, src))
				}
				rows = append(rows, cells)
			}
			out.Tables = append(out.Tables, rows)
		case *ast.Link:
			out.Links = append(out.Links, MDLink{Text: nodeText(n, src), URL: string(n.Destination)})
		case *ast.Image:
			out.Images = append(out.Images, MDLink{Text: nodeText(n, src), URL: string(n.Destination)})
		case *ast.HTMLBlock, *ast.RawHTML:
			out.HTML++
		}
		return ast.WalkContinue, nil
	})
	return out
}

// nodeText is the text of n's inline content (code spans included).
func nodeText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}
