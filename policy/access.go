package policy

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/rego"
)

// Scopes a token may hold.
const (
	ScopeIngest = "ingest"
	ScopeRead   = "read"
	ScopePin    = "pin"
	ScopeAdmin  = "admin"
	// ScopeShare makes and revokes a recording's share links.
	ScopeShare = "share"
	// ScopeComment comments on a recording's steps.
	ScopeComment = "comment"
)

// Scopes lists every scope.
var Scopes = []string{ScopeIngest, ScopeRead, ScopePin, ScopeAdmin, ScopeShare, ScopeComment}

// AllProjects is a token's project when it reaches every project.
const AllProjects = "*"

// AccessInput is what an access decision is made from.
type AccessInput struct {
	Method  string `json:"method"`
	Route   string `json:"route"`   // the route pattern: /v1/recordings/{id}
	Project string `json:"project"` // the request's project, "" when it names none
	Token   Claims `json:"token"`
}

// Claims are what a token says about its holder.
type Claims struct {
	ID      string   `json:"id"`
	Project string   `json:"project"` // a project, or AllProjects
	Scopes  []string `json:"scopes"`
}

// Decision is the access policy's answer: whether to allow, the scope the
// route needs, and why ("granted", "missing scope", "other project", "no
// such route").
type Decision struct {
	Allow  bool   `json:"allow"`
	Need   string `json:"need"`
	Reason string `json:"reason"`
}

// Reasons a decision gives.
const (
	ReasonGranted      = "granted"
	ReasonMissingScope = "missing scope"
	ReasonOtherProject = "other project"
	ReasonNoRoute      = "no such route"
)

// AccessEvaluations is how many access decisions were evaluated (a cache
// in front of Access keeps this far below the request count).
func (e *Engine) AccessEvaluations() int64 { return e.aevals.Load() }

// Access evaluates the access policy. A failure is an error, and the
// caller refuses the request: access fails closed.
func (e *Engine) Access(ctx context.Context, in AccessInput) (Decision, error) {
	e.aevals.Add(1)
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	scopes := make([]any, len(in.Token.Scopes))
	for i, s := range in.Token.Scopes {
		scopes[i] = s
	}
	input := map[string]any{"method": in.Method, "route": in.Route, "project": in.Project,
		"token": map[string]any{"id": in.Token.ID, "project": in.Token.Project, "scopes": scopes}}
	rs, err := e.access.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return Decision{}, fmt.Errorf("policy: evaluating %s: %w", AccessQuery, err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Decision{}, fmt.Errorf("policy: %s is undefined", AccessQuery)
	}
	m, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return Decision{}, fmt.Errorf("policy: %s is not an object", AccessQuery)
	}
	var d Decision
	d.Allow, _ = m["allow"].(bool)
	d.Need, _ = m["need"].(string)
	d.Reason, _ = m["reason"].(string)
	return d, nil
}
