package app_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/wire"
)

// TestLockRefusals: a writer refused by the data directory's lock gets
// DATA_DIR_LOCKED naming the holder, with a next that fits it: a server
// is reached with --server (on loopback when it binds every interface; on
// the port it was given when it asked for any),
// a short command is waited for and then named.
func TestLockRefusals(t *testing.T) {
	for _, c := range []struct {
		command, addr, listened string
		next                    string
	}{
		{"serve", "127.0.0.1:8480", "", "send this command through it with --server http://127.0.0.1:8480"},
		{"serve", "127.0.0.1:0", "127.0.0.1:4242", "--server http://127.0.0.1:4242"},
		{"demo", ":9000", "", "--server http://127.0.0.1:9000"},
		{"token create", "", "", "wait for flightrec token create (pid %d) to finish"},
	} {
		sc := app.StoreConfig{Data: t.TempDir(), LockTimeout: 50 * time.Millisecond}
		held, err := sc.Lock(c.command, c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if c.listened != "" { // the port a server asked the kernel for
			if err := held.SetAddr(c.listened); err != nil {
				t.Fatal(err)
			}
		}
		_, err = sc.Lock("reindex", "")
		var e *wire.Error
		if !errors.As(err, &e) || e.Code != "DATA_DIR_LOCKED" || e.Status != http.StatusConflict {
			t.Fatalf("held by %s: %v, want DATA_DIR_LOCKED", c.command, err)
		}
		pid := fmt.Sprintf("pid %d", os.Getpid())
		if next := strings.ReplaceAll(c.next, "%d", fmt.Sprint(os.Getpid())); !strings.Contains(e.Next, next) ||
			!strings.Contains(e.Message, pid) || !strings.Contains(e.Message, c.command) {
			t.Errorf("held by %s: %q / next %q", c.command, e.Message, e.Next)
		}
		held.Close()
		again, err := sc.Lock("reindex", "")
		if err != nil {
			t.Fatalf("after the holder closed: %v", err)
		}
		again.Close()
	}
}
