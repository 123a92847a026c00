package objstore_test

import (
	"testing"

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
