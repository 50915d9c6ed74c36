package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/platform-apiserver/test/framework"
)

const (
	// slowWatchers is how many slow clients BenchmarkSlowWatchers opens,
	// each reading at slowWatcherRate bytes per second.
	slowWatchers    = 100
	slowWatcherRate = 1024
	// slowWatchPath is a watch with initial events of every NodeCapacity.
	slowWatchPath = "/apis/platform.example.io/v1alpha1/nodecapacities?watch=1"
)

// BenchmarkSlowWatchers lists and gets NodeCapacities through the
// aggregator without, then with, slowWatchers watchers reading their initial
// events at 1 KB/s from the server's own port (each restarting when the
// server ends its stream, as client-go relists), and the database sessions
// held for a client. See docs/benchmarks.md, "Slow watchers".
func BenchmarkSlowWatchers(b *testing.B) {
	e := setup(b)
	for _, watchers := range []int{0, slowWatchers} {
		func() {
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			var slow *slowClients
			if watchers > 0 {
				slow = e.startSlowWatchers(ctx, b, watchers)
			}
			held := e.sampleHeldSessions(ctx)
			for _, op := range []struct {
				name string
				want int
				run  func(context.Context) (int, error)
			}{
				{"list", nodeCount, listNodeCapacities(e.platform)},
				{"get", 1, getNodeCapacity(e.platform)},
			} {
				b.Run(fmt.Sprintf("op=%s/watchers=%d", op.name, watchers), func(b *testing.B) {
					held.Store(0)
					benchClient(b, e, op.want, op.run)
					b.ReportMetric(float64(held.Load()), "db-sessions-held-max")
					if slow != nil {
						b.ReportMetric(float64(slow.restarts.Load()), "slow-restarts")
						b.ReportMetric(float64(slow.errors.Load()), "slow-error-events")
						b.ReportMetric(float64(slow.busy.Load()), "slow-429s")
					}
				})
			}
		}()
	}
}

// slowClients are the slow watchers of BenchmarkSlowWatchers.
type slowClients struct {
	restarts, errors, busy atomic.Int64
}

// startSlowWatchers opens n slow watchers until ctx ends; it returns once
// each has received its first bytes or been refused, and the server has
// settled.
func (e *env) startSlowWatchers(ctx context.Context, b *testing.B, n int) *slowClients {
	cfg := e.cp.PlatformDirectConfig()
	s := &slowClients{}
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		go func() {
			first := sync.OnceFunc(started.Done)
			defer first()
			for ctx.Err() == nil {
				w := framework.StartSlowWatch(ctx, cfg, slowWatchPath, slowWatcherRate)
				for w.Bytes.Load() == 0 && !w.Finished() && ctx.Err() == nil {
					time.Sleep(50 * time.Millisecond)
				}
				first()
				<-w.Done()
				switch err := w.Err(); {
				case errors.Is(err, framework.ErrTooManyRequests):
					// Retry-After: 1, as client-go honours it.
					s.busy.Add(1)
					time.Sleep(time.Second)
					continue
				case err != nil && ctx.Err() == nil:
					b.Errorf("slow watch: %v", err)
					return
				}
				if w.ErrorEvent() != "" {
					s.errors.Add(1)
				}
				if ctx.Err() == nil {
					s.restarts.Add(1)
				}
			}
		}()
	}
	started.Wait()
	e.settle(ctx, b)
	return s
}

// settle waits (up to two minutes) until the platform-apiserver's CPU use
// falls below half a core: the burst in which it fills the buffers between
// it and every watcher (loopback sockets take megabytes) is over, and what
// is measured is the steady state of clients reading at their rate.
func (e *env) settle(ctx context.Context, b *testing.B) {
	err := pollUntil(ctx, time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		cores, err := e.platformCPU(ctx, time.Second)
		return cores < 0.5, fmt.Sprintf("%.2f cores", cores), err
	})
	if err != nil && ctx.Err() == nil {
		b.Logf("the platform-apiserver stayed busy after the slow watchers started: %v", err)
	}
}

// sampleHeldSessions samples, every 100 ms until ctx ends, the registry
// database's sessions that wait on a client (ClientWrite) or sit idle in
// a transaction, keeping the most seen.
func (e *env) sampleHeldSessions(ctx context.Context) (most *atomic.Int64) {
	most = new(atomic.Int64)
	sample := func() error {
		var n int64
		if err := e.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND (wait_event = 'ClientWrite' OR state LIKE 'idle in transaction%')`).Scan(&n); err == nil {
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		}
		return nil
	}
	go func() { _ = every(ctx, 100*time.Millisecond, -1, sample) }()
	return most
}
