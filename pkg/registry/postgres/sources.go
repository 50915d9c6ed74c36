package postgres

import (
	"context"
	"strings"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// NodeCapacities reads NodeCapacity records by object name,
// <cluster id>.<node name> (a cluster id holds no dot).
func (s *Store) NodeCapacities() store.Source[store.NodeCapacity] {
	return store.Source[store.NodeCapacity]{
		Get: func(ctx context.Context, _, name string) (*store.NodeCapacity, error) {
			cluster, node, ok := strings.Cut(name, ".")
			if !ok || cluster == "" || node == "" {
				return nil, store.ErrNotFound
			}
			return s.GetNodeCapacity(ctx, cluster, node)
		},
		List:   s.ListNodeCapacities,
		Stream: s.StreamNodeCapacities,
		Key:    keyOf(nodeCapacityList),
	}
}

// ClusterNamespaces reads ClusterNamespace records by namespace and object
// name (the cluster id).
func (s *Store) ClusterNamespaces() store.Source[store.ClusterNamespace] {
	return store.Source[store.ClusterNamespace]{Get: s.GetClusterNamespace, List: s.ListClusterNamespaces, Stream: s.StreamClusterNamespaces,
		Key: keyOf(clusterNamespaceList)}
}

// keyOf is a Source's Key: the list's keyset.
func keyOf[T any](spec listSpec[T]) func(*T) store.ListKey {
	return func(r *T) store.ListKey { return spec.key(*r) }
}
