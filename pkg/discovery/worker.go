package discovery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// workerParams configure the worker of one member cluster.
type workerParams struct {
	ClusterID string
	Config    *rest.Config
	Tuning    Tuning
	Store     store.Writer
}

// worker mirrors one member cluster: one syncer per resource.
type worker struct {
	clusterID string
	syncers   []*syncer
	scraper   *scraper
}

func newWorker(p workerParams) (*worker, error) {
	cfg := rest.CopyConfig(p.Config)
	cfg.UserAgent = "platform-apiserver-discovery"
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 20, 40
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("member cluster %s: client: %w", p.ClusterID, err)
	}
	metrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("member cluster %s: metrics client: %w", p.ClusterID, err)
	}
	w := &worker{clusterID: p.ClusterID, scraper: newScraper(scraperParams{
		ClusterID:    p.ClusterID,
		Client:       metrics,
		Store:        p.Store,
		Interval:     p.Tuning.MetricsInterval,
		FirstDelay:   time.Duration(rand.Int64N(int64(p.Tuning.MetricsInterval))),
		ListTimeout:  p.Tuning.MetricsListTimeout,
		WriteTimeout: p.Tuning.MetricsWriteTimeout,
		Reporting:    p.Tuning.usageReporting(),
		Retention:    p.Tuning.MetricsRetention,
		Clock:        p.Tuning.Clock,
	})}
	for _, r := range allResources {
		w.syncers = append(w.syncers, newSyncer(syncerParams{
			Cluster:      p.ClusterID,
			Source:       sourceFor(client, r),
			Store:        p.Store,
			BatchSize:    p.Tuning.BatchSize,
			BatchDelay:   p.Tuning.BatchDelay,
			Clock:        p.Tuning.Clock,
			Backoff:      p.Tuning.Backoff,
			ApplyTimeout: p.Tuning.ApplyTimeout,
			WatchTimeout: p.Tuning.WatchTimeout,
		}))
	}
	return w, nil
}

// run mirrors the member until ctx ends.
func (w *worker) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("cluster", w.clusterID)
	logger.Info("Starting discovery of member cluster")
	var wg sync.WaitGroup
	for _, s := range w.syncers {
		wg.Go(func() { s.run(ctx) })
	}
	wg.Go(func() { w.scraper.run(ctx) })
	wg.Wait()
	logger.Info("Stopped discovery of member cluster")
}

// synced reports whether every resource finished its first list or resumed its watch.
func (w *worker) synced() bool {
	for _, s := range w.syncers {
		if !s.status().synced {
			return false
		}
	}
	return true
}

// wedged returns an error naming a resource that has had events pending
// without any sign of life (no event, no commit attempt) for longer than timeout.
func (w *worker) wedged(now time.Time, timeout time.Duration) error {
	for _, s := range w.syncers {
		st := s.status()
		if st.pending > 0 && now.Sub(st.lastBeat) > timeout {
			return fmt.Errorf("cluster %s, %s: %d events pending and no progress for %s",
				w.clusterID, s.resource(), st.pending, now.Sub(st.lastBeat).Round(time.Second))
		}
	}
	return nil
}
