package policy

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/flightrec/flightrec/wire"
)

//go:embed rego/*.rego
var defaultPolicy embed.FS

// RedactQuery is the rule a redaction policy must define.
const RedactQuery = "data.flightrec.redact.plan"

// AccessQuery is the rule an access policy must define.
const AccessQuery = "data.flightrec.access.decision"

// RetentionQuery is the rule a retention policy must define.
const RetentionQuery = "data.flightrec.retention.class"

// Input is what a recording's plan is computed from.
type Input struct {
	Recording RecordingInput `json:"recording"`
	AppMap    wire.AppMap    `json:"app_map"`
}

// RecordingInput is the part of a recording's metadata a policy sees.
type RecordingInput struct {
	Project  string            `json:"project"`
	Flow     string            `json:"flow,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Executor string            `json:"executor,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
}

// Engine holds the compiled policy: the embedded default plus the user's
// modules, prepared once at start.
type Engine struct {
	modules map[string]*ast.Module
	digest  string
	redact  rego.PreparedEvalQuery
	access  rego.PreparedEvalQuery
	retain  rego.PreparedEvalQuery
	evals   atomic.Int64
	aevals  atomic.Int64
	timeout time.Duration
}

// CompileError is a policy that does not compile, with every location.
type CompileError struct{ Errs []string }

func (e *CompileError) Error() string {
	return "policy does not compile:\n  " + strings.Join(e.Errs, "\n  ")
}

