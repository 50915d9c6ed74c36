// Package apiserver assembles the platform.example.io aggregated API server,
// the one place it is built: the generic k8s.io/apiserver machinery, the
// PostgreSQL registry, the change feed the watches follow, discovery, every
// health check and the post-start hooks that run them.
package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/discovery"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/placementreport"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/quotareport"
	"github.com/example/platform-apiserver/pkg/registry/usagereport"
)

// Config is the server's configuration, each component's whole.
type Config struct {
	Generic  *genericapiserver.RecommendedConfig
	Registry RegistryConfig
	Watch    FeedConfig
	// Limits bound what one request may ask of the registry.
	Limits registry.Limits
	// QuotaPolicy is the overcommit QuotaReports judge proposed quotas by.
	QuotaPolicy quotareport.Policy
	// Discovery mirrors member clusters into the registry; nil serves the
	// registry as it is. Its Store is the registry (set by New).
	Discovery *discovery.Config
}

// RegistryConfig is the registry database.
type RegistryConfig struct {
	DSN   string
	Store postgres.Options
	// UsageRetention is how long the usage history is kept, discovery's
	// Metrics.Retention (--metrics-retention, which discovery may not run
	// to read): UsageReports ask for a window up to it.
	UsageRetention time.Duration
}

// FeedConfig tunes how watches follow the registry's change feed.
type FeedConfig struct {
	// PollInterval bounds how late a change is seen when a notification is lost.
	PollInterval time.Duration
	// BookmarkInterval is how often watches that allow bookmarks get one.
	BookmarkInterval time.Duration
	// HistoryRetention is how long changes stay resumable; older
	// resourceVersions get 410 Gone.
	HistoryRetention time.Duration
	// CompactionInterval is how often history older than the retention is dropped.
	CompactionInterval time.Duration
	// WatcherBuffer is how many events a watcher may lag before it is
	// closed (its client resumes).
	WatcherBuffer int
	// WindowChanges and WindowBytes bound the recent changes kept in
	// memory to serve resuming watches without a database query.
	WindowChanges int
	WindowBytes   int
	// FeedReadTimeout bounds each read of the change feed; FeedMaxStaleness
	// is how long the feed may go without a completed read before the
	// readiness check registry-feed fails.
	FeedReadTimeout  time.Duration
	FeedMaxStaleness time.Duration
	// MemberStaleAfter is how old a member's mirror heartbeat may be
	// before readers show the member Stale (registry.MemberStaleness); zero
	// never does.
	MemberStaleAfter time.Duration
}

// DefaultFeedConfig returns the change feed defaults.
func DefaultFeedConfig() FeedConfig {
	return FeedConfig{
		PollInterval:       time.Second,
		BookmarkInterval:   time.Minute,
		HistoryRetention:   time.Hour,
		CompactionInterval: time.Minute,
		WatcherBuffer:      1000,
		WindowChanges:      10000,
		WindowBytes:        64 << 20,
		FeedReadTimeout:    feed.DefaultReadTimeout,
		FeedMaxStaleness:   15 * time.Second,
		MemberStaleAfter:   registry.DefaultMemberStaleAfter,
	}
}

type completedConfig struct {
	generic   genericapiserver.CompletedConfig
	registry  RegistryConfig
	watch     FeedConfig
	limits    registry.Limits
	quota     quotareport.Policy
	discovery *discovery.Config
}

// CompletedConfig is a Config with defaults filled in, ready for New.
type CompletedConfig struct {
	*completedConfig
}

// Complete fills in the generic server's defaults on a copy of its
// configuration; c itself is not changed.
func (c *Config) Complete() CompletedConfig {
	generic := *c.Generic
	chain := generic.BuildHandlerChainFunc
	auth, serving := &generic.Authentication, generic.SecureServing
	generic.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		return retryUntilAuthenticationLoaded(chain(h, gc), auth, serving)
	}
	generic.OpenAPIConfig, generic.OpenAPIV3Config = withCreateOnlyFieldValidation(generic.OpenAPIConfig, generic.OpenAPIV3Config)
	var disc *discovery.Config
	if c.Discovery != nil {
		d := *c.Discovery
		disc = &d
	}
	return CompletedConfig{&completedConfig{
		generic:   generic.Complete(),
		registry:  c.Registry,
		watch:     c.Watch,
		limits:    c.Limits,
		quota:     c.QuotaPolicy,
		discovery: disc,
	}}
}

// Server is the platform.example.io API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
	registry         *postgres.Store
	migrated         chan struct{}
	// runDiscovery, when set, runs from Run until its context ends;
	// discovery is it running. Run waits for it on the way out, so a
	// replica stops its workers and releases its Leases before it exits
	// (else the others wait for the Leases to expire).
	runDiscovery *discovery.Discovery
	discovery    sync.WaitGroup
}

// RegistryMigrated is closed once the registry's migrations are applied;
// loops that use the registry start after it.
func (s *Server) RegistryMigrated() <-chan struct{} { return s.migrated }

// New returns a server serving the platform.example.io group from the
// registry, with discovery when configured. Nothing runs before Run.
func (c CompletedConfig) New(ctx context.Context) (*Server, error) {
	// Open does not need the database to be up: readiness reports it until it is.
	reg, err := postgres.Open(ctx, c.registry.DSN, c.registry.Store)
	if err != nil {
		return nil, fmt.Errorf("opening the registry database: %w", err)
	}
	s, err := c.newServer(reg)
	if err != nil {
		reg.Close()
		return nil, err
	}
	return s, nil
}

