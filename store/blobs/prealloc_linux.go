package blobs

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate reserves n bytes for f, zero-filled. It is an optimization
// only: on a filesystem without fallocate, writes extend the file instead.
func preallocate(f *os.File, n int64) {
	_ = unix.Fallocate(int(f.Fd()), 0, 0, n)
}
