package apiserver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/backoff"
)

// migrate applies the registry's migrations once the server runs, retrying
// while the database is unreachable (serving starts regardless; /readyz fails
// until they are in), and closes done when they are applied.
func migrate(ctx context.Context, reg interface{ Migrate(context.Context) error }, done chan<- struct{}) {
	logger := klog.FromContext(ctx)
	retry := backoff.New(500 * time.Millisecond)
	err := wait.ExponentialBackoffWithContext(ctx, retry, func(ctx context.Context) (bool, error) {
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
