package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/internal/testenv"
)

// TestServeOnAFullDisk starts serve on a real full filesystem (a tmpfs of a
// few MiB in a private mount namespace, filled up), on a new data
// directory and on one that holds a recording: serve exits naming the
// cause (no space left on device) and the directory to free space under.
func TestServeOnAFullDisk(t *testing.T) {
	if out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs -o size=1m tmpfs /mnt && umount /mnt").CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("cannot mount a small filesystem here (needs root and unshare): %v %s", err, out))
	}
	fx := newDamageFixture(t) // a stopped server's directory with a recording
	bin := binary(t)
	mnt := t.TempDir()
	for _, existing := range []bool{false, true} {
		seed := "mkdir $M/data"
		if existing {
			seed = "cp -a " + fx.p.data + " $M/data"
		}
		script := `set -e; M=` + mnt + `; mount -t tmpfs -o size=16m tmpfs $M; ` + seed + `
dd if=/dev/zero of=$M/fill bs=4k 2>/dev/null || true
` + bin + ` serve --data $M/data --addr 127.0.0.1:0 || echo "exit $?"`
		out, _ := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script).CombinedOutput()
		s := string(out)
		t.Logf("existing store %v: %s", existing, s)
		data := filepath.Join(mnt, "data")
		if !strings.Contains(s, "STORAGE_FULL") || !strings.Contains(s, "no space left on device") ||
			!strings.Contains(s, "free space on the filesystem holding "+data) || !strings.Contains(s, "exit 3") {
			t.Fatalf("serve on a full disk (existing store %v):\n%s", existing, s)
		}
	}
}
