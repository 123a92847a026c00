package sqlite

import (
	"testing"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

// BenchmarkIndex is indextest.Bench on SQLite; store/clickhouse runs the
// same one, so the two backends' figures compare side by side.
func BenchmarkIndex(b *testing.B) {
	indextest.Bench(b, func(b *testing.B) store.Index { return openTemp(b) })
}
