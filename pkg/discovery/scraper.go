package discovery

import (
	"context"
	"fmt"
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
	Store     store.Writer
	// Interval between scrapes; each scrape is bounded by it too.
	Interval time.Duration
	// Retention is how long samples are kept (each node's latest always is).
	Retention time.Duration
	Clock     clock.Clock
}

// scraper lists metrics.k8s.io NodeMetrics of one member on an interval and
// stores the samples in one batch. When the API is absent or failing it logs
// and counts it; the view then shows usage as unknown, never as zero.
type scraper struct {
	p scraperParams
}

func newScraper(p scraperParams) *scraper { return &scraper{p: p} }

func (s *scraper) run(ctx context.Context) {
	for {
		s.scrapeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.p.Clock.After(s.p.Interval):
		}
	}
}

// scrapeOnce does one scrape and reports how many new samples it stored.
func (s *scraper) scrapeOnce(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, s.p.Interval)
	defer cancel()
	logger := klog.FromContext(ctx).WithValues("cluster", s.p.ClusterID, "resource", "nodemetrics")
	start := s.p.Clock.Now()
	list, err := s.p.Client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		reason := "member_unavailable"
		if apierrors.IsNotFound(err) {
			reason = "metrics_api_absent"
		}
		scrapeErrors.WithLabelValues(s.p.ClusterID, reason).Inc()
		logger.Info("Listing metrics.k8s.io NodeMetrics failed; node usage stays unknown until it works", "reason", reason, "err", err)
		return 0
	}
	samples := s.samples(logger, list.Items)
	inserted, err := s.p.Store.InsertNodeMetrics(ctx, samples)
	if err != nil {
		scrapeErrors.WithLabelValues(s.p.ClusterID, "store").Inc()
		logger.Error(err, "Storing node metrics failed")
		return 0
	}
	if _, err := s.p.Store.PruneNodeMetrics(ctx, s.p.Clock.Now().Add(-s.p.Retention)); err != nil {
		scrapeErrors.WithLabelValues(s.p.ClusterID, "store").Inc()
		logger.Error(err, "Pruning node metrics older than the retention failed", "retention", s.p.Retention)
	}
	scrapeDuration.WithLabelValues(s.p.ClusterID).Observe(s.p.Clock.Since(start).Seconds())
	samplesStored.WithLabelValues(s.p.ClusterID).Add(float64(inserted))
	logger.V(4).Info("Scraped node metrics", "nodes", len(list.Items), "new", inserted)
	return inserted
}

// samples converts NodeMetrics; an item with a malformed usage is skipped
// with a log line and a metric, the others are kept.
func (s *scraper) samples(logger klog.Logger, items []metricsv1beta1.NodeMetrics) []store.NodeMetricsSample {
	out := make([]store.NodeMetricsSample, 0, len(items))
	for i := range items {
		m := &items[i]
		sample, err := nodeMetricsSample(s.p.ClusterID, m)
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
		return store.NodeMetricsSample{}, fmt.Errorf("no timestamp")
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
