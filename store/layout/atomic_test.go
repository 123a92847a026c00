package layout

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "meta.json")
	for _, s := range []string{"first", "second, longer"} {
		if err := WriteFileAtomic(p, []byte(s), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != s {
			t.Fatalf("read %q %v, want %q", got, err, s)
		}
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporaries left behind: %v", ents)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "no-such-dir", "x"), nil, 0o644); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}
