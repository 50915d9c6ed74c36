package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

var (
	// namespaceColumns are the columns scanClusterNamespace reads, in its order.
	namespaceColumns = statement("namespace_columns")
	sqlGetNamespace  = statement("read_get_namespace")
)

// ClusterNamespace objects live in the member namespace and are named after
// the cluster, so lists order by (name, cluster_id).
var clusterNamespaceList = listSpec[store.ClusterNamespace]{
	kind:    clusterNamespaceKind,
	table:   "cluster_namespace",
	columns: namespaceColumns,
	order:   [2]string{"name", "cluster_id"},
	scan:    scanClusterNamespace,
	key:     func(n store.ClusterNamespace) store.ListKey { return store.ListKey{n.Namespace.Name, n.ClusterID} },
}

// GetClusterNamespace returns the view of namespace in cluster clusterID.
func (s *Store) GetClusterNamespace(ctx context.Context, namespace, clusterID string) (*store.ClusterNamespace, error) {
	n, err := getRow(ctx, s.reads, scanClusterNamespace, sqlGetNamespace, clusterID, namespace)
	if err != nil {
		return nil, fmt.Errorf("get clusternamespace %s/%s: %w", namespace, clusterID, interpretError(err))
	}
	return &n, nil
}

// StreamClusterNamespaces streams the ClusterNamespaces matching opts in keyset pages (see stream).
func (s *Store) StreamClusterNamespaces(ctx context.Context, opts store.ListOptions, pageSize int, yield func(store.StreamPage[store.ClusterNamespace]) error) error {
	return stream(ctx, s, clusterNamespaceList, opts, pageSize, yield)
}

// ListClusterNamespaces lists namespace views ordered by (namespace, cluster).
func (s *Store) ListClusterNamespaces(ctx context.Context, opts store.ListOptions) (*store.Page[store.ClusterNamespace], error) {
	return list(ctx, s, clusterNamespaceList, opts)
}

func scanClusterNamespace(row pgx.Row) (store.ClusterNamespace, error) {
	var (
		n                 store.ClusterNamespace
		created, observed *time.Time
		cpu, memory, pods *int64
	)
	err := row.Scan(&n.ClusterID, &n.Namespace.Name, &n.Namespace.UID, &n.Namespace.Labels, &n.Namespace.Phase, &created,
		&n.PodCount, &n.Requested.CPUMillis, &n.Requested.MemoryBytes, &n.Quotas, &n.FirstSeen, &n.ResourceVersion,
		&cpu, &memory, &pods, &observed)
	if err != nil {
		return n, err
	}
	if cpu != nil && memory != nil && pods != nil && observed != nil {
		n.Usage = &store.NamespaceUsage{CPUNanoCores: *cpu, MemoryBytes: *memory, Pods: *pods, Timestamp: *observed}
	}
	if created != nil {
		n.Namespace.CreatedAt = *created
	}
	n.Requested.Pods = n.PodCount
	for i := range n.Quotas {
		n.Quotas[i].Namespace = n.Namespace.Name
	}
	return n, nil
}
