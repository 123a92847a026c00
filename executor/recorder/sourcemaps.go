package recorder

import (
	"context"
	"sync"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/sourcemap"
)

// sourceMaps knows the page's scripts that name a source map (from
// Debugger.scriptParsed) and maps stack frames through those maps. Maps
// are fetched from the app like the browser's DevTools would, and cached.
type sourceMaps struct {
	res     sourcemap.Resolver
	mu      sync.Mutex
	scripts map[string]script // by CDP script id
}

type script struct{ url, mapURL string }

func newSourceMaps() *sourceMaps {
	return &sourceMaps{res: sourcemap.Resolver{Timeout: 5 * time.Second}, scripts: map[string]script{}}
}

func (m *sourceMaps) scriptParsed(id, url, mapURL string) {
	m.mu.Lock()
	m.scripts[id] = script{url, mapURL}
	m.mu.Unlock()
}

// mapFrames returns the source-mapped frames of a stack (1-based, like
// event.StackFrame), or nil when no frame could be mapped. A frame without
// a mapping stays as the browser reported it, so the stacks line up.
func (m *sourceMaps) mapFrames(frames []*cdpruntime.CallFrame) []event.StackFrame {
	var out []event.StackFrame
	mapped := false
	for _, f := range frames {
		if len(out) == maxStackFrames {
			break
		}
		sf := event.StackFrame{Function: f.FunctionName, URL: f.URL, Line: int(f.LineNumber) + 1, Column: int(f.ColumnNumber) + 1}
		m.mu.Lock()
		sc, ok := m.scripts[string(f.ScriptID)]
		m.mu.Unlock()
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			got, err := m.res.MapFrame(ctx, sourcemap.Frame{Function: f.FunctionName, URL: sc.url,
				Line: int(f.LineNumber), Column: int(f.ColumnNumber)}, sc.mapURL)
			cancel()
			if err == nil {
				sf = event.StackFrame{Function: got.Function, URL: got.URL, Line: got.Line + 1, Column: got.Column + 1}
				mapped = true
			}
		}
		out = append(out, sf)
	}
	if !mapped {
		return nil
	}
	return out
}
