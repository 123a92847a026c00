package diffrun

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Table is the report as readable text for the CLI: the two runs, the
// first divergence and the notes on top, then one line per pair. A pair's
// marker is ">" for the first divergence and "!" for another material
// pair; its material differences come first, each prefixed "!".
func (r *Report) Table() string {
	var b strings.Builder
	side := func(name string, s RunSummary) {
		fmt.Fprintf(&b, "%s  %s  flow %s  %s  %s  %d steps", name, orNone(s.ID), orNone(s.Flow),
			orNone(s.Verdict), orNone(s.State), s.Steps)
		if s.Signature != "" {
			fmt.Fprintf(&b, "  signature %s", s.Signature)
		}
		b.WriteByte('\n')
	}
	side("a", r.A)
	side("b", r.B)
	if d := r.FirstDivergence; d != nil {
		b.WriteString(d.Explanation)
		b.WriteByte('\n')
	} else {
		b.WriteString("no material divergence\n")
	}
	for _, n := range r.Notes {
		b.WriteString("note: " + n + "\n")
	}
	if len(r.Pairs) == 0 {
		return b.String()
	}
	b.WriteByte('\n')
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "A\tB\t   op       step\n")
	for _, p := range r.Pairs {
		mark := " "
		switch {
		case r.FirstDivergence != nil && p.StepA == r.FirstDivergence.StepA && p.StepB == r.FirstDivergence.StepB:
			mark = ">"
		case p.Material:
			mark = "!"
		}
		sig := p.Signature
		if p.Op == OpChanged {
			sig, _, _ = strings.Cut(sig, " → ") // the difference "step" says what b did
		}
		line := fmt.Sprintf("%s %-8s %s", mark, p.Op, clip(sig, 72))
		if t := diffCell(p.Differences); t != "" {
			line += "  " + t
		}
		fmt.Fprintf(tw, "%s\t%s\t %s\n", stepCell(p.StepA), stepCell(p.StepB), line)
	}
	tw.Flush()
	return b.String()
}

func stepCell(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// diffCell lists a pair's differences, material ones first (in the order
// explanations prefer), at most four.
func diffCell(ds []Difference) string {
	var parts []string
	for pass := 0; pass < 2; pass++ {
		for rank := 0; rank <= 5; rank++ {
			for _, d := range ds {
				if d.Material != (pass == 0) || channelRank(d.Channel) != rank {
					continue
				}
				p := clip(d.Detail, 120)
				if !strings.HasPrefix(p, d.Channel+" ") {
					p = d.Channel + ": " + p
				}
				if d.Material {
					p = "!" + p
				}
				parts = append(parts, p)
			}
		}
	}
	if len(parts) > 4 {
		parts = append(parts[:4], fmt.Sprintf("(+%d more)", len(parts)-4))
	}
	return strings.Join(parts, "; ")
}
