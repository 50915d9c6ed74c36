package discovery

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// scrapeNamespaces lists the member's metrics.k8s.io PodMetrics and reports
// each namespace's usage, the sum over its pods' containers, with the same
// quiet rule as nodes' (store.RecordNamespaceMetrics). It runs after the
// node scrape and fails on its own: a member whose credentials may list
// node metrics but not pod metrics keeps its node usage.
func (s *scraper) scrapeNamespaces(ctx context.Context) (reported int64) {
	logger := klog.FromContext(ctx).WithValues("cluster", s.p.ClusterID, "resource", "podmetrics")
	listCtx, cancel := context.WithTimeout(ctx, s.p.Metrics.ListTimeout)
	list, err := s.p.Client.MetricsV1beta1().PodMetricses(metav1.NamespaceAll).List(listCtx, metav1.ListOptions{})
	cancel()
	if err != nil {
		reason, hint := scrapeErrorReason(err)
		scrapeErrors.WithLabelValues(s.p.ClusterID, "pods_"+reason).Inc()
		logger.Info("Listing metrics.k8s.io PodMetrics failed; namespaces keep their reported usage", "reason", reason, "hint", hint, "err", err)
		return 0
	}
	samples := namespaceSamples(s.p.ClusterID, list.Items, s.p.Clock.Now())
	writeCtx, cancel := context.WithTimeout(ctx, s.p.Metrics.WriteTimeout)
	reported, err = s.p.Store.RecordNamespaceMetrics(writeCtx, samples, s.p.Metrics.UsageReporting)
	cancel()
	if err != nil {
		reason := "store"
		if errors.Is(err, store.ErrFenced) {
			reason = "fenced"
		}
		scrapeErrors.WithLabelValues(s.p.ClusterID, "pods_"+reason).Inc()
		logger.Error(err, "Recording namespace metrics failed", "reason", reason, "namespaces", len(samples))
		return 0
	}
	logger.V(4).Info("Scraped pod metrics", "pods", len(list.Items), "namespaces", len(samples), "reported", reported)
	return reported
}

// namespaceSamples sums PodMetrics per namespace: every container's CPU and
// memory, the number of pods, observed at the newest pod's timestamp (or
// now, for pods without one). Pods with a negative usage are left out.
func namespaceSamples(cluster string, pods []metricsv1beta1.PodMetrics, now time.Time) []store.NamespaceMetricsSample {
	byNamespace := map[string]*store.NamespaceMetricsSample{}
	var order []string
	for i := range pods {
		p := &pods[i]
		var cpu, memory int64
		valid := true
		for _, c := range p.Containers {
			cq, mq := c.Usage["cpu"], c.Usage["memory"]
			if cq.Sign() < 0 || mq.Sign() < 0 {
				valid = false
				break
			}
			cpu += cq.ScaledValue(resource.Nano)
			memory += mq.Value()
		}
		if !valid {
			continue
		}
		ns := byNamespace[p.Namespace]
		if ns == nil {
			ns = &store.NamespaceMetricsSample{ClusterID: cluster, Namespace: p.Namespace}
			byNamespace[p.Namespace] = ns
			order = append(order, p.Namespace)
		}
		ns.CPUNanoCores += cpu
		ns.MemoryBytes += memory
		ns.Pods++
		at := p.Timestamp.Time
		if at.IsZero() {
			at = now
		}
		if at.After(ns.ObservedAt) {
			ns.ObservedAt = at
		}
	}
	out := make([]store.NamespaceMetricsSample, 0, len(order))
	for _, name := range order {
		out = append(out, *byNamespace[name])
	}
	return out
}
