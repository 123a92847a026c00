package ingest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// zeros is n zero bytes of unknown length, as a decompressor yields them.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n)
	clear(p[:k])
	z.n -= k
	return int(k), nil
}

// TestBodyMemManyGrowingBodies: more bodies growing at once than the
// budget holds all complete (none waits on another forever), bodies over
// the limit are refused, and afterwards every byte and slot of the budget
// is free again.
func TestBodyMemManyGrowingBodies(t *testing.T) {
	lim := Limits{MaxBatchBytes: 16 << 20, MaxBodyMemory: 64 << 20}
	m := newBodyMem(lim, time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			size := int64(i%4) * (6 << 20) // 0, 6, 12 and 18 MiB: the last over the limit
			body, done, err := m.read(context.Background(), &zeros{size}, lim.MaxBatchBytes, -1)
			var mbe *http.MaxBytesError
			switch {
			case size > lim.MaxBatchBytes:
				if !errors.As(err, &mbe) {
					errs <- err
				}
			case err != nil || int64(len(body)) != size:
				errs <- err
			default:
				done()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a body: %v", err)
	}
	slots := (lim.MaxBodyMemory - smallPool) / (lim.MaxBatchBytes + 1 + smallBody)
	if !m.small.TryAcquire(smallPool) || !m.large.TryAcquire(slots) {
		t.Fatal("the budget was not all given back")
	}
}
