package pgdb

import (
	"k8s.io/component-base/metrics"
)

// The pools' metrics, reported at scrape time from pgxpool's statistics
// and the acquires refused as busy.
var (
	poolConns = metrics.NewDesc("platform_registry_pool_connections",
		"Connections of each of the registry's pools (reads, writes, feed, health, and a standby's) by state: acquired (in use), idle, constructing; and max, the pool's limit.",
		[]string{"pool", "state"}, nil, metrics.ALPHA, "")
	poolAcquires = metrics.NewDesc("platform_registry_pool_acquires_total",
		"Connection acquisitions from each of the registry's pools, by result: ok, waited (the pool was empty: a request queued), canceled, busy (no connection within --postgres-acquire-timeout: the request was answered 429).",
		[]string{"pool", "result"}, nil, metrics.ALPHA, "")
	poolAcquireSeconds = metrics.NewDesc("platform_registry_pool_acquire_seconds_total",
		"Total time spent acquiring connections from each of the registry's pools; its rate against the acquires' shows queueing.",
		[]string{"pool"}, nil, metrics.ALPHA, "")
)

// NewPoolCollector reports the statistics of the pools that pools returns
// at scrape time.
func NewPoolCollector(pools func() []*Pool) metrics.StableCollector {
	return &poolCollector{pools: pools}
}

// poolCollector reports the pools' statistics at scrape time.
type poolCollector struct {
	metrics.BaseStableCollector
	pools func() []*Pool
}

func (c *poolCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- poolConns
	ch <- poolAcquires
	ch <- poolAcquireSeconds
}

func (c *poolCollector) CollectWithStability(ch chan<- metrics.Metric) {
	for _, p := range c.pools() {
		st := p.Stat()
		for state, v := range map[string]int32{
			"acquired": st.AcquiredConns(), "idle": st.IdleConns(), "constructing": st.ConstructingConns(), "max": st.MaxConns(),
		} {
			ch <- metrics.NewLazyConstMetric(poolConns, metrics.GaugeValue, float64(v), p.name, state)
		}
		for result, v := range map[string]int64{
			"ok": st.AcquireCount(), "waited": st.EmptyAcquireCount(), "canceled": st.CanceledAcquireCount(), "busy": p.busy.Load(),
		} {
			ch <- metrics.NewLazyConstMetric(poolAcquires, metrics.CounterValue, float64(v), p.name, result)
		}
		ch <- metrics.NewLazyConstMetric(poolAcquireSeconds, metrics.CounterValue, st.AcquireDuration().Seconds(), p.name)
	}
}
