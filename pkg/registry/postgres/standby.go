package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/component-base/metrics"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// standby is a read-only server the registry's reads may go to.
type standby struct {
	name string // host:port, for metrics and logs
	pool *pgxpool.Pool
	// replayed is the registry resourceVersion the standby was last seen
	// to hold; it only grows.
	replayed atomic.Int64
}

// standbys spread reads over the standbys of Options.ReadDSNs.
type standbys struct {
	list []*standby
	next atomic.Uint64
	// wait is how long a read waits for a standby to replay what it needs
	// before it goes to the primary.
	wait time.Duration
}

// DefaultStandbyWait: a standby that streams is milliseconds behind; one
// that is further behind than this serves no fresh reads (the primary does).
const DefaultStandbyWait = 250 * time.Millisecond

// Reads served per server: on a standby, or on the primary because no
// standby had replayed far enough in time (or none is configured).
var (
	readsByServer = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reads_total",
		Help:           "Registry reads (lists, gets, change-feed reads) by where they ran: standby, or primary (no standby configured, or none had replayed the resourceVersion the read needs within the wait).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"server"})
	standbyLag = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "standby_lag_resource_versions",
		Help:           "How many resourceVersions a standby was behind the primary when last compared, per standby (host:port).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"standby"})
	failoversTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "failovers_total",
		Help:           "Failovers of the registry database this replica recorded (a new primary timeline); see registry_epoch for the lost resourceVersions.",
		StabilityLevel: metrics.ALPHA,
	})
)

// readPool returns the pool a read that needs freshness f runs on: a
// standby (round robin) once it has replayed what f needs, waiting for
// that up to the standbys' wait, else the primary. A read needing the
// latest state first asks the primary for its present (one row).
func (s *Store) readPool(ctx context.Context, f store.Freshness) (*pgxpool.Pool, error) {
	if len(s.standbys.list) == 0 {
		readsByServer.WithLabelValues("primary").Inc()
		return s.pool, nil
	}
	need := f.AtLeast
	if f.Latest {
		var present int64
		if err := s.pool.QueryRow(ctx, sqlRegistryVersion).Scan(&present); err != nil {
			return nil, fmt.Errorf("read the registry's present: %w", interpretError(err))
		}
		need = max(need, present)
	}
	sb := s.standbys.list[s.standbys.next.Add(1)%uint64(len(s.standbys.list))]
	ok, behind, err := sb.waitReplayed(ctx, need, s.standbys.wait)
	if f.Latest && err == nil {
		// Only a latest read compares with the primary's present.
		standbyLag.WithLabelValues(sb.name).Set(float64(behind))
	}
	if err != nil || !ok {
		readsByServer.WithLabelValues("primary").Inc()
		return s.pool, nil //nolint:nilerr // a standby that fails or lags is skipped: the primary serves
	}
	readsByServer.WithLabelValues("standby").Inc()
	return sb.pool, nil
}

// waitReplayed reports whether the standby holds resourceVersion need,
// polling it for up to wait, and how far behind need it was when first
// asked (0 when it was known to hold it).
func (sb *standby) waitReplayed(ctx context.Context, need int64, wait time.Duration) (ok bool, behind int64, err error) {
	if sb.replayed.Load() >= need {
		return true, 0, nil
	}
	deadline := time.Now().Add(wait)
	for delay, first := time.Millisecond, true; ; delay, first = min(2*delay, 20*time.Millisecond), false {
		var rv int64
		if err := sb.pool.QueryRow(ctx, sqlRegistryVersion).Scan(&rv); err != nil {
			return false, behind, err
		}
		sb.observe(rv)
		if first {
			behind = max(0, need-rv)
		}
		if rv >= need {
			return true, behind, nil
		}
		if time.Now().Add(delay).After(deadline) {
			return false, behind, nil
		}
		select {
		case <-ctx.Done():
			return false, behind, ctx.Err()
		case <-time.After(delay):
		}
	}
}

func (sb *standby) observe(rv int64) {
	for {
		cur := sb.replayed.Load()
		if rv <= cur || sb.replayed.CompareAndSwap(cur, rv) {
			return
		}
	}
}
