package demoapp

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed flows/*.yaml
var flowFS embed.FS

// FlowNames lists the flows that ship with the storefront, without the
// .yaml suffix: checkout-passes and checkout-with-gift-card-fails.
func FlowNames() []string {
	ents, _ := fs.ReadDir(flowFS, "flows")
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// FlowFile returns the YAML of a shipped flow by name (see FlowNames) and
// its file name, for error messages.
func FlowFile(name string) (file string, data []byte, err error) {
	file = name + ".yaml"
	data, err = fs.ReadFile(flowFS, "flows/"+file)
	return file, data, err
}
