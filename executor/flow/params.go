package flow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Param is one parameter a flow declares under params: a value supplied
// when the flow runs rather than written in the file, such as what was
// typed into a masked field when the flow was exported from a recording.
//
//	params:
//	  card_number: typed into textbox "Card number" (masked)
//	steps:
//	  - fill: {target: textbox "Card number", value: "{{card_number}}"}
type Param struct {
	Name        string
	Description string
	Line        int
}

// paramName is what a parameter may be called: it becomes an environment
// variable name (ParamEnv) and a JavaScript identifier's tail, so it is
// kept to lower-case letters, digits and underscores.
var paramName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ValidParamName says whether name may name a parameter.
func ValidParamName(name string) bool { return paramName.MatchString(name) && name != "base" }

// ParamEnv is the environment variable that supplies parameter name to
// flightrec record: FLIGHTREC_PARAM_CARD_NUMBER for card_number.
func ParamEnv(name string) string { return "FLIGHTREC_PARAM_" + strings.ToUpper(name) }

// varUse is a {{name}} (not base) in a field, checked against params.
type varUse struct {
	n          *yaml.Node
	what, name string
}

// use notes the variables of a field's text.
func (p *parser) use(n *yaml.Node, what, text string) {
	for _, m := range variable.FindAllStringSubmatch(text, -1) {
		if m[1] != "base" {
			p.uses = append(p.uses, varUse{n: n, what: what, name: m[1]})
		}
	}
}

// checkUses reports every variable that is neither base nor declared.
func (p *parser) checkUses(params []Param) {
	declared := map[string]bool{}
	for _, pr := range params {
		declared[pr.Name] = true
	}
	for _, u := range p.uses {
		if !declared[u.name] {
			p.errf(u.n, "%s: unknown variable {{%s}} (declare it under params; {{base}} is the app's base URL)", u.what, u.name)
		}
	}
}

// params reads params: a mapping of name to description.
func (p *parser) params(n *yaml.Node) []Param {
	fields, ok := p.mapping(n, "params")
	if !ok {
		return nil
	}
	var out []Param
	for _, fd := range fields {
		if !ValidParamName(fd.key) {
			p.errf(fd.kn, "params: %q is not a parameter name (lower-case letters, digits and _, starting with a letter; not base)", fd.key)
			continue
		}
		pr := Param{Name: fd.key, Line: fd.kn.Line}
		if v := deref(fd.v); v.Kind != yaml.ScalarNode || v.Tag != "!!null" {
			pr.Description, _ = p.str(fd.v, "params "+fd.key)
		}
		out = append(out, pr)
	}
	return out
}

// MissingParamsError names the parameters a run was not given.
type MissingParamsError struct {
	File  string
	Names []string
}

func (e *MissingParamsError) Error() string {
	return fmt.Sprintf("%s: no value for parameter(s) %s", e.File, strings.Join(e.Names, ", "))
}

// Bind returns a copy of f with every parameter replaced by its value from
// values (values it does not declare are ignored). A declared parameter
// without a value is a *MissingParamsError naming all of them. Values are
// substituted once: a value holding {{…}} is not expanded again.
func (f *Flow) Bind(values map[string]string) (*Flow, error) {
	var missing []string
	for _, pr := range f.Params {
		if _, ok := values[pr.Name]; !ok {
			missing = append(missing, pr.Name)
		}
	}
	if len(missing) > 0 {
		return nil, &MissingParamsError{File: f.File, Names: missing}
	}
	x := func(s string) string {
		return variable.ReplaceAllStringFunc(s, func(m string) string {
			name := variable.FindStringSubmatch(m)[1]
			if v, ok := values[name]; ok && name != "base" {
				return v
			}
			return m
		})
	}
	out := *f
	out.StartURL = x(f.StartURL)
	out.Steps = make([]Step, len(f.Steps))
	for i, s := range f.Steps {
		s.URL, s.Value = x(s.URL), x(s.Value)
		if s.Wait != nil {
			w := *s.Wait
			w.Text, w.URL = x(w.Text), x(w.URL)
			s.Wait = &w
		}
		if s.Expect != nil {
			e := *s.Expect
			e.Text = x(e.Text)
			if e.State != nil {
				st := *e.State
				st.URL = x(st.URL)
				e.State = &st
			}
			s.Expect = &e
		}
		out.Steps[i] = s
	}
	return &out, nil
}

// ParsePersona reads a persona file: a YAML mapping of parameter names to
// values (scalars), such as
//
//	email: buyer@acme.example
//	card_number: "4242 4242 4242 4242"
//
// Errors name the file and line, never a value.
func ParsePersona(file string, data []byte) (map[string]string, error) {
	p := &parser{file: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]string{}, nil
		}
		return nil, p.yamlError(err)
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	out := map[string]string{}
	fields, ok := p.mapping(root, "a persona file")
	if ok {
		for _, fd := range fields {
			if !ValidParamName(fd.key) {
				p.errf(fd.kn, "%q is not a parameter name (lower-case letters, digits and _)", fd.key)
				continue
			}
			if v, ok := p.str(fd.v, fd.key); ok {
				out[fd.key] = v
			}
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return out, nil
}
