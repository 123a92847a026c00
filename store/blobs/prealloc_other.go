//go:build !linux

package blobs

import "os"

// preallocate is a no-op where fallocate is not available.
func preallocate(f *os.File, n int64) {}
