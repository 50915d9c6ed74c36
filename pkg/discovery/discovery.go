package discovery

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/discovery/shard"
)

// Discovery runs the workers of the member clusters this replica mirrors.
type Discovery struct {
	cfg      Config
	identity string
	members  *members
	ready    readiness
}

// New checks the configuration and returns discovery, not yet running.
func New(cfg Config) (*Discovery, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	RegisterMetrics()
	d := &Discovery{cfg: cfg, identity: identity()}
	d.members = newMembers(&d.cfg, d.identity)
	registerMembersCollector(d.members)
	d.ready = readiness{store: cfg.Store}
	if cfg.Hosting != nil {
		d.ready.clusterID = cfg.Hosting.ID
	}
	return d, nil
}

// Run runs discovery until ctx ends: the workers of the members this
// replica mirrors (with leader election, those whose Lease it holds; else
// all) and its turns at the registry-wide metrics history maintenance.
func (d *Discovery) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		runMetricsMaintenance(ctx, maintenanceParams{Store: d.cfg.Store, Metrics: d.cfg.Metrics, Clock: d.cfg.Clock})
	})
	le := d.cfg.LeaderElection
	if !le.LeaderElect {
		d.members.run(ctx)
		return
	}
	client, err := kubernetes.NewForConfig(leaseConfig(d.cfg.Hosting.Config))
	var mgr *shard.Manager
	if err == nil {
		mgr, err = shard.New(shard.Config{
			Leases:        client.CoordinationV1(),
			Namespace:     le.ResourceNamespace,
			Name:          le.ResourceName,
			Identity:      d.identity,
			LeaseDuration: le.LeaseDuration.Duration,
			RoundTimeout:  le.RenewDeadline.Duration,
			RetryPeriod:   le.RetryPeriod.Duration,
			Clock:         d.cfg.Clock,
		}, d.members)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Discovery cannot run: no client for its Leases")
		return
	}
	d.members.Lost = mgr.Lost
	// Leases are given up only once every worker has stopped: the manager
	// outlives members.run.
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	wg.Go(func() { mgr.Run(mgrCtx) })
	d.members.run(ctx)
	stopMgr()
}

// identity names this replica in the Lease: host name and a random suffix,
// so a restarted replica does not pose as its predecessor.
func identity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "platform-apiserver"
	}
	return host + "_" + uuid.NewString()
}

// leaseConfig is the hosting cluster's config for Lease calls: short timeouts.
func leaseConfig(c *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(c)
	cfg.UserAgent = "platform-apiserver-discovery-leases"
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	// A round renews up to a third of the held Leases, one call each:
	// client-go's default of 5 requests a second would queue a fleet's
	// renewals past the round's deadline (the fleet benchmark saw it).
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return cfg
}
