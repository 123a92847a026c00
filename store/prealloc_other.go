//go:build !linux

package store

import "os"

// preallocate is a no-op where fallocate is not available.
func preallocate(f *os.File, n int64) {}
