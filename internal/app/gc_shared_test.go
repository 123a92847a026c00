package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/objstore"
)

// TestGCRace (issue 20's GC race): node B sweeps in a loop while node A
// ingests recordings whose frames repeat the blobs of a recording that
// was removed, blobs B is condemning and deleting. Every blob a recording
// references survives, and verify passes on both nodes; the removed
// recording's own blobs and blobs nothing ever referenced are collected.
func TestGCRace(t *testing.T) {
	grace := func(c *app.Config) { c.Store.BlobGCGrace = 300 * time.Millisecond }
	_, appA, baseA, appB, baseB := twoNodes(t, "gc", grace)
	ctx := context.Background()

	evs := testgen.Recording(testgen.Options{Seed: 5, Steps: 6, EventsPerStep: 10, FrameBytes: 6000})
	ingestAll := func() (id, root string) { return ingestFinished(t, baseA, evs, 20) }

	// checkKept checks that every blob recording id references is stored,
	// on both nodes.
	checkKept := func(id string) {
		t.Helper()
		for name, a := range map[string]*app.App{"A": appA, "B": appB} {
			refs, err := a.Store.References(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, cs := range refs {
				c, _ := store.ParseCID(cs)
				if err := readBlob(a.Store.Blobs, c); err != nil {
					t.Fatalf("node %s: blob %s of %s: %v", name, cs, id, err)
				}
			}
		}
	}
	remove := func(id string) {
		t.Helper()
		if _, err := appA.Store.RemoveRecording(id); err != nil {
			t.Fatal(err)
		}
		if err := appA.Index.DeleteRecording(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// A recording, removed: its blobs are referenced by nothing now.
	gone, goneRoot := ingestAll()
	goneMan, _, err := appA.Store.Manifest(gone)
	if err != nil {
		t.Fatal(err)
	}
	remove(gone)
	// And blobs nothing ever referenced.
	orphans := [][]byte{[]byte("orphan one"), []byte("orphan two"), make([]byte, blobs.PackMaxBlob+1)}
	orphanCIDs, err := appA.Store.Blobs.PutMany(orphans)
	if err != nil {
		t.Fatal(err)
	}

	// B sweeps in a loop while A ingests the same events again and again:
	// each recording's frames are those of the one removed before it,
	// which B is condemning and deleting.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sweeps, removed atomic.Int64
	var sweepErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rep, err := appB.Sweeper.Sweep(ctx, false, nil)
			if err != nil {
				sweepErr = err
				return
			}
			sweeps.Add(1)
			removed.Add(int64(rep.BlobsRemoved))
		}
	}()
	goneBlobs := map[string]bool{}
	for _, c := range goneMan.Blobs {
		goneBlobs[c] = true
	}
	var last string
	for i := range 5 {
		id, _ := ingestAll()
		m, _, err := appA.Store.Manifest(id)
		if err != nil {
			t.Fatal(err)
		}
		reused := 0
		for _, c := range m.Blobs {
			if goneBlobs[c] {
				reused++
			}
		}
		if reused == 0 {
			t.Fatal("the recording reused no frame blob of the removed one: the test exercises nothing")
		}
		checkKept(id)
		waitIndexed(t, baseB, id, uint64(len(evs)))
		checkReads(t, baseB, id, evs)
		if i < 4 {
			remove(id)
		}
		last = id
	}
	// Sweeps after the last batch, too: they must keep what the last
	// recording references now that its holds are released.
	for start := sweeps.Load(); sweeps.Load() < start+2; {
		time.Sleep(50 * time.Millisecond)
		if finished(&wg) {
			break // the loop ended with an error
		}
	}
	close(stop)
	wg.Wait()
	if sweepErr != nil {
		t.Fatalf("sweep on B: %v", sweepErr)
	}
	if removed.Load() == 0 {
		t.Fatalf("%d sweeps on B removed nothing", sweeps.Load())
	}
	t.Logf("%d sweeps on B removed %d blobs", sweeps.Load(), removed.Load())
	checkKept(last)
	for name, a := range map[string]*app.App{"A": appA, "B": appB} {
		rep, err := a.Store.Verify(ctx, nil)
		if err != nil || !rep.OK() {
			t.Errorf("verify on node %s: %+v %v", name, rep, err)
		}
	}
	// What nothing references was collected.
	rootCID, err := store.ParseCID(goneRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(orphanCIDs, rootCID) {
		if _, err := appB.Store.Blobs.Open(c); !errors.Is(err, blobs.ErrNotFound) {
			t.Errorf("unreferenced blob %s: %v, want it collected", c, err)
		}
	}
	checkReads(t, baseB, last, evs)
}

// finished reports whether every goroutine of wg has returned.
func finished(wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Millisecond):
		return false
	}
}

