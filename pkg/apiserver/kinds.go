package apiserver

import (
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
)

// Kind is a kind the server serves: its declaration (registry.Kind), its
// registry view as the change log reads it, and its storage over the
// registry.
type Kind struct {
	registry.Declaration
	View    views.Logged
	Storage func(*postgres.Store, KindConfig) rest.Storage
}

// KindConfig is what every kind's storage shares.
type KindConfig struct {
	Watch registry.WatchConfig
	// Staleness judges a member's mirroring when it is read.
	Staleness registry.MemberStaleness
	// Heartbeats show a member's data age in its objects' tables.
	Heartbeats *registry.MemberHeartbeats
}

// served lists the kinds of platform.example.io the server serves, each
// declared in its own package (registry.Kind) and served from its view
// (views.View): a new kind is one entry here, its view in
// views.InChangeLog. A kind declared outside this repository's API types
// is served by Extend instead.
var served = []Kind{
	{nodecapacity.Kind.Declaration(), views.NodeCapacity.Logged(), func(s *postgres.Store, c KindConfig) rest.Storage {
		return nodecapacity.NewREST(postgres.Source(s, views.NodeCapacity), c.Watch, c.Heartbeats)
	}},
	{clusternamespace.Kind.Declaration(), views.ClusterNamespace.Logged(), func(s *postgres.Store, c KindConfig) rest.Storage {
		return clusternamespace.NewREST(postgres.Source(s, views.ClusterNamespace), c.Watch, c.Heartbeats)
	}},
	{clustercapacity.Kind.Declaration(), views.ClusterCapacity.Logged(), func(s *postgres.Store, c KindConfig) rest.Storage {
		return clustercapacity.NewREST(postgres.Source(s, views.ClusterCapacity), c.Watch, c.Staleness)
	}},
}
