package discovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/backoff"
	"github.com/example/platform-apiserver/pkg/discovery/shard"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Member is a member cluster to mirror, keyed by its cluster id (a DNS label).
type Member struct {
	ID     string
	Config *rest.Config
}

// Tuning holds the knobs of every worker.
type Tuning struct {
	// BatchSize commits a batch once it holds this many events.
	BatchSize int
	// BatchDelay commits a non-empty batch at the latest this long after its first event.
	BatchDelay time.Duration
	// Backoff paces retries after member or registry failures.
	Backoff wait.Backoff
	// ApplyTimeout bounds one commit attempt.
	ApplyTimeout time.Duration
	// WatchTimeout is the shortest server-side timeout of a watch request.
	WatchTimeout time.Duration
	// WedgeTimeout fails /livez when a worker has events pending and no sign
	// of life for this long.
	WedgeTimeout time.Duration
	// MetricsInterval is how often metrics.k8s.io NodeMetrics are scraped.
	MetricsInterval time.Duration
	// MetricsRetention is how long node metrics samples are kept.
	MetricsRetention time.Duration
	// MetricsListTimeout and MetricsWriteTimeout bound one scrape's list
	// from the member and its write to the registry.
	MetricsListTimeout  time.Duration
	MetricsWriteTimeout time.Duration
	// IdentityInterval is how often a running worker checks that the member
	// is still the cluster its cursors came from.
	IdentityInterval time.Duration
	// MaintenanceTimeout bounds one round of metrics history maintenance.
	MaintenanceTimeout time.Duration
	// UsageReportThreshold and UsageReportPeriod say when a node's reported
	// usage changes (store.UsageReporting).
	UsageReportThreshold float64
	UsageReportPeriod    time.Duration
	Clock                clock.Clock
}

// usageReporting is the reporting policy of the tuning.
func (t Tuning) usageReporting() store.UsageReporting {
	return store.UsageReporting{Threshold: t.UsageReportThreshold, Period: t.UsageReportPeriod}
}

// DefaultTuning returns the defaults.
func DefaultTuning() Tuning {
	return Tuning{
		BatchSize:        1000,
		BatchDelay:       100 * time.Millisecond,
		Backoff:          backoff.New(500 * time.Millisecond),
		ApplyTimeout:     time.Minute,
		WatchTimeout:     5 * time.Minute,
		WedgeTimeout:     5 * time.Minute,
		MetricsInterval:  30 * time.Second,
		MetricsRetention: 24 * time.Hour,
		// A scrape of thousands of nodes lists in well under a second.
		MetricsListTimeout:   20 * time.Second,
		MetricsWriteTimeout:  20 * time.Second,
		MaintenanceTimeout:   time.Minute,
		IdentityInterval:     time.Minute,
		UsageReportThreshold: 0.05,
		UsageReportPeriod:    5 * time.Minute, // the kubelet's nodeStatusReportFrequency
		Clock:                clock.RealClock{},
	}
}

