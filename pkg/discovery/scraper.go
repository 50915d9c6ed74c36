package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// scraperParams configure the metrics scraper of one member.
type scraperParams struct {
	ClusterID string
	Client    metricsclient.Interface
	Store     samplesStore
	Metrics   MetricsConfig
	// FirstDelay postpones the first scrape, so members that start together
	// (at process start, after a takeover) do not scrape in step.
	FirstDelay time.Duration
	Clock      clock.Clock
}

// scraper lists metrics.k8s.io NodeMetrics of one member on an interval and
// records the samples in one batch, then its PodMetrics, reported as
// namespace usage (namespace_scraper.go). When the API is absent or failing it
// logs why and counts it; the view then keeps its reported usage until that
// gets too old, then shows it as unknown, never as zero.
type scraper struct {
	p scraperParams
	// newest is when the newest node metrics sample recorded was taken,
	// in Unix nanoseconds: the member's usage heartbeat.
	newest atomic.Int64
}

// lastUsage is the usage heartbeat: when the newest node metrics sample
// the scraper recorded was taken (zero before one, or without a scraper).
func (s *scraper) lastUsage() time.Time {
	if s == nil {
		return time.Time{}
	}
	if n := s.newest.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func newScraper(p scraperParams) *scraper { return &scraper{p: p} }

func (s *scraper) run(ctx context.Context) {
	delay := s.p.FirstDelay
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.p.Clock.After(delay):
		}
		s.scrapeOnce(ctx)
		delay = s.p.Metrics.Interval
	}
}

// scrapeOnce does one scrape and reports what it recorded.
func (s *scraper) scrapeOnce(ctx context.Context) store.MetricsRecorded {
	logger := klog.FromContext(ctx).WithValues("cluster", s.p.ClusterID, "resource", "nodemetrics")
	defer s.scrapeNamespaces(ctx) // whatever became of the nodes'
	start := s.p.Clock.Now()
	listCtx, cancel := context.WithTimeout(ctx, s.p.Metrics.ListTimeout)
	list, err := s.p.Client.MetricsV1beta1().NodeMetricses().List(listCtx, metav1.ListOptions{})
	cancel()
	if err != nil {
		reason, hint := scrapeErrorReason(err)
		scrapeErrors.WithLabelValues(s.p.ClusterID, reason).Inc()
		logger.Info("Listing metrics.k8s.io NodeMetrics failed; the member's usage heartbeat stops and its nodes' usage becomes unknown after --usage-unknown-after",
			"reason", reason, "hint", hint, "err", err)
		return store.MetricsRecorded{}
	}
	samples := s.samples(logger, list.Items, s.p.Clock.Now())
	writeCtx, cancel := context.WithTimeout(ctx, s.p.Metrics.WriteTimeout)
	recorded, err := s.p.Store.RecordNodeMetrics(writeCtx, samples, s.p.Metrics.UsageReporting)
	cancel()
	if err != nil {
		reason := "store"
		switch {
		case errors.Is(err, store.ErrUnavailable):
			reason = "store_unavailable"
		case errors.Is(err, store.ErrFenced):
			reason = "fenced"
		case errors.Is(err, context.DeadlineExceeded):
			reason = "store_timeout"
		}
		scrapeErrors.WithLabelValues(s.p.ClusterID, reason).Inc()
		logger.Error(err, "Recording node metrics failed", "reason", reason, "samples", len(samples))
		return store.MetricsRecorded{}
	}
	// The heartbeat never runs ahead of this process's clock, which
	// maintenance reckons its age by: a member whose clock is ahead would
	// otherwise keep its usage shown after its metrics stopped.
	now := s.p.Clock.Now().UnixNano()
	for _, m := range samples {
		if n := min(m.ObservedAt.UnixNano(), now); n > s.newest.Load() {
			s.newest.Store(n)
		}
	}
	if hb := s.lastUsage(); !hb.IsZero() {
		usageHeartbeat.WithLabelValues(s.p.ClusterID).Set(float64(hb.UnixNano()) / 1e9)
	}
	scrapeDuration.WithLabelValues(s.p.ClusterID).Observe(s.p.Clock.Since(start).Seconds())
	samplesStored.WithLabelValues(s.p.ClusterID).Add(float64(recorded.Stored))
	usageReports.WithLabelValues(s.p.ClusterID).Add(float64(recorded.Reported))
	logger.V(4).Info("Scraped node metrics", "nodes", len(list.Items), "stored", recorded.Stored, "reported", recorded.Reported)
	return recorded
}

