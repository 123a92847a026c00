package blobs_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/backendtest"
	"github.com/flightrec/flightrec/store/layout"
)

func TestLocalBackend(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) blobs.Backend { return blobs.Local{Dir: t.TempDir()} })
}

// TestLocalBackendIsTheBlobTree: a loose blob's key names the file the
// layout names, so the local backend and FSBlobs share one tree: what one
// writes the other reads, and the files are where they always were.
func TestLocalBackendIsTheBlobTree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fsb, err := blobs.OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsb.Close()
	data := bytes.Repeat([]byte("loose "), 2<<20) // over the pack limit: stored loose
	c, _, err := fsb.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	key := layout.ShardOf(c.String()) + "/" + c.String()
	if _, err := os.Stat(layout.BlobTree{Dir: dir}.Loose(c.String())); err != nil {
		t.Fatalf("the loose blob is not where the layout says: %v", err)
	}
	local := blobs.Local{Dir: dir}
	if n, err := local.Stat(ctx, key); err != nil || n != int64(len(data)) {
		t.Fatalf("the backend does not see FSBlobs' blob: %d, %v", n, err)
	}
	other := []byte("written by the backend")
	oc := blobs.Sum(other)
	if err := local.Put(ctx, layout.ShardOf(oc.String())+"/"+oc.String(), other); err != nil {
		t.Fatal(err)
	}
	r, err := fsb.Open(oc)
	if err != nil {
		t.Fatalf("FSBlobs does not see the backend's blob: %v", err)
	}
	r.Close()
}
