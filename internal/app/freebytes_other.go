//go:build !linux

package app

// freeBytes is unknown where statfs is not wired up.
func freeBytes(string) (uint64, bool) { return 0, false }
