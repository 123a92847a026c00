package statedoc

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/flightrec/flightrec/store/objstore"
)

// TestNoLostUpdate: two writers (two nodes' Docs on one object, or two
// goroutines on one file) each append lines concurrently; every line is
// there at the end, and a deleted document reads as none.
func TestNoLostUpdate(t *testing.T) {
	obj, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := File(filepath.Join(t.TempDir(), "state", "doc.json"), 0o600)
	for name, docs := range map[string][2]Doc{
		"object": {Object(obj, "state/doc"), Object(obj, "state/doc")},
		"file":   {file, file},
	} {
		ctx := context.Background()
		const n = 20
		var wg sync.WaitGroup
		for w, d := range docs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range n {
					line := fmt.Appendf(nil, "%d-%d\n", w, i)
					if err := d.Update(ctx, func(old []byte) ([]byte, error) { return append(old, line...), nil }); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		got, err := docs[1].Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lines := bytes.Count(got, []byte("\n")); lines != 2*n {
			t.Errorf("%s: %d lines, want %d: an update was lost", name, lines, 2*n)
		}
		if err := docs[0].Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if b, err := docs[1].Read(ctx); err != nil || b != nil {
			t.Errorf("%s: a deleted document reads %q %v", name, b, err)
		}
		if docs[0].Shared() != (name == "object") {
			t.Errorf("%s: Shared() = %v", name, docs[0].Shared())
		}
	}
}
