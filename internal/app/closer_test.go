package app

import (
	"errors"
	"slices"
	"testing"
)

// TestCloserReverseOrder: what was opened last closes first, every close
// runs even when one fails, their errors are joined, and a second close
// closes nothing again.
func TestCloserReverseOrder(t *testing.T) {
	var order []string
	errIndex := errors.New("index close failed")
	var c closer
	for _, name := range []string{"lock", "store", "index", "audit"} {
		c.add(func() error {
			order = append(order, name)
			if name == "index" {
				return errIndex
			}
			return nil
		})
	}
	err := c.close()
	if want := []string{"audit", "index", "store", "lock"}; !slices.Equal(order, want) {
		t.Errorf("closed %v, want %v", order, want)
	}
	if !errors.Is(err, errIndex) {
		t.Errorf("close: %v, want the index's error", err)
	}
	if err := c.close(); err != nil || len(order) != 4 {
		t.Errorf("second close: %v, closed %v", err, order)
	}
}