func (c CompletedConfig) newServer(reg *postgres.Store) (*Server, error) {
	reg.RegisterMetrics()
	var disc *discovery.Discovery
	if c.discovery != nil {
		cfg := *c.discovery
		cfg.Store = reg
		var err error
		if disc, err = discovery.New(cfg); err != nil {
			return nil, err
		}
	}
	generic, err := c.generic.New("platform-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	s := &Server{GenericAPIServer: generic, registry: reg, migrated: make(chan struct{})}

	if err := generic.AddReadyzChecks(
		cachedCheck("registry", checkCacheTTL, checkTimeout, reg.Ready),
		authenticationLoaded(&c.generic.Authentication, c.generic.SecureServing),
	); err != nil {
		return nil, err
	}
	if len(c.registry.Store.ReadDSNs)+len(c.registry.Store.ReadDSNFiles) > 0 {
		// Reported, though the replica serves correctly (see
		// --postgres-standby-max-lag): the install's probes exclude it.
		if err := generic.AddReadyzChecks(cachedCheck("registry-standbys", checkCacheTTL, checkTimeout, reg.CheckStandbys)); err != nil {
			return nil, err
		}
	}
	if disc != nil {
		if err := generic.AddReadyzChecks(disc.ReadyzCheck()); err != nil {
			return nil, err
		}
		if err := generic.AddLivezChecks(0, disc.LivezCheck()); err != nil {
			return nil, err
		}
	}

	follower := feed.New(reg, feed.Options{PollInterval: c.watch.PollInterval, SubscriberBuffer: c.watch.WatcherBuffer,
		WindowChanges: c.watch.WindowChanges, WindowBytes: c.watch.WindowBytes, ReadTimeout: c.watch.FeedReadTimeout})
	if err := generic.AddReadyzChecks(healthz.NamedCheck("registry-feed", func(*http.Request) error {
		return follower.CheckFresh(c.watch.FeedMaxStaleness)
	})); err != nil {
		return nil, err
	}
	feed.RegisterMetrics()
	registry.RegisterMetrics()
	watches := registry.WatchConfig{Follower: follower, BookmarkInterval: c.watch.BookmarkInterval, Draining: &atomic.Bool{}, Limits: c.limits}
	group := genericapiserver.NewDefaultAPIGroupInfo(platform.GroupName, Scheme, metav1ParameterCodec, Codecs)
	storages := map[string]rest.Storage{}
	staleness := registry.MemberStaleness{StaleAfter: c.watch.MemberStaleAfter}
	kinds := KindConfig{Watch: watches, Staleness: staleness,
		Heartbeats: &registry.MemberHeartbeats{Load: reg.MemberHeartbeats, Staleness: staleness}}
	for _, k := range servedKinds() {
		storages[k.Resource] = k.Storage(reg, kinds)
	}
	// Each report is authorized by what it asks, with the server's own
	// (delegated) authorizer: one implementation, two front doors.
	if c.generic.Authorization.Authorizer == nil {
		return nil, fmt.Errorf("usage reports need an authorizer (delegated authorization)")
	}
	reports := usagereport.NewREST(reg, postgres.Source(reg, views.ClusterNamespace).Get, c.generic.Authorization.Authorizer, c.registry.UsageRetention).WithLimits(c.limits)
	storages["usagereports"], storages["localusagereports"] = reports, reports.Local()
	storages["placementreports"] = placementreport.NewREST(reg, c.generic.Authorization.Authorizer, c.limits, staleness)
	quotas := quotareport.NewREST(quotareport.Registry{Members: postgres.Source(reg, views.ClusterCapacity),
		Namespaces: postgres.Source(reg, views.ClusterNamespace), History: reg.UsageHistory},
		c.generic.Authorization.Authorizer, c.quota, c.limits, c.registry.UsageRetention, staleness)
	storages["quotareports"], storages["localquotareports"] = quotas, quotas.Local()
	group.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = storages
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, err
	}

	generic.AddPostStartHookOrDie("registry-migrations", func(ctx genericapiserver.PostStartHookContext) error {
		go migrate(ctx, reg, s.migrated)
		return nil
	})
	generic.AddPreShutdownHookOrDie("platform-watch-draining", func() error {
		watches.Draining.Store(true) // from the moment shutdown begins
		return nil
	})
	generic.AddPostStartHookOrDie("registry-change-feed", func(ctx genericapiserver.PostStartHookContext) error {
		go func() {
			select {
			case <-s.migrated:
				go follower.Run(ctx)
				compactHistory(ctx, reg, c.watch)
			case <-ctx.Done():
			}
		}()
		return nil
	})
	s.runDiscovery = disc
	return s, nil
}

// discoveryStopTimeout bounds how long Run waits for discovery to stop its
// workers and release its Leases on the way out.
const discoveryStopTimeout = 20 * time.Second

// Run serves until ctx ends, then waits (up to discoveryStopTimeout) for
// discovery to stop and closes the registry. Discovery runs once the
// registry is migrated, in the background (serving never waits for members
// or the Leases), and stops as soon as ctx ends — while the HTTP server
// drains its requests, not after — so its Leases are released early in a
// pod's termination grace period.
func (s *Server) Run(ctx context.Context) error {
	defer s.registry.Close()
	if s.runDiscovery != nil {
		s.discovery.Go(func() {
			select {
			case <-s.migrated:
				s.runDiscovery.Run(ctx)
			case <-ctx.Done():
			}
		})
	}
	err := s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
	stopped := make(chan struct{})
	go func() { s.discovery.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(discoveryStopTimeout):
		klog.FromContext(ctx).Info("Discovery did not stop in time; exiting without waiting (its Leases expire instead)", "waited", discoveryStopTimeout)
	}
	return err
}