// readBlob reads blob c whole, as a reader would.
func readBlob(b blobs.Store, c cid.Cid) error {
	r, err := b.Open(c)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// TestAuditChainsAcrossNodes: two nodes append to their own audit chains
// in the bucket (a recording opened on each writes its plan entry); the
// chains and their union verify; an entry edited in the bucket is named
// by chain and entry.
func TestAuditChainsAcrossNodes(t *testing.T) {
	srv, _, baseA, _, baseB := twoNodes(t, "aud")
	for range 2 {
		openRec(t, baseA)
		openRec(t, baseB)
	}
	ctx := context.Background()
	obj := srv.Store(t, "aud")
	rep, err := audit.VerifyChains(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Chains) != 2 || rep.Entries < 4 {
		t.Fatalf("two nodes' chains: %+v", rep)
	}
	chain := rep.Chains[1].Chain
	key := audit.ChainPrefix + chain + "/000000000002"
	orig, _, err := objstore.ReadAll(ctx, obj, key)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(orig, []byte(`"plan"`), []byte(`"sweep"`), 1)
	if _, err := obj.Put(ctx, key, bytes.NewReader(edited), int64(len(edited)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if rep, err = audit.VerifyChains(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(rep.Broken(), "chain "+chain+", entry 2: edited") {
		t.Fatalf("an edited entry: %q", rep.Broken())
	}
}

// TestSharedSideState: share links and comments made through node A are
// seen by node B within 2 seconds: a player link A made opens on B (the
// link key is the deployment's), a comment A stored is listed by B, and a
// link revoked through B no longer opens on A.
func TestSharedSideState(t *testing.T) {
	_, _, baseA, _, baseB := twoNodes(t, "side")
	evs := testgen.Recording(testgen.Options{Seed: 3, Steps: 2, EventsPerStep: 4})
	id := openRec(t, baseA)
	acked(t, appendBatch(t, baseA, id, evs))
	if r := do(t, "POST", baseA+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, baseB, id, uint64(len(evs)))

	r := do(t, "POST", baseA+"/v1/recordings/"+id+"/shares", []byte(`{"expires_in":"7d","what":"player"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("share on A: %d %s", r.status, r.body)
	}
	var made shareReply
	r.decode(t, &made)
	secret := made.URL[strings.Index(made.URL, "#share=")+len("#share="):]
	opens := func(base string) bool {
		return do(t, "GET", base+"/v1/recordings/"+id+"/steps", nil, "Authorization", "Bearer "+secret).status == 200
	}
	eventually(t, "A's share link opening on B", func() bool { return opens(baseB) })

	if r := do(t, "POST", baseA+"/v1/recordings/"+id+"/comments", []byte(`{"step":1,"text":"seen on B?"}`)); r.status != http.StatusCreated {
		t.Fatalf("comment on A: %d %s", r.status, r.body)
	}
	eventually(t, "A's comment listed by B", func() bool {
		return bytes.Contains(do(t, "GET", baseB+"/v1/recordings/"+id+"/comments", nil).body, []byte("seen on B?"))
	})

	// Both nodes comment at once: no comment is lost.
	var wg sync.WaitGroup
	for _, base := range []string{baseA, baseB} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				if r := do(t, "POST", base+"/v1/recordings/"+id+"/comments", []byte(fmt.Sprintf(`{"step":1,"text":"at once %d"}`, i))); r.status != http.StatusCreated {
					t.Errorf("comment: %d %s", r.status, r.body)
				}
			}
		}()
	}
	wg.Wait()
	if n := bytes.Count(do(t, "GET", baseA+"/v1/recordings/"+id+"/comments", nil).body, []byte("at once")); n != 16 {
		t.Fatalf("%d of 16 comments made at once through two nodes are kept", n)
	}

	if r := do(t, "DELETE", baseB+"/v1/recordings/"+id+"/shares/"+made.Share.ID, nil); r.status != 200 {
		t.Fatalf("revoke on B: %d %s", r.status, r.body)
	}
	eventually(t, "the link revoked through B refused by A", func() bool { return !opens(baseA) })
}

// twoNodes starts two nodes of one deployment: a versitygw bucket (blobs
// and state under prefix), one ClickHouse, the same keys.
func twoNodes(t *testing.T, prefix string, opts ...func(*app.Config)) (srv *testenv.S3Server, appA *app.App, baseA string, appB *app.App, baseB string) {
	t.Helper()
	srv = testenv.S3(t)
	dsn := testenv.ClickHouse(t)
	keys := deployKeys(t)
	appA, baseA = node(t, srv, prefix, dsn, keys, opts...)
	appB, baseB = node(t, srv, prefix, dsn, keys, opts...)
	return srv, appA, baseA, appB, baseB
}

// TestSharedReRedactedCopy: node B serves a recording A ingested (so B
// keeps a copy of its meta.json and ROOT); A re-redacts it (Reseal, as
// audit scan --fix does), erasing a value the policy missed. B then
// sweeps, collecting the old root's blobs nothing else references, and
// serves the new root, without the value, within store.CopyCheckEvery;
// with the object store out of reach B serves its copy.
func TestSharedReRedactedCopy(t *testing.T) {
	grace := func(c *app.Config) { c.Store.BlobGCGrace = 300 * time.Millisecond }
	srv, appA, baseA, appB, baseB := twoNodes(t, "rered", grace)
	ctx := context.Background()
	secret, erased := []byte("periwinkle-copy"), []byte("[erased-by-rules]")
	// The value is a text on the page: in the events (the step view) and
	// in the DOM view, whose checkpoint set B caches and keeps.
	evs := domRecording(2, 4)
	step := -1
	for i, e := range evs {
		if bytes.Contains(e.Data, []byte(`"item 1 of step 1"`)) {
			evs[i].Data = bytes.Replace(e.Data, []byte("item 1 of step 1"), secret, 1)
			step = e.Step
		}
	}
	if step < 0 {
		t.Fatal("the generated recording has no text to carry the value")
	}
	id, oldRoot := ingestFinished(t, baseA, evs, 20)
	waitIndexed(t, baseB, id, uint64(len(evs)))
	stepView := func(base string) []byte {
		r := do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/steps/%d", base, id, step), nil)
		if r.status != http.StatusOK {
			t.Fatalf("step %d on %s: %d %s", step, base, r.status, r.body)
		}
		return r.body
	}
	domView := func(base string) []byte {
		r := do(t, "GET", fmt.Sprintf("%s/v1/recordings/%s/steps/%d/dom?at=after", base, id, step), nil)
		if r.status != http.StatusOK {
			t.Fatalf("DOM of step %d on %s: %d %s", step, base, r.status, r.body)
		}
		return r.body
	}
	if !bytes.Contains(stepView(baseB), secret) || !bytes.Contains(domView(baseB), secret) {
		t.Fatalf("B does not serve the value before the re-redaction: the test exercises nothing: %s", stepView(baseB))
	}
	if root, err := appB.Store.Root(id); err != nil || root != oldRoot {
		t.Fatalf("B's copy: root %q %v, want %s", root, err, oldRoot)
	}

	// A re-redacts it: the value erased (same length, so the index's
	// locators stay valid whichever root a node reads).
	var recs []store.Record
	if _, err := appA.Store.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		r.Data = bytes.ReplaceAll(r.Data, secret, erased[:len(secret)])
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	meta, err := appA.Store.Meta(id)
	if err != nil {
		t.Fatal(err)
	}
	meta.ReRedacted = append(meta.ReRedacted, store.ReRedaction{At: time.Now().UnixNano(), OldRoot: oldRoot, Rules: []string{"test.value"}})
	_, newRoot, err := appA.Store.Reseal(meta, recs)
	if err != nil || newRoot == oldRoot {
		t.Fatalf("reseal on A: %s %v", newRoot, err)
	}
	if err := appA.Store.ReindexRewritten(ctx, appA.Index, []string{id}); err != nil {
		t.Fatal(err)
	}

	// B's sweep, before B reads it again (its copy checked within
	// store.CopyCheckEvery), marks the new root and collects the old
	// manifest and the segments only it named.
	refsOf := func(root string) []cid.Cid {
		c, _ := store.ParseCID(root)
		r, err := appB.Store.Blobs.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		refs, err := store.ManifestRefs(b)
		if err != nil {
			t.Fatal(err)
		}
		return refs
	}
	kept := map[cid.Cid]bool{}
	for _, c := range refsOf(newRoot) {
		kept[c] = true
	}
	var dropped []cid.Cid
	for _, c := range refsOf(oldRoot) {
		if !kept[c] {
			dropped = append(dropped, c)
		}
	}
	if len(dropped) < 2 {
		t.Fatalf("the old root names %d blobs the new one does not: the test exercises nothing", len(dropped))
	}
	eventually(t, "B's sweep collecting the old root's blobs", func() bool {
		if _, err := appB.Sweeper.Sweep(ctx, false, nil); err != nil {
			t.Fatal(err)
		}
		// A sweep marking the stale root would collect the new one's.
		for c := range kept {
			if err := readBlob(appB.Store.Blobs, c); err != nil {
				t.Fatalf("blob %s of the new root after B's sweep: %v", c, err)
			}
		}
		for _, c := range dropped {
			if err := readBlob(appB.Store.Blobs, c); !errors.Is(err, store.ErrNotFound) {
				return false
			}
		}
		return true
	})
	eventually(t, "B serving the re-redacted root", func() bool {
		root, err := appB.Store.Root(id)
		return err == nil && root == newRoot && !bytes.Contains(stepView(baseB), secret) && !bytes.Contains(domView(baseB), secret)
	})
	if bytes.Contains(stepView(baseA), secret) || bytes.Contains(domView(baseA), secret) || !bytes.Contains(stepView(baseB), erased[:len(secret)]) {
		t.Fatal("after the sweep a node serves the value, or B lost the re-redacted event")
	}

	// The compact timeline, cached per root, is served again from B's cache.
	c1 := do(t, "GET", baseB+"/v1/recordings/"+id+"/steps?form=compact", nil)
	c2 := do(t, "GET", baseB+"/v1/recordings/"+id+"/steps?form=compact", nil)
	if c1.status != http.StatusOK || !bytes.Equal(c1.body, c2.body) || !bytes.Contains(c1.body, []byte(`"form":"compact"`)) {
		t.Fatalf("B's compact timeline: %d %s, then %s", c1.status, c1.body, c2.body)
	}

	// The object store out of reach: B's check of its copy fails, and B
	// serves the copy it has.
	srv.Stop()
	time.Sleep(store.CopyCheckEvery) // the next read checks
	if root, err := appB.Store.Root(id); err != nil || root != newRoot {
		t.Fatalf("B's root of %s with the object store stopped: %q %v, want its copy's %s", id, root, err, newRoot)
	}
	srv.Start()
}
