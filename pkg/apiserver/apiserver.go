// Package apiserver assembles the platform.example.io aggregated API server:
// the generic k8s.io/apiserver machinery with the registry's REST storages and
// a readiness check on the registry database.
package apiserver

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Registry is what the server reads from and checks readiness against.
type Registry interface {
	clusternamespace.Reader
	nodecapacity.Reader
	store.ChangeFeed
	// Migrate applies pending schema migrations.
	Migrate(ctx context.Context) error
	// Ready fails while the database is unreachable or migrations are pending.
	Ready(ctx context.Context) error
}

// WatchConfig tunes how watches follow the registry's change feed.
type WatchConfig struct {
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
}

// Config is the server's configuration.
type Config struct {
	Generic  *genericapiserver.RecommendedConfig
	Registry Registry
	Watch    WatchConfig
}

type completedConfig struct {
	generic  genericapiserver.CompletedConfig
	registry Registry
	watch    WatchConfig
}

// CompletedConfig is a Config with defaults filled in, ready for New.
type CompletedConfig struct {
	*completedConfig
}

// Server is the platform.example.io API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
	migrated         chan struct{}
}

// RegistryMigrated is closed once the registry's migrations are applied;
// loops that use the registry start after it.
func (s *Server) RegistryMigrated() <-chan struct{} { return s.migrated }

// Complete fills in defaults and adds the registry readiness check.
func (c *Config) Complete() CompletedConfig {
	c.Generic.AddReadyzChecks(healthz.NamedCheck("registry", func(r *http.Request) error {
		return c.Registry.Ready(r.Context())
	}))
	return CompletedConfig{&completedConfig{
		generic:  c.Generic.Complete(),
		registry: c.Registry,
		watch:    c.Watch,
	}}
}

// New returns a server serving the platform.example.io group.
func (c CompletedConfig) New() (*Server, error) {
	generic, err := c.generic.New("platform-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	follower := feed.New(c.registry, feed.Options{PollInterval: c.watch.PollInterval, SubscriberBuffer: c.watch.WatcherBuffer,
		WindowChanges: c.watch.WindowChanges, WindowBytes: c.watch.WindowBytes})
	feed.RegisterMetrics()
	registry.RegisterMetrics()
	watches := registry.WatchConfig{Follower: follower, BookmarkInterval: c.watch.BookmarkInterval, Draining: &atomic.Bool{}}
	group := genericapiserver.NewDefaultAPIGroupInfo(platform.GroupName, Scheme, metav1ParameterCodec, Codecs)
	storages := map[string]rest.Storage{}
	for _, k := range served {
		storages[k.Resource] = k.storage(c.registry, watches)
	}
	group.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = storages
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	s := &Server{GenericAPIServer: generic, migrated: make(chan struct{})}
	generic.AddPostStartHookOrDie("registry-migrations", func(ctx genericapiserver.PostStartHookContext) error {
		go migrate(ctx, c.registry, s.migrated)
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
				compactHistory(ctx, c.registry, c.watch)
			case <-ctx.Done():
			}
		}()
		return nil
	})
	return s, nil
}
