package app

import "golang.org/x/sys/unix"

// freeBytes is the space available to this process on dir's filesystem.
func freeBytes(dir string) (uint64, bool) {
	var s unix.Statfs_t
	if err := unix.Statfs(dir, &s); err != nil {
		return 0, false
	}
	return s.Bavail * uint64(s.Bsize), true
}
