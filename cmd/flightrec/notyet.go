package main

import "github.com/flightrec/flightrec/internal/apierr"

var errNotYet = apierr.New(0, "NOT_BUILT", "use go test -bench", "not built yet")
