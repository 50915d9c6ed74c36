package apiserver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// compactionMinTimeout is the least time a compaction run gets: the
// statement timeout (60 s by default) of its first batch.
const compactionMinTimeout = time.Minute

// compactHistory drops change history older than the retention on every
// interval. Every replica runs it; compaction is idempotent.
func compactHistory(ctx context.Context, feed store.ChangeFeed, cfg FeedConfig) {
	if cfg.HistoryRetention <= 0 || cfg.CompactionInterval <= 0 {
		return
	}
	// A run that outlasts this (a hung database, a large backlog) gives up;
	// the batches it deleted stay deleted and the next run goes on, on a
	// new connection, rather than blocking compaction for good.
	timeout := max(cfg.CompactionInterval, compactionMinTimeout)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		logger := klog.FromContext(ctx)
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		horizon, err := feed.Compact(ctx, time.Now().Add(-cfg.HistoryRetention))
		if err != nil {
			logger.Error(err, "Compacting the registry change history failed")
			return
		}
		logger.V(2).Info("Compacted the registry change history", "oldestResumableResourceVersion", horizon)
	}, cfg.CompactionInterval)
}
