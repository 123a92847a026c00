package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/store/objstore/objstoretest"
)

func newLocal(t *testing.T) objstore.Store {
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLocalConformance(t *testing.T) { objstoretest.Run(t, newLocal) }

// TestLocalTwoOpeners: two stores on one directory (as two processes
// would open it: separate mutexes, separate lock descriptors) race through
// the flock alone, and lose no update and no create-only race.
func TestLocalTwoOpeners(t *testing.T) {
	dir := t.TempDir()
	var stores [2]*objstore.Local
	for i := range stores {
		s, err := objstore.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	ctx := context.Background()
	const workers, each = 6, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for range each {
				_, err := objstore.Update(ctx, s, "counter", func(old []byte, exists bool) ([]byte, error) {
					n := 0
					if exists {
						n, _ = strconv.Atoi(string(old))
					}
					return []byte(strconv.Itoa(n + 1)), nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
			_, err := stores[w%2].Put(ctx, "once", strings.NewReader(strconv.Itoa(w)), -1, objstore.PutOptions{CreateOnly: true})
			if err != nil && !errors.Is(err, objstore.ErrExists) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, _, err := objstore.ReadAll(ctx, stores[1], "counter")
	if err != nil || string(got) != strconv.Itoa(workers*each) {
		t.Fatalf("counter %q (%v), want %d", got, err, workers*each)
	}
	// The ETag cache of one opener never vouches for the other's write.
	a, _ := stores[0].Stat(ctx, "counter")
	b, _ := stores[1].Stat(ctx, "counter")
	if a.ETag != b.ETag || a.ETag == "" {
		t.Fatalf("the openers disagree on the ETag: %s vs %s", a.ETag, b.ETag)
	}
}

// TestLocalDurableLayout: objects are plain files under their keys; a
// crashed put's old temporary file is removed at open, a young one (a put
// in progress elsewhere) is kept, and neither is ever listed.
func TestLocalDurableLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Put(ctx, "a/b c", strings.NewReader("data"), 4, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "a", "b c")); err != nil || string(got) != "data" {
		t.Fatalf("the object's file: %q, %v", got, err)
	}
	s.Close()
	old := filepath.Join(dir, ".objstore.tmp", "put-old")
	young := filepath.Join(dir, ".objstore.tmp", "put-young")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	s, err = objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale temporary file is still there: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatalf("the young temporary file was removed: %v", err)
	}
	var keys []string
	for info, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	if len(keys) != 1 || keys[0] != "a/b c" {
		t.Fatalf("listed %q", keys)
	}
	// Deleting the last key of a directory removes the directory, so the
	// name can be a key again.
	if err := s.Delete(ctx, "a/b c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a", strings.NewReader("now a file"), -1, objstore.PutOptions{}); err != nil {
		t.Fatalf("put a after its directory emptied: %v", err)
	}
}
