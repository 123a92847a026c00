package indextest

import (
	"testing"

	"github.com/flightrec/flightrec/store"
)

func Run(t *testing.T, open func(t *testing.T) store.Index) {}
