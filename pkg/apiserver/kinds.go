package apiserver

import (
	"context"
	"time"

	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// servedKind is a kind the server serves: its declaration and its storage
// over the registry.
type servedKind struct {
	registry.Declaration
	storage func(sources, kindConfig) rest.Storage
}

// kindConfig is what every kind's storage shares.
type kindConfig struct {
	watch registry.WatchConfig
	// staleness judges a member's mirroring when it is read.
	staleness registry.MemberStaleness
	// heartbeats show a member's data age in its objects' tables.
	heartbeats *registry.MemberHeartbeats
}

// sources are the registry's records of every served kind.
type sources interface {
	NodeCapacities() store.Source[store.NodeCapacity]
	ClusterNamespaces() store.Source[store.ClusterNamespace]
	ClusterCapacities() store.Source[store.ClusterCapacity]
	MemberHeartbeats(ctx context.Context) (map[string]time.Time, error)
}

// served lists the kinds the server serves, each declared in its own
// package (registry.Kind); a new kind is one entry here and its records'
// source in sources.
var served = []servedKind{
	{nodecapacity.Kind.Declaration(), func(r sources, c kindConfig) rest.Storage {
		return nodecapacity.NewREST(r.NodeCapacities(), c.watch, c.heartbeats)
	}},
	{clusternamespace.Kind.Declaration(), func(r sources, c kindConfig) rest.Storage {
		return clusternamespace.NewREST(r.ClusterNamespaces(), c.watch, c.heartbeats)
	}},
	{clustercapacity.Kind.Declaration(), func(r sources, c kindConfig) rest.Storage {
		return clustercapacity.NewREST(r.ClusterCapacities(), c.watch, c.staleness)
	}},
}
