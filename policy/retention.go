package policy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/rego"
)

// RetentionInput is what a recording's retention class is decided from.
type RetentionInput struct {
	Project  string            `json:"project"`
	Flow     string            `json:"flow,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Executor string            `json:"executor,omitempty"`
	Verdict  string            `json:"verdict,omitempty"`
	// Damaged is set for a finished recording whose manifest declares
	// gaps (a repair sealed it with seqs lost to damage) or cannot be
	// read: damaged evidence, which the default policy keeps like a
	// failure whatever its verdict (a repaired recording has none).
	Damaged bool `json:"damaged,omitempty"`
}

// Class is a retention class: its name and how many days after finishing
// a recording of it is kept.
type Class struct {
	Name string `json:"name"`
	Days int    `json:"days"`
}

// Retention evaluates the retention policy for one recording. A failure
// is an error, and the sweeper keeps the recording: retention fails safe.
func (e *Engine) Retention(ctx context.Context, in RetentionInput) (Class, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	labels := map[string]any{}
	for k, v := range in.Labels {
		labels[k] = v
	}
	input := map[string]any{"recording": map[string]any{"project": in.Project, "flow": in.Flow,
		"labels": labels, "executor": in.Executor, "verdict": in.Verdict, "damaged": in.Damaged}}
	rs, err := e.retain.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return Class{}, fmt.Errorf("policy: evaluating %s: %w", RetentionQuery, err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Class{}, fmt.Errorf("policy: %s is undefined", RetentionQuery)
	}
	m, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return Class{}, fmt.Errorf("policy: %s is not an object", RetentionQuery)
	}
	var c Class
	c.Name, _ = m["name"].(string)
	switch d := m["days"].(type) {
	case json.Number:
		n, err := d.Int64()
		if err != nil {
			return Class{}, fmt.Errorf("policy: %s.days is not a whole number", RetentionQuery)
		}
		c.Days = int(n)
	case float64:
		c.Days = int(d)
	case int:
		c.Days = d
	default:
		return Class{}, fmt.Errorf("policy: %s.days is missing", RetentionQuery)
	}
	if c.Name == "" || c.Days <= 0 {
		return Class{}, fmt.Errorf("policy: %s needs a name and days > 0", RetentionQuery)
	}
	return c, nil
}
