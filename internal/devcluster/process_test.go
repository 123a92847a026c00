package devcluster

import (
	"fmt"
	"net"
	"testing"
)

// TestFreePortsBelowEphemeral: the ports a cluster is given are distinct,
// free, and outside the ephemeral range, where any outgoing connection on
// the machine could take one before its server binds it.
func TestFreePortsBelowEphemeral(t *testing.T) {
	ports, err := FreePorts(40)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p >= ephemeralStart() || p < 10000 {
			t.Fatalf("port %d: repeated or outside [10000, %d): %v", p, ephemeralStart(), ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