// scrapeErrorReason names why a metrics.k8s.io list failed, for the errors
// metric, and says what to look at.
func scrapeErrorReason(err error) (reason, hint string) {
	switch {
	case apierrors.IsNotFound(err):
		return "metrics_api_absent", "the member does not serve metrics.k8s.io; install metrics-server there"
	case apierrors.IsForbidden(err):
		return "forbidden", "the member's credentials may not list nodes.metrics.k8s.io; grant get and list on it"
	case apierrors.IsUnauthorized(err):
		return "unauthorized", "the member rejected the credentials of its kubeconfig"
	case apierrors.IsServiceUnavailable(err):
		return "metrics_api_unavailable", "metrics.k8s.io is registered but its backend (metrics-server) does not answer; check its APIService and pods"
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), errors.Is(err, context.DeadlineExceeded):
		return "timeout", "the list did not finish within the scrape's list timeout"
	default:
		return "member_unavailable", "the member's API server could not be reached"
	}
}

// maxSampleSkew is how far in the future (by this process's clock) a
// sample's timestamp may be; beyond it the member's clock is wrong.
const maxSampleSkew = time.Hour

// samples converts NodeMetrics; an item with a malformed usage, or a
// timestamp older than the retention or too far in the future (which would
// only make history partitions for nothing), is skipped with a log line and
// a metric, the others are kept.
func (s *scraper) samples(logger klog.Logger, items []metricsv1beta1.NodeMetrics, now time.Time) []store.NodeMetricsSample {
	out := make([]store.NodeMetricsSample, 0, len(items))
	for i := range items {
		m := &items[i]
		sample, err := nodeMetricsSample(s.p.ClusterID, m)
		if err == nil && (sample.ObservedAt.Before(now.Add(-s.p.Metrics.Retention)) || sample.ObservedAt.After(now.Add(maxSampleSkew))) {
			err = fmt.Errorf("timestamp %s is outside the retained window [%s, %s]; is the member's clock right?",
				sample.ObservedAt.Format(time.RFC3339), now.Add(-s.p.Metrics.Retention).Format(time.RFC3339), now.Add(maxSampleSkew).Format(time.RFC3339))
		}
		if err != nil {
			scrapeErrors.WithLabelValues(s.p.ClusterID, "conversion").Inc()
			logger.Info("Skipping a NodeMetrics sample that cannot be stored", "node", m.Name, "err", err)
			continue
		}
		out = append(out, sample)
	}
	return out
}

func nodeMetricsSample(cluster string, m *metricsv1beta1.NodeMetrics) (store.NodeMetricsSample, error) {
	cpu, okCPU := m.Usage["cpu"]
	mem, okMem := m.Usage["memory"]
	if !okCPU || !okMem {
		return store.NodeMetricsSample{}, fmt.Errorf("usage lacks cpu or memory: %v", m.Usage)
	}
	if cpu.Sign() < 0 || mem.Sign() < 0 {
		return store.NodeMetricsSample{}, fmt.Errorf("negative usage cpu=%s memory=%s", cpu.String(), mem.String())
	}
	if m.Timestamp.IsZero() {
		return store.NodeMetricsSample{}, errors.New("no timestamp")
	}
	return store.NodeMetricsSample{
		ClusterID:    cluster,
		Node:         m.Name,
		CPUNanoCores: cpu.ScaledValue(resource.Nano),
		MemoryBytes:  mem.Value(),
		ObservedAt:   m.Timestamp.Time,
		Window:       m.Window.Duration,
	}, nil
}
