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

// servedKind is a kind the server serves: its declaration and its storage
// over the registry.
type servedKind struct {
	registry.Declaration
	storage func(*postgres.Store, kindConfig) rest.Storage
}

// kindConfig is what every kind's storage shares.
type kindConfig struct {
	watch registry.WatchConfig
	// staleness judges a member's mirroring when it is read.
	staleness registry.MemberStaleness
	// heartbeats show a member's data age in its objects' tables.
	heartbeats *registry.MemberHeartbeats
}

// served lists the kinds the server serves, each declared in its own
// package (registry.Kind) and served from its view (views.View): a new
// kind is one entry here.
var served = []servedKind{
	{nodecapacity.Kind.Declaration(), func(s *postgres.Store, c kindConfig) rest.Storage {
		return nodecapacity.NewREST(postgres.Source(s, views.NodeCapacity), c.watch, c.heartbeats)
	}},
	{clusternamespace.Kind.Declaration(), func(s *postgres.Store, c kindConfig) rest.Storage {
		return clusternamespace.NewREST(postgres.Source(s, views.ClusterNamespace), c.watch, c.heartbeats)
	}},
	{clustercapacity.Kind.Declaration(), func(s *postgres.Store, c kindConfig) rest.Storage {
		return clustercapacity.NewREST(postgres.Source(s, views.ClusterCapacity), c.watch, c.staleness)
	}},
}
