package store

import "sort"

// ReportBuilder accumulates a report from records in seq order.
type ReportBuilder struct {
	rep   RedactionReport
	rules map[[2]string]*RuleCount
}

// NewReportBuilder starts a report.
func NewReportBuilder(recording, planDigest string) *ReportBuilder {
	return &ReportBuilder{rep: RedactionReport{Recording: recording, PlanDigest: planDigest},
		rules: map[[2]string]*RuleCount{}}
}

// Add counts one record.
func (b *ReportBuilder) Add(r *Record) {
	b.rep.Events++
	if len(r.Redactions) == 0 {
		return
	}
	b.rep.Redacted++
	for _, x := range r.Redactions {
		k := [2]string{x.Rule, x.Channel}
		rc := b.rules[k]
		if rc == nil {
			rc = &RuleCount{Rule: x.Rule, Channel: x.Channel, Locations: []Location{}}
			b.rules[k] = rc
		}
		rc.Count++
		b.rep.Total++
		if len(rc.Locations) < MaxReportLocations {
			rc.Locations = append(rc.Locations, Location{Seq: r.Seq, Pointer: x.Pointer})
		} else {
			rc.Omitted++
		}
	}
}

// AddMeta counts the redactions made in a recording's metadata at open
// (seq 0: they belong to no event).
func (b *ReportBuilder) AddMeta(m *RecordingMeta) {
	if len(m.Redactions) > 0 {
		b.Add(&Record{Redactions: m.Redactions})
		b.rep.Events--
	}
}

// Report returns the report, rules sorted by rule then channel.
func (b *ReportBuilder) Report() *RedactionReport {
	rep := b.rep
	rep.Rules = make([]RuleCount, 0, len(b.rules))
	for _, rc := range b.rules {
		rep.Rules = append(rep.Rules, *rc)
	}
	sort.Slice(rep.Rules, func(i, j int) bool {
		if rep.Rules[i].Rule != rep.Rules[j].Rule {
			return rep.Rules[i].Rule < rep.Rules[j].Rule
		}
		return rep.Rules[i].Channel < rep.Rules[j].Channel
	})
	return &rep
}

// Redaction returns a recording's redaction report: the manifest's once it
// is finished, else built by reading its log.
func (s *Store) Redaction(id string) (*RedactionReport, error) {
	if root, err := s.Root(id); err != nil {
		return nil, err
	} else if root != "" {
		m, err := s.ReadManifest(root)
		if err != nil {
			return nil, err
		}
		if m.Redaction != nil {
			return m.Redaction, nil
		}
	}
	meta, err := s.Meta(id)
	if err != nil {
		return nil, err
	}
	b := NewReportBuilder(id, meta.PlanDigest)
	b.AddMeta(&meta)
	if _, err := s.Scan(id, Pos{}, 0, func(r Record, _ Locator) error { b.Add(&r); return nil }); err != nil {
		return nil, err
	}
	return b.Report(), nil
}
