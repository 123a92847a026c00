package recorder

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/*/stat CPU times; it
// is 100 on every architecture Go supports there.
const clockTicks = 100

// processTreeCPU sums the CPU time of root and its live descendants, plus
// what root's reaped children used (cutime, cstime), from /proc.
func processTreeCPU(root int) (time.Duration, bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := map[int]int{}
	ticks := map[int]int64{}
	var rootReaped int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime(14) stime(15) cutime(16) cstime(17)
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, ' ')]))
		if err != nil {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		parent[pid] = ppid
		ticks[pid] = ut + st
		if pid == root {
			cut, _ := strconv.ParseInt(f[13], 10, 64)
			cst, _ := strconv.ParseInt(f[14], 10, 64)
			rootReaped = cut + cst
		}
	}
	if _, ok := ticks[root]; !ok {
		return 0, false
	}
	total := rootReaped
	for pid, t := range ticks {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				total += t
				break
			}
		}
	}
	return time.Duration(total) * time.Second / clockTicks, true
}
