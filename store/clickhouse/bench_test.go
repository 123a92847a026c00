package clickhouse

import (
	"testing"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

// BenchmarkIndex is indextest.Bench on ClickHouse; store/sqlite runs the
// same one.
func BenchmarkIndex(b *testing.B) {
	indextest.Bench(b, func(b *testing.B) store.Index { return openTest(b, "") })
}