// LeaderElection configures the Leases through which replicas share the
// members (package shard): one per member, <Name>-member-<cluster id>, and
// one per replica, in Namespace of the hosting cluster.
type LeaderElection struct {
	Enabled       bool
	Namespace     string
	Name          string
	LeaseDuration time.Duration
	// RenewDeadline bounds one round of Lease calls.
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Config configures discovery.
type Config struct {
	// Hosting is the cluster the server runs in, mirrored under its id; it
	// holds the Leases. Nil when there is none.
	Hosting *Member
	// MemberDir holds one kubeconfig per further member, named by its cluster id.
	MemberDir string
	// MemberDirInterval is how often MemberDir is read for added and removed members.
	MemberDirInterval time.Duration
	// MemberRemovalGrace is how long a member stays absent from the
	// configuration before its rows are deleted.
	MemberRemovalGrace time.Duration
	// MemberAllowFilesAndPlugins lets member kubeconfigs use exec and
	// auth-provider plugins and file references (token, certificate, key,
	// CA files); else they are refused (docs/security.md).
	MemberAllowFilesAndPlugins bool
	Tuning                     Tuning
	LeaderElection             LeaderElection
	Store                      store.Writer
}

// DefaultConfig returns the defaults: DefaultTuning, the member directory
// read every 10s with a 5m removal grace, and members shared through
// Leases (15s/10s/2s, the Kubernetes components' timings) named
// platform-apiserver-discovery-*. Hosting, MemberDir, the Lease namespace
// and Store are left to the caller.
func DefaultConfig() Config {
	return Config{
		MemberDirInterval:  10 * time.Second,
		MemberRemovalGrace: 5 * time.Minute,
		Tuning:             DefaultTuning(),
		LeaderElection: LeaderElection{
			Enabled:       true,
			Name:          "platform-apiserver-discovery",
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
	}
}

// Discovery runs the workers of the member clusters this replica mirrors.
type Discovery struct {
	cfg      Config
	identity string
	members  *members
	ready    readiness
}

// New checks the configuration and returns discovery, not yet running.
func New(cfg Config) (*Discovery, error) {
	var errs []error
	if cfg.Hosting == nil && cfg.MemberDir == "" {
		errs = append(errs, errors.New("no member cluster: neither a hosting cluster nor a member directory"))
	}
	if cfg.Hosting != nil {
		for _, msg := range validation.IsDNS1123Label(cfg.Hosting.ID) {
			errs = append(errs, fmt.Errorf("cluster id %q: %s", cfg.Hosting.ID, msg))
		}
	}
	if cfg.LeaderElection.Enabled && cfg.Hosting == nil {
		errs = append(errs, errors.New("leader election needs a hosting cluster for its Leases"))
	}
	if cfg.Store == nil {
		errs = append(errs, errors.New("no store"))
	}
	if cfg.MemberRemovalGrace < 0 {
		errs = append(errs, fmt.Errorf("negative member removal grace period %s", cfg.MemberRemovalGrace))
	}
	t := cfg.Tuning
	if t.BatchSize < 1 || t.BatchDelay <= 0 || t.ApplyTimeout <= 0 || t.WatchTimeout <= 0 || t.WedgeTimeout <= 0 || t.Clock == nil ||
		t.MetricsInterval <= 0 || t.IdentityInterval <= 0 || t.MetricsListTimeout <= 0 || t.MetricsWriteTimeout <= 0 || t.MaintenanceTimeout <= 0 ||
		!(t.UsageReportThreshold >= 0 && t.UsageReportThreshold <= 1) || t.UsageReportPeriod <= 0 {
		errs = append(errs, fmt.Errorf("invalid tuning %+v", t))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	RegisterMetrics()
	d := &Discovery{cfg: cfg, identity: identity()}
	d.members = newMembers(membersParams{
		Hosting:      cfg.Hosting,
		Dir:          cfg.MemberDir,
		DirInterval:  cfg.MemberDirInterval,
		RemovalGrace: cfg.MemberRemovalGrace,
		Tuning:       cfg.Tuning,
		Store:        cfg.Store,
		Owner:        d.identity,
		Shared:       cfg.LeaderElection.Enabled,

		AllowFilesAndPlugins: cfg.MemberAllowFilesAndPlugins,
	})
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
	wg.Go(func() { runMetricsMaintenance(ctx, maintenanceParams{Store: d.cfg.Store, Tuning: d.cfg.Tuning}) })
	if !d.cfg.LeaderElection.Enabled {
		d.members.run(ctx)
		return
	}
	le := d.cfg.LeaderElection
	client, err := kubernetes.NewForConfig(leaseConfig(d.cfg.Hosting.Config))
	var mgr *shard.Manager
	if err == nil {
		mgr, err = shard.New(shard.Config{
			Leases:        client.CoordinationV1(),
			Namespace:     le.Namespace,
			Name:          le.Name,
			Identity:      d.identity,
			LeaseDuration: le.LeaseDuration,
			RoundTimeout:  le.RenewDeadline,
			RetryPeriod:   le.RetryPeriod,
			Clock:         d.cfg.Tuning.Clock,
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
