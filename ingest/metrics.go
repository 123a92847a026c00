package ingest

import "github.com/prometheus/client_golang/prometheus"

// Metrics are ingest's Prometheus instruments (error replies are counted
// by the edge, internal/httpx).
type Metrics struct {
	Events    prometheus.Counter
	Bytes     prometheus.Counter
	Batches   prometheus.Counter
	Dups      prometheus.Counter
	AckLat    prometheus.Histogram
	OpenRecs  prometheus.GaugeFunc
	IndexLag  prometheus.GaugeFunc
	IndexErrs prometheus.Counter
	// Redactions counts erased or masked values by rule.
	Redactions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, open, lag func() float64) *Metrics {
	m := &Metrics{
		Events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flightrec_ingest_events_total", Help: "Events stored (duplicates not counted)."}),
		Bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flightrec_ingest_bytes_total", Help: "Decompressed bytes of append bodies received."}),
		Batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flightrec_ingest_batches_total", Help: "Append batches acknowledged."}),
		Dups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flightrec_ingest_duplicate_events_total", Help: "Events received again after acknowledgement (client retries)."}),
		AckLat: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "flightrec_ingest_ack_seconds", Help: "Time from receiving an append to acknowledging it durable.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		OpenRecs: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flightrec_open_recordings", Help: "Recordings open for appends."}, open),
		IndexLag: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flightrec_index_lag_events", Help: "Acknowledged events not yet in the index."}, lag),
		IndexErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flightrec_index_errors_total", Help: "Failed index writes (retried)."}),
	}
	m.Redactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flightrec_redactions_total", Help: "Values erased or masked by redaction, by rule."}, []string{"rule"})
	reg.MustRegister(m.Redactions, m.Events, m.Bytes, m.Batches, m.Dups, m.AckLat, m.OpenRecs, m.IndexLag, m.IndexErrs)
	return m
}
