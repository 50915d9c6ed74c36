package apiserver

import (
	"context"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
)

// Health checks that ask the database answer from a result at most
// checkCacheTTL old, computed within checkTimeout, whoever asks: kubelet
// probes, the aggregator and anonymous callers of /readyz share one query a
// second, so they cannot load the database, and none waits on a database
// that does not answer for longer than checkTimeout.
const (
	checkCacheTTL = time.Second
	checkTimeout  = 5 * time.Second
)

// cachedCheck is a named health check that runs check at most once per
// ttl, within timeout; concurrent callers wait for the same run.
func cachedCheck(name string, ttl, timeout time.Duration, check func(context.Context) error) healthz.HealthChecker {
	c := &checkCache{ttl: ttl, timeout: timeout, check: check, now: time.Now}
	return healthz.NamedCheck(name, func(r *http.Request) error { return c.result(r.Context()) })
}

type checkCache struct {
	ttl, timeout time.Duration
	check        func(context.Context) error
	now          func() time.Time

	mu      sync.Mutex
	at      time.Time     // when err was found
	err     error         // the last run's result
	running chan struct{} // closed when the current run ends; nil if none
}

// result is the last run's result while it is fresh, else a new run's (a
// caller whose request ends first gets its context's error).
func (c *checkCache) result(ctx context.Context) error {
	c.mu.Lock()
	if !c.at.IsZero() && c.now().Sub(c.at) < c.ttl {
		defer c.mu.Unlock()
		return c.err
	}
	done := c.running
	if done == nil {
		done = make(chan struct{})
		c.running = done
		go c.run(done)
	}
	c.mu.Unlock()
	select {
	case <-done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs the check, detached from any caller, and records its result.
func (c *checkCache) run(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	err := c.check(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.err, c.running = c.now(), err, nil
	close(done)
}
