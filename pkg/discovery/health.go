package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// LivezCheck fails while a worker is wedged: events pending and no sign of
// life (no event received, no commit attempt finished) for Sync.WedgeTimeout.
// A registry outage does not fail it (commit attempts keep finishing, and a
// restart would not bring the database back); readyz reports that.
func (d *Discovery) LivezCheck() healthz.HealthChecker {
	return healthz.NamedCheck("discovery", func(*http.Request) error {
		now := d.cfg.Clock.Now()
		var errs []error
		for _, w := range d.members.workers() {
			if err := w.wedged(now, d.cfg.Sync.WedgeTimeout); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// ReadyzCheck passes once the hosting cluster's first sync is in the
// registry: every resource has a persisted cursor. Optional resources do
// not count: a member need not serve them (and their views say whether
// discovery looked yet), and a replica started among replicas of an older
// version, which hold the hosting cluster and do not mirror them, would
// never be ready. Every replica can tell
// (not just the leader), a restart with cursors is ready at once, and once
// passed it stays passed (the registry check covers outages). Members from
// the directory do not gate readiness: one unreachable member must not take
// the API away for the others.
func (d *Discovery) ReadyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("discovery-synced", func(r *http.Request) error {
		return d.ready.check(r.Context())
	})
}

// readiness latches the first complete sync of the hosting cluster.
type readiness struct {
	clusterID string
	store     store.Writer
	done      atomic.Bool
}

func (r *readiness) check(ctx context.Context) error {
	if r.done.Load() || r.clusterID == "" {
		return nil
	}
	for _, res := range memberResources {
		if res.optional {
			continue
		}
		cursor, err := r.store.Cursor(ctx, r.clusterID, res.name)
		if err != nil {
			return fmt.Errorf("reading discovery cursors: %w", err)
		}
		if cursor == "" {
			return fmt.Errorf("member cluster %s: %s not synced yet", r.clusterID, res.name)
		}
	}
	r.done.Store(true)
	return nil
}
