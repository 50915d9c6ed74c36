package apiserver

import (
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
)

// servedKind is a kind the server serves: its declaration and its storage
// over the registry.
type servedKind struct {
	registry.Declaration
	storage func(Registry, registry.WatchConfig) rest.Storage
}

// served lists the kinds the server serves, each declared in its own
// package (registry.Kind); a new kind is one entry here and its records'
// source in Registry.
var served = []servedKind{
	{nodecapacity.Kind.Declaration(), func(r Registry, w registry.WatchConfig) rest.Storage {
		return nodecapacity.NewREST(r.NodeCapacities(), w)
	}},
	{clusternamespace.Kind.Declaration(), func(r Registry, w registry.WatchConfig) rest.Storage {
		return clusternamespace.NewREST(r.ClusterNamespaces(), w)
	}},
}