// Load compiles the default policy and, when dir is not empty, every .rego
// file under dir (tests, *_test.rego, included for Test). A policy that
// does not compile is a *CompileError naming each file, line and column.
func Load(ctx context.Context, dir string) (*Engine, error) {
	modules := map[string]*ast.Module{}
	// sources are the modules' bytes by a name that does not depend on
	// where the directory was named from (digest).
	sources := map[string][]byte{}
	var errs []string
	parse := func(name string, src []byte) {
		m, err := ast.ParseModuleWithOpts(name, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			errs = append(errs, locate(err)...)
			return
		}
		modules[name] = m
		if rel, err := filepath.Rel(dir, name); err == nil && !strings.HasPrefix(name, "default/") {
			sources["user/"+filepath.ToSlash(rel)] = src
		} else {
			sources[name] = src
		}
	}
	err := fs.WalkDir(defaultPolicy, "rego", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := defaultPolicy.ReadFile(p)
		if err == nil {
			parse("default/"+d.Name(), src)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if dir != "" {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".rego") {
				return nil
			}
			src, err := os.ReadFile(p)
			if err == nil {
				parse(p, src)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("policy: reading %s: %w", dir, err)
		}
	}
	if len(errs) > 0 {
		return nil, &CompileError{Errs: errs}
	}
	replaceDefault(modules, "flightrec.access")
	replaceDefault(modules, "flightrec.retention")
	prepare := func(query string) (rego.PreparedEvalQuery, error) {
		opts := []func(*rego.Rego){rego.Query(query), rego.StrictBuiltinErrors(true)}
		for _, m := range modules {
			opts = append(opts, rego.ParsedModule(m))
		}
		pq, err := rego.New(opts...).PrepareForEval(ctx)
		if err != nil {
			return pq, &CompileError{Errs: locate(err)}
		}
		return pq, nil
	}
	red, err := prepare(RedactQuery)
	if err != nil {
		return nil, err
	}
	acc, err := prepare(AccessQuery)
	if err != nil {
		return nil, err
	}
	ret, err := prepare(RetentionQuery)
	if err != nil {
		return nil, err
	}
	return &Engine{modules: modules, digest: digestOf(sources), redact: red, access: acc, retain: ret, timeout: time.Second}, nil
}

// digestOf is "sha256:" and the hex digest of every module's name and
// bytes, in name order: two loads have one digest exactly when they read
// the same files (tests included, which decide nothing but are cheap to
// count), whatever path named the directory.
func digestOf(sources map[string][]byte) string {
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%d:%s%d:", len(n), n, len(sources[n]))
		h.Write(sources[n])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Digest names the policy this engine loaded (the default's modules and
// the user's): serve records it in the data directory, and a retention
// sweep from the command line refuses to run under another.
func (e *Engine) Digest() string { return e.digest }

// replaceDefault drops a default package (and its tests) when the user's
// modules define it: the access and retention policies are replaced whole,
// not extended, since their rules are complete (a rule added to the
// default access policy could only ever grant more, one added to the
// retention policy would conflict).
func replaceDefault(modules map[string]*ast.Module, pkg string) {
	path := "data." + pkg
	user := false
	for name, m := range modules {
		if !strings.HasPrefix(name, "default/") && m.Package.Path.String() == path {
			user = true
		}
	}
	if !user {
		return
	}
	for name, m := range modules {
		p := m.Package.Path.String()
		if strings.HasPrefix(name, "default/") && (p == path || p == path+"_test") {
			delete(modules, name)
		}
	}
}

// locate renders OPA errors as "file:row:col: message".
func locate(err error) []string {
	var ae ast.Errors
	if errors.As(err, &ae) {
		out := make([]string, 0, len(ae))
		for _, e := range ae {
			if e.Location != nil {
				out = append(out, fmt.Sprintf("%s:%d:%d: %s", e.Location.File, e.Location.Row, e.Location.Col, e.Message))
			} else {
				out = append(out, e.Message)
			}
		}
		sort.Strings(out)
		return out
	}
	return []string{err.Error()}
}

// Evaluations is how many times a plan was evaluated (one per recording).
func (e *Engine) Evaluations() int64 { return e.evals.Load() }

// Plan evaluates the redaction policy for one recording. Any failure is an
// error: the caller refuses the recording rather than store it unredacted.
func (e *Engine) Plan(ctx context.Context, in Input) (*Plan, error) {
	e.evals.Add(1)
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	raw, err := toValue(in)
	if err != nil {
		return nil, err
	}
	rs, err := e.redact.Eval(ctx, rego.EvalInput(raw))
	if err != nil {
		return nil, fmt.Errorf("policy: evaluating %s: %w", RedactQuery, err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, fmt.Errorf("policy: %s is undefined", RedactQuery)
	}
	b, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		return nil, err
	}
	var p Plan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy: %s has the wrong shape: %w", RedactQuery, err)
	}
	p.applyFloors()
	p.Normalize()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// toValue turns the input into plain JSON values for OPA.
func toValue(in Input) (any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var v any
	return v, json.Unmarshal(b, &v)
}

// applyFloors puts back what no policy may take away, whatever it says:
// password inputs stay masked and credentials stay out of headers. User
// modules can only add to the default's sets; this also holds for a policy
// directory that replaces the plan rule wholesale.
func (p *Plan) applyFloors() {
	p.MaskInputTypes = append(p.MaskInputTypes, "password")
	p.DropHeaders = append(p.DropHeaders, "authorization", "proxy-authorization", "cookie", "set-cookie")
}

// Validate checks what must compile: name patterns are RE2.
func (p *Plan) Validate() error {
	for _, pat := range p.MaskNamePatterns {
		if _, err := regexp.Compile("(?i)" + pat); err != nil {
			return fmt.Errorf("policy: mask_name_patterns: %w", err)
		}
	}
	if p.EntropyThreshold < 0 || p.EntropyThreshold > 8 {
		return fmt.Errorf("policy: entropy_threshold must be 0-8 bits per character")
	}
	return nil
}

// TestResult is one Rego test's outcome.
type TestResult struct {
	Name     string `json:"name"`
	Location string `json:"location"`
	Pass     bool   `json:"pass"`
	Error    string `json:"error,omitempty"`
}

// Test runs every Rego test (test_* rules) in the loaded modules.
func (e *Engine) Test(ctx context.Context) ([]TestResult, error) {
	ch, err := tester.NewRunner().SetModules(e.modules).RunTests(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{Name: r.Package + "." + r.Name, Pass: !r.Fail && r.Error == nil}
		if r.Location != nil {
			tr.Location = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
		}
		if r.Error != nil {
			tr.Error = r.Error.Error()
		}
		out = append(out, tr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
