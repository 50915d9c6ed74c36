package apiserver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// migrate applies the registry's migrations once the server runs, retrying
// while the database is unreachable (serving starts regardless; /readyz fails
// until they are in), and closes done when they are applied.
func migrate(ctx context.Context, reg Registry, done chan<- struct{}) {
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 30 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := reg.Migrate(ctx); err != nil {
			logger.Error(err, "Applying registry migrations failed; retrying")
			return false, nil
		}
		logger.Info("Registry migrations applied")
		return true, nil
	})
	if err == nil {
		close(done)
	}
}
