// Package objstoretest is the conformance suite every objstore.Store runs
// (in the manner of restic's backend tests): round trips, byte ranges,
// create-only and ETag-conditional races, listing past S3's page size,
// idempotent deletes, odd keys and multipart-sized objects. A backend's
// test calls Run with a function giving a fresh, empty store.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flightrec/flightrec/store/objstore"
)

// Run runs the suite. newStore returns an empty store, private to the
// (sub)test that asked.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"NotExist", testNotExist},
		{"Ranges", testRanges},
		{"CreateOnly", testCreateOnly},
		{"CreateOnlyRace", testCreateOnlyRace},
		{"IfMatch", testIfMatch},
		{"IfMatchRace", testIfMatchRace},
		{"UpdateCounter", testUpdateCounter},
		{"ListPaging", testListPaging},
		{"ListOrderAndPrefixes", testListOrder},
		{"Delete", testDelete},
		{"DeleteMany", testDeleteMany},
		{"OddKeys", testOddKeys},
		{"InvalidKeys", testInvalidKeys},
		{"Large", testLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func put(t testing.TB, s objstore.Store, key string, data []byte, opts objstore.PutOptions) (objstore.Info, error) {
	t.Helper()
	return s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), opts)
}

func mustPut(t testing.TB, s objstore.Store, key string, data []byte) objstore.Info {
	t.Helper()
	info, err := put(t, s, key, data, objstore.PutOptions{})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func mustGet(t testing.TB, s objstore.Store, key string) ([]byte, objstore.Info) {
	t.Helper()
	data, info, err := objstore.ReadAll(context.Background(), s, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return data, info
}

func random(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// wantKind checks that err is an *objstore.Error of the kind.
func wantKind(t testing.TB, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got %v, want %v", what, err, kind)
	}
	var e *objstore.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %T is not an *objstore.Error", what, err)
	}
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := random(t, 100_000)
	pi := mustPut(t, s, "dir/obj", data)
	if pi.Size != int64(len(data)) || pi.ETag == "" || pi.Key != "dir/obj" {
		t.Fatalf("put info %+v", pi)
	}
	got, gi := mustGet(t, s, "dir/obj")
	if !bytes.Equal(got, data) {
		t.Fatal("get returned other bytes")
	}
	if gi.Size != pi.Size || gi.ETag != pi.ETag {
		t.Fatalf("get info %+v, put info %+v", gi, pi)
	}
	si, err := s.Stat(ctx, "dir/obj")
	if err != nil {
		t.Fatal(err)
	}
	if si.Size != pi.Size || si.ETag != pi.ETag || si.ModTime.IsZero() {
		t.Fatalf("stat info %+v, put info %+v", si, pi)
	}

	// Replacing changes the bytes and the ETag.
	data2 := random(t, 50)
	pi2 := mustPut(t, s, "dir/obj", data2)
	if pi2.ETag == pi.ETag {
		t.Fatal("the ETag did not change with the content")
	}
	if got, _ := mustGet(t, s, "dir/obj"); !bytes.Equal(got, data2) {
		t.Fatal("get after replace returned other bytes")
	}
	if si, _ := s.Stat(ctx, "dir/obj"); si.ETag != pi2.ETag || si.Size != 50 {
		t.Fatalf("stat after replace %+v, want %+v", si, pi2)
	}

	// Empty objects, and bodies of unknown size.
	mustPut(t, s, "empty", nil)
	if got, gi := mustGet(t, s, "empty"); len(got) != 0 || gi.Size != 0 {
		t.Fatalf("empty object read back as %d bytes, size %d", len(got), gi.Size)
	}
	if _, err := s.Put(ctx, "unknown-size", io.MultiReader(bytes.NewReader(data[:1000]), bytes.NewReader(data[1000:3000])), -1, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := mustGet(t, s, "unknown-size"); !bytes.Equal(got, data[:3000]) {
		t.Fatal("an object of unknown size read back differently")
	}

	// A body shorter than announced stores nothing.
	if _, err := s.Put(ctx, "short", bytes.NewReader(data[:10]), 20, objstore.PutOptions{}); err == nil {
		t.Fatal("a body shorter than its size was stored")
	}
	if _, err := s.Stat(ctx, "short"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("after a short body: stat says %v", err)
	}
}

func testNotExist(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	_, _, err := s.Get(ctx, "missing/key")
	wantKind(t, "get", err, objstore.ErrNotExist)
	_, err = s.Stat(ctx, "missing")
	wantKind(t, "stat", err, objstore.ErrNotExist)
	_, err = s.GetRange(ctx, "missing", 0, 10)
	wantKind(t, "range", err, objstore.ErrNotExist)
	_, err = s.GetRange(ctx, "missing", 0, 0)
	wantKind(t, "empty range", err, objstore.ErrNotExist)
	// A key that is a prefix of others is no object.
	mustPut(t, s, "a/b", []byte("x"))
	_, err = s.Stat(ctx, "a")
	wantKind(t, "stat of a prefix", err, objstore.ErrNotExist)
	for _, kind := range []error{objstore.ErrExists, objstore.ErrPrecondition, objstore.ErrUnavailable} {
		if errors.Is(err, kind) {
			t.Fatalf("not-found is also %v", kind)
		}
	}
}

func testRanges(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := random(t, 1000)
	mustPut(t, s, "r", data)
	for _, c := range []struct {
		off, n     int64
		start, end int
	}{
		{0, 10, 0, 10},
		{990, 10, 990, 1000},
		{995, 10, 995, 1000}, // past the end: cut there
		{0, -1, 0, 1000},
		{500, -1, 500, 1000},
		{999, 1, 999, 1000},
		{1000, 10, 1000, 1000}, // at the end: empty
		{1000, -1, 1000, 1000},
		{10, 0, 10, 10},
		{0, 5000, 0, 1000},
	} {
		rc, err := s.GetRange(ctx, "r", c.off, c.n)
		if err != nil {
			t.Fatalf("range %d+%d: %v", c.off, c.n, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("range %d+%d: read: %v", c.off, c.n, err)
		}
		if !bytes.Equal(got, data[c.start:c.end]) {
			t.Fatalf("range %d+%d: got %d bytes, want bytes %d..%d", c.off, c.n, len(got), c.start, c.end)
		}
	}
	for _, c := range [][2]int64{{1001, 1}, {5000, -1}, {1001, 0}} {
		_, err := s.GetRange(ctx, "r", c[0], c[1])
		wantKind(t, fmt.Sprintf("range %d+%d beyond the end", c[0], c[1]), err, objstore.ErrRange)
	}
	// A range of an empty object.
	mustPut(t, s, "e", nil)
	rc, err := s.GetRange(ctx, "e", 0, 10)
	if err != nil {
		t.Fatalf("range of an empty object: %v", err)
	}
	if got, _ := io.ReadAll(rc); len(got) != 0 {
		t.Fatalf("range of an empty object gave %d bytes", len(got))
	}
	rc.Close()
}

func testCreateOnly(t *testing.T, s objstore.Store) {
	create := objstore.PutOptions{CreateOnly: true}
	first, err := put(t, s, "state/token", []byte("one"), create)
	if err != nil {
		t.Fatalf("create-only put of a new key: %v", err)
	}
	_, err = put(t, s, "state/token", []byte("two"), create)
	wantKind(t, "create-only put of a taken key", err, objstore.ErrExists)
	got, info := mustGet(t, s, "state/token")
	if string(got) != "one" || info.ETag != first.ETag {
		t.Fatalf("the refused put changed the object: %q", got)
	}
	// After a delete the key can be created again.
	if err := s.Delete(context.Background(), "state/token"); err != nil {
		t.Fatal(err)
	}
	if _, err := put(t, s, "state/token", []byte("three"), create); err != nil {
		t.Fatalf("create-only after delete: %v", err)
	}
}

// race runs fn from n goroutines at once.
func race(n int, fn func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			fn(i)
		}()
	}
	start.Done()
	done.Wait()
}

const racers = 8

func testCreateOnlyRace(t *testing.T, s objstore.Store) {
	for round := range 5 {
		key := "race/" + strconv.Itoa(round)
		errs := make([]error, racers)
		race(racers, func(i int) {
			_, errs[i] = put(t, s, key, []byte("writer "+strconv.Itoa(i)), objstore.PutOptions{CreateOnly: true})
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both created %s", round, winner, i, key)
				}
				winner = i
			case !errors.Is(err, objstore.ErrExists):
				t.Fatalf("round %d: writer %d: %v, want ErrExists", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %s", round, key)
		}
		if got, _ := mustGet(t, s, key); string(got) != "writer "+strconv.Itoa(winner) {
			t.Fatalf("round %d: %s holds %q, the winner was %d", round, key, got, winner)
		}
	}
}

func testIfMatch(t *testing.T, s objstore.Store) {
	v1 := mustPut(t, s, "pins", []byte("v1"))
	_, err := put(t, s, "pins", []byte("x"), objstore.PutOptions{IfMatch: "0123456789abcdef0123456789abcdef"})
	wantKind(t, "if-match with a wrong ETag", err, objstore.ErrPrecondition)
	_, err = put(t, s, "gone", []byte("x"), objstore.PutOptions{IfMatch: v1.ETag})
	wantKind(t, "if-match on a missing key", err, objstore.ErrPrecondition)
	if _, err := s.Stat(context.Background(), "gone"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("the refused if-match put created the key: %v", err)
	}
	v2, err := put(t, s, "pins", []byte("v2"), objstore.PutOptions{IfMatch: v1.ETag})
	if err != nil {
		t.Fatalf("if-match with the current ETag: %v", err)
	}
	_, err = put(t, s, "pins", []byte("v3"), objstore.PutOptions{IfMatch: v1.ETag})
	wantKind(t, "if-match with the previous ETag", err, objstore.ErrPrecondition)
	if got, info := mustGet(t, s, "pins"); string(got) != "v2" || info.ETag != v2.ETag {
		t.Fatalf("pins holds %q (%s), want v2 (%s)", got, info.ETag, v2.ETag)
	}
}

// testIfMatchRace: writers that all read the same version race to replace
// it; exactly one wins, every round.
func testIfMatchRace(t *testing.T, s objstore.Store) {
	cur := mustPut(t, s, "shared", []byte("start"))
	for round := range 5 {
		errs := make([]error, racers)
		infos := make([]objstore.Info, racers)
		race(racers, func(i int) {
			infos[i], errs[i] = put(t, s, "shared", []byte(fmt.Sprintf("round %d writer %d", round, i)), objstore.PutOptions{IfMatch: cur.ETag})
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both replaced the same version", round, winner, i)
				}
				winner = i
			case !errors.Is(err, objstore.ErrPrecondition):
				t.Fatalf("round %d: writer %d: %v, want ErrPrecondition", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody replaced the object", round)
		}
		got, info := mustGet(t, s, "shared")
		if string(got) != fmt.Sprintf("round %d writer %d", round, winner) || info.ETag != infos[winner].ETag {
			t.Fatalf("round %d: the object holds %q, the winner was %d", round, got, winner)
		}
		cur = info
	}
}

// testUpdateCounter: read-modify-write from several goroutines loses no
// increment.
func testUpdateCounter(t *testing.T, s objstore.Store) {
	const each = 5
	errs := make([]error, racers)
	race(racers, func(i int) {
		for range each {
			_, err := objstore.Update(context.Background(), s, "counter", func(old []byte, exists bool) ([]byte, error) {
				n := 0
				if exists {
					var err error
					if n, err = strconv.Atoi(string(old)); err != nil {
						return nil, err
					}
				}
				return []byte(strconv.Itoa(n + 1)), nil
			})
			if err != nil {
				errs[i] = err
				return
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got, _ := mustGet(t, s, "counter"); string(got) != strconv.Itoa(racers*each) {
		t.Fatalf("counter is %s, want %d", got, racers*each)
	}
}

func listKeys(t testing.TB, s objstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range s.List(context.Background(), prefix) {
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

// putMany stores the keys from a few goroutines (listing tests need more
// keys than one S3 page).
func putMany(t testing.TB, s objstore.Store, keys []string) {
	t.Helper()
	errs := make([]error, racers)
	race(racers, func(w int) {
		for i := w; i < len(keys); i += racers {
			if _, err := put(t, s, keys[i], []byte(keys[i]), objstore.PutOptions{}); err != nil {
				errs[w] = err
				return
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func testListPaging(t *testing.T, s objstore.Store) {
	const n = 1234 // more than S3's page of 1000
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("packs/%02x/%08d", i%7, i))
	}
	putMany(t, s, want)
	mustPut(t, s, "other/x", []byte("x"))
	slices.Sort(want)
	got := listKeys(t, s, "packs/")
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d keys, want %d (first difference near %v)", len(got), len(want), firstDiff(got, want))
	}
	var sizes int64
	for info, err := range s.List(context.Background(), "packs/03/") {
		if err != nil {
			t.Fatal(err)
		}
		sizes += info.Size
		if info.Size != int64(len(info.Key)) {
			t.Fatalf("listed %s with size %d, want %d", info.Key, info.Size, len(info.Key))
		}
	}
	if sizes == 0 {
		t.Fatal("listing packs/03/ found nothing")
	}
	// Stopping the loop early stops the listing.
	count := 0
	for _, err := range s.List(context.Background(), "") {
		if err != nil {
			t.Fatal(err)
		}
		count++
		if count == 1100 {
			break
		}
	}
	if count != 1100 {
		t.Fatalf("an early break after 1100 keys counted %d", count)
	}
	if all := listKeys(t, s, ""); len(all) != n+1 {
		t.Fatalf("listing everything gave %d keys, want %d", len(all), n+1)
	}
	// DeleteMany past S3's 1,000 keys a request, with keys never stored
	// among them: every tenth key is kept, and "other/x".
	var doomed, kept []string
	for i, key := range want {
		if i%10 == 0 {
			kept = append(kept, key)
		} else {
			doomed = append(doomed, key)
		}
	}
	doomed = append(doomed, "packs/never/1", "packs/never/2")
	if err := s.DeleteMany(context.Background(), doomed); err != nil {
		t.Fatalf("delete many: %v", err)
	}
	if got := listKeys(t, s, "packs/"); !slices.Equal(got, kept) {
		t.Fatalf("after deleting %d keys, %d are listed, want %d (first difference near %v)", len(doomed), len(got), len(kept), firstDiff(got, kept))
	}
	if got := listKeys(t, s, "other/"); !slices.Equal(got, []string{"other/x"}) {
		t.Fatalf("delete many of packs/ left other/ as %q", got)
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("index %d: %q vs %q", i, a[i], b[i])
		}
	}
	return "at the end"
}

func testListOrder(t *testing.T, s objstore.Store) {
	keys := []string{"a/b", "a-c", "a/b-d/e", "a/bz", "ab", "a.x/y", "b", "a/c/d0/e"}
	putMany(t, s, keys)
	want := slices.Sorted(slices.Values(keys))
	if got := listKeys(t, s, ""); !slices.Equal(got, want) {
		t.Fatalf("list: %q, want bytewise order %q", got, want)
	}
	for _, prefix := range []string{"a", "a/", "a/b", "a/b-", "a/b/", "zz", "a-"} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		if got := listKeys(t, s, prefix); !slices.Equal(got, want) {
			t.Fatalf("list %q: %q, want %q", prefix, got, want)
		}
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	mustPut(t, s, "d/x", []byte("x"))
	mustPut(t, s, "d/y", []byte("y"))
	if err := s.Delete(ctx, "d/x"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stat(ctx, "d/x")
	wantKind(t, "stat after delete", err, objstore.ErrNotExist)
	if err := s.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Fatalf("deleting a key never stored: %v", err)
	}
	if got := listKeys(t, s, "d/"); !slices.Equal(got, []string{"d/y"}) {
		t.Fatalf("after delete, list d/ gives %q", got)
	}
	// Concurrent deletes of one key all succeed.
	mustPut(t, s, "d/z", []byte("z"))
	errs := make([]error, racers)
	race(racers, func(i int) { errs[i] = s.Delete(ctx, "d/z") })
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent deletes: %v", err)
	}
}

// testDeleteMany: keys gone, missing keys no failure, an empty list
// nothing, and one invalid key refuses the whole call before any is removed.
func testDeleteMany(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	putMany(t, s, []string{"m/a", "m/b", "m/c", "n/a"})
	if err := s.DeleteMany(ctx, nil); err != nil {
		t.Fatalf("delete of no keys: %v", err)
	}
	err := s.DeleteMany(ctx, []string{"m/a", "bad//key", "m/b"})
	wantKind(t, "delete many with an invalid key", err, objstore.ErrInvalidKey)
	if got := listKeys(t, s, "m/"); !slices.Equal(got, []string{"m/a", "m/b", "m/c"}) {
		t.Fatalf("a refused delete many removed keys: %q left", got)
	}
	if err := s.DeleteMany(ctx, []string{"m/a", "m/c", "m/never", "m/a"}); err != nil {
		t.Fatalf("delete many: %v", err)
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"m/b", "n/a"}) {
		t.Fatalf("after delete many: %q", got)
	}
	_, err = s.Stat(ctx, "m/a")
	wantKind(t, "stat after delete many", err, objstore.ErrNotExist)
	// DeleteUnder: a prefix's objects but those kept, nothing outside it.
	putMany(t, s, []string{"m/d", "m/e", "m/f", "mx"})
	if err := objstore.DeleteUnder(ctx, s, "m/", func(key string) bool { return key == "m/e" }); err != nil {
		t.Fatalf("delete under m/: %v", err)
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"m/e", "mx", "n/a"}) {
		t.Fatalf("after delete under m/ but m/e: %q", got)
	}
}

// OddKeys are keys with characters that need escaping in URLs, XML or
// shells, and non-ASCII ones.
var OddKeys = []string{
	"sp ace/with space", "plus+sign", "percent%20encoded", "q?mark", "hash#frag", "amp&er=sand",
	"colon:semi;comma,", "star*", "quote'dq\"", "back\\slash", "tilde~bang!dollar$", "brackets[]{}()",
	"at@caret^pipe|", "ümlaut/日本語/emoji-😀", "<angle>", "trailing.dot.", "..dots-in-name..", ".hidden", "-dash",
	"x/" + strings.Repeat("long", 60),
}

func testOddKeys(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, key := range OddKeys {
		if err := objstore.CheckKey(key); err != nil {
			t.Fatalf("%q: %v", key, err)
		}
	}
	putMany(t, s, OddKeys)
	for _, key := range OddKeys {
		got, info := mustGet(t, s, key)
		if string(got) != key || info.Key != key {
			t.Fatalf("%q read back as %q (info key %q)", key, got, info.Key)
		}
		rc, err := s.GetRange(ctx, key, 1, 2)
		if err != nil {
			t.Fatalf("range of %q: %v", key, err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != key[1:3] {
			t.Fatalf("range of %q: %q", key, b)
		}
	}
	want := slices.Sorted(slices.Values(OddKeys))
	if got := listKeys(t, s, ""); !slices.Equal(got, want) {
		t.Fatalf("list: %q\nwant %q", got, want)
	}
	// Half one by one, half in one request (S3 names them in XML).
	half := len(OddKeys) / 2
	for _, key := range OddKeys[:half] {
		if err := s.Delete(ctx, key); err != nil {
			t.Fatalf("delete %q: %v", key, err)
		}
	}
	if err := s.DeleteMany(ctx, OddKeys[half:]); err != nil {
		t.Fatalf("delete many %q: %v", OddKeys[half:], err)
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("after deleting every key, list gives %q", got)
	}
}

// InvalidKeys are refused by every store, before any I/O.
var InvalidKeys = []string{
	"", "/lead", "trail/", "dou//ble", "./dot", "a/../b", "a/.", ".objstore.tmp/x", ".objstore-x",
	"nul\x00", "ctl\x01", "del\x7f", "bad\xffutf8", strings.Repeat("s", 256), strings.Repeat("a/", 500) + "a",
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, key := range InvalidKeys {
		_, err := put(t, s, key, []byte("x"), objstore.PutOptions{})
		wantKind(t, fmt.Sprintf("put %q", key), err, objstore.ErrInvalidKey)
		_, _, err = s.Get(ctx, key)
		wantKind(t, fmt.Sprintf("get %q", key), err, objstore.ErrInvalidKey)
		err = s.Delete(ctx, key)
		wantKind(t, fmt.Sprintf("delete %q", key), err, objstore.ErrInvalidKey)
		err = s.DeleteMany(ctx, []string{key})
		wantKind(t, fmt.Sprintf("delete many %q", key), err, objstore.ErrInvalidKey)
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("refused keys left objects: %q", got)
	}
}

// LargeSize is above S3's multipart threshold (16 MiB), and not a multiple
// of a part.
const LargeSize = 16<<20 + 3<<20 + 12345

func testLarge(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := random(t, LargeSize)
	sum := sha256.Sum256(data)
	info, err := s.Put(ctx, "big/known", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{CreateOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != LargeSize {
		t.Fatalf("put size %d", info.Size)
	}
	got, gi := mustGet(t, s, "big/known")
	if sha256.Sum256(got) != sum || gi.ETag != info.ETag {
		t.Fatalf("large object read back differently (etag %s vs %s)", gi.ETag, info.ETag)
	}
	// A range across the first part's end.
	rc, err := s.GetRange(ctx, "big/known", 16<<20-100, 300)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(part, data[16<<20-100:16<<20+200]) {
		t.Fatal("a range across the part boundary differs")
	}
	// Conditions hold on the multipart path too.
	_, err = s.Put(ctx, "big/known", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{CreateOnly: true})
	wantKind(t, "create-only multipart put of a taken key", err, objstore.ErrExists)
	_, err = s.Put(ctx, "big/known", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfMatch: "0123456789abcdef0123456789abcdef-2"})
	wantKind(t, "if-match multipart put with a wrong ETag", err, objstore.ErrPrecondition)
	if _, err := s.Put(ctx, "big/known", bytes.NewReader(data[:LargeSize-1]), LargeSize-1, objstore.PutOptions{IfMatch: info.ETag}); err != nil {
		t.Fatalf("if-match multipart put with the current ETag: %v", err)
	}
	if st, err := s.Stat(ctx, "big/known"); err != nil || st.Size != LargeSize-1 {
		t.Fatalf("after the if-match replace: %+v, %v", st, err)
	}
	// Unknown size: streamed in parts.
	if _, err := s.Put(ctx, "big/streamed", io.MultiReader(bytes.NewReader(data)), -1, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := mustGet(t, s, "big/streamed"); sha256.Sum256(got) != sum {
		t.Fatal("a streamed large object read back differently")
	}
}
